"""`spacy-elmo export` and `spacy-elmo perplexity` (`pretrain` is in pretrain_cmd.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import typer
from wasabi import msg

from ..errors import ElmoError, Errors
from ..files import STDOUT, check_writable_path, guard_output, write_json
from ..validation import check_all, integer, regex, thread_count
from .common import app, fail


@app.command("export")
def export_cli(
    checkpoint: Path = typer.Argument(..., help="A run directory or its checkpoint.pt"),
    output: Path = typer.Argument(..., help="Directory for options.json + weights.hdf5"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace a model already in OUTPUT"),
) -> None:
    """Export a pretraining checkpoint: options.json + weights.hdf5 (bilm-tf layout),
    vocab.txt, and the softmax in softmax.hdf5. OUTPUT is written whole: a model there is
    kept until the new one is complete; other files in OUTPUT are refused."""
    from ..pretrain.export import export

    try:
        if str(output) == STDOUT:  # a model is a directory: it cannot stream
            raise ElmoError(Errors.E070.format(what="an export"))
        paths = export(checkpoint, output, overwrite=overwrite)
    except ElmoError as err:
        fail(str(err))
    msg.good(f"Exported to {output}", "\n".join(str(p) for p in paths.values()))


@app.command("perplexity")
def perplexity_cli(
    model: str = typer.Argument(
        ..., help="An export (or snapshot) with softmax.hdf5 + vocab.txt, or a finished "
                  "pretraining run (its model/)"),
    text: List[str] = typer.Argument(..., help="Text files (.txt, .gz, .xz), globs or directories"),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="spaCy language for tokenization (default: the run's, else "
                             "whitespace)"),
    segmenter: Optional[str] = typer.Option(
        None, "--segmenter", help="Chinese word segmentation (default: the run's)"),
    skip_pattern: Optional[str] = typer.Option(
        None, "--skip-pattern", help="Skip lines matching this regex (default: the run's)"),
    max_tokens: Optional[int] = typer.Option(
        None, "--max-tokens",
        help="Read exactly this many tokens of the text (the last sentence cut there)"),
    rows: Optional[int] = typer.Option(
        None, "--rows",
        help="Parallel streams (default: the run's batch size, as its dev evaluation; 64 "
             "for a model that is not in a run directory)"),
    window: Optional[int] = typer.Option(
        None, "--window", help="Tokens per window (default: the run's, else 20)"),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads"),
    output: Optional[Path] = typer.Option(None, "--output",
                                          help="Also write the figures to this JSON file"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace the --output file if it exists"),
) -> None:
    """Full-softmax perplexity of an exported biLM language model on text: how well a biLM
    fits your domain, before and after domain adaptation. For a model in a pretraining run
    (RUN, RUN/model, RUN/snapshots/step_N) the settings not given are the run's, so that
    the run's dev text gives the figure in its metrics.jsonl."""
    import torch

    from ..pretrain.corpus import TextSettings, resolve_files
    from ..pretrain.perplexity import (
        load_lm,
        model_of_run,
        run_of,
        run_settings,
        text_perplexity,
    )

    try:
        if STDOUT in text:  # the same '-' that means standard input elsewhere
            raise ElmoError(Errors.E145)
        sizes = {"--rows": rows, "--window": window}  # None: the run's, or the default
        check_all({k: v for k, v in sizes.items() if v is not None},
                  {"--rows": integer(1), "--window": integer(1)}, Errors.E020)
        check_all({"--max-tokens": max_tokens, "--threads": threads},
                  {"--max-tokens": integer(1, optional=True),
                   "--threads": thread_count(optional=True)}, Errors.E020)
        check_all({"--skip-pattern": skip_pattern}, {"--skip-pattern": regex(optional=True)},
                  Errors.E020)
        if output is not None:  # a path that can never be written: before anything else
            check_writable_path(output, "a file name for --output")
        given = Path(model)
        model = model_of_run(model)
        files = resolve_files(text, what="perplexity")
        if output is not None:
            source = Path(model)
            guard_output(output, inputs=[given, source if source.is_dir() else source.parent,
                                         *files], overwrite=overwrite, what="--output")
        run = run_of(model)
        found = run_settings(run)
        reading: Dict[str, Any] = {k: found[k] for k in ("split_sentences",
                                                         "max_sentence_tokens") if k in found}
        same_lang = lang is None or lang == found.get("lang")  # the run's segmenter fits
        settings = TextSettings(
            lang=lang or found.get("lang", "whitespace"),
            segmenter=segmenter if segmenter is not None or not same_lang
            else found.get("segmenter"),
            skip_pattern=skip_pattern if skip_pattern is not None else found.get("skip_pattern"),
            **reading)
        rows = rows or found.get("batch_size", 64)
        window = window or found.get("window", 20)
        if run is not None:
            msg.info(f"Settings not given are those of the run '{run}': rows {rows}, "
                     f"window {window}, lang {settings.lang}")
        if threads:
            torch.set_num_threads(threads)
        lm, vocab = load_lm(model)
        result = text_perplexity(lm, vocab, files, settings, rows=rows, window=window,
                                 max_tokens=max_tokens)
    except ElmoError as err:
        fail(str(err))
    msg.table({"forward": f"{result['dev_ppl_fwd']:.2f}",
               "backward": f"{result['dev_ppl_bwd']:.2f}",
               "mean": f"{result['dev_ppl']:.2f}",
               "mean per character": f"{result['ppl_per_char']:.2f}",
               "tokens": result["tokens"],
               "predicted (tokens + sentence ends)": result["dev_tokens"]},
              title=f"Perplexity of {model}")
    if output is not None:
        try:
            write_json(output, {"model": model, "text": text, "rows": rows, "window": window,
                                "lang": settings.lang, **result})
        except ElmoError as err:
            fail(str(err))
        except OSError as err:
            fail(Errors.E009.format(path=output, err=err))

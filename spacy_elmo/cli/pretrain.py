"""`spacy-elmo export` and `spacy-elmo perplexity` (`pretrain` is in pretrain_cmd.py)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from wasabi import msg

from ..errors import ElmoError, Errors
from ..files import check_writable_path, write_json
from ..validation import check_all, integer, regex
from . import app, fail


@app.command("export")
def export_cli(
    checkpoint: Path = typer.Argument(..., help="A run directory or its checkpoint.pt"),
    output: Path = typer.Argument(..., help="Directory for options.json + weights.hdf5"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace a model already in OUTPUT"),
) -> None:
    """Export a pretraining checkpoint: options.json + weights.hdf5 (bilm-tf layout),
    vocab.txt, and the softmax in softmax.hdf5."""
    from ..pretrain.export import EXPORT_FILES, export

    try:
        if not overwrite and any((output / name).exists() for name in EXPORT_FILES):
            raise ElmoError(Errors.E026.format(output=output))
        paths = export(checkpoint, output)
    except ElmoError as err:
        fail(str(err))
    msg.good(f"Exported to {output}", "\n".join(str(p) for p in paths.values()))


@app.command("perplexity")
def perplexity_cli(
    model: str = typer.Argument(..., help="An export (or snapshot) with softmax.hdf5 + vocab.txt"),
    text: List[str] = typer.Argument(..., help="Text files (.txt, .gz, .xz), globs or directories"),
    lang: str = typer.Option("whitespace", "--lang",
                             help="spaCy language for tokenization, as in pretraining"),
    segmenter: Optional[str] = typer.Option(
        None, "--segmenter", help="Chinese word segmentation, as in pretraining"),
    skip_pattern: Optional[str] = typer.Option(None, "--skip-pattern",
                                               help="Skip lines matching this regex"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens",
                                             help="Stop after this many tokens"),
    rows: int = typer.Option(64, "--rows", help="Parallel streams (pretraining's batch size)"),
    window: int = typer.Option(20, "--window", help="Tokens per window"),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads"),
    output: Optional[Path] = typer.Option(None, "--output",
                                          help="Also write the figures to this JSON file"),
) -> None:
    """Full-softmax perplexity of an exported biLM language model on text: how well a biLM
    fits your domain, before and after domain adaptation."""
    import torch

    from ..pretrain.corpus import TextSettings, resolve_files
    from ..pretrain.perplexity import load_lm, text_perplexity

    try:
        check_all({"--rows": rows, "--window": window, "--max-tokens": max_tokens,
                   "--threads": threads},
                  {"--rows": integer(1), "--window": integer(1),
                   "--max-tokens": integer(1, optional=True),
                   "--threads": integer(1, optional=True)}, Errors.E020)
        check_all({"--skip-pattern": skip_pattern}, {"--skip-pattern": regex(optional=True)},
                  Errors.E020)
        if output is not None:
            check_writable_path(output, "a file name for the JSON")
        if threads:
            torch.set_num_threads(threads)
        lm, vocab = load_lm(model)
        result = text_perplexity(lm, vocab, resolve_files(text),
                                 TextSettings(lang=lang, segmenter=segmenter,
                                              skip_pattern=skip_pattern),
                                 rows=rows, window=window, max_tokens=max_tokens)
    except ElmoError as err:
        fail(str(err))
    msg.table({"forward": f"{result['dev_ppl_fwd']:.2f}",
               "backward": f"{result['dev_ppl_bwd']:.2f}",
               "mean": f"{result['dev_ppl']:.2f}",
               "mean per character": f"{result['ppl_per_char']:.2f}",
               "tokens": result["dev_tokens"]},
              title=f"Perplexity of {model}")
    if output is not None:
        try:
            write_json(output, {"model": model, "text": text, **result})
        except ElmoError as err:
            fail(str(err))
        except OSError as err:
            fail(Errors.E009.format(path=output, err=err))

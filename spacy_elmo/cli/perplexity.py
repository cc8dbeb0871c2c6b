"""`spacy-elmo perplexity`: how well an exported biLM language model fits some text."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from wasabi import msg

from ..errors import ElmoError
from .common import app, fail


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
        help="Read exactly this many tokens of the text (the last sentence cut there; "
             "default: all of it, or for a run's own dev text as many as the run read)"),
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
    from ..pretrain.perplexity import PerplexityJob

    try:
        job = PerplexityJob.prepare(model, text, lang=lang, segmenter=segmenter,
                                    skip_pattern=skip_pattern, max_tokens=max_tokens,
                                    rows=rows, window=window, threads=threads, output=output,
                                    overwrite=overwrite)
        if job.run is not None:
            msg.info(f"Settings not given are those of the run '{job.run}': rows {job.rows}, "
                     f"window {job.window}, lang {job.settings.lang}"
                     + (f", max tokens {job.max_tokens} (its dev text)"
                        if job.max_tokens is not None and max_tokens is None else ""))
        figures = job.measure()
    except ElmoError as err:
        fail(str(err))
    msg.table({"forward": f"{figures['dev_ppl_fwd']:.2f}",
               "backward": f"{figures['dev_ppl_bwd']:.2f}",
               "mean": f"{figures['dev_ppl']:.2f}",
               "mean per character": f"{figures['ppl_per_char']:.2f}",
               "tokens": figures["tokens"],
               "predicted (tokens + sentence ends)": figures["dev_tokens"]},
              title=f"Perplexity of {job.model}")
    if output is not None:
        try:
            job.write(figures)
        except ElmoError as err:
            fail(str(err))

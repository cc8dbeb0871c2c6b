"""Train and evaluate every cell of a results table: tasks x rows x seeds, resumable.

  python -m spacy_elmo_lab.run_table en|zh [--tasks ner,wnut] [--rows cnn,elmo] [--seeds 0,1]
      [--weights W] [--news-weights W] [--jieba-weights W] [--max-steps 3000]
      [--eval-frequency 500] [--gpu-id -1] [--jobs 1] [--dry-run]
      [--summary results/table_en.json] [--archive benchmarks/results/cells]
      [--training training] [--metrics metrics]

A cell is `spacy train` of its base config (configs/<kind>_<architecture>.cfg) with the
overrides of its task's language and its row (`table.compose`) on corpus/<dataset>/{train,dev}.spacy
into training/<task>_<row>_s<seed>/, then `spacy evaluate` of its model-best on dev and test
into metrics/<task>_<row>_s<seed>.{dev,test}.json (the names `spacy_elmo_lab.results` reads).
A finished cell leaves training/<run>/cell.json (its command, wall time and scores); a rerun
skips finished cells (those whose cell.json records the same settings, --gpu-id aside: a
cell of other settings, such as another biLM or budget, is trained again) and trains an
interrupted one again from the start, so a table that takes longer than a session continues
where it stopped. With `--archive DIR`, each finished cell's record and its dev and test
metrics are also written to DIR/<run>.json, to be committed: a rerun on another machine,
where training/ and metrics/ are gone, restores them from there and skips those cells
(their models are not kept: `spacy_elmo_lab.results` shows no layer mix for them).
`--summary` is written once every cell is finished (the project's commands name it as
their output), and while cells are skipped for missing inputs the command exits non-zero,
so that `spacy project run` does not take the table as made. Every row of a task gets the
same budget (`--max-steps`, `--eval-frequency`, the config's patience) and the test score
of the model selected on dev is reported. `--jobs N` runs N cells at once, each process's
thread pools (OpenMP, MKL, OpenBLAS: torch and numpy) capped at cores / N, its output in
training/<run>/train.log: spaCy's CPU training is mostly one thread, so on a small machine
parallel cells use it better than one cell with every core.

Rows (each only where its inputs exist in the project; --dry-run lists the commands):
  cnn               spaCy's CNN tok2vec
  cnnpre            the CNN warm-started with `spacy pretrain` (pretrain_cnn/model-last.bin)
  cnnw2vsame        CNN + word2vec trained on the biLM's own text (vectors/w2v_same/nlp)
  cnnw2vall         CNN + word2vec trained on all of lm_en (vectors/w2v_all/nlp)
  cnnw2v            Chinese: CNN + character word2vec (vectors/zh_w2v/nlp)
  elmo              the ELMo listener over the frozen biLM (--weights)
  elmo_ft           the same, fine-tuning the biLM (grad_factor 1)
  elmo_news         Chinese: the ELMo listener over the news-adapted biLM (--news-weights)
  elmo_concat       [spaCy features ; ELMo]
  elmo_concat_w2v   [word2vec + features ; ELMo]
  cnnw2vall_bilstm  CNN + word2vec (all lm_en) with a biLSTM encoder (cnnw2v_bilstm: Chinese)
  elmo_bilstm       the ELMo listener with a biLSTM encoder (the paper's task biLSTM)
  elmo_bilstm_out   the same, with ELMo again at the biLSTM's output ([h ; ELMo])
  elmo_concat_bilstm  [spaCy features ; ELMo] with a biLSTM encoder
  elmo_bilstm_attn  text classification: the biLSTM encoder and attention pooling

Where a task compares biLMs (THUCNews: `elmo` over --weights, `elmo_news` over
--news-weights), its other ELMo rows take the biLM whose ELMo row has the better mean dev
score over the seeds: they run after those cells, in the same invocation, and their
cell.json records the dev scores that chose it. `--follow elmo` gives them that row's biLM
instead, without the other rival (a biLM compared alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import IO, Annotated, Dict, List, Optional, Tuple

import typer

from spacy_elmo.files.atomic import write_text
from spacy_elmo.files.json_io import write_json

from .cell_inputs import input_digests
from .results import CELL_DONE, CELL_RUNNING, score
from .table import SPLITS, TABLES, W2V_CONCAT, Cell, cell_record, finished, make_cells, recorded


def cores() -> int:
    """The CPU cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cell_env(threads: Optional[int]) -> Optional[Dict[str, str]]:
    """The environment of a cell's processes: with `threads`, every thread pool capped."""
    if threads is None:
        return None
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    return env


def evaluate_run(run_dir: Path, corpus: Path, metrics: Path, gpu_id: int,
                 env: Optional[Dict[str, str]] = None, log: Optional[IO] = None
                 ) -> Dict[str, float]:
    """`spacy evaluate` of a run's model-best on corpus/{dev,test}.spacy: writes
    metrics/<run>.<split>.json, returns each split's table figure."""
    metrics.mkdir(parents=True, exist_ok=True)
    scores = {}
    for split in ("dev", "test"):
        data = corpus / f"{split}.spacy"
        if data.exists():
            out = metrics / f"{run_dir.name}.{split}.json"
            subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(run_dir / "model-best"),
                            str(data), "--output", str(out), "--gpu-id", str(gpu_id)],
                           check=True, env=env, stdout=log, stderr=log)
            scores[split] = score(json.loads(out.read_text(encoding="utf-8")))
    return scores


def restore(archive: Path, training: Path, metrics: Path) -> List[str]:
    """Every archived cell without a local cell.json gets one, and its metrics files, back
    from archive/<run>.json; returns their runs. A local record is never overwritten, and
    a restored one counts as finished only if it records the command and inputs of this
    run (`table.finished`)."""
    restored = []
    for path in sorted(archive.glob("*.json")):
        run = path.stem
        if (training / run / CELL_DONE).exists() or (training / run / CELL_RUNNING).exists():
            continue
        entry = json.loads(path.read_text(encoding="utf-8"))
        for split, data in entry.pop("metrics", {}).items():
            write_json(metrics / f"{run}.{split}.json", data)
        write_json(training / run / CELL_DONE, entry)
        restored.append(run)
    return restored


def archive_cell(run: str, record: Dict, metrics: Path, archive: Path) -> None:
    """Write archive/<run>.json: the cell's record and its dev and test metrics."""
    found = {split: metrics / f"{run}.{split}.json" for split in ("dev", "test")}
    write_json(archive / f"{run}.json", {**record, "metrics": {
        split: json.loads(path.read_text(encoding="utf-8"))
        for split, path in found.items() if path.exists()}})


def run_cell(cell: Cell, training: Path, metrics: Path, gpu_id: int,
             threads: Optional[int] = None, archive: Optional[Path] = None) -> Dict:
    """Train (from scratch), evaluate, and mark the cell finished (and archive its record
    and metrics in archive/<run>.json). With `threads`, the processes' thread pools are
    capped and their output goes to training/<run>/train.log."""
    start = time.time()
    inputs = input_digests(cell.command, cell.lang)  # what it trains from, by content
    run_dir = training / cell.run
    # what an earlier training of this cell left (other settings) must not outlive it
    for old in [run_dir / CELL_DONE] + [metrics / f"{cell.run}.{s}.json" for s in SPLITS]:
        old.unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text(run_dir / CELL_RUNNING, recorded(cell.command) + "\n")
    env = cell_env(threads)
    log = None
    if threads is not None:
        log = (run_dir / "train.log").open("w", encoding="utf-8")
    try:
        subprocess.run(cell.command, check=True, env=env, stdout=log, stderr=log)
        minutes = (time.time() - start) / 60
        scores = evaluate_run(run_dir, cell.corpus, metrics, gpu_id, env, log)
    finally:
        if log is not None:
            log.close()
    record = {"command": recorded(cell.command),
              "inputs": inputs,
              "train_minutes": round(minutes, 1),
              **({"threads": threads} if threads is not None else {}),
              **({"bilm_chosen_by_dev": cell.chosen_by} if cell.chosen_by else {}),
              **scores}
    write_json(run_dir / CELL_DONE, record)
    (run_dir / CELL_RUNNING).unlink()
    if archive is not None:
        archive_cell(cell.run, record, metrics, archive)
    return record


def run_cells(cells: List[Cell], training: Path, metrics: Path, gpu_id: int, jobs: int,
              archive: Optional[Path] = None) -> List[str]:
    """Run the cells, `jobs` at a time; returns the runs that failed (after a failure no
    new cell starts, the running ones finish)."""
    def done(cell: Cell, record: Dict) -> None:
        typer.echo(f"{cell.run}: test {record['test']:.1f}, dev {record['dev']:.1f} "
                   f"({record['train_minutes']} min)")

    if jobs == 1:
        for i, cell in enumerate(cells, 1):
            typer.echo(f"[{i}/{len(cells)}] {cell.run}", err=True)
            try:
                done(cell, run_cell(cell, training, metrics, gpu_id, archive=archive))
            except subprocess.CalledProcessError:
                typer.echo(f"{cell.run} failed: see its output above", err=True)
                return [cell.run]
        return []
    threads = max(1, cores() // jobs)
    stop = threading.Event()  # set by a failed cell, in its worker, before it takes another

    def guarded(cell: Cell) -> Optional[Dict]:
        if stop.is_set():
            return None
        try:
            return run_cell(cell, training, metrics, gpu_id, threads, archive)
        except subprocess.CalledProcessError:
            stop.set()
            raise

    failed: List[str] = []
    with ThreadPoolExecutor(jobs) as pool:
        futures: Dict[Future, Cell] = {pool.submit(guarded, cell): cell for cell in cells}
        typer.echo(f"{len(cells)} cells, {jobs} at a time, {threads} thread(s) each; "
                   f"output in {training}/<run>/train.log", err=True)
        for future in as_completed(futures):
            cell = futures[future]
            try:
                record = future.result()
            except subprocess.CalledProcessError:
                failed.append(cell.run)
                typer.echo(f"{cell.run} failed: see {training / cell.run / 'train.log'}",
                           err=True)
                continue
            if record is not None:
                done(cell, record)
    return failed


def check_rivals(table: str, cells: List[Cell], rows: Optional[List[str]],
                 follow: Optional[str] = None) -> None:
    """A row that waits for its task's rival rows needs them in this run (or finished), and
    --follow names one of a task's rival rows."""
    if follow is not None:
        competing = {r for task in TABLES[table].values() for r in task.rivals}
        if follow not in competing:
            raise typer.BadParameter(
                f"--follow takes a row that competes on dev in the {table} table "
                f"({', '.join(sorted(competing)) or 'none'}), not {follow!r}")
    for cell in cells:
        rivals = TABLES[table][cell.task].rivals
        if cell.waits and rows is not None and not set(rivals) <= set(rows):
            raise typer.BadParameter(
                f"the {cell.row} row of {cell.task} takes the biLM that its rows "
                f"{', '.join(rivals)} choose on dev, and they have not run: add them to "
                f"--rows (e.g. --rows {','.join([*rivals, cell.row])})")


def plan(todo: List[Cell], dry_run: bool) -> Tuple[List[Cell], List[str], List[str]]:
    """The cells to run now, those skipped for missing inputs, and those waiting for their
    rival rows to choose their biLM; all but the first are listed with their commands
    (--dry-run lists all and runs none)."""
    runnable: List[Cell] = []
    skipped: List[str] = []
    waiting: List[str] = []
    for i, cell in enumerate(todo, 1):
        missing = [str(p) for p in cell.needs if not p.exists()]
        why = (f"  (skipped: missing {', '.join(missing)})" if missing else
               "  (after its rival ELMo rows: the biLM with the better dev score)"
               if cell.waits else "")
        if dry_run or why:
            typer.echo(f"[{i}/{len(todo)}] {cell.run}: {recorded(cell.command)}{why}")
        if missing:
            skipped.append(cell.run)
        elif cell.waits:
            waiting.append(cell.run)
        elif not dry_run:
            runnable.append(cell)
    return runnable, skipped, waiting


def main(
    table: str = typer.Argument(..., help="en, zh or ud"),
    tasks: str = typer.Option("", help="comma-separated tasks (default: the table's)"),
    rows: str = typer.Option("", help="comma-separated rows (default: each task's)"),
    seeds: str = typer.Option("0,1", help="comma-separated seeds"),
    weights: str = typer.Option("null", help="biLM of the ELMo rows (null: the bundled one "
                                             "for the table's language)"),
    news_weights: str = typer.Option("bilm/zh_news", help="the news-adapted Chinese biLM"),
    jieba_weights: str = typer.Option("bilm/zh_jieba_pretrained",
                                      help="the jieba-word Chinese biLM"),
    max_steps: int = typer.Option(3000, help="training budget of every cell"),
    eval_frequency: int = typer.Option(500, help="dev evaluation interval"),
    gpu_id: int = typer.Option(-1, help="GPU id (-1: CPU)"),
    jobs: int = typer.Option(1, min=1, help="cells run at once (each with cores / jobs threads)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list the cells and commands only"),
    summary: Optional[Path] = typer.Option(None, help="once every cell is finished, write "
                                                      "their records to this JSON file"),
    archive: Optional[Path] = typer.Option(None, help="keep each finished cell's record and "
                                                      "metrics here (to commit); restored "
                                                      "from here on a new machine"),
    training: Annotated[Path, typer.Option(
        help="the cells' runs: <training>/<run>/ (another directory keeps a study at another "
             "budget apart)")] = Path("training"),
    metrics: Annotated[Path, typer.Option(help="the cells' dev and test scores")
                       ] = Path("metrics"),
    follow: Annotated[Optional[str], typer.Option(
        help="THUCNews: the rows that take the biLM elmo/elmo_news choose on dev take this "
             "row's biLM instead (the other need not run), e.g. elmo")] = None,
) -> None:
    """Train and evaluate the table's missing cells."""
    if table not in TABLES:
        raise typer.BadParameter(f"table must be one of {sorted(TABLES)}, not {table!r}")
    task_names = tasks.split(",") if tasks else list(TABLES[table])
    if tasks == "" and table == "zh":
        task_names.remove("thucnewsjieba")  # a separate experiment: --tasks thucnewsjieba
    unknown = [t for t in task_names if t not in TABLES[table]]
    row_names = rows.split(",") if rows else None
    table_rows = {r for t in TABLES[table].values() for r in t.rows}
    unknown += [r for r in row_names or [] if r not in table_rows]
    if unknown:
        raise typer.BadParameter(f"unknown tasks or rows {unknown} for the {table} table; "
                                 f"tasks: {sorted(TABLES[table])}, rows: {sorted(table_rows)}")
    values = {"weights": weights, "news_weights": news_weights, "jieba_weights": jieba_weights,
              "w2v": W2V_CONCAT[table]}
    budget = ["--training.max_steps", str(max_steps), "--training.eval_frequency",
              str(eval_frequency), "--gpu-id", str(gpu_id)]
    seed_list = [int(s) for s in seeds.split(",")]
    if archive is not None:  # before --dry-run's listing too: it shows what will run
        restored = restore(archive, training, metrics)
        if restored:
            typer.echo(f"restored from {archive}: {len(restored)} cell record(s)", err=True)
    cells = make_cells(table, task_names, row_names, seed_list, values, budget, training,
                       follow)
    todo = [c for c in cells if not finished(c, training)]
    if archive is not None and not dry_run:  # also those finished without --archive
        for cell in cells:
            if cell not in todo:
                archive_cell(cell.run, cell_record(cell, training), metrics, archive)
    check_rivals(table, cells, row_names, follow)
    stale = [c.run for c in todo if not c.waits and (training / c.run / CELL_DONE).exists()]
    typer.echo(f"{table}: {len(cells)} cells, {len(cells) - len(todo)} finished, "
               f"{len(todo)} to run")
    if stale:
        typer.echo(f"trained again, their cell.json records other settings: {', '.join(stale)}",
                   err=True)
    runnable, skipped, waiting = plan(todo, dry_run)
    failed = run_cells(runnable, training, metrics, gpu_id, jobs, archive)
    if waiting and not failed and not dry_run:
        # the rivals have run: the cells that waited for them now know their biLM
        cells = make_cells(table, task_names, row_names, seed_list, values, budget, training,
                           follow)
        later = [c for c in cells if c.run in waiting and not finished(c, training)]
        runnable, missing, still = plan(later, dry_run)
        skipped += missing + still
        failed = run_cells(runnable, training, metrics, gpu_id, jobs, archive)
    if failed:
        typer.echo(f"failed: {', '.join(failed)}; rerun the same command to retry them", err=True)
        raise typer.Exit(1)
    if summary is None or dry_run:
        return
    if skipped:  # a non-zero status: `spacy project run` must not record the table as made
        typer.echo(f"not written: {summary}: {len(skipped)} cell(s) skipped for missing inputs "
                   f"or waiting for cells that could not run (listed above); make them and "
                   f"run the same command again", err=True)
        raise typer.Exit(1)
    records = {c.run: cell_record(c, training) for c in cells}
    write_json(summary, records)
    typer.echo(f"every cell finished: {summary}")

if __name__ == "__main__":
    typer.run(main)

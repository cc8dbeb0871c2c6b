"""The results tables: tasks x rows, each cell's `spacy train` command composed from a base
config and overrides (language, static vectors, fine-tuning, seed, budget), and the test of
whether a finished cell was trained with the settings asked for now."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from .cell_inputs import input_digests
from .results import CELL_DONE

CONFIGS = Path("configs")  # relative to the project directory, as the commands name them


@dataclass(frozen=True)
class Task:
    dataset: str  # corpus/<dataset>/
    kind: str  # "ner", "textcat" or "ud": the config family (and the component's name)
    rows: Tuple[str, ...]  # the rows run by default
    lang: str = "en"  # --nlp.lang of its configs
    tokenizer: str = ""  # "jieba": the jieba-word configs (configs/zh_<kind>_<row>_jieba.cfg)
    bilm: str = "weights"  # which biLM option the ELMo rows take
    # ELMo rows whose biLMs compete on dev: the task's other ELMo rows take the winner's
    rivals: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Row:
    config: str  # the architecture: "cnn", "elmo" or "elmo_concat" (configs/<kind>_<config>.cfg)
    paths: Dict[str, str] = field(default_factory=dict)  # --paths.X values ({weights} etc.)
    overrides: Dict[str, str] = field(default_factory=dict)  # other overrides ({kind})
    vectors: bool = False  # static vectors (--paths.vectors) in its embedding


# the task biLSTM rows (the paper's design): CNN + word2vec, ELMo and [features ; ELMo] with
# a biLSTM encoder, and ELMo again at its output; text classification also pools by attention
BILSTM_ROWS = ("elmo_bilstm", "elmo_bilstm_out", "elmo_concat_bilstm")
EN_ROWS = ("cnn", "cnnpre", "cnnw2vsame", "cnnw2vall", "elmo", "elmo_concat",
           "elmo_concat_w2v", "cnnw2vall_bilstm", *BILSTM_ROWS)
EN_TEXTCAT_ROWS = EN_ROWS + ("elmo_bilstm_attn",)
ZH_NER_ROWS = ("cnn", "cnnw2v", "elmo", "elmo_concat", "cnnw2v_bilstm", *BILSTM_ROWS)
UD_ROWS = ("cnn", "cnnw2vall", "elmo", "elmo_concat", "elmo_concat_w2v", "cnnw2vall_bilstm",
           *BILSTM_ROWS)
TABLES: Dict[str, Dict[str, Task]] = {
    "en": {
        "ner": Task("conll", "ner", EN_ROWS + ("elmo_ft",)),
        "wnut": Task("wnut", "ner", EN_ROWS + ("elmo_ft",)),
        "sst5": Task("sst5", "textcat", EN_TEXTCAT_ROWS),
        "trec": Task("trec", "textcat", EN_TEXTCAT_ROWS),
    },
    "zh": {
        "msra": Task("msra", "ner", ZH_NER_ROWS, lang="zh"),
        "weibo": Task("weibo", "ner", ZH_NER_ROWS, lang="zh"),
        "resume": Task("resume", "ner", ZH_NER_ROWS, lang="zh"),
        "thucnews": Task("thucnews", "textcat", ("cnn", "cnnw2v", "elmo", "elmo_news",
                                                 "elmo_concat", "elmo_concat_w2v",
                                                 "cnnw2v_bilstm", "elmo_bilstm_attn",
                                                 "elmo_concat_bilstm"),
                         lang="zh", rivals=("elmo", "elmo_news")),
        "thucnewsjieba": Task("thucnews_jieba", "textcat", ("cnn", "elmo"), lang="zh",
                              tokenizer="jieba", bilm="jieba_weights"),
    },
    # UD English EWT: tagger, morphologizer, parser and lemmatizer in one pipeline
    "ud": {"ud": Task("ud_en_ewt", "ud", UD_ROWS)},
}
# the components a row's "{kind}" override reaches: the task's one component, or each of the
# UD pipeline's four listeners
LISTENERS = {"ud": ("tagger", "morphologizer", "parser", "trainable_lemmatizer")}
# the encoder of a CNN baseline's tok2vec component, and of an ELMo task's listener
CNN_ENCODER = "components.tok2vec.model.encode.kind"
ENCODER = "components.{kind}.model.tok2vec.encode.kind"
AT_OUTPUT = "components.{kind}.model.tok2vec.elmo_at_output"
POOL = "components.{kind}.model.pool"
ROWS: Dict[str, Row] = {
    "cnn": Row("cnn"),
    "cnnpre": Row("cnn", {"init_tok2vec": "pretrain_cnn/model-last.bin"}),
    "cnnw2vsame": Row("cnn", {"vectors": "vectors/w2v_same/nlp"}, vectors=True),
    "cnnw2vall": Row("cnn", {"vectors": "vectors/w2v_all/nlp"}, vectors=True),
    "cnnw2v": Row("cnn", {"vectors": "vectors/zh_w2v/nlp"}, vectors=True),
    "elmo": Row("elmo", {"elmo_weights": "{weights}"}),
    "elmo_ft": Row("elmo", {"elmo_weights": "{weights}"},
                   {"components.{kind}.model.tok2vec.grad_factor": "1.0"}),
    "elmo_news": Row("elmo", {"elmo_weights": "{news_weights}"}),
    "elmo_concat": Row("elmo_concat", {"elmo_weights": "{weights}"}),
    "elmo_concat_w2v": Row("elmo_concat", {"elmo_weights": "{weights}", "vectors": "{w2v}"},
                           vectors=True),
    "cnnw2vall_bilstm": Row("cnn", {"vectors": "vectors/w2v_all/nlp"}, {CNN_ENCODER: "bilstm"},
                            vectors=True),
    "cnnw2v_bilstm": Row("cnn", {"vectors": "vectors/zh_w2v/nlp"}, {CNN_ENCODER: "bilstm"},
                         vectors=True),
    "elmo_bilstm": Row("elmo", {"elmo_weights": "{weights}"}, {ENCODER: "bilstm"}),
    "elmo_bilstm_out": Row("elmo", {"elmo_weights": "{weights}"},
                           {ENCODER: "bilstm", AT_OUTPUT: "true"}),
    "elmo_concat_bilstm": Row("elmo_concat", {"elmo_weights": "{weights}"},
                              {ENCODER: "bilstm"}),
    "elmo_bilstm_attn": Row("elmo", {"elmo_weights": "{weights}"},
                            {ENCODER: "bilstm", POOL: "attention"}),
}
# The encoder settings the rows were defined with, where a shipped config's default has moved
# since (1.1: the ELMo text classifiers to a biLSTM, with attention pooling over ELMo alone;
# NER over ELMo alone to a biLSTM with ELMo again at its output): each row keeps its
# meaning, and a row's own overrides come on top
PINNED: Dict[str, Dict[str, str]] = {
    "textcat_elmo.cfg": {ENCODER: "cnn", POOL: "reduce"},
    "textcat_elmo_concat.cfg": {ENCODER: "cnn"},
    "ner_elmo.cfg": {ENCODER: "cnn", AT_OUTPUT: "false"},
}
W2V_CONCAT = {"en": "vectors/w2v_all/nlp", "zh": "vectors/zh_w2v/nlp",
              "ud": "vectors/w2v_all/nlp"}
SPLITS = ("train", "dev", "test")  # corpus/<dataset>/<split>.spacy: every cell needs all three
# where each architecture's static vectors are switched on ({kind}: the task's component;
# the UD configs' four listeners share one switch)
STATIC_VECTORS = {"cnn": "components.tok2vec.model.embed.include_static_vectors",
                  "elmo_concat": "components.{kind}.model.tok2vec.features."
                                 "include_static_vectors",
                  "ud_elmo_concat": "paths.static_vectors"}
TASK_DATASETS = {name: task.dataset for tasks in TABLES.values() for name, task in tasks.items()}


@dataclass
class Cell:
    task: str
    row: str
    seed: int
    corpus: Path  # corpus/<dataset>: train, dev and test .spacy files
    command: List[str]
    needs: List[Path]  # inputs that must exist (config, corpus, vectors, weights)
    # a row that takes the biLM its task's rivals choose: their mean dev scores once
    # chosen (recorded in cell.json), None while they are not all finished
    chosen_by: Optional[Dict[str, float]] = None
    waits: bool = False
    lang: str = "en"  # its task's language: which biLM "null" weights are

    @property
    def run(self) -> str:
        return f"{self.task}_{self.row}_s{self.seed}"


CHOSEN_LATER = "<chosen-on-dev>"  # a waiting cell's biLM in --dry-run's listing


def compose(task: Task, row: Row) -> Tuple[Path, Dict[str, str]]:
    """A cell's base config and the overrides that make it this task's row (language, static
    vectors, the row's own); --paths.* values come from the row, the seed and budget from
    the table."""
    if task.tokenizer:
        config = CONFIGS / f"{task.lang}_{task.kind}_{row.config}_{task.tokenizer}.cfg"
    else:
        config = CONFIGS / f"{task.kind}_{row.config}.cfg"
    overrides = pinned_settings(task, config.name)
    if task.lang != "en" and not task.tokenizer:
        overrides["nlp.lang"] = task.lang
    if row.vectors:
        switch = STATIC_VECTORS.get(f"{task.kind}_{row.config}", STATIC_VECTORS[row.config])
        overrides.update(each_listener(task, {switch: "true"}))
    overrides.update(each_listener(task, row.overrides))
    return config, overrides


def pinned_settings(task: Task, config_name: str) -> Dict[str, str]:
    """The settings PINNED for the task's cells of a config, as overrides."""
    return each_listener(task, PINNED.get(config_name, {}))


def each_listener(task: Task, overrides: Dict[str, str]) -> Dict[str, str]:
    """The overrides with "{kind}" made each of the task's listening components."""
    return {key.format(kind=name): value for key, value in overrides.items()
            for name in LISTENERS.get(task.kind, (task.kind,))}


def is_follower(task: Task, row_name: str) -> bool:
    """Whether the row takes the biLM that the task's rival ELMo rows choose."""
    return (bool(task.rivals) and row_name not in task.rivals
            and ROWS[row_name].paths.get("elmo_weights") == "{weights}")


def choose_bilm(table: str, name: str, seeds: List[int], values: Dict[str, str],
                budget: List[str], training: Path) -> Optional[Tuple[str, Dict[str, float]]]:
    """The biLM (a weights value) of the task's rival ELMo row with the best mean dev
    score, and every rival's mean; None until all their cells are finished."""
    task = TABLES[table][name]
    rivals = make_cells(table, [name], list(task.rivals), seeds, values, budget, training)
    if not rivals or not all(finished(c, training) for c in rivals):
        return None
    dev = {row: sum(cell_record(c, training)["dev"] for c in rivals if c.row == row) / len(seeds)
           for row in task.rivals}
    best = max(task.rivals, key=lambda row: dev[row])  # a tie: the first listed
    task_values = {**values, "weights": values[task.bilm]}
    return ROWS[best].paths["elmo_weights"].format(**task_values), dev


def cell_record(cell: Cell, training: Path) -> Dict[str, Any]:
    """The cell.json of a finished cell."""
    data: Dict[str, Any] = json.loads((training / cell.run / CELL_DONE).read_text(
        encoding="utf-8"))
    return data


def make_cells(table: str, tasks: List[str], rows: Optional[List[str]], seeds: List[int],
               values: Dict[str, str], budget: List[str], training: Path = Path("training"),
               follow: Optional[str] = None) -> List[Cell]:
    """Every (task, row, seed) of the table, with its `spacy train` command (output in
    `training`/<run>). With `follow` (one of a task's rival rows), the rows that would take
    the rivals' choice on dev take that row's biLM instead."""
    cells = []
    for name in tasks:
        task = TABLES[table][name]
        choice: Optional[Tuple[str, Optional[Dict[str, float]]]] = None
        if follow is not None and follow in task.rivals:
            fixed = {**values, "weights": values[task.bilm]}
            choice = ROWS[follow].paths["elmo_weights"].format(**fixed), None
        elif task.rivals and any(is_follower(task, r) for r in rows or task.rows
                                 if r in task.rows):
            choice = choose_bilm(table, name, seeds, values, budget, training)
        # the rows asked for that the task has (attention pooling is for classes only)
        for row_name in task.rows if rows is None else [r for r in rows if r in task.rows]:
            row = ROWS[row_name]
            config, overrides = compose(task, row)
            corpus = Path("corpus") / task.dataset
            task_values = {**values, "weights": values[task.bilm]}
            follower = is_follower(task, row_name)
            if follower:
                task_values["weights"] = CHOSEN_LATER if choice is None else choice[0]
            paths = {k: v.format(**task_values) for k, v in row.paths.items()}
            for seed in seeds:
                command = [sys.executable, "-m", "spacy", "train", str(config), "--output",
                           str(training / f"{name}_{row_name}_s{seed}"),
                           "--paths.train", str(corpus / "train.spacy"),
                           "--paths.dev", str(corpus / "dev.spacy"),
                           "--system.seed", str(seed), *budget]
                for key, value in paths.items():
                    command += [f"--paths.{key}", value]
                for key, value in overrides.items():
                    command += [f"--{key}", value]
                needs = [config] + [corpus / f"{split}.spacy" for split in SPLITS]
                needs += [Path(v) for k, v in paths.items() if v not in ("null", CHOSEN_LATER)]
                cells.append(Cell(name, row_name, seed, corpus, command, needs,
                                  chosen_by=choice[1] if follower and choice else None,
                                  waits=follower and choice is None, lang=task.lang))
    return cells


def recorded(command: List[str]) -> str:
    """A cell's command as its cell.json records it (`python` for the interpreter)."""
    return "python " + " ".join(command[1:])


def settings(command: str) -> Tuple[str, Tuple[Tuple[str, str], ...]]:
    """What makes two recorded commands train the same cell: the base config and every
    option but the device (--gpu-id), in any order."""
    words = command.split()
    if len(words) < 5:  # no record of a `python -m spacy train CONFIG ...` command
        return command, ()
    config, options = words[4], words[5:]
    pairs = dict(zip(options[::2], options[1::2], strict=False))
    pairs.pop("--gpu-id", None)
    return config, tuple(sorted(pairs.items()))


def finished(cell: Cell, training: Path) -> bool:
    """Whether the cell's cell.json records a run of this very command from the same
    inputs (other settings, e.g. another budget, or another biLM: not finished, trained
    again). An input whose digest the record holds (`cell_inputs`) is compared by its
    content, not by its path; a record without digests (before them) by its command."""
    if not (training / cell.run / CELL_DONE).exists():
        return False
    record = cell_record(cell, training)
    known: Dict[str, str] = record.get("inputs", {})
    current = input_digests(cell.command, cell.lang) if known else {}  # hashes only if asked
    if any(key in current and current[key] != digest for key, digest in known.items()):
        return False
    by_content = {f"--paths.{key}" for key in known if key in current}
    config, options = settings(record.get("command", ""))
    mine, my_options = settings(recorded(cell.command))
    return (config, _without(options, by_content)) == (mine, _without(my_options, by_content))


def _without(options: Tuple[Tuple[str, str], ...], flags: Set[str]
             ) -> Tuple[Tuple[str, str], ...]:
    return tuple(pair for pair in options if pair[0] not in flags)

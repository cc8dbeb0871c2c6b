import random
from pathlib import Path
from typing import Optional

import pytest
import torch
from thinc.api import Config
from typer.testing import CliRunner

from spacy_elmo.checksums import tensors_sha256
from spacy_elmo.cli import app
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import CHECKSUM, OLD_CHECKSUM
from spacy_elmo.pretrain.config import PretrainConfig

torch.set_num_threads(1)

WORDS = ("the cat dog sat on a mat and ran to the big small red house in garden with "
         "john mary saw two old trees near river").split()
TINY_OPTIONS = {"lstm_dim": 16, "projection_dim": 8, "filters": [[1, 4], [2, 4], [3, 8]],
                "char_embed_dim": 4, "n_highway": 1}


def write_corpus(path: Path, n_lines: int = 200, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        lines.append(" ".join(words) + " .")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


V1_0_PRETRAIN = Path(__file__).resolve().parents[1] / "fixtures" / "v1_0" / "pretrain"


def as_written_by_0_1(checkpoint: Path, checksum: Optional[str] = OLD_CHECKSUM) -> None:
    """Rewrite a checkpoint as spacy-elmo 0.1 wrote it: without the checksum over its whole
    content, with 0.1's checksum over its tensors only (or, before that, none)."""
    data = torch.load(checkpoint, weights_only=True)
    del data[CHECKSUM]
    if checksum is not None:
        data[checksum] = tensors_sha256(data)
    torch.save(data, checkpoint)


def tiny_config(tmp_path: Path, **changes) -> PretrainConfig:
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        write_corpus(corpus)
    settings = dict(train=[str(corpus)], dev=[str(corpus)], output=str(tmp_path / "run"),
                    options=TINY_OPTIONS, vocab_size=40, n_negatives=8, batch_size=4,
                    window=6, max_steps=10, eval_every=5, log_every=2, checkpoint_every=5,
                    dev_max_tokens=300, shuffle_buffer=30)
    settings.update(changes)
    return PretrainConfig(**settings)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.txt")


def flat(text: str) -> str:
    """A message with its line breaks and runs of spaces made single spaces."""
    return " ".join(text.split())


def resolved(*args: object) -> PretrainConfig:
    """The settings `spacy-elmo pretrain ARGS` would train with (--dry-run prints them)."""
    result = CliRunner().invoke(app, ["pretrain", *map(str, args), "--dry-run"])
    assert result.exit_code == 0, result.output
    sections = Config().from_str(result.stdout, interpolate=False)
    return PretrainConfig(**{k: v for values in sections.values() for k, v in values.items()})


@pytest.fixture
def no_curves(monkeypatch):
    """Runs without drawing curves.png (matplotlib is optional and slow)."""
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)

import random
from pathlib import Path

import pytest
import torch

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

"""A 2-process DistributedDataParallel run on CPU (Gloo)."""

import os
import socket
from pathlib import Path

import torch
import torch.multiprocessing as mp

from spacy_elmo.pretrain import ddp
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import tiny_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank: int, world_size: int, port: int, tmp: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank))
    result = train(tiny_config(Path(tmp), device="cpu", max_steps=6, eval_every=3),
                   progress=False)
    torch.save(result.model.state_dict(), Path(tmp) / f"rank{rank}.pt")


def test_two_process_gloo_run(tmp_path):
    # every word of an even line starts with "e", of an odd line with "o"
    lines = [" ".join(("e" if i % 2 == 0 else "o") + w for w in "the cat sat on a mat".split())
             for i in range(200)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    mp.spawn(worker, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    a, b = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    assert all(torch.equal(a[k], b[k]) for k in a)  # gradients were averaged
    # ... and applied: the weights moved from where both ranks started (the seed's biLM)
    start = Trainer.start(tiny_config(tmp_path, output=str(tmp_path / "fresh"), device="cpu"),
                          ddp.setup("cpu"), overwrite=False, progress=False)
    init = start.model.state_dict()
    assert {k: v.shape for k, v in init.items()} == {k: v.shape for k, v in a.items()}
    moved = [k for k in a if k.startswith("bilm.") and not torch.equal(a[k], init[k])]
    assert len(moved) > len([k for k in a if k.startswith("bilm.")]) // 2
    data = load_checkpoint(tmp_path / "run")
    assert data["step"] == 6 and data["world_size"] == 2 and len(data["ranks"]) == 2
    seen = []
    for state in data["ranks"]:
        tokens = {t for fwd, _ in state["buffers"] for chunk in fwd for t in chunk}
        seen.append({t[0] for t in tokens if t not in ("<S>", "</S>")})
    assert seen == [{"e"}, {"o"}]  # each process reads its own lines
    metrics = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len([m for m in metrics if '"train"' in m]) == 3  # one writer

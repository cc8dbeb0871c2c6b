"""What int8 inference costs a trained task: a pipeline trained with fp32 ELMo features,
evaluated on the same test set with its `elmo` component at fp32 and at int8 (the config's
`precision`, set when loading), side by side; the difference in the task's score.

    python benchmarks/int8_downstream.py training/wnut_elmo_s0/model-best corpus/wnut/test.spacy
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Dict, Optional, Sequence  # noqa: E402

import spacy  # noqa: E402
import torch  # noqa: E402
from spacy.tokens import DocBin  # noqa: E402
from spacy.training import Example  # noqa: E402
from spacy_elmo_lab.results import score  # noqa: E402

from spacy_elmo.pretrain.machine import cpu_model  # noqa: E402


def evaluate(model: Path, test: Path, precision: str) -> Dict[str, float]:
    """The table's score (entity F1, accuracy or LAS) and seconds, at `precision`."""
    nlp = spacy.load(model, config={"components": {"elmo": {"model": {
        "precision": precision}}}})
    docs = list(DocBin().from_disk(test).get_docs(nlp.vocab))
    examples = [Example(nlp.make_doc(d.text), d) for d in docs]
    start = time.perf_counter()
    scores = nlp.evaluate(examples)
    return {"score": score(scores), "seconds": time.perf_counter() - start}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="a trained pipeline with an elmo component")
    parser.add_argument("test", type=Path, help="its test set (.spacy)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    torch.set_num_threads(args.threads)
    rows = {p: evaluate(args.model, args.test, p) for p in ("fp32", "int8")}
    print(f"# {args.model} on {args.test} ({cpu_model()}, {args.threads} thread(s))")
    print("| precision | score | seconds |\n|---|---|---|")
    for precision, row in rows.items():
        print(f"| {precision} | {row['score']:.2f} | {row['seconds']:.1f} |")
    print(f"int8 - fp32: {rows['int8']['score'] - rows['fp32']['score']:+.2f}")


if __name__ == "__main__":
    main()

"""What a lower precision costs a trained task: a pipeline trained with fp32 ELMo features,
evaluated on the same test set with its `elmo` component at each precision (the config's
`precision`, set when loading), side by side; each score's difference to fp32.

    python benchmarks/precision_downstream.py training/wnut_elmo_s0/model-best \
        corpus/wnut/test.spacy

Precisions: fp32, int8 and, where this CPU has native bf16 (AVX512-BF16 or AMX), bf16
(`--precisions` to choose; bf16 where it is emulated needs SPACY_ELMO_ALLOW_EMULATED_BF16=1).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Dict, List, Optional, Sequence  # noqa: E402

import spacy  # noqa: E402
import torch  # noqa: E402
from spacy.tokens import DocBin  # noqa: E402
from spacy.training import Example  # noqa: E402
from spacy_elmo_lab.results import score  # noqa: E402

from spacy_elmo.bilm.hardware import cpu_isa, cpu_model, native_bf16  # noqa: E402
from spacy_elmo.bilm.precision import PRECISIONS  # noqa: E402


def default_precisions() -> List[str]:
    """fp32 and int8, and bf16 where it is native on this CPU."""
    return ["fp32", "int8"] + (["bf16"] if native_bf16(torch.device("cpu")) else [])


def evaluate(model: Path, test: DocBin, precision: str) -> Dict[str, float]:
    """The table's score (entity F1, accuracy or LAS) and seconds, at `precision`."""
    nlp = spacy.load(model, config={"components": {"elmo": {"model": {
        "precision": precision}}}})
    docs = list(test.get_docs(nlp.vocab))
    examples = [Example(nlp.make_doc(d.text), d) for d in docs]
    start = time.perf_counter()
    scores = nlp.evaluate(examples)
    return {"score": score(scores), "seconds": time.perf_counter() - start}


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="a trained pipeline with an elmo component")
    parser.add_argument("test", type=Path, help="its test set (.spacy)")
    parser.add_argument("--precisions", default=None,
                        help="comma-separated, fp32 first (default: fp32,int8 and bf16 "
                             "where native)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    precisions = (args.precisions.split(",") if args.precisions else default_precisions())
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown or precisions[0] != "fp32":
        parser.error(f"--precisions: fp32 first, then any of {', '.join(PRECISIONS)}; "
                     f"not {args.precisions}")
    for path in (args.model, args.test):
        if not path.exists():
            parser.error(f"no such file or directory: {path}")
    torch.set_num_threads(args.threads)
    test = DocBin().from_disk(args.test)  # read once, its docs made in each pipeline's vocab
    rows = {p: evaluate(args.model, test, p) for p in precisions}
    command = " ".join(["python benchmarks/precision_downstream.py",
                        *(argv if argv is not None else sys.argv[1:])])
    lines = [f"# {args.model} on {args.test}", "", f"`{command}`", "",
             f"{cpu_model()} ({cpu_isa()}), {args.threads} thread(s)", "",
             "| precision | score | - fp32 | seconds |", "|---|---:|---:|---:|"]
    base = rows["fp32"]["score"]
    for precision, row in rows.items():
        lines.append(f"| {precision} | {row['score']:.2f} | {row['score'] - base:+.2f} | "
                     f"{row['seconds']:.1f} |")
    text = "\n".join(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()

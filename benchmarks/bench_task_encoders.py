"""What the task encoder costs: spaCy's CNN window encoder against a biLSTM (and a biLSTM with
ELMo again at its output) over the same frozen ELMo features, for NER.

Pipelines from configs/ner_elmo.cfg on the bundled English biLM, each variant an override of
the same file (`encode.kind`, `elmo_at_output`), trained and run on the project's WNUT-17
sample (demo/data): seconds per training update (batches of `--batch-size` sentences, the
biLM's output cache on, as from the second epoch; best of `--repeats`) and `nlp.pipe` words
per second over the dev sample, side by side in one run, with the same-run fp32 matmul rate
and the CPU's flags.

    python benchmarks/bench_task_encoders.py [--batches 8] [--batch-size 64] [--threads 1]
        [--repeats 3] [--out benchmarks/results/task_encoders.md]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import argparse  # noqa: E402
import datetime  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Dict, List, Optional, Sequence  # noqa: E402

import spacy  # noqa: E402
import torch  # noqa: E402
from spacy.tokens import Doc, Span  # noqa: E402
from spacy.training import Example  # noqa: E402
from thinc.api import Adam, Config  # noqa: E402

from spacy_elmo.bilm.hardware import cpu_flags, cpu_model  # noqa: E402
from spacy_elmo.files.atomic import write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo" / "data"
VARIANTS: Dict[str, Dict[str, object]] = {
    "cnn (today's default)": {},
    "bilstm": {"encode.kind": "bilstm"},
    "bilstm, ELMo at its output": {"encode.kind": "bilstm", "elmo_at_output": True},
}


def conll_docs(path: Path, vocab) -> List[Doc]:
    """Sentences of a CoNLL file (token, BIO tag), with their entities."""
    docs, words, tags = [], [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip():
            token, tag = line.split("\t")[0], line.split("\t")[-1]
            words.append(token)
            tags.append(tag)
            continue
        if words:
            doc = Doc(vocab, words=words)
            spans, start = [], None
            for i, tag in enumerate(tags + ["O"]):
                if start is not None and not tag.startswith("I-"):
                    spans.append(Span(doc, start, i, tags[start][2:]))
                    start = None
                if tag.startswith("B-"):
                    start = i
            doc.ents = spans
            docs.append(doc)
            words, tags = [], []
    return docs


def matmul_gflops(size: int = 1024, repeats: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    began = time.perf_counter()
    for _ in range(repeats):
        torch.mm(a, b)
    return 2 * size**3 * repeats / (time.perf_counter() - began) / 1e9


def measure(overrides: Dict[str, object], train: List[Doc], dev: List[Doc], batches: int,
            batch_size: int, repeats: int) -> Dict[str, float]:
    config = Config().from_disk(ROOT / "configs" / "ner_elmo.cfg", overrides={
        f"components.ner.model.tok2vec.{key}": value for key, value in overrides.items()})
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = [Example(nlp.make_doc(d.text), d) for d in train]
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.001)
    chunks = [examples[i:i + batch_size] for i in range(0, batches * batch_size, batch_size)]
    for chunk in chunks:  # fills the output cache: what later epochs see
        nlp.update(chunk, sgd=optimizer)
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        for chunk in chunks:
            nlp.update(chunk, sgd=optimizer)
        best = min(best, (time.perf_counter() - began) / len(chunks))
    texts = [d.text for d in dev]
    list(nlp.pipe(texts[:32]))
    began = time.perf_counter()
    words = sum(len(doc) for doc in nlp.pipe(texts, batch_size=batch_size))
    return {"update_s": best, "words_per_s": words / (time.perf_counter() - began)}


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the table here too")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    vocab = spacy.blank("en").vocab
    train = conll_docs(DEMO / "wnut17_train_sample.conll", vocab)
    dev = conll_docs(DEMO / "wnut17_dev_sample.conll", vocab)
    gflops = matmul_gflops()
    results = {name: measure(overrides, train, dev, args.batches, args.batch_size,
                             args.repeats) for name, overrides in VARIANTS.items()}
    base = results["cnn (today's default)"]
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    lines = [
        "# The task encoder's cost: CNN against biLSTM over frozen ELMo (NER)", "",
        f"- {datetime.date.today().isoformat()}; CPU: {cpu_model()}, {os.cpu_count()} cores; "
        f"flags: {' '.join(flags)}; torch {torch.__version__}, {args.threads} thread(s); "
        f"fp32 matmul in the same run: {gflops:.0f} GFLOP/s",
        "- command: `python benchmarks/bench_task_encoders.py "
        + " ".join(argv if argv is not None else sys.argv[1:]) + "`",
        f"- configs/ner_elmo.cfg, the bundled English biLM, WNUT-17 sample (demo/data): "
        f"{args.batches} updates of {args.batch_size} sentences (output cache warm), "
        f"`nlp.pipe` over {len(dev)} dev sentences", "",
        "| encoder | s / update | updates/s vs cnn | nlp.pipe words/s | words/s vs cnn |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | {r['update_s']:.3f} | {base['update_s'] / r['update_s']:.2f}x "
                     f"| {r['words_per_s']:.0f} | {r['words_per_s'] / base['words_per_s']:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        write_text(args.out, text)
    return text


if __name__ == "__main__":
    main()

"""What the task encoder costs: spaCy's CNN window encoder (1.0's default) against a biLSTM
(and a biLSTM with ELMo again at its output, 1.1's) over the same frozen ELMo features, for
NER, and for text classification the CNN with max + mean pooling (1.0's default) against the
biLSTM with attention pooling (1.1's).

Pipelines from configs/ner_elmo.cfg and configs/textcat_elmo.cfg on the bundled English
biLM, each variant an override of the same file (`encode.kind`, `elmo_at_output`, `pool`),
trained and run on the project's WNUT-17 sample (demo/data; for classes, whether a sentence
has an entity, as the demo's): seconds per training update (batches of `--batch-size`
sentences, the biLM's output cache on, as from the second epoch; best of `--repeats`) and
`nlp.pipe` words per second over the dev sample, side by side in one run, with the same-run
fp32 matmul rate and the CPU's flags.

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
from typing import Dict, List, Optional, Sequence, Tuple  # noqa: E402

import spacy  # noqa: E402
import torch  # noqa: E402
from spacy.tokens import Doc, Span  # noqa: E402
from spacy.training import Example  # noqa: E402
from thinc.api import Adam, Config  # noqa: E402

from spacy_elmo.bilm.hardware import cpu_flags, cpu_model  # noqa: E402
from spacy_elmo.files.atomic import write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo" / "data"
# per task: its config, its component, and the variants (overrides under the component's
# model), the first the baseline of the ratios
TASKS: Dict[str, Tuple[str, str, Dict[str, Dict[str, object]]]] = {
    "NER": ("ner_elmo.cfg", "ner", {
        "cnn (1.0's default)": {"tok2vec.encode.kind": "cnn", "tok2vec.elmo_at_output": False},
        "bilstm": {"tok2vec.encode.kind": "bilstm", "tok2vec.elmo_at_output": False},
        "bilstm, ELMo at its output (1.1's default)": {"tok2vec.encode.kind": "bilstm",
                                                       "tok2vec.elmo_at_output": True}}),
    "text classification": ("textcat_elmo.cfg", "textcat", {
        "cnn, max + mean (1.0's default)": {"tok2vec.encode.kind": "cnn", "pool": "reduce"},
        "bilstm, attention (1.1's default)": {"tok2vec.encode.kind": "bilstm",
                                              "pool": "attention"}}),
}


def conll_docs(path: Path, vocab) -> List[Doc]:
    """Sentences of a CoNLL file (token, BIO tag), with their entities, and as classes
    whether they have one."""
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
            doc.cats = {"ENTITY": float(bool(spans)), "NO_ENTITY": float(not spans)}
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


def measure(config_name: str, component: str, overrides: Dict[str, object], train: List[Doc],
            dev: List[Doc], batches: int, batch_size: int, repeats: int) -> Dict[str, float]:
    config = Config().from_disk(ROOT / "configs" / config_name, overrides={
        f"components.{component}.model.{key}": value for key, value in overrides.items()})
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
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    lines = [
        "# The task encoder's cost: CNN against biLSTM over frozen ELMo", "",
        f"- {datetime.date.today().isoformat()}; CPU: {cpu_model()}, {os.cpu_count()} cores; "
        f"flags: {' '.join(flags)}; torch {torch.__version__}, {args.threads} thread(s); "
        f"fp32 matmul in the same run: {gflops:.0f} GFLOP/s",
        "- command: `python benchmarks/bench_task_encoders.py "
        + " ".join(argv if argv is not None else sys.argv[1:]) + "`",
        f"- the bundled English biLM, WNUT-17 sample (demo/data): {args.batches} updates of "
        f"{args.batch_size} sentences (output cache warm), `nlp.pipe` over {len(dev)} dev "
        "sentences",
    ]
    for task, (config_name, component, variants) in TASKS.items():
        results = {name: measure(config_name, component, overrides, train, dev, args.batches,
                                 args.batch_size, args.repeats)
                   for name, overrides in variants.items()}
        base = next(iter(results.values()))
        lines += ["", f"{task} (configs/{config_name}):", "",
                  "| encoder | s / update | updates/s vs first | nlp.pipe words/s | "
                  "words/s vs first |", "|---|---:|---:|---:|---:|"]
        for name, r in results.items():
            lines.append(f"| {name} | {r['update_s']:.3f} | "
                         f"{base['update_s'] / r['update_s']:.2f}x | {r['words_per_s']:.0f} | "
                         f"{r['words_per_s'] / base['words_per_s']:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        write_text(args.out, text)
    return text


if __name__ == "__main__":
    main()

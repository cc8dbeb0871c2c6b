"""What several listening components cost beside one: a frozen biLM runs once per batch
however many components listen, so an update of N listeners should cost little more than one.

Pipelines from configs/ud_elmo.cfg on the bundled English biLM: `elmo` + tagger (1 listener)
against `elmo` + tagger + parser + trainable_lemmatizer (3 listeners), the same batches of UD
English EWT training sentences (../shared/data/ud_en_ewt, else the test sample). Per pipeline:
seconds per update with the biLM's output cache off (the biLM runs on every batch, as in the
first epoch) and on (later epochs: the frozen biLM's outputs come from the cache), and the
share of an update spent in the `elmo` component. Best of --repeats, side by side in one run,
with the same-run fp32 matmul rate and the CPU's flags.

    python benchmarks/bench_listeners.py [--batches 4] [--batch-size 64] [--threads 1]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import argparse  # noqa: E402
import datetime  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional, Sequence, Tuple  # noqa: E402

import spacy  # noqa: E402
import torch  # noqa: E402
from spacy.language import Language  # noqa: E402
from spacy.tokens import DocBin  # noqa: E402
from spacy.training import Example  # noqa: E402
from spacy.training.converters import conllu_to_docs  # noqa: E402
from thinc.api import Adam, Config  # noqa: E402

from spacy_elmo.bilm.hardware import cpu_flags, cpu_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UD_TRAIN = ROOT.parent / "shared" / "data" / "ud_en_ewt" / "en_ewt-ud-train.conllu"
SAMPLE = ROOT / "tests" / "fixtures" / "ud_ewt_sample" / "train.conllu"
ONE = ["tagger"]
THREE = ["tagger", "parser", "trainable_lemmatizer"]
ALL = ["tagger", "morphologizer", "parser", "trainable_lemmatizer"]


def ud_docs(path: Path, n: int) -> DocBin:
    text = path.read_text(encoding="utf-8")
    docs = conllu_to_docs(text, n_sents=1, merge_subtokens=False, no_print=True)
    return DocBin(docs=itertools.islice(docs, n), store_user_data=False)


def examples_for(nlp: Language, docs: DocBin) -> List[Example]:
    return [Example(nlp.make_doc(d.text), d) for d in docs.get_docs(nlp.vocab)]


def pipeline(components: Sequence[str], docs: DocBin, cache_mb: int
             ) -> Tuple[Language, List[Example]]:
    config = Config().from_disk(ROOT / "configs" / "ud_elmo.cfg")
    config["nlp"]["pipeline"] = ["elmo", *components]
    for name in ALL:
        if name not in components:
            del config["components"][name]
    config["components"]["elmo"]["model"]["output_cache_mb"] = cache_mb
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = examples_for(nlp, docs)
    nlp.initialize(lambda: examples)
    return nlp, examples


def seconds_per_update(nlp: Language, batches: List[List[Example]], repeats: int
                       ) -> Dict[str, float]:
    """Best seconds per update over the batches, and the `elmo` component's share."""
    optimizer = Adam(0.001)
    elmo: Any = nlp.get_pipe("elmo")
    spent = [0.0]
    update = elmo.update

    def timed_update(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = update(*args, **kwargs)
        spent[0] += time.perf_counter() - start
        return result

    elmo.update = timed_update
    best, best_elmo = float("inf"), 0.0
    for _ in range(repeats):
        spent[0] = 0.0
        start = time.perf_counter()
        for batch in batches:
            nlp.update(batch, sgd=optimizer)
        total = (time.perf_counter() - start) / len(batches)
        if total < best:
            best, best_elmo = total, spent[0] / len(batches)
    elmo.update = update
    return {"update_s": best, "elmo_s": best_elmo}


def matmul_gflops(size: int = 1024, repeats: int = 5) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best / 1e9


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.batches < 1 or args.batch_size < 1 or args.repeats < 1 or args.threads < 1:
        parser.error("--batches, --batch-size, --repeats and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    source = UD_TRAIN if UD_TRAIN.exists() else SAMPLE
    docs = ud_docs(source, args.batches * args.batch_size)
    size = args.batch_size
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    print(f"# Listener cost ({datetime.date.today()}; {cpu_model()}, flags {' '.join(flags)}; "
          f"torch {torch.__version__}, {args.threads} thread(s))")
    print(f"{len(docs)} sentences of {source.name} in batches of {size}")
    gflops_before = matmul_gflops()
    rows = {}
    for cache_mb, label in ((0, "biLM runs (cache off)"), (2048, "biLM cached (cache on)")):
        for components in (ONE, THREE):
            nlp, examples = pipeline(components, docs, cache_mb)
            batches = [examples[i:i + size] for i in range(0, len(examples), size)]
            if cache_mb:
                for batch in batches:  # fill the cache: the first epoch
                    nlp.update(batch, sgd=Adam(0.001))
            rows[(label, len(components))] = seconds_per_update(nlp, batches, args.repeats)
    gflops_after = matmul_gflops()
    print(f"fp32 matmul 1024^3: {gflops_before:.1f} GFLOP/s before, {gflops_after:.1f} after\n")
    print("| biLM | listeners | s/update | of which elmo | 3 : 1 |")
    print("|---|---|---|---|---|")
    for label in ("biLM runs (cache off)", "biLM cached (cache on)"):
        one = rows[(label, 1)]["update_s"]
        for n in (1, 3):
            row = rows[(label, n)]
            print(f"| {label} | {n} | {row['update_s']:.3f} | {row['elmo_s']:.3f} | "
                  f"{row['update_s'] / one:.2f}x |")


if __name__ == "__main__":
    main()

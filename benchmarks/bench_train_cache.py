"""Training epochs with a frozen biLM, with and without the sentence output cache.

  python benchmarks/bench_train_cache.py corpus/conll/train.spacy [--sentences 2000]
      [--weights DIR] [--preset small] [--epochs 3] [--threads 2]

Without --weights a random biLM of the given preset's shape is used (speed does not depend
on the values). Both pipelines train the same NER (configs/ner_elmo.cfg) on the same batches;
the table shows seconds per epoch side by side and the speed-up from the cache.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import spacy
import torch
import typer
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from thinc.api import Config

from spacy_elmo.bilm import BiLM, preset, save_bilm

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "ner_elmo.cfg"


def _sentences(path: Path, n: int) -> List[Doc]:
    nlp = spacy.blank("en")
    out: List[Doc] = []
    for doc in DocBin().from_disk(path).get_docs(nlp.vocab):
        for sent in doc.sents:
            out.append(sent.as_doc())
            if len(out) == n:
                return out
    return out


def _pipeline(weights: Path, cache_mb: float):
    config = Config().from_disk(CONFIG)
    config["components"]["elmo"]["weights"] = str(weights)
    config["components"]["elmo"]["model"]["output_cache_mb"] = cache_mb
    return spacy.util.load_model_from_config(config, auto_fill=True)


def main(train: Path, sentences: int = 2000, weights: Optional[Path] = None,
         preset_name: str = typer.Option("small", "--preset"), epochs: int = 3,
         threads: int = 2, batch_size: int = 64) -> None:
    torch.set_num_threads(threads)
    docs = _sentences(train, sentences)
    n_tokens = sum(len(d) for d in docs)
    with tempfile.TemporaryDirectory() as tmp:
        if weights is None:
            torch.manual_seed(0)
            weights = Path(tmp)
            save_bilm(BiLM(preset(preset_name)), weights)
        runs = {"no cache": _pipeline(weights, 0), "cache": _pipeline(weights, 4096)}
        examples = {}
        for name, nlp in runs.items():
            examples[name] = [Example(nlp.make_doc(d.text), d) for d in docs]
            nlp.initialize(lambda name=name: examples[name][:200])
        optimizers = {name: nlp.create_optimizer() for name, nlp in runs.items()}
        times: Dict[str, List[float]] = {name: [] for name in runs}
        for epoch in range(epochs):
            order = list(range(len(docs)))
            random.Random(epoch).shuffle(order)
            batches = [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
            for name, nlp in runs.items():  # alternate: both see the same machine load
                start = time.perf_counter()
                for batch in batches:
                    nlp.update([examples[name][i] for i in batch], sgd=optimizers[name])
                times[name].append(time.perf_counter() - start)
    print(f"{len(docs)} sentences, {n_tokens} tokens, preset={preset_name} (random weights"
          f" unless --weights), {threads} threads, torch {torch.__version__}")
    print("| epoch | no cache (s) | cache (s) | speed-up |")
    print("|---|---|---|---|")
    for e in range(epochs):
        a, b = times["no cache"][e], times["cache"][e]
        print(f"| {e + 1} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")


if __name__ == "__main__":
    typer.run(main)

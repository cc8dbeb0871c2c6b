"""int8 against fp32 inference, side by side in one run: error per layer, tokens/s of the biLM
(1 and 2 threads, batch 64 and batch 1), single-sentence latency of `nlp(text)`, the two
LSTM directions stacked against each on its own thread (2 threads), and words/s
of `nlp.pipe` for an ELMo pipeline against spaCy's CNN pipeline of the same tasks, with the
fp32 and int8 matmul rates torch reaches in the same run and the CPU's flags.

Shapes: `small` is the bundled English biLM (its real weights); `original` the published
original shape with random weights (speed depends on the shape only; its error is reported
too, on random weights). Sentences: the AllenNLP fixture's 30 news sentences (10-30 tokens).
Word cache off for tokens/s (every token encoded), on for latency and pipelines (the
component's default).

    python benchmarks/bench_precision.py [--quick] [--output benchmarks/results/precision.md]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import argparse  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable, Dict, List, Optional, Sequence  # noqa: E402

import spacy  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from spacy.language import Language  # noqa: E402
from spacy.training import Example  # noqa: E402

from spacy_elmo.bilm import BiLM, batch_to_ids, load_bilm, preset, save_bilm  # noqa: E402
from spacy_elmo.bilm.directions import concurrent_directions  # noqa: E402
from spacy_elmo.bilm.int8 import Int8Matmul  # noqa: E402
from spacy_elmo.experiments.timing import best_time  # noqa: E402
from spacy_elmo.files import write_text  # noqa: E402
from spacy_elmo.pretrain.machine import cpu_flags, cpu_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "allennlp_elmo" / "sentences.json"
PRECISIONS = ("fp32", "int8")
ALLENNLP_SECONDS_PER_SENTENCE = 0.1  # reported for single sentences on CPU (AllenNLP #1968)


def fixture_sentences() -> List[List[str]]:
    groups = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return [s.split() for group in groups for s in group]


def matmul_rates(repeats: int) -> Dict[str, float]:
    """fp32 GFLOP/s and int8 (dynamic, as the biLM runs it) GOP/s of a 1024^3 product."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024) * 0.05
    int8 = Int8Matmul(b)
    return {"fp32": 2 * 1024 ** 3 / best_time(lambda: a @ b, repeats) / 1e9,
            "int8": 2 * 1024 ** 3 / best_time(lambda: int8(a), repeats) / 1e9}


def layers(bilm: BiLM, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return bilm(ids).layers


def errors(bilm: BiLM, sentences: List[List[str]]) -> List[str]:
    """Per layer: max |int8 - fp32| and the mean cosine over tokens."""
    ids = batch_to_ids(sentences)
    mask = (ids > 0).any(-1)
    bilm.set_precision("fp32")
    ref = layers(bilm, ids)
    bilm.set_precision("int8")
    out = layers(bilm, ids)
    bilm.set_precision("fp32")
    cells = []
    for k in range(ref.shape[0]):
        a, b = ref[k][mask], out[k][mask]
        cells.append(f"{(a - b).abs().max().item():.4f} / "
                     f"{F.cosine_similarity(a, b, dim=-1).mean().item():.5f}")
    return cells


def tokens_per_second(bilm: BiLM, sentences: List[List[str]], batch: int, repeats: int
                      ) -> float:
    """Every sentence through the biLM in batches of `batch`, word cache off."""
    bilm.word_cache = None
    chunks = [batch_to_ids(sentences[i:i + batch]) for i in range(0, len(sentences), batch)]
    n_tokens = sum(len(s) for s in sentences)
    with torch.inference_mode():
        bilm(chunks[0])  # warm-up (and the int8 copies)
        return n_tokens / best_time(lambda: [bilm(c) for c in chunks], repeats)


def elmo_nlp(weights: Path, precision: str, pipes: Sequence[str] = ()) -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights), "model": {
        "@architectures": "spacy-elmo.ElmoModel.v1", "precision": precision}})
    for name in pipes:
        nlp.add_pipe(name, config={"model": LISTENER_MODELS[name]})
    return nlp


def latency(nlp: Language, texts: List[str]) -> Dict[str, float]:
    """p50 and p95 milliseconds of nlp(text), one text per call."""
    for text in texts[:10]:
        nlp(text)
    times = []
    for text in texts:
        start = time.perf_counter()
        nlp(text)
        times.append(1000 * (time.perf_counter() - start))
    quantiles = statistics.quantiles(times, n=20)
    return {"p50": statistics.median(times), "p95": quantiles[18]}


LISTENER = {"@architectures": "spacy-elmo.ElmoListener.v1", "width": 96,
            "encode": {"@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 96,
                       "depth": 4, "window_size": 1, "maxout_pieces": 3}}
LISTENER_MODELS = {
    "ner": {"@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner",
            "extra_state_tokens": False, "hidden_width": 64, "maxout_pieces": 2,
            "use_upper": True, "nO": None, "tok2vec": LISTENER},
    "textcat": {"@architectures": "spacy.TextCatReduce.v1", "exclusive_classes": True,
                "use_reduce_first": False, "use_reduce_last": False,
                "use_reduce_max": True, "use_reduce_mean": True, "nO": None,
                "tok2vec": LISTENER},
}


def cnn_nlp() -> Language:
    """spaCy's own CNN pipeline of the same tasks: a shared tok2vec, NER and textcat."""
    nlp = spacy.blank("en")
    nlp.add_pipe("tok2vec")
    for name in ("ner", "textcat"):
        nlp.add_pipe(name, config={"model": {
            **{k: v for k, v in LISTENER_MODELS[name].items() if k != "tok2vec"},
            "tok2vec": {"@architectures": "spacy.Tok2VecListener.v1", "width": 96,
                        "upstream": "tok2vec"}}})
    return nlp


def initialized(nlp: Language, texts: List[str]) -> Language:
    examples = []
    for i, text in enumerate(texts[:8]):
        doc = nlp.make_doc(text)
        examples.append(Example.from_dict(doc, {
            "entities": [(0, len(doc[0].text), "X")],
            "cats": {"A": float(i % 2), "B": float(1 - i % 2)}}))
    nlp.initialize(lambda: examples)
    return nlp


def words_per_second(nlp: Language, texts: List[str], n_process: int) -> float:
    n_words = sum(len(t.split()) for t in texts)
    list(nlp.pipe(texts[:16]))  # warm-up
    start = time.perf_counter()
    for _ in nlp.pipe(texts, batch_size=64, n_process=n_process):
        pass
    return n_words / (time.perf_counter() - start)


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shape, few repeats")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200, help="latency: nlp(text) calls")
    parser.add_argument("--texts", type=int, default=4000,
                        help="nlp.pipe: texts per run (enough to amortize starting processes)")
    parser.add_argument("--sections", default="error,speed,latency,directions,pipe",
                        help="comma-separated: error, speed, latency, directions, pipe")
    parser.add_argument("--output", type=Path, help="also write the markdown here")
    args = parser.parse_args(argv)
    sections = set(args.sections.split(","))
    if args.repeats < 1 or args.calls < 20 or args.texts < 16:
        parser.error("--repeats must be >= 1, --calls >= 20 and --texts >= 16")
    if not sections <= {"error", "speed", "latency", "directions", "pipe"}:
        parser.error(f"unknown --sections {sorted(sections)}")
    shapes = ["small"] if args.quick else ["small", "original"]
    repeats, calls = (1, 20) if args.quick else (args.repeats, args.calls)
    sentences = fixture_sentences()
    batch64 = (sentences * 3)[:64]
    tokens = [t for s in sentences for t in s]
    texts20 = [" ".join(tokens[i:i + 20]) for i in range(0, 3 * calls, 3)][:calls]
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "vnni")))
    lines = [f"# int8 against fp32 ({datetime.date.today()})", "",
             f"- command: `python benchmarks/bench_precision.py "
             f"{' '.join(argv if argv is not None else __import__('sys').argv[1:])}`",
             f"- CPU: {cpu_model()}, {os.cpu_count()} cores; flags: {' '.join(flags)}",
             f"- torch {torch.__version__}, quantized engine "
             f"{torch.backends.quantized.engine}", ""]
    scratch = Path(tempfile.mkdtemp(prefix="bench-precision-"))
    models: Dict[str, Path] = {"small": ROOT / "spacy_elmo" / "data" / "elmo_en_small"}
    bilms: Dict[str, BiLM] = {"small": load_bilm(models["small"])}
    if "original" in shapes and sections & {"error", "speed", "latency", "directions"}:
        torch.manual_seed(0)
        bilms["original"] = BiLM(preset("original")).eval()
        models["original"] = scratch / "original"
        save_bilm(bilms["original"], models["original"])

    if "error" in sections:
        lines += error_section(shapes, bilms, sentences)
    if "speed" in sections:
        lines += speed_section(shapes, bilms, sentences, batch64, repeats)
    if "latency" in sections:
        lines += latency_section(shapes, models, texts20, calls)
    if "directions" in sections:
        lines += directions_section(shapes, bilms, models, sentences, batch64, texts20,
                                    repeats)
    if "pipe" in sections:
        texts = [" ".join(s) for s in sentences] * (2 if args.quick else 1 + args.texts // 30)
        lines += pipe_section(models, texts[: 60 if args.quick else args.texts])
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        write_text(args.output, text)
    return text


def error_section(shapes: List[str], bilms: Dict[str, BiLM], sentences: List[List[str]]
                  ) -> List[str]:
    lines = ["## Error of int8 against fp32 (max abs / mean cosine per layer)", "",
             "| shape | token layer | LSTM 1 | LSTM 2 |", "|---|---|---|---|"]
    torch.set_num_threads(1)
    for shape in shapes:
        lines.append(f"| {shape} | " + " | ".join(errors(bilms[shape], sentences)) + " |")
    return lines


def speed_section(shapes: List[str], bilms: Dict[str, BiLM], sentences: List[List[str]],
                  batch64: List[List[str]], repeats: int) -> List[str]:
    lines: List[str] = []

    lines += ["", "## biLM tokens/s (word cache off)", "",
              "| shape | threads | batch | fp32 | int8 | int8 : fp32 | fp32 matmul GFLOP/s | "
              "int8 matmul GOP/s |", "|---|---|---|---|---|---|---|---|"]
    for threads in (1, 2):
        torch.set_num_threads(threads)
        rates = matmul_rates(repeats)
        for shape in shapes:
            bilm = bilms[shape]
            for batch, group in ((64, batch64), (1, sentences)):
                speed = {}
                for precision in PRECISIONS:
                    bilm.set_precision(precision)
                    speed[precision] = tokens_per_second(bilm, group, batch, repeats)
                lines.append(f"| {shape} | {threads} | {batch} | {speed['fp32']:,.0f} | "
                             f"{speed['int8']:,.0f} | {speed['int8'] / speed['fp32']:.2f}x | "
                             f"{rates['fp32']:.0f} | {rates['int8']:.0f} |")
            bilm.set_precision("fp32")
    return lines


def latency_section(shapes: List[str], models: Dict[str, Path], texts20: List[str],
                    calls: int) -> List[str]:
    lines: List[str] = []
    lines += ["", f"## Latency of nlp(text), one 20-token sentence a call ({calls} calls, "
              "1 thread, word cache on)", "",
              "| shape | fp32 p50 / p95 ms | int8 p50 / p95 ms | int8 : fp32 (p50) | "
              "AllenNLP's reported |", "|---|---|---|---|---|"]
    torch.set_num_threads(1)
    for shape in shapes:
        ms = {p: latency(elmo_nlp(models[shape], p), texts20) for p in PRECISIONS}
        lines.append(f"| {shape} | {ms['fp32']['p50']:.1f} / {ms['fp32']['p95']:.1f} | "
                     f"{ms['int8']['p50']:.1f} / {ms['int8']['p95']:.1f} | "
                     f"{ms['int8']['p50'] / ms['fp32']['p50']:.2f}x | "
                     f"{1000 * ALLENNLP_SECONDS_PER_SENTENCE:.0f} ms |")
    return lines


def directions_section(shapes: List[str], bilms: Dict[str, BiLM], models: Dict[str, Path],
                       sentences: List[List[str]], batch64: List[List[str]],
                       texts20: List[str], repeats: int) -> List[str]:
    """2 threads: the two LSTM directions stacked on one thread pool ("off") against each on
    its own thread ("on", what "auto" picks with two or more threads)."""
    lines = ["", "## Both LSTM directions at once (2 threads): stacked vs one thread each", "",
             "| shape | precision | measure | stacked | one thread each | each : stacked |",
             "|---|---|---|---|---|---|"]
    torch.set_num_threads(2)
    for shape in shapes:
        for precision in PRECISIONS:
            bilm = bilms[shape]
            bilm.set_precision(precision)
            for batch, group in ((64, batch64), (1, sentences)):
                speed = {}
                for mode in ("off", "on"):
                    with concurrent_directions(mode):
                        speed[mode] = tokens_per_second(bilm, group, batch, repeats)
                lines.append(f"| {shape} | {precision} | tokens/s, batch {batch} | "
                             f"{speed['off']:,.0f} | {speed['on']:,.0f} | "
                             f"{speed['on'] / speed['off']:.2f}x |")
            bilm.set_precision("fp32")
            nlp = elmo_nlp(models[shape], precision)
            ms = {}
            for mode in ("off", "on"):
                with concurrent_directions(mode):
                    ms[mode] = latency(nlp, texts20)["p50"]
            lines.append(f"| {shape} | {precision} | nlp(text) p50 ms, 20 tokens | "
                         f"{ms['off']:.1f} | {ms['on']:.1f} | {ms['on'] / ms['off']:.2f}x |")
    return lines


def pipe_section(models: Dict[str, Path], texts: List[str]) -> List[str]:
    torch.set_num_threads(1)  # one a process (and no thread pool for the workers to inherit)
    lines: List[str] = []
    lines += ["", f"## nlp.pipe words/s: NER + textcat ({len(texts)} texts, 1 thread a "
              "process unless said, word cache on)", "",
              "| pipeline | n_process=1 | n_process=2 | 2 : 1 | n_process=1, 2 threads | "
              "2 threads : 1 |", "|---|---|---|---|---|---|"]
    pipelines: Dict[str, Callable[[], Language]] = {"spaCy CNN (tok2vec, ner, textcat)": cnn_nlp}
    for precision in PRECISIONS:
        pipelines[f"ELMo small {precision} (elmo, ner, textcat listeners)"] = functools.partial(
            elmo_nlp, models["small"], precision, ("ner", "textcat"))
    for name, make in pipelines.items():
        nlp = initialized(make(), texts)
        one, two = (words_per_second(nlp, texts, n) for n in (1, 2))
        torch.set_num_threads(2)  # later forks still work: children get one (bilm/fork.py)
        threads = words_per_second(nlp, texts, 1)
        torch.set_num_threads(1)
        lines.append(f"| {name} | {one:,.0f} | {two:,.0f} | {two / one:.2f}x | "
                     f"{threads:,.0f} | {threads / one:.2f}x |")
    return lines


if __name__ == "__main__":
    main()

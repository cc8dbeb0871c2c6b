"""fp32, bf16 and int8 inference side by side in one run: error per layer (per-token cosine
to fp32: mean, minimum, 1st percentile, median), tokens/s of the biLM (1 and 2 threads,
batch 64 and batch 1) with the fp32, bf16 and int8 matmul rates torch reaches in the same
run, int8 on each quantized engine torch has here, single-sentence latency of `nlp(text)`,
the two LSTM directions stacked against each on its own thread (2 threads), and words/s of
`nlp.pipe` for an ELMo pipeline against spaCy's CNN pipeline of the same tasks; with the
CPU's model, instruction sets and flags.

bf16 runs where it is native (AVX512-BF16 or AMX; a GPU from Ampere on); `--force-bf16`
runs it where it is emulated (its figures then say how slow emulation is, not what bf16
gives). `--device cuda`: fp32 against bf16 on a GPU (error and speed sections).

Shapes: `small` is the bundled English biLM (its real weights); `original` the published
original shape with random weights (speed depends on the shape only; its error is reported
too, on random weights, and on N(0, 0.05) weights, with which the LSTMs are chaotic: any
perturbation grows along the sentence). Sentences: the AllenNLP fixture's 30 news sentences
(10-30 tokens). Word cache off for tokens/s (every token encoded), on for latency and
pipelines (the component's default).

    python benchmarks/bench_precision.py [--quick] [--shapes small] [--force-bf16]
        [--output benchmarks/results/precision.md]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable, Dict, Iterator, List, Optional, Sequence  # noqa: E402

import spacy  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from spacy.language import Language  # noqa: E402
from spacy.training import Example  # noqa: E402
from spacy_elmo_lab.timing import best_time  # noqa: E402

from spacy_elmo.bilm import BiLM, batch_to_ids, int8, load_bilm, preset, save_bilm  # noqa: E402
from spacy_elmo.bilm.directions import concurrent_directions  # noqa: E402
from spacy_elmo.bilm.hardware import (  # noqa: E402
    ALLOW_EMULATED_BF16,
    cpu_flags,
    cpu_isa,
    cpu_model,
    native_bf16,
)
from spacy_elmo.files.atomic import write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "allennlp_elmo" / "sentences.json"
ALLENNLP_SECONDS_PER_SENTENCE = 0.1  # reported for single sentences on CPU (AllenNLP #1968)
PRECISIONS: List[str] = ["fp32"]  # those this run measures (main() adds bf16, int8)
DEVICE = torch.device("cpu")


def fixture_sentences() -> List[List[str]]:
    groups = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return [s.split() for group in groups for s in group]


def synced(fn: Callable[[], object]) -> Callable[[], object]:
    """fn, waiting for the GPU's queue when the run is on one (timings include the work)."""
    if DEVICE.type != "cuda":
        return fn

    def run() -> object:
        out = fn()
        torch.cuda.synchronize(DEVICE)
        return out

    return run


def matmul_rates(repeats: int) -> Dict[str, float]:
    """GFLOP/s of a 1024^3 product in fp32 and in bf16, and int8 GOP/s (dynamic, as the
    biLM runs it), in this run."""
    a = torch.randn(1024, 1024, device=DEVICE)
    b = torch.randn(1024, 1024, device=DEVICE) * 0.05
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    flops = 2 * 1024 ** 3
    rates = {"fp32": flops / best_time(synced(lambda: a @ b), repeats) / 1e9,
             "bf16": flops / best_time(synced(lambda: a16 @ b16), repeats) / 1e9}
    if "int8" in PRECISIONS:
        product = int8.Int8Matmul(b)
        rates["int8"] = flops / best_time(lambda: product(a), repeats) / 1e9
    return rates


def layers(bilm: BiLM, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return bilm(ids.to(DEVICE)).layers.cpu()


def cosine_cells(ref: torch.Tensor, out: torch.Tensor, mask: torch.Tensor) -> List[str]:
    """Per layer: max |out - ref|, then the per-token cosine's mean, minimum, 1st percentile
    and median."""
    cells = []
    for k in range(ref.shape[0]):
        a, b = ref[k][mask], out[k][mask]
        cos = F.cosine_similarity(a, b, dim=-1).double()
        cells.append(f"{(a - b).abs().max().item():.4f} / {cos.mean().item():.5f} / "
                     f"{cos.min().item():.4f} / {cos.quantile(0.01).item():.4f} / "
                     f"{cos.median().item():.5f}")
    return cells


def by_position(ref: torch.Tensor, out: torch.Tensor, mask: torch.Tensor) -> List[str]:
    """The top layer's forward half: mean per-token cosine by position in the sentence
    (an error that grows along the sentence comes from the recurrence, not one product)."""
    half = ref.shape[-1] // 2
    cos = F.cosine_similarity(ref[-1][..., :half], out[-1][..., :half], dim=-1)
    cells = []
    for start, stop in POSITIONS:
        inside = mask.clone()
        inside[:, :start] = False
        inside[:, stop:] = False
        cells.append(f"{cos[inside].mean().item():.4f}" if inside.any() else "-")
    return cells


POSITIONS = ((0, 5), (5, 10), (10, 20), (20, 10_000))


def tokens_per_second(bilm: BiLM, sentences: List[List[str]], batch: int, repeats: int
                      ) -> float:
    """Every sentence through the biLM in batches of `batch`, word cache off."""
    bilm.word_cache = None
    chunks = [batch_to_ids(sentences[i:i + batch]).to(DEVICE)
              for i in range(0, len(sentences), batch)]
    n_tokens = sum(len(s) for s in sentences)
    with torch.inference_mode():
        synced(lambda: bilm(chunks[0]))()  # warm-up (and the int8 or bf16 copies)
        return n_tokens / best_time(synced(lambda: [bilm(c) for c in chunks]), repeats)


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
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shape, few repeats")
    parser.add_argument("--shapes", default="small,original", help="comma-separated")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda[:N] (error and speed)")
    parser.add_argument("--force-bf16", action="store_true",
                        help="run bf16 where it is emulated (slow; its figures say how slow)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200, help="latency: nlp(text) calls")
    parser.add_argument("--texts", type=int, default=4000,
                        help="nlp.pipe: texts per run (enough to amortize starting processes)")
    parser.add_argument("--sections", default="error,speed,engines,latency,directions,pipe",
                        help="comma-separated: " + ", ".join(SECTIONS))
    parser.add_argument("--output", type=Path, help="also write the markdown here")
    args = parser.parse_args(argv)
    DEVICE = torch.device(args.device)
    sections = set(args.sections.split(","))
    if DEVICE.type != "cpu":
        sections &= {"error", "speed"}  # int8, threads and pipelines are the CPU's
    if args.repeats < 1 or args.calls < 20 or args.texts < 16:
        parser.error("--repeats must be >= 1, --calls >= 20 and --texts >= 16")
    if not sections <= set(SECTIONS):
        parser.error(f"unknown --sections {sorted(sections)}")
    shapes = ["small"] if args.quick else args.shapes.split(",")
    repeats, calls = (1, 20) if args.quick else (args.repeats, args.calls)
    native = native_bf16(DEVICE)
    if args.force_bf16 and not native:
        os.environ[ALLOW_EMULATED_BF16] = "1"
    PRECISIONS[:] = ["fp32"] + (["bf16"] if native or args.force_bf16 else []) + (
        ["int8"] if DEVICE.type == "cpu" and int8.int8_engine() else [])
    sentences = fixture_sentences()
    batch64 = (sentences * 3)[:64]
    tokens = [t for s in sentences for t in s]
    texts20 = [" ".join(tokens[i:i + 20]) for i in range(0, 3 * calls, 3)][:calls]
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "vnni")))
    bf16_note = ("native" if native else "EMULATED (forced with --force-bf16: its speed is "
                 "emulation's, not bf16's)" if args.force_bf16 else "emulated: not run")
    lines = [f"# fp32, bf16 and int8 side by side ({datetime.date.today()})", "",
             f"- command: `python benchmarks/bench_precision.py "
             f"{' '.join(argv if argv is not None else __import__('sys').argv[1:])}`",
             f"- CPU: {cpu_model()}, {os.cpu_count()} cores; ISA: {cpu_isa()}; "
             f"flags: {' '.join(flags)}",
             f"- torch {torch.__version__}; device {DEVICE}"
             + (f" ({torch.cuda.get_device_name(DEVICE)})" if DEVICE.type == "cuda" else "")
             + f"; bf16 {bf16_note}",
             f"- int8: quantized engine {int8.int8_engine()} (torch has "
             f"{', '.join(torch.backends.quantized.supported_engines)}; activations "
             f"{8 if int8.native_int8_dot() else 7}-bit)", ""]
    scratch = Path(tempfile.mkdtemp(prefix="bench-precision-"))
    models: Dict[str, Path] = {"small": ROOT / "spacy_elmo" / "data" / "elmo_en_small"}
    bilms: Dict[str, BiLM] = {"small": load_bilm(models["small"]).to(DEVICE)}
    if "original" in shapes and sections - {"pipe"}:
        torch.manual_seed(0)
        bilms["original"] = BiLM(preset("original")).eval()
        models["original"] = scratch / "original"
        save_bilm(bilms["original"], models["original"])
        bilms["original"] = bilms["original"].to(DEVICE)

    if "error" in sections:
        lines += error_section(shapes, bilms, sentences)
    if "speed" in sections:
        lines += speed_section(shapes, bilms, sentences, batch64, repeats)
    if "engines" in sections and "int8" in PRECISIONS:
        lines += engines_section(shapes, bilms, batch64, repeats)
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


SECTIONS = ("error", "speed", "engines", "latency", "directions", "pipe")


def error_section(shapes: List[str], bilms: Dict[str, BiLM], sentences: List[List[str]]
                  ) -> List[str]:
    """Per shape and precision, every layer's error against fp32; and on the original
    shape with N(0, 0.05) weights, the top layer's cosine by position."""
    n_layers = bilms["small"].options.n_layers
    lines = ["## Error against fp32, per layer: max abs / per-token cosine mean / min / 1st "
             "percentile / median", "",
             "| shape | precision | token layer | "
             + " | ".join(f"LSTM {k + 1}" for k in range(n_layers)) + " |",
             "|---|---|---|" + "---|" * n_layers]
    torch.set_num_threads(1)
    ids = batch_to_ids(sentences)
    mask = (ids > 0).any(-1)
    cases = [(shape, bilms[shape]) for shape in shapes]
    if "original" in shapes:
        torch.manual_seed(0)
        chaotic = BiLM(preset("original")).eval()
        with torch.no_grad():
            for p in chaotic.parameters():
                p.copy_(torch.randn_like(p) * 0.05)
        cases.append(("original, N(0, 0.05) weights", chaotic.to(DEVICE)))
    positions: List[str] = []
    for name, bilm in cases:
        bilm.set_precision("fp32")
        ref = layers(bilm, ids)
        for precision in PRECISIONS[1:]:
            bilm.set_precision(precision)
            out = layers(bilm, ids)
            lines.append(f"| {name} | {precision} | "
                         + " | ".join(cosine_cells(ref, out, mask)) + " |")
            if name.startswith("original, N"):
                positions.append(f"| {precision} | " + " | ".join(by_position(ref, out, mask))
                                 + " |")
        bilm.set_precision("fp32")
    if positions:
        lines += ["", "Original shape, N(0, 0.05) weights: mean cosine of the top layer's "
                  "forward LSTM by position in the sentence", "",
                  "| precision | " + " | ".join(
                      f"tokens {a + 1}-{b}" if b < 10_000 else f"tokens {a + 1}+"
                      for a, b in POSITIONS) + " |",
                  "|---|" + "---|" * len(POSITIONS), *positions]
    return lines


def speed_section(shapes: List[str], bilms: Dict[str, BiLM], sentences: List[List[str]],
                  batch64: List[List[str]], repeats: int) -> List[str]:
    others = PRECISIONS[1:]
    lines = ["", "## biLM tokens/s (word cache off), with the matmul rates of this run", "",
             "| shape | threads | batch | " + " | ".join(PRECISIONS) + " | "
             + " | ".join(f"{p} : fp32" for p in others)
             + " | fp32 matmul GFLOP/s | bf16 matmul GFLOP/s"
             + (" | int8 matmul GOP/s" if "int8" in PRECISIONS else "") + " |",
             "|---|---|---|" + "---|" * (len(PRECISIONS) + len(others) + 2
                                         + ("int8" in PRECISIONS))]
    for threads in ((1, 2) if DEVICE.type == "cpu" else (torch.get_num_threads(),)):
        torch.set_num_threads(threads)
        rates = matmul_rates(repeats)
        for shape in shapes:
            bilm = bilms[shape]
            for batch, group in ((64, batch64), (1, sentences)):
                speed = {}
                for precision in PRECISIONS:
                    bilm.set_precision(precision)
                    speed[precision] = tokens_per_second(bilm, group, batch, repeats)
                lines.append(f"| {shape} | {threads} | {batch} | "
                             + " | ".join(f"{speed[p]:,.0f}" for p in PRECISIONS) + " | "
                             + " | ".join(f"{speed[p] / speed['fp32']:.2f}x" for p in others)
                             + " | " + " | ".join(f"{rates[k]:.0f}" for k in rates) + " |")
            bilm.set_precision("fp32")
    return lines


def engines_section(shapes: List[str], bilms: Dict[str, BiLM], batch64: List[List[str]],
                    repeats: int) -> List[str]:
    """int8 tokens/s (batch 64) with the weights packed for each quantized engine, the best
    of `repeats` rounds that run every engine in turn."""
    chosen = int8.int8_engine()
    engines = [e for e in ("x86", "fbgemm", "onednn") if e in
               torch.backends.quantized.supported_engines]
    lines = ["", f"## int8 on each quantized engine (tokens/s, batch 64; `{chosen}` is the "
             "one precision int8 uses here)", "",
             "| shape | threads | " + " | ".join(engines) + " |",
             "|---|---|" + "---|" * len(engines)]
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for shape in shapes:
            bilm = bilms[shape]
            bilm.set_precision("int8")
            speed = {engine: 0.0 for engine in engines}
            for _ in range(repeats):  # round-robin: a burst of load hits every engine alike
                for engine in engines:
                    with packed_for(engine):
                        bilm.weights_changed()  # the int8 copies packed again for it
                        speed[engine] = max(speed[engine],
                                            tokens_per_second(bilm, batch64, 64, 1))
            bilm.weights_changed()
            bilm.set_precision("fp32")
            lines.append(f"| {shape} | {threads} | "
                         + " | ".join(f"{speed[e]:,.0f}" for e in engines) + " |")
    return lines


@contextlib.contextmanager
def packed_for(engine: str) -> Iterator[None]:
    """int8 copies made in the block are packed for `engine` instead of the chosen one."""
    chosen = int8.int8_engine
    int8.int8_engine = lambda: engine
    try:
        yield
    finally:
        int8.int8_engine = chosen


def latency_section(shapes: List[str], models: Dict[str, Path], texts20: List[str],
                    calls: int) -> List[str]:
    lines: List[str] = []
    lines += ["", f"## Latency of nlp(text), one 20-token sentence a call ({calls} calls, "
              "1 thread, word cache on)", "",
              "| shape | " + " | ".join(f"{p} p50 / p95 ms" for p in PRECISIONS) + " | "
              + " | ".join(f"{p} : fp32 (p50)" for p in PRECISIONS[1:])
              + " | AllenNLP's reported |",
              "|---|" + "---|" * (2 * len(PRECISIONS))]
    torch.set_num_threads(1)
    for shape in shapes:
        ms = {p: latency(elmo_nlp(models[shape], p), texts20) for p in PRECISIONS}
        lines.append(f"| {shape} | "
                     + " | ".join(f"{ms[p]['p50']:.1f} / {ms[p]['p95']:.1f}"
                                  for p in PRECISIONS) + " | "
                     + " | ".join(f"{ms[p]['p50'] / ms['fp32']['p50']:.2f}x"
                                  for p in PRECISIONS[1:])
                     + f" | {1000 * ALLENNLP_SECONDS_PER_SENTENCE:.0f} ms |")
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

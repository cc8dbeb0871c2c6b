#!/usr/bin/env bash
# One short GPU check (under 8 minutes) for a CUDA machine with a CUDA build of torch:
#   1. the fixture and component tests on the GPU (bf16 inference and the bf16 fused LSTM
#      backward against autograd's included, where the GPU has native bf16),
#   2. a 50-step `spacy train --gpu-id 0` of configs/ner_textcat_elmo.cfg on a toy corpus,
#   3. biLM embedding throughput on GPU vs CPU,
#   4. GPU pretraining tokens/s (fused vs autograd LSTM backward, fp32 vs native bf16, 64 and
#      512 rows),
#   5. bf16 inference against fp32 (tokens/s, per-token cosine per layer, the same run's fp32
#      and bf16 matmul rates; benchmarks/bench_precision.py --device cuda),
#   6. sharded `embed` on the GPU under torchrun against one process (time, same vectors).
# Usage: bash benchmarks/gpu_check.sh  (from the repository root; installs CuPy if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))"
python -c "import cupy" 2>/dev/null || python -m pip install -q "cupy-cuda12x>=11"
python -m pip install -q --no-deps -e . -e ./lab >/dev/null
echo "== 1. GPU tests"
python -m pytest -q tests/test_gpu.py
echo "== 2. 50 training steps on the GPU"
tmp=$(mktemp -d)
python - "$tmp" <<'PY'
import sys
from pathlib import Path
import spacy
from spacy.tokens import DocBin
from spacy_elmo.bilm import save_bilm
from spacy_elmo_lab.tiny import make_random_bilm, toy_docs
out = Path(sys.argv[1])
nlp = spacy.blank("en")
DocBin(docs=toy_docs(nlp, 200)).to_disk(out / "train.spacy")
DocBin(docs=toy_docs(nlp, 40, seed=1)).to_disk(out / "dev.spacy")
save_bilm(make_random_bilm(), out / "bilm")
PY
python -m spacy train configs/ner_textcat_elmo.cfg --gpu-id 0 --output "$tmp/out" \
  --paths.train "$tmp/train.spacy" --paths.dev "$tmp/dev.spacy" --paths.elmo_weights "$tmp/bilm" \
  --training.max_steps 50 --training.eval_frequency 25
echo "== 3. embedding throughput, GPU vs CPU (random weights, 256 sentences of 10-30 tokens)"
python - <<'PY'
import random, time
import torch
from spacy_elmo.bilm import BiLM, batch_to_ids, preset
rng = random.Random(0)
words = "the of and to in a is that for it as was with be by on not he this are".split()
sents = [[rng.choice(words) + str(rng.randint(0, 999)) for _ in range(rng.randint(10, 30))]
         for _ in range(256)]
n_tokens = sum(map(len, sents))
torch.set_num_threads(2)
print("| size | CPU tok/s | GPU tok/s | GPU/CPU |")
print("|---|---:|---:|---:|")
for size in ("small", "original"):
    torch.manual_seed(0)
    bilm = BiLM(preset(size)).eval()
    rates = {}
    for device in ("cpu", "cuda"):
        model = bilm.to(device)
        batches = [batch_to_ids(sents[i:i + 64]).to(device) for i in range(0, len(sents), 64)]
        with torch.inference_mode():
            model(batches[0])  # warm-up
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            for batch in batches:
                model(batch)
            if device == "cuda":
                torch.cuda.synchronize()
        rates[device] = n_tokens / (time.perf_counter() - start)
    print(f"| {size} | {rates['cpu']:,.0f} | {rates['cuda']:,.0f} | {rates['cuda'] / rates['cpu']:.1f}x |")
PY
echo "== 4. GPU pretraining: tokens/s of a few hundred steps at the bundled biLM's shape"
python - "$tmp" <<'PY'
import random, sys
from pathlib import Path
rng = random.Random(0)
words = [f"w{k}" for k in range(20000)]
weights = [1.0 / (k + 1) for k in range(len(words))]
out = Path(sys.argv[1])
with open(out / "lm.txt", "w", encoding="utf-8") as f:
    for _ in range(200000):
        f.write(" ".join(rng.choices(words, weights=weights, k=rng.randint(8, 30))) + " .\n")
PY
opts=$(python -c "import json; from spacy_elmo.pretrain.config import PretrainConfig; print(json.dumps(PretrainConfig.from_file('configs/pretrain_en.cfg').options))")
echo "| path | rows | tokens/s (steps 101-300) |"
echo "|---|---:|---:|"
for run in "fused fp32 64" "autograd fp32 64" "fused bf16 64" "fused fp32 512" "fused bf16 512"; do
  set -- $run
  python -m spacy_elmo pretrain "$tmp/lm.txt" --output "$tmp/pre_$1_$2_$3" --gpu-id 0 \
    --lstm-backward "$1" --precision "$2" --batch-size "$3" --options "$opts" \
    --preset small --vocab-size 20000 --n-negatives 4096 --max-steps 300 --eval-every 100000 \
    --checkpoint-every 100000 --shuffle-buffer 1000 > /dev/null 2>&1 || { echo "| $run | failed | |"; continue; }
  python - "$tmp/pre_$1_$2_$3/metrics.jsonl" "$run" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
speeds = [r["tokens_per_s"] for r in records if r["step"] > 100]
name, prec, rows = sys.argv[2].split()
print(f"| {name} {prec} | {rows} | {sum(speeds) / len(speeds):,.0f} |")
PY
done
echo "== 5. bf16 inference against fp32 (the native bf16 path; bundled and random weights)"
python benchmarks/bench_precision.py --device cuda --sections error,speed --shapes small,original
echo "== 6. sharded embed on the GPU (torchrun, 1 process a GPU) against one process"
python - "$tmp" <<'PY'
import json, sys
from pathlib import Path
groups = json.loads(Path("tests/fixtures/allennlp_elmo/sentences.json").read_text())
lines = [s for g in groups for s in g] * 100
Path(sys.argv[1], "embed.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
PY
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
start=$(date +%s.%N)
python -m spacy_elmo embed "$tmp/embed.txt" "$tmp/one.hdf5" --gpu-id 0 > /dev/null 2>&1
mid=$(date +%s.%N)
torchrun --nproc-per-node "$gpus" -m spacy_elmo embed "$tmp/embed.txt" "$tmp/sharded.hdf5" \
  --gpu-id 0 > /dev/null 2>&1
end=$(date +%s.%N)
python - "$tmp" "$start" "$mid" "$end" "$gpus" <<'PY'
import sys
import h5py
import numpy as np
tmp, start, mid, end, gpus = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5]
with h5py.File(f"{tmp}/one.hdf5") as a, h5py.File(f"{tmp}/sharded.hdf5") as b:
    names = [k for k in a if k != "sentence_to_index"]
    diff = max(float(np.abs(a[k][...] - b[k][...]).max()) for k in names if a[k].size)
print(f"| one process | {mid - start:.1f} s | torchrun x {gpus} | {end - mid:.1f} s | "
      f"{len(names)} lines, max abs difference {diff:.2g} |")
PY

#!/usr/bin/env bash
# A GPU pretraining burst: the bundled English biLM's shape and recipe (configs/pretrain_en.cfg)
# on the lm_en shards in DATA, 512 rows a step, bf16 where the GPU has it, for at most MINUTES
# minutes of training steps (the cosine schedule spans STEPS steps). The run and its export
# (OUT/run/model) land in OUT.
#
# Usage (from the repository root): bash benchmarks/gpu_burst.sh DATA OUT [MINUTES] [STEPS] [GPU]
#   DATA: a folder with enwiki_core.train.*.txt.xz and enwiki_core.valid.txt.xz (lm_en,
#   CC BY-SA). With the device tool: copy four training shards and the valid file into burst/
#   (ignored by git), then run `bash benchmarks/gpu_burst.sh burst "$OUT" 8` with carry ["burst"].
# Afterwards, on the CPU, compare the export with the bundled biLM and bundle it if better:
#   spacy-elmo perplexity OUT/run/model DATA/enwiki_core.valid.txt.xz
#   spacy-elmo perplexity spacy_elmo/data/elmo_en_small DATA/enwiki_core.valid.txt.xz
#   python -m spacy_elmo_lab.wic ...  (docs/models.md), then python -m spacy_elmo_lab.bundle ...
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:?DATA folder with lm_en shards}; out=${2:?OUT folder}
minutes=${3:-8}; steps=${4:-10000}; gpu=${5:-0}
python -c "import spacy_elmo, spacy_elmo_lab" 2>/dev/null || python -m pip install -q --no-deps -e . -e ./lab >/dev/null
precision=fp32
if [ "$gpu" -ge 0 ] && python -c "import sys, torch; sys.exit(0 if torch.cuda.is_bf16_supported() else 1)"; then
  precision=bf16
fi
mkdir -p "$out"
python -m spacy_elmo pretrain configs/pretrain_en.cfg "$data"/enwiki_core.train.*.txt.xz \
  --dev "$data/enwiki_core.valid.txt.xz" --output "$out/run" --gpu-id "$gpu" \
  --precision "$precision" --batch-size 512 --max-minutes "$minutes" \
  --training.max_steps "$steps" --optimizer.warmup_steps 500 --eval-every 1000 \
  --checkpoint-every 1000 2>&1 | tail -40
python - "$out/run" <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
train = [r for r in records if "tokens_per_s" in r]
dev = [r for r in records if "dev_ppl" in r or "dev_ppl_fwd" in r]
print(f"steps {train[-1]['step'] if train else 0}; tokens/s "
      f"{sum(r['tokens_per_s'] for r in train[-10:]) / max(1, len(train[-10:])):,.0f}; "
      f"last dev {dev[-1] if dev else None}; export: {(run / 'model').exists()}")
PY

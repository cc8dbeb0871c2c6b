#!/usr/bin/env bash
# One short GPU check (under 5 minutes) for a CUDA machine with a CUDA build of torch:
#   1. the fixture and component tests on the GPU,
#   2. a 50-step `spacy train --gpu-id 0` of configs/ner_textcat_elmo.cfg on a toy corpus,
#   3. biLM embedding throughput on GPU vs CPU.
# Usage: bash benchmarks/gpu_check.sh  (from the repository root; installs CuPy if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))"
python -c "import cupy" 2>/dev/null || python -m pip install -q "cupy-cuda12x>=11"
python -m pip install -q --no-deps -e . >/dev/null
echo "== 1. GPU tests"
python -m pytest -q tests/test_gpu.py
echo "== 2. 50 training steps on the GPU"
tmp=$(mktemp -d)
python - "$tmp" <<'PY'
import sys
from pathlib import Path
import spacy
from spacy.tokens import DocBin
sys.path.insert(0, ".")
from tests.pipeline.conftest import toy_docs
from tests.conftest import make_random_bilm
from spacy_elmo.bilm import save_bilm
out = Path(sys.argv[1])
nlp = spacy.blank("en")
DocBin(docs=toy_docs(nlp, 200)).to_disk(out / "train.spacy")
DocBin(docs=toy_docs(nlp, 40, seed=1)).to_disk(out / "dev.spacy")
save_bilm(make_random_bilm(), out / "bilm")
PY
python -m spacy train configs/ner_textcat_elmo.cfg --gpu-id 0 --output "$tmp/out" \
  --paths.train "$tmp/train.spacy" --paths.dev "$tmp/dev.spacy" --paths.elmo_weights "$tmp/bilm" \
  --training.max_steps 50 --training.eval_frequency 25
echo "== 3. embedding throughput, GPU vs CPU"
python benchmarks/bench_embed.py --device cuda --compare-cpu --quick

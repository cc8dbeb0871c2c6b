"""benchmarks/precision_downstream.py: a trained pipeline's test score at each precision,
beside fp32's."""

import importlib.util
import re
from pathlib import Path

import pytest
import spacy
import torch
from spacy.tokens import DocBin
from spacy.training import Example
from spacy_elmo_lab.tiny import toy_docs
from thinc.api import Config

from .conftest import CONFIGS

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "precision_downstream.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("precision_downstream", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trained(weights_dir, tmp_path):
    config = Config().from_disk(CONFIGS / "ner_textcat_elmo.cfg")
    config["components"]["elmo"]["weights"] = str(weights_dir)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    docs = toy_docs(nlp, 16)
    examples = [Example(nlp.make_doc(d.text), d) for d in docs]
    nlp.initialize(lambda: examples)
    torch.manual_seed(0)
    for _ in range(5):
        nlp.update(examples)
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=docs).to_disk(tmp_path / "test.spacy")
    return tmp_path / "model", tmp_path / "test.spacy"


def test_each_precision_is_scored_beside_fp32(bench, weights_dir, tmp_path, capsys):
    model, test = _trained(weights_dir, tmp_path)
    text = bench.main([str(model), str(test), "--precisions", "fp32,int8"])
    assert capsys.readouterr().out.strip() == text
    rows = {m[0]: (float(m[1]), float(m[2])) for m in
            re.findall(r"^\| (fp32|int8) \| ([\d.]+) \| ([+-][\d.]+) \|", text, re.M)}
    assert set(rows) == {"fp32", "int8"} and rows["fp32"][1] == 0.0
    assert rows["int8"][1] == pytest.approx(rows["int8"][0] - rows["fp32"][0], abs=0.011)
    assert abs(rows["int8"][1]) <= 5.0  # int8 features keep what fp32 ones predict
    assert torch.get_num_threads() == 1


def test_bf16_is_in_the_default_only_where_native(bench, monkeypatch):
    monkeypatch.setattr(bench, "native_bf16", lambda device: False)
    assert bench.default_precisions() == ["fp32", "int8"]
    monkeypatch.setattr(bench, "native_bf16", lambda device: True)
    assert bench.default_precisions() == ["fp32", "int8", "bf16"]


@pytest.mark.parametrize("precisions", ["int8,fp32", "fp32,int4"])
def test_precisions_start_with_fp32_and_are_known(bench, precisions, tmp_path, capsys):
    with pytest.raises(SystemExit):
        bench.main([str(tmp_path), str(tmp_path), "--precisions", precisions])
    assert "fp32 first" in capsys.readouterr().err

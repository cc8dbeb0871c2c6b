"""`spacy package` makes a wheel that installs and loads without `--code`."""

import shutil
import subprocess
import sys

import numpy as np
import pytest
import spacy

from ..bilm.test_efml import EFML_DIR
from .test_training import _train_nlp

pytest.importorskip("build")


def test_spacy_package_wheel_installs_and_loads(weights_dir, tmp_path):
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg",
                               {"components.ner.model.tok2vec.upstream": "elmo"})
    nlp.update(examples, sgd=nlp.create_optimizer())
    # a second biLM, from an ELMoForManyLangs model: its dictionaries travel in the package
    efml = shutil.copytree(EFML_DIR / "model", tmp_path / "efml_model")
    nlp.add_pipe("elmo", name="elmo_efml", config={"weights": str(efml)})
    text = "Alice went to Paris today ."
    expected = nlp(text)._.elmo  # the last component's: EFML (loaded now)
    nlp.meta["name"] = "elmo_test"
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(efml)
    with nlp.select_pipes(disable=["elmo_efml"]):
        expected_first = nlp(text)._.elmo
    assert expected.shape[1] == 16 and expected_first.shape[1] == 12
    (tmp_path / "pkg").mkdir()
    subprocess.run([sys.executable, "-m", "spacy", "package", str(tmp_path / "pipeline"),
                    str(tmp_path / "pkg"), "--build", "wheel", "--force"],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "pkg").rglob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(tmp_path / "site"), str(wheel)], check=True,
                   capture_output=True)
    script = ("import sys, numpy; sys.path.insert(0, sys.argv[1]); import spacy; "
              "nlp = spacy.load('en_elmo_test'); text = 'Alice went to Paris today .'; "
              "numpy.save(sys.argv[2], nlp(text)._.elmo); "
              "nlp.disable_pipe('elmo_efml'); numpy.save(sys.argv[3], nlp(text)._.elmo)")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "site"),
                    str(tmp_path / "out.npy"), str(tmp_path / "first.npy")], check=True,
                   cwd=tmp_path)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "first.npy"), expected_first, atol=1e-6)
    assert spacy.util.is_package("spacy") and not spacy.util.is_package("en_elmo_test")

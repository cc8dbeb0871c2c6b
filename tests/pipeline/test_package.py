"""`spacy package` makes a wheel that installs and loads without `--code`."""

import subprocess
import sys

import pytest
import spacy

from .test_training import _train_nlp

pytest.importorskip("build")


def test_spacy_package_wheel_installs_and_loads(weights_dir, tmp_path):
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg")
    nlp.update(examples, sgd=nlp.create_optimizer())
    nlp.meta["name"] = "elmo_test"
    nlp.to_disk(tmp_path / "pipeline")
    expected = nlp("Alice went to Paris today .")._.elmo
    (tmp_path / "pkg").mkdir()
    subprocess.run([sys.executable, "-m", "spacy", "package", str(tmp_path / "pipeline"),
                    str(tmp_path / "pkg"), "--build", "wheel", "--force"],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "pkg").rglob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(tmp_path / "site"), str(wheel)], check=True,
                   capture_output=True)
    script = ("import sys, numpy; sys.path.insert(0, sys.argv[1]); import spacy; "
              "nlp = spacy.load('en_elmo_test'); "
              "numpy.save(sys.argv[2], nlp('Alice went to Paris today .')._.elmo)")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "site"),
                    str(tmp_path / "out.npy")], check=True, cwd=tmp_path)
    import numpy as np

    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=1e-6)
    assert spacy.util.is_package("spacy") and not spacy.util.is_package("en_elmo_test")

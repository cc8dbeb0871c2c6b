"""`spacy package` makes a wheel that installs and loads without `--code`."""

import os
import shutil
import subprocess
import sys

import build  # noqa: F401  (in the test extra: a missing install fails, never skips)
import numpy as np
import spacy

from ..bilm.test_efml import EFML_DIR
from .test_training import _train_nlp


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
    script = ("import sys, numpy, spacy; "
              "nlp = spacy.load('en_elmo_test'); text = 'Alice went to Paris today .'; "
              "numpy.save(sys.argv[1], nlp(text)._.elmo); "
              "nlp.disable_pipe('elmo_efml'); numpy.save(sys.argv[2], nlp(text)._.elmo)")
    # the installed wheel's folder on the path, as a user's site-packages would be
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "out.npy"),
                    str(tmp_path / "first.npy")], check=True, cwd=tmp_path, env=env)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "first.npy"), expected_first, atol=1e-6)
    assert spacy.util.is_package("spacy") and not spacy.util.is_package("en_elmo_test")


def test_every_entry_point_names_the_registered_function():
    """setup.cfg's entry points (what a packaged pipeline finds without `--code`) point at
    the functions registered under the same names."""
    import configparser
    import importlib
    from pathlib import Path

    from spacy.util import registry

    setup = configparser.ConfigParser()
    setup.read(Path(__file__).resolve().parents[2] / "setup.cfg")
    groups = {"spacy_factories": registry.factories, "spacy_architectures":
              registry.architectures, "spacy_layers": registry.layers}
    seen = []
    for group, reg in groups.items():
        for line in setup["options.entry_points"][group].strip().splitlines():
            name, target = (part.strip() for part in line.split("="))
            module, attr = target.split(":")
            function = getattr(importlib.import_module(module), attr)
            assert reg.get_all()[name] is function, name
            seen.append(name)
    assert {"spacy-elmo.ElmoTok2Vec.v2", "spacy-elmo.ScalarMix.v1"} <= set(seen)
    assert "spacy-elmo.ElmoTok2Vec.v1" not in registry.architectures.get_all()  # gone in 1.0

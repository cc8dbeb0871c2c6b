"""What `pip install spacy-elmo` gets: the library and the bundled biLMs, no lab. The built
wheel, installed on its own and used from a folder outside the checkout, adds the component,
embeds a file and trains a shipped config with `spacy train`: no missing module, no --code."""

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

pytest.importorskip("build", reason="the test extra is not installed")

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "LICENSE", "spacy_elmo")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The package's wheel, built from a copy of its sources (so that no build files land in
    the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(tmp / "dist"), str(src)], check=True, capture_output=True)
    return next((tmp / "dist").glob("spacy_elmo-*.whl"))


def test_the_wheel_holds_the_library_and_no_lab(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"spacy_elmo", wheel.name.split("-py3")[0] + ".dist-info"}
    modules = {n for n in names if n.endswith(".py")}
    assert not [n for n in modules if "experiments" in n or "lab" in n or "tiny" in n]
    for needed in ("spacy_elmo/pipeline/static_vectors.py", "spacy_elmo/py.typed",
                   "spacy_elmo/data/elmo_en_small/weights.hdf5",
                   "spacy_elmo/data/elmo_zh_small/weights.hdf5"):
        assert needed in names, needed
    points = configparser.ConfigParser()
    info = next(n for n in names if n.endswith("entry_points.txt"))
    points.read_string(zipfile.ZipFile(wheel).read(info).decode("utf-8"))
    for section in points.sections():
        for target in points[section].values():
            path = target.split(":")[0].replace(".", "/")
            assert {path + ".py", path + "/__init__.py"} & modules, (section, target)


def _toy_corpus(path: Path) -> None:
    nlp = spacy.blank("en")
    docs = []
    for text, start, end in [("Alice flew to Paris today .", 3, 4),
                             ("Bob lives in Berlin .", 3, 4)] * 4:
        doc = nlp(text)
        doc.ents = [doc.char_span(doc[start].idx, doc[end - 1].idx + len(doc[end - 1]),
                                  label="LOC")]
        docs.append(doc)
    DocBin(docs=docs).to_disk(path)


def test_the_installed_wheel_works_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(site), str(wheel)], check=True, capture_output=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, *args], cwd=outside, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    where = run("-c", "import spacy, spacy_elmo; nlp = spacy.blank('en'); "
                "nlp.add_pipe('elmo'); print(nlp('The bank .')._.elmo.shape); "
                "print(spacy_elmo.__file__)")
    assert where.splitlines()[0] == "(3, 256)"
    assert Path(where.splitlines()[1]).is_relative_to(site)
    (outside / "in.txt").write_text("The bank raised rates .\n", encoding="utf-8")
    run("-m", "spacy_elmo", "embed", "in.txt", "out.hdf5", "--layers", "top")
    assert (outside / "out.hdf5").stat().st_size > 0
    shutil.copy2(ROOT / "configs" / "ner_elmo_concat.cfg", outside / "config.cfg")
    _toy_corpus(outside / "train.spacy")
    run("-m", "spacy", "train", "config.cfg", "--output", "trained", "--paths.train",
        "train.spacy", "--paths.dev", "train.spacy", "--training.max_steps", "4",
        "--training.eval_frequency", "2")
    assert (outside / "trained" / "model-last" / "config.cfg").exists()

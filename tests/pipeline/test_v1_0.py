"""The pipeline saved by spacy-elmo 1.0 (tests/fixtures/v1_0: `elmo`, NER and spancat on
`spacy-elmo.ElmoListener.v1`, textcat on its own biLM through `spacy-elmo.ElmoTok2Vec.v2`)
loads with spacy.load and gives what 1.0 gave: the 1.0 compatibility promise. Never
regenerate the fixture; a later format gets a new folder."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import spacy

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1_0"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
pytestmark = pytest.mark.filterwarnings("ignore:.W002.")  # one text has a token over 50 bytes


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its configs name a biLM at "bilm": the pipeline carries it


@pytest.fixture(scope="module")
def nlp():
    return spacy.load(FIXTURE / "pipeline")


@pytest.fixture(scope="module")
def arrays():
    with np.load(FIXTURE / "expected.npz") as data:
        return dict(data)


def check(doc, i, arrays):
    expected = EXPECTED["pipeline"][i]
    assert [t.text for t in doc] == expected["tokens"]
    np.testing.assert_allclose(doc._.elmo, arrays[f"elmo_{i}"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(doc._.elmo_layers, arrays[f"layers_{i}"], atol=1e-5, rtol=0)
    assert doc.cats == pytest.approx(expected["cats"], abs=1e-5)
    assert [[e.start, e.end, e.label_] for e in doc.ents] == expected["ents"]
    assert [[s.start, s.end, s.label_] for s in doc.spans["sc"]] == expected["spans"]
    np.testing.assert_allclose(doc.spans["sc"].attrs["scores"], arrays[f"span_scores_{i}"],
                               atol=1e-5, rtol=0)


def test_the_pipeline_of_1_0_loads_with_its_components(nlp):
    assert nlp.pipe_names == ["elmo", "ner", "textcat", "spancat"]
    assert not (Path.cwd() / "bilm").exists()
    components = nlp.config["components"]
    assert components["ner"]["model"]["tok2vec"]["@architectures"] == \
        "spacy-elmo.ElmoListener.v1"
    assert components["textcat"]["model"]["tok2vec"]["@architectures"] == \
        "spacy-elmo.ElmoTok2Vec.v2"
    assert set(nlp.get_pipe("ner").labels) == {"PER", "LOC"}
    assert set(nlp.get_pipe("spancat").labels) == {"PER", "LOC", "PLACE"}


def test_the_pipeline_of_1_0_gives_what_1_0_gave(nlp, arrays):
    texts = EXPECTED["texts"]
    for i, doc in enumerate(nlp.pipe(texts)):  # in one batch
        check(doc, i, arrays)
    for i, text in enumerate(reversed(texts)):  # one at a time: the same vectors
        check(nlp(text), len(texts) - 1 - i, arrays)


def test_the_pipeline_of_1_0_saved_again_gives_the_same(nlp, arrays, tmp_path):
    shutil.copytree(FIXTURE / "pipeline", tmp_path / "copy")
    spacy.load(tmp_path / "copy").to_disk(tmp_path / "again")
    again = spacy.load(tmp_path / "again")
    for i, doc in enumerate(again.pipe(EXPECTED["texts"])):
        check(doc, i, arrays)

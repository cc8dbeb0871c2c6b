"""A pipeline saved by spacy-elmo 0.1 (tests/fixtures/compat: an `elmo` component, NER on a
listener, textcat on `spacy-elmo.ElmoTok2Vec.v1`) is refused, each part with an error that
says what it is and what to do; none of it loads unchecked."""

from pathlib import Path

import pytest
import spacy
from catalogue import RegistryError

from spacy_elmo.errors import ElmoError

PIPELINE = Path(__file__).resolve().parents[1] / "fixtures" / "compat" / "pipeline"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its configs name a biLM at "bilm": not needed to load


def test_the_removed_private_tok2vec_is_named():
    with pytest.raises(RegistryError, match=r"(?s)'spacy-elmo\.ElmoTok2Vec\.v1'.*"
                                            r"spacy-elmo\.ElmoTok2Vec\.v2"):
        spacy.load(PIPELINE)


def test_its_biLM_saved_without_a_checksum_is_refused():
    with pytest.raises(ElmoError, match=r"\[E260\] '.*elmo.model' holds a biLM saved without "
                                        r"a checksum .* before 1\.0"):
        spacy.load(PIPELINE, exclude=["textcat"])


def test_its_layer_mix_saved_without_its_width_is_refused():
    nlp = spacy.load(PIPELINE, exclude=["elmo", "textcat"])
    with pytest.warns(UserWarning, match="W003"), \
            pytest.raises(ElmoError, match=r"\[E261\] .* saved by spacy-elmo before 1\.0"):
        nlp("Alice went to Paris today .")

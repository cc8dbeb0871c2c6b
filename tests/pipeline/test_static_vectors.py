"""The word2vec rows end to end: vectors trained on text -> `spacy init vectors` -> the CNN +
word2vec and [word2vec + features ; ELMo] configs train with them."""

import gensim  # noqa: F401  (in the test extra: a missing install fails, never skips)
import numpy as np
import pytest
import spacy
from spacy.cli.init_pipeline import init_vectors_cli
from spacy.cli.train import train
from spacy.tokens import DocBin
from spacy_elmo_lab import word2vec
from spacy_elmo_lab.table import STATIC_VECTORS
from spacy_elmo_lab.tiny import toy_docs

from spacy_elmo.pretrain.config import PretrainConfig

from .conftest import CONFIGS

CNN_VECTORS = STATIC_VECTORS["cnn"]  # the overrides of the word2vec rows


def _vectors(directory, lang, lines, **settings):
    """spacy_elmo_lab.word2vec on the lines, then `spacy init vectors` (the project's two
    steps); returns the vectors pipeline and word2vec's own vectors."""
    directory.mkdir()
    (directory / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = PretrainConfig(train=[str(directory / "text.txt")], lang=lang, **settings)
    word2vec.make_vectors(directory, config, dim=8, min_count=1, epochs=2, threads=1)
    init_vectors_cli(lang, directory / "vectors.txt", directory / "nlp", prune=-1, truncate=0,
                     mode="default", name=None, verbose=False, jsonl_loc=None, attr="ORTH")
    rows = [line.split(" ") for line in
            (directory / "vectors.txt").read_text(encoding="utf-8").splitlines()[1:]]
    return directory / "nlp", {r[0]: np.array(r[1:], dtype="float32") for r in rows}


@pytest.fixture(scope="module")
def en_vectors(tmp_path_factory):
    nlp = spacy.blank("en")
    texts = [d.text for d in toy_docs(nlp, 40, seed=3)]
    return _vectors(tmp_path_factory.mktemp("w2v") / "en", "en", texts)


def _train(config_name, corpus, out, vectors, **extra):
    overrides = {"paths.train": str(corpus / "train.spacy"),
                 "paths.dev": str(corpus / "dev.spacy"), "paths.vectors": str(vectors),
                 "training.max_steps": 3, "training.eval_frequency": 3, **extra}
    train(CONFIGS / config_name, out, overrides=overrides)
    return spacy.load(out / "model-best")


def test_cnn_with_word2vec_vectors_trains_and_uses_them(en_vectors, toy_corpus, tmp_path):
    path, gensim_vectors = en_vectors
    nlp = _train("ner_cnn.cfg", toy_corpus, tmp_path / "out", path, **{CNN_VECTORS: True})
    vectors = nlp.vocab.vectors
    assert vectors.shape == (len(gensim_vectors), 8)
    np.testing.assert_allclose(nlp.vocab["Alice"].vector, gensim_vectors["Alice"], atol=1e-6)
    tok2vec = nlp.get_pipe("tok2vec")
    doc = nlp.make_doc("Alice went to Paris today .")
    before = tok2vec.predict([doc])[0].copy()
    vectors.data[:] = 0
    assert not np.allclose(before, tok2vec.predict([doc])[0])


def test_word2vec_features_beside_elmo_train(en_vectors, toy_corpus, weights_dir, tmp_path):
    path, gensim_vectors = en_vectors
    nlp = _train("textcat_elmo_concat.cfg", toy_corpus, tmp_path / "out", path,
                 **{"paths.elmo_weights": str(weights_dir),
                    STATIC_VECTORS["elmo_concat"].format(kind="textcat"): True})
    assert nlp.vocab.vectors.shape == (len(gensim_vectors), 8)
    textcat = nlp.get_pipe("textcat").model
    assert any(node.name == "static_vectors" for node in textcat.walk())
    doc = nlp("Bob went to Rome today .")
    assert set(doc.cats) == {"SOUTH", "NORTH"}
    # the vectors feed the classifier: without them its scores change
    before = textcat.predict([doc]).copy()
    nlp.vocab.vectors.data[:] = 0
    assert not np.allclose(before, textcat.predict([doc]))


def test_chinese_character_vectors_train_the_chinese_row(tmp_path):
    nlp = spacy.blank("zh")
    lines, docs = [], []
    for i, (city, cat) in enumerate([("北京", "NORTH"), ("广州", "SOUTH")] * 6):
        text = f"小明{i % 3}去{city}了。"
        lines.append(text)
        doc = nlp(text)
        doc.cats = {"NORTH": float(cat == "NORTH"), "SOUTH": float(cat == "SOUTH")}
        docs.append(doc)
    path, gensim_vectors = _vectors(tmp_path / "zh", "zh", lines, segmenter="char")
    assert all(len(key) == 1 for key in gensim_vectors)  # character vectors
    assert {"北", "京", "。"} <= set(gensim_vectors)
    DocBin(docs=docs).to_disk(tmp_path / "train.spacy")
    DocBin(docs=docs[:4]).to_disk(tmp_path / "dev.spacy")
    trained = _train("textcat_cnn.cfg", tmp_path, tmp_path / "out", path,
                     **{"nlp.lang": "zh", CNN_VECTORS: True})
    assert trained.vocab.vectors.shape == (len(gensim_vectors), 8)
    np.testing.assert_allclose(trained.vocab["北"].vector, gensim_vectors["北"], atol=1e-6)
    doc = trained("小明去广州了。")
    assert [t.text for t in doc] == list("小明去广州了。")  # characters, as the vectors
    tok2vec = trained.get_pipe("tok2vec")  # what the classifier listens to
    before = tok2vec.predict([doc])[0].copy()
    trained.vocab.vectors.data[:] = 0
    assert not np.allclose(before, tok2vec.predict([doc])[0])

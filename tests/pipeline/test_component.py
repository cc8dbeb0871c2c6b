"""The `elmo` component: extensions, hooks, sentences and windows, bad input."""

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc, DocBin

from spacy_elmo.bilm import batch_to_ids, load_bilm
from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.elmo_model import get_holder

TEXT = "The bank raised rates. We sat on the river bank."


def test_extensions_shapes_and_values(nlp_elmo, weights_dir):
    doc = nlp_elmo(TEXT)
    n = len(doc)
    assert doc._.elmo.shape == (n, 12) and doc._.elmo.dtype == np.float32
    assert doc._.elmo_layers.shape == (3, n, 12)
    np.testing.assert_allclose(doc._.elmo, doc._.elmo_layers.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(doc[1]._.elmo, doc._.elmo[1])
    np.testing.assert_allclose(doc[1:3]._.elmo, doc._.elmo[1:3].mean(0), rtol=1e-6)
    # no sentence boundaries on a blank pipeline: the whole doc is one biLM input
    bilm = load_bilm(weights_dir)
    with torch.no_grad():
        expected = bilm(batch_to_ids([[t.text for t in doc]])).layers[:, 0].numpy()
    np.testing.assert_allclose(doc._.elmo_layers, expected, atol=1e-5)


def test_same_word_differs_by_context(nlp_elmo):
    doc = nlp_elmo(TEXT)
    first, second = doc[1], doc[-2]
    assert first.text == second.text == "bank"
    assert not np.allclose(first._.elmo, second._.elmo)


def test_sentences_go_through_separately(weights_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir), "store_layers": True})
    doc = nlp(TEXT)
    sents = list(doc.sents)
    assert len(sents) == 2
    alone = nlp(sents[1].text)
    np.testing.assert_allclose(doc._.elmo_layers[:, sents[1].start:], alone._.elmo_layers,
                               atol=1e-5)


def test_vector_hooks_and_similarity(nlp_elmo):
    doc = nlp_elmo(TEXT)
    assert doc.has_vector and doc[0].has_vector
    np.testing.assert_array_equal(doc[1].vector, doc[1]._.elmo)
    np.testing.assert_allclose(doc.vector, doc._.elmo.mean(0), rtol=1e-6)
    sim = doc[1].similarity(doc[-2])
    a, b = doc[1]._.elmo, doc[-2]._.elmo
    assert sim == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), rel=1e-5)
    # a span's vector is the mean of its tokens' ELMo vectors, and similarity uses it
    np.testing.assert_allclose(doc[0:2].vector, doc._.elmo[0:2].mean(0), rtol=1e-6)
    a, b = doc._.elmo[0:2].mean(0), doc._.elmo[2:4].mean(0)
    assert doc[0:2].similarity(doc[2:4]) == pytest.approx(
        float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), rel=1e-5)


def test_every_vector_norm_is_the_norm_of_its_vector(nlp_elmo):
    """Doc, Span and Token norms are floats, the L2 norm of `.vector` (spaCy 3.8's
    Span.vector_norm answers with the `vector` span hook whenever a `vector_norm` span hook
    exists: the span's vector, not its norm)."""
    doc = nlp_elmo("The bank raised its rates today .")
    for obj in (doc, doc[1:4], doc[0:1], doc[1]):
        norm = obj.vector_norm
        assert np.ndim(norm) == 0, type(obj).__name__
        assert float(norm) == pytest.approx(float(np.linalg.norm(obj.vector)), rel=1e-5)
        assert bool(norm)
        unit = obj.vector / norm
        assert float(np.linalg.norm(unit)) == pytest.approx(1.0, rel=1e-5)
    assert float(doc[1:4].vector_norm) == pytest.approx(
        float(np.linalg.norm(doc._.elmo[1:4].mean(0))), rel=1e-5)


def test_hooks_off_and_layers_off(weights_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir), "set_vector_hooks": False,
                                 "mix_weights": [0, 0, 1], "gamma": 2.0})
    doc = nlp(TEXT)
    assert doc._.elmo_layers is None
    assert "vector" not in doc.user_hooks
    nlp2 = spacy.blank("en")
    nlp2.add_pipe("elmo", config={"weights": str(weights_dir), "store_layers": True})
    layers = nlp2(TEXT)._.elmo_layers
    np.testing.assert_allclose(doc._.elmo, 2.0 * layers[2], rtol=1e-5, atol=1e-6)


def test_a_gamma_that_overflows_float32_is_refused(weights_dir):
    """gamma 1e39 gave infinite doc._.elmo with only numpy's overflow warning."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir), "gamma": 1e39})
    with pytest.raises(ElmoError, match=r"\[E270\] `gamma` 1e\+39 scales the mixed vectors"):
        nlp(TEXT)


def test_docbin_roundtrip_keeps_vectors(nlp_elmo):
    doc = nlp_elmo(TEXT)
    data = DocBin(docs=[doc], store_user_data=True).to_bytes()
    restored = list(DocBin().from_bytes(data).get_docs(nlp_elmo.vocab))[0]
    np.testing.assert_array_equal(restored._.elmo, doc._.elmo)
    np.testing.assert_array_equal(restored._.elmo_layers, doc._.elmo_layers)
    np.testing.assert_array_equal(restored[2]._.elmo, doc[2]._.elmo)


def test_similarity_to_a_restored_doc_uses_its_elmo_vectors(nlp_elmo):
    """A doc restored from a DocBin keeps doc._.elmo but not the vector hooks: similarity to
    it read its static vectors (0.0, or a shape error with a vector table)."""
    doc, again = nlp_elmo(TEXT), nlp_elmo(TEXT)
    data = DocBin(docs=[again], store_user_data=True).to_bytes()
    restored = list(DocBin().from_bytes(data).get_docs(nlp_elmo.vocab))[0]
    assert "similarity" not in restored.user_hooks  # as spaCy restores it
    assert doc.similarity(restored) == pytest.approx(doc.similarity(again), rel=1e-6)
    assert doc.similarity(restored) == pytest.approx(1.0, rel=1e-5)
    assert doc[1].similarity(restored[1]) == pytest.approx(1.0, rel=1e-5)
    assert doc[0:2].similarity(restored[0:2]) == pytest.approx(1.0, rel=1e-5)


def test_vector_hooks_on_a_doc_without_vectors_say_why(nlp_elmo):
    from spacy_elmo.pipeline import install_vector_hooks

    doc = nlp_elmo.make_doc("no vectors here")
    install_vector_hooks(doc)
    with pytest.raises(ElmoError, match="has no ELMo vectors"):
        _ = doc.vector
    with pytest.raises(ElmoError, match="has no ELMo vectors"):
        _ = doc[0].vector


def test_similarity_to_a_doc_without_elmo_vectors_says_why(nlp_elmo):
    doc = nlp_elmo("a good movie")
    with pytest.raises(ElmoError, match=r"\[E055\] This doc has no ELMo vectors"):
        doc.similarity(nlp_elmo.make_doc("a bad movie"))


def test_vectors_of_a_doc_retokenized_after_elmo_are_refused(nlp_elmo):
    """Merging (merge_entities after `elmo`) or splitting tokens would shift every vector
    after the change onto the wrong token."""
    doc = nlp_elmo("New York is big .")
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[0:2])
    for read in (lambda: doc[1]._.elmo, lambda: doc[0:2]._.elmo, lambda: doc.vector,
                 lambda: doc[2].vector):
        with pytest.raises(ElmoError, match=r"\[E051\] This doc has 4 tokens but ELMo "
                                            r"vectors for 5: it was retokenized"):
            read()


@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_and_whitespace_docs(nlp_elmo, text):
    doc = nlp_elmo(text)
    assert doc._.elmo.shape == (len(doc), 12)
    assert not doc._.elmo.any()


def test_odd_unicode_and_long_tokens(nlp_elmo):
    doc = nlp_elmo("Émoji 🙂🙃 and 中文混合 text, Ω≈ç√ " + "x" * 1500 + " end\u200b.")
    assert doc._.elmo.shape == (len(doc), 12)
    assert np.isfinite(doc._.elmo).all()
    assert np.abs(doc._.elmo[[t.i for t in doc if not t.is_space]]).sum(1).min() > 0


def test_long_doc_without_sentences_is_windowed(weights_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir),
                                 "model": {"@architectures": "spacy-elmo.ElmoModel.v1",
                                           "max_sentence_tokens": 50, "batch_size": 8}})
    doc = Doc(nlp.vocab, words=["word"] * 20_000)
    calls = []
    holder = get_holder(nlp.get_pipe("elmo").model)
    holder.register_forward_pre_hook(lambda mod, args: calls.append(tuple(args[0].shape)))
    doc = nlp(doc)
    assert doc._.elmo.shape == (20_000, 12)
    assert calls and max(shape[0] for shape in calls) <= 8
    assert max(shape[1] for shape in calls) <= 50 + 2 * (50 // 4)  # window + context


def test_windows_overlap_and_keep_the_token_layer_exact(weights_dir):
    def run(max_tokens):
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"weights": str(weights_dir), "store_layers": True,
                                     "model": {"@architectures": "spacy-elmo.ElmoModel.v1",
                                               "max_sentence_tokens": max_tokens}})
        return nlp(Doc(nlp.vocab, words=[f"w{i % 37}" for i in range(230)]))._.elmo_layers

    windowed, whole = run(40), run(1000)
    np.testing.assert_allclose(windowed[0], whole[0], atol=1e-6)
    assert np.abs(windowed[1:]).sum(-1).min() > 0  # every token got LSTM outputs
    # one pass is the biLM's own output for the whole sentence
    bilm = load_bilm(weights_dir).eval()
    words = [f"w{i % 37}" for i in range(230)]
    with torch.no_grad():
        direct = bilm(batch_to_ids([words])).layers[:, 0].numpy()
        # hard cuts: 40-token pieces run alone, no context
        hard = np.concatenate([bilm(batch_to_ids([words[i:i + 40]])).layers[:, 0].numpy()
                               for i in range(0, 230, 40)], axis=1)
    np.testing.assert_allclose(whole, direct, atol=1e-5)
    # with context on both sides, the windows agree with one pass far better than hard cuts
    windowed_error = np.abs(windowed[1:] - whole[1:]).mean()
    hard_error = np.abs(hard[1:] - whole[1:]).mean()
    assert windowed_error < 0.5 * hard_error


def test_pipe_batches_and_n_process(nlp_elmo):
    texts = [TEXT, "Short one.", "", "Another sentence here ."]
    single = [nlp_elmo(t)._.elmo for t in texts]
    piped = [d._.elmo for d in nlp_elmo.pipe(texts, batch_size=2)]
    for a, b in zip(single, piped, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    multi = [d._.elmo for d in nlp_elmo.pipe(texts, n_process=2, batch_size=2)]
    for a, b in zip(single, multi, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_missing_weights_give_clear_errors(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(tmp_path / "nope.hdf5")})
    with pytest.raises(ElmoError, match="nope.hdf5"):
        nlp("hello")
    with pytest.raises(ElmoError, match="nope.hdf5"):
        nlp.initialize()


def test_options_not_matching_weights(tmp_path, weights_dir, fixture_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir / "weights.hdf5"),
                                 "options": str(fixture_dir / "options.json")})
    with pytest.raises(ElmoError, match="do not match the options"):
        nlp.initialize()


def test_url_weights_are_downloaded_once(tmp_path, weights_dir, monkeypatch):
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    config = {"weights": (weights_dir / "weights.hdf5").as_uri(),
              "options": (weights_dir / "options.json").as_uri()}
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config=config)
    from spacy_elmo.bilm.io import sources

    calls = []
    real = sources.download
    monkeypatch.setattr(sources, "download",
                        lambda url, target, kind: (calls.append(url), real(url, target, kind))[1])
    nlp.initialize()
    assert len(list((tmp_path / "cache").rglob("weights.hdf5"))) == 1
    assert sorted(u.rsplit("/", 1)[1] for u in calls) == ["options.json", "weights.hdf5"]
    expected = nlp("hi there")._.elmo
    assert expected.shape == (2, 12)
    # a second pipeline over the same URLs reads the cache: nothing is downloaded again
    again = spacy.blank("en")
    again.add_pipe("elmo", config=config)
    again.initialize()
    assert len(calls) == 2
    np.testing.assert_allclose(again("hi there")._.elmo, expected, atol=1e-6)


def test_fixture_weights_through_the_component(fixture_dir, fixture_sentences):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(fixture_dir / "lm_weights.hdf5"),
                                 "options": str(fixture_dir / "options.json"),
                                 "store_layers": True})
    words = fixture_sentences[0][0].split()
    doc = nlp(Doc(nlp.vocab, words=words))
    import h5py
    with h5py.File(fixture_dir / "lm_embeddings_0.hdf5", "r") as f:
        expected = f["0"][...]
    # the first fixture batch starts from a zero state: deterministic mode reproduces it
    np.testing.assert_allclose(doc._.elmo_layers[2],
                               np.concatenate([expected[0], expected[1]], -1), atol=1e-5)


def test_chinese_text_and_truncation_warning(weights_dir):
    nlp = spacy.blank("zh")  # character segmentation
    nlp.add_pipe("elmo", config={"weights": str(weights_dir)})
    text = "我爱北京天安門！ＡＢＣ１２３，混合English文本🙂。" + "长" * 3000
    doc = nlp(text)
    assert len(doc) > 3000 and doc._.elmo.shape == (len(doc), 12)
    assert np.isfinite(doc._.elmo).all()
    # whitespace-joined long Chinese "words" exceed the 48-byte budget: the user is told
    words = ["中华人民共和国国务院新闻办公室发布会今天举行", "好"]
    with pytest.warns(UserWarning, match="longer than this biLM's budget of 48 UTF-8 bytes"):
        nlp(Doc(nlp.vocab, words=words))


@pytest.mark.parametrize("lang,text,n_tokens", [("en", "The bank raised rates.", 5),
                                                 ("zh", "他去银行取钱。", 7)])
def test_add_pipe_without_config_uses_the_bundled_biLM(lang, text, n_tokens):
    """Offline, with no config: the biLM bundled for the pipeline's language."""
    from spacy_elmo.bilm.io.sources import bundled

    nlp = spacy.blank(lang)
    nlp.add_pipe("elmo")
    doc = nlp(text)
    assert doc._.elmo.shape == (n_tokens, 256)
    # the equal mix (no mix_weights, gamma 1) of the bundled biLM's layers for these tokens
    bilm = load_bilm(bundled(lang)).eval()
    ids = batch_to_ids([[t.text for t in doc]], bilm.options.max_characters_per_token)
    with torch.no_grad():
        layers = bilm(ids).layers[:, 0].numpy()
    np.testing.assert_allclose(doc._.elmo, layers.mean(0), atol=1e-5)


def test_elmo_model_settings_have_one_default():
    """The component's model block and ElmoModel.v1 share build_elmo_model's defaults."""
    import inspect

    from spacy_elmo.pipeline import build_elmo_model

    defaults = {name: p.default for name, p in
                inspect.signature(build_elmo_model).parameters.items()}
    assert defaults["output_cache_mb"] == 0
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo")
    config = dict(nlp.config["components"]["elmo"]["model"])
    assert config.pop("@architectures") == "spacy-elmo.ElmoModel.v1" and config == defaults

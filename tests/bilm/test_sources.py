"""Weights by published name, URL or language, found in one place (`bilm.io.sources.locate`)
for the component, `embed`, `info`, `perplexity` and `pretrain --init-weights`. The
published models are served by a local mirror ($SPACY_ELMO_URL_PREFIX): no network."""

import functools
import http.server
import threading

import numpy as np
import pytest
import spacy
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import PUBLISHED, batch_to_ids, load_bilm, locate, save_bilm
from spacy_elmo.bilm.io.sources import URL_PREFIX_ENV, published_urls
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.perplexity import load_lm
from spacy_elmo.pretrain.trainer import make_bilm

from ..conftest import make_random_bilm

SMALL = "2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway"


class Mirror(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; counts requests; `/short/...` announces more bytes than it sends."""

    requests: list = []

    def do_GET(self):
        self.requests.append(self.path)
        if self.path.startswith("/short/"):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"\x89HDF\r\n\x1a\n" + b"0" * 100)
            return
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A folder laid out as AllenNLP's download area, with a tiny biLM as `small`, and an
    HTTP server for it on 127.0.0.1."""
    root = tmp_path_factory.mktemp("mirror")
    save_bilm(make_random_bilm(), root / "tiny")
    (root / SMALL).parent.mkdir(parents=True)
    (root / "tiny" / "weights.hdf5").rename(root / f"{SMALL}_weights.hdf5")
    (root / "tiny" / "options.json").rename(root / f"{SMALL}_options.json")
    handler = functools.partial(Mirror, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def served(mirror, tmp_path, monkeypatch):
    """The mirror's address as $SPACY_ELMO_URL_PREFIX, and an empty cache."""
    root, address = mirror
    monkeypatch.setenv(URL_PREFIX_ENV, address)
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    Mirror.requests.clear()
    return root


def layers(bilm, sentences=(("The", "bank", "."), ("Hi",))):
    with torch.no_grad():
        return bilm(batch_to_ids([list(s) for s in sentences])).layers.numpy()


def test_published_names_are_allennlps_documented_addresses(monkeypatch):
    monkeypatch.delenv(URL_PREFIX_ENV, raising=False)
    base = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/"
    assert sorted(PUBLISHED) == ["allennlp/medium", "allennlp/original",
                                 "allennlp/original-5.5B", "allennlp/small"]
    assert published_urls("allennlp/original") == (
        base + "2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5",
        base + "2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_options.json")
    assert published_urls("allennlp/original-5.5B")[0] == (
        base + "2x4096_512_2048cnn_2xhighway_5.5B/"
        "elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5")
    assert published_urls("allennlp/medium")[1] == (
        base + "2x2048_256_2048cnn_1xhighway/elmo_2x2048_256_2048cnn_1xhighway_options.json")
    assert published_urls("allennlp/small")[0] == base + SMALL + "_weights.hdf5"
    with pytest.raises(ElmoError, match=r"\[E061\] 'allennlp/large' is neither .* "
                                        r"\['allennlp/medium'"):
        locate("allennlp/large")


def test_a_name_is_downloaded_once_and_loads_the_same_biLM(served):
    expected = layers(load_bilm(served / f"{SMALL}_weights.hdf5"))
    files = locate("allennlp/small")
    assert files.format == "allennlp" and files.weights.name.endswith("_weights.hdf5")
    assert sorted(Mirror.requests) == sorted(f"/{SMALL}_{end}"
                                             for end in ("options.json", "weights.hdf5"))
    np.testing.assert_array_equal(layers(load_bilm("allennlp/small")), expected)
    assert len(Mirror.requests) == 2  # the second load read the cache


def test_file_url_mirror(mirror, tmp_path, monkeypatch):
    root, _ = mirror
    monkeypatch.setenv(URL_PREFIX_ENV, root.as_uri())
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    assert locate("allennlp/small").weights.is_relative_to(tmp_path / "cache")


def test_component_embed_info_perplexity_and_init_weights_take_names(served, tmp_path):
    expected = layers(load_bilm(served / f"{SMALL}_weights.hdf5"), [["The", "bank", "."]])
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": "allennlp/small", "store_layers": True})
    np.testing.assert_allclose(nlp("The bank.")._.elmo_layers, expected[:, 0], atol=1e-6)
    text = tmp_path / "in.txt"
    text.write_text("The bank .\n", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"),
                                 "--weights", "allennlp/small"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["info", "allennlp/small"])
    assert result.exit_code == 0 and "_weights.hdf5" in result.output
    bilm = make_bilm(PretrainConfig(train=[str(text)], init_weights="allennlp/small"))
    np.testing.assert_array_equal(layers(bilm.eval(), [["The", "bank", "."]]), expected)
    with pytest.raises(ElmoError, match=r"\[E115\] .* has no softmax.hdf5"):
        load_lm("allennlp/small")
    assert len(Mirror.requests) == 2


def test_a_weights_url_brings_the_options_beside_it(served, mirror, tmp_path):
    """AllenNLP's `<name>_options.json` beside `<name>_weights.hdf5`, else `options.json`."""
    root, address = mirror
    expected = layers(load_bilm(root / f"{SMALL}_weights.hdf5"))
    files = locate(f"{address}{SMALL}_weights.hdf5")
    assert files.options.name.endswith("_options.json")
    np.testing.assert_array_equal(layers(load_bilm(f"{address}{SMALL}_weights.hdf5")), expected)
    save_bilm(make_random_bilm(), root / "plain")
    assert locate(f"{address}plain/weights.hdf5").options.name == "options.json"


def test_a_weights_url_without_options_beside_it_asks_for_them(served, mirror, tmp_path):
    root, address = mirror
    (root / "lonely").mkdir(exist_ok=True)
    (root / "lonely" / "x_weights.hdf5").write_bytes((root / f"{SMALL}_weights.hdf5")
                                                      .read_bytes())
    with pytest.raises(ElmoError, match=rf"\[E066\] No options for the weights "
                                        rf"'{address}lonely/x_weights.hdf5': "
                                        rf"'{address}lonely/x_options.json' beside it could "
                                        rf"not be fetched \(\[E060\] .*404"):
        locate(f"{address}lonely/x_weights.hdf5")


def test_a_cache_that_cannot_be_made_names_its_variable(mirror, tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("x")
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "a_file" / "cache"))
    with pytest.raises(ElmoError, match=r"\[E009\] Cannot write .* downloads are kept in "
                                        r"\$SPACY_ELMO_CACHE"):
        locate(f"{mirror[1]}{SMALL}_weights.hdf5")


def test_a_home_directory_that_does_not_exist_is_a_missing_file():
    with pytest.raises(ElmoError, match=r"\[E001\] No such file: '~no_such_user_x/model'"):
        load_bilm("~no_such_user_x/model")


def test_an_incomplete_download_keeps_nothing(served, tmp_path):
    prefix = published_urls("allennlp/small")[0].split(SMALL)[0]
    with pytest.raises(ElmoError, match=r"\[E062\] The download of .* stopped after 108 of "
                                        r"1000 bytes"):
        load_bilm(prefix + "short/x_weights.hdf5", served / f"{SMALL}_options.json")
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


def test_a_server_that_says_nothing_times_out_with_e060(tmp_path, monkeypatch):
    """urlopen had no timeout: a server that accepts the connection and never answers hung
    the component's first call for good."""
    import socket

    monkeypatch.setenv("SPACY_ELMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPACY_ELMO_DOWNLOAD_TIMEOUT", "0.5")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/x_weights.hdf5"
        with pytest.raises(ElmoError, match=r"\[E060\] Could not download .*timed out"):
            locate(url, tmp_path / "options.json")
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []
    monkeypatch.setenv("SPACY_ELMO_DOWNLOAD_TIMEOUT", "soon")
    with pytest.raises(ElmoError, match=r"\[E020\] SPACY_ELMO_DOWNLOAD_TIMEOUT must be a "
                                        r"positive number of seconds, got 'soon'"):
        locate(url, tmp_path / "options.json")


def test_an_error_page_is_not_taken_for_weights(served, tmp_path):
    (served / "page_weights.hdf5").write_text("<html>Access denied</html>")
    prefix = published_urls("allennlp/small")[0].split(SMALL)[0]
    with pytest.raises(ElmoError, match=r"\[E063\] .* did not give an HDF5 file .*<html>"):
        locate(prefix + "page_weights.hdf5", served / f"{SMALL}_options.json")
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("lang", ["fr", "de"])
def test_a_language_without_a_bundled_biLM_asks_for_weights(lang):
    nlp = spacy.blank(lang)
    nlp.add_pipe("elmo")
    with pytest.raises(ElmoError, match=rf"\[E064\] No biLM is bundled for the language "
                                        rf"'{lang}' \(bundled: \['en', 'zh'\]\), so `weights` must "
                                        r"be given: e.g. nlp.add_pipe\('elmo', config="):
        nlp.initialize()


def test_the_bundled_default_follows_the_pipelines_language(tmp_path, monkeypatch):
    """A language's bundled biLM is used with no config once BUNDLED names it; English
    keeps its own."""
    from spacy_elmo.bilm.io import sources

    zh_bilm = make_random_bilm()
    save_bilm(zh_bilm, tmp_path / "elmo_zh_test")
    (tmp_path / "elmo_en_small").symlink_to(sources.DATA_DIR / "elmo_en_small")
    monkeypatch.setattr(sources, "DATA_DIR", tmp_path)
    monkeypatch.setattr(sources, "BUNDLED", {**sources.BUNDLED, "zh": "elmo_zh_test"})
    nlp = spacy.blank("zh")
    nlp.add_pipe("elmo")
    nlp.initialize()
    doc = nlp("我爱北京")
    assert len(doc) == 4 and doc._.elmo.shape == (4, zh_bilm.options.output_dim)
    en = spacy.blank("en")
    en.add_pipe("elmo")
    en.initialize()
    assert en("a bank")._.elmo.shape[1] == load_bilm(sources.bundled("en")).options.output_dim
    assert sources.bundled("zh") == tmp_path / "elmo_zh_test"
    with pytest.raises(ElmoError, match=r"\[E064\] .*'fr' \(bundled: \['en', 'zh'\]\)"):
        sources.bundled("fr")

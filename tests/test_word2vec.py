"""spacy_elmo_lab.word2vec: the text word2vec reads is the biLM's, token for token."""

import gzip
import sys
from collections import Counter

import pytest
from spacy_elmo_lab import word2vec

from spacy_elmo.bilm.chars import BOS_TOKEN, EOS_TOKEN
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.batches import TrainStreams
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.corpus import SentenceSource, resolve_files

TITLE = "^= .* =$"


@pytest.fixture(scope="module")
def w2v():
    return word2vec


def _corpus(directory, n_files=3):
    """Small English files (one gzipped), with Wikipedia-style title lines."""
    directory.mkdir(exist_ok=True)
    for f in range(n_files):
        lines = [f"= Article {f} =", f"Doc {f} starts here. It has two sentences.",
                 f"Mr. Smith of file {f} paid $5 for it! Did he? Yes (he did).", "",
                 " ".join(f"w{f}x{i}" for i in range(30)) + " ."]
        text = "\n".join(lines) + "\n"
        if f == 1:
            with gzip.open(directory / f"part{f}.txt.gz", "wt", encoding="utf-8") as out:
                out.write(text)
        else:
            (directory / f"part{f}.txt").write_text(text, encoding="utf-8")
    return [str(directory / "part*")]


def _first_epoch(config, settings):
    """Every sentence the pretraining reader gives in its first epoch."""
    source = SentenceSource(resolve_files(config.train), settings, seed=config.seed)
    sentences = []
    while True:
        sentence = source.next_sentence()
        if source.state.epoch > 0:
            return sentences
        sentences.append(sentence)


def test_one_pass_is_the_pretraining_readers_first_epoch_and_max_tokens_cuts_exactly(
        w2v, tmp_path):
    config = PretrainConfig(train=_corpus(tmp_path / "text"), lang="en", skip_pattern=TITLE,
                            seed=3)
    order = [p.name for p in w2v.file_order(config)]
    assert order != sorted(order)  # the run's shuffled file order, not the sorted one
    got = list(w2v.one_pass(config))
    assert got == _first_epoch(config, config.text_settings())
    assert got[0] == ["Doc", order[0].split(".")[0][-1], "starts", "here", "."]
    assert ["Mr.", "Smith"] == got[2][:2] and ["Yes", "(", "he", "did", ")", "."] in got
    assert not any("=" in s for s in got)
    flat = [t for s in got for t in s]
    for n in (1, 7, len(flat) - 1, len(flat), len(flat) + 5, 0):
        cut = list(w2v.first_tokens(iter(got), n))
        assert [t for s in cut for t in s] == (flat[:n] if n else flat)
        assert all(cut)


def test_chinese_reads_characters(w2v, tmp_path):
    (tmp_path / "zh.txt").write_text("我爱北京。你好！\nABC 12\n", encoding="utf-8")
    config = PretrainConfig(train=[str(tmp_path / "zh.txt")], lang="zh", segmenter="char")
    assert list(w2v.one_pass(config)) == [
        ["我", "爱", "北", "京", "。"], ["你", "好", "！"], ["A", "B", "C", "1", "2"]]


class _Capture:
    """The batch maker's place: keeps the token windows the trainer would turn into
    tensors."""

    def __init__(self):
        self.windows = []

    def make(self, inputs, targets, steps):
        self.windows.append((inputs[0], targets[0]))


@pytest.mark.parametrize("buffer", [0, 4])
def test_pretrain_steps_read_exactly_the_tokens_of_the_runs_batches(w2v, tmp_path, buffer):
    config = PretrainConfig(train=_corpus(tmp_path / "text", n_files=2), lang="whitespace",
                            batch_size=3, window=5, shuffle_buffer=buffer, seed=1)
    steps = 12  # past the end of the first epoch
    got = list(w2v.run_text(config, steps))
    source = SentenceSource(resolve_files(config.train), config.text_settings(),
                            seed=config.seed, buffer_size=buffer)
    capture = _Capture()
    streams = TrainStreams(source, capture, rows=3, window=5)
    for _ in range(steps):
        streams.next_batch()
    seen = []
    for row in range(3):  # every window's inputs, then the last window's last target
        stream = [t for inputs, _ in capture.windows for t in inputs[row]]
        stream.append(capture.windows[-1][1][row][-1])
        seen += [t for t in stream if t not in (BOS_TOKEN, EOS_TOKEN)]
    assert sorted(t for s in got for t in s) == sorted(seen)
    one_pass = sum(len(s) for s in w2v.one_pass(config))
    assert one_pass < len(seen) < 2 * one_pass


def test_missing_gensim_empty_text_and_bad_paths_are_clear_errors(w2v, tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "text")
    monkeypatch.setitem(sys.modules, "gensim", None)
    monkeypatch.setitem(sys.modules, "gensim.models", None)
    config = PretrainConfig(train=corpus, lang="en")
    with pytest.raises(w2v.Word2VecError, match=r'pip install -e "\.\[vectors\]"'):
        w2v.make_vectors(tmp_path / "out", config)
    assert not (tmp_path / "out").exists()  # nothing read or written before the check
    monkeypatch.setattr(w2v, "_import_word2vec", lambda: None)
    (tmp_path / "titles.txt").write_text("= Only =\n= Titles =\n", encoding="utf-8")
    titles = PretrainConfig(train=[str(tmp_path / "titles.txt")], lang="en", skip_pattern=TITLE)
    with pytest.raises(w2v.Word2VecError, match="No tokens read"):
        w2v.make_vectors(tmp_path / "out", titles)
    assert not (tmp_path / "out").exists()  # no empty OUTPUT_DIR of its own making is left
    (tmp_path / "mine").mkdir()
    with pytest.raises(w2v.Word2VecError, match="No tokens read"):
        w2v.make_vectors(tmp_path / "mine", titles)
    assert list((tmp_path / "mine").iterdir()) == []  # the user's own directory stays, empty
    with pytest.raises(ElmoError, match="No corpus files match"):
        w2v.make_vectors(tmp_path / "out", PretrainConfig(train=[str(tmp_path / "nope*")]))
    with pytest.raises(w2v.Word2VecError, match="No training text"):
        w2v.make_vectors(tmp_path / "out", PretrainConfig())


@pytest.mark.parametrize("setting,value,message", [
    ("window", 0, "--window must be a positive integer, got 0"),  # hung gensim's workers
    ("threads", 0, "--threads must be a positive integer, got 0"),  # untrained vectors
    ("dim", -1, "--dim must be a positive integer, got -1"),
    ("epochs", 0, "--epochs must be a positive integer, got 0"),
    ("max_tokens", -5, "--max-tokens must be an integer >= 0"),
    ("pretrain_steps", -3, "--pretrain-steps must be an integer >= 0"),
])
def test_sizes_gensim_cannot_use_are_refused_first(w2v, tmp_path, setting, value, message):
    config = PretrainConfig(train=_corpus(tmp_path / "text"), lang="en")
    with pytest.raises(w2v.Word2VecError, match=message):
        w2v.make_vectors(tmp_path / "out", config, **{setting: value})
    assert not (tmp_path / "out").exists()


def test_word2vec_vectors_are_deterministic_with_one_thread(w2v, tmp_path):
    import gensim  # noqa: F401  (in the test extra)
    config = PretrainConfig(train=_corpus(tmp_path / "text"), lang="en", skip_pattern=TITLE)
    records = [w2v.make_vectors(tmp_path / name, config, dim=8, min_count=2, epochs=2,
                                threads=1, seed=3) for name in ("a", "b")]
    counts = Counter(t for s in w2v.one_pass(config) for t in s)
    assert records[0]["tokens"] == sum(counts.values())
    assert records[0]["vectors"] == sum(n >= 2 for n in counts.values())
    text = (tmp_path / "a" / "vectors.txt").read_text(encoding="utf-8")
    assert text == (tmp_path / "b" / "vectors.txt").read_text(encoding="utf-8")
    assert text.split("\n")[0] == f"{records[0]['vectors']} 8"
    with pytest.raises(w2v.Word2VecError, match="lower --min-count"):
        w2v.make_vectors(tmp_path / "c", config, dim=8, min_count=10_000, threads=1)

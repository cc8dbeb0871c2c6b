import copy
import gzip
import lzma

import pytest

from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.corpus import (
    SentenceSource,
    SourceState,
    TextSettings,
    iter_sentences,
    read_pieces,
    resolve_files,
    split_sentences,
)


def test_plain_gz_xz_globs_and_directories(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("one two\n", encoding="utf-8")
    with gzip.open(tmp_path / "d" / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("three four\n")
    with lzma.open(tmp_path / "c.txt.xz", "wt", encoding="utf-8") as f:
        f.write("five six\n")
    files = resolve_files([str(tmp_path / "d"), str(tmp_path / "*.xz")])
    assert [p.name for p in files] == ["a.txt", "b.txt.gz", "c.txt.xz"]
    sentences = list(iter_sentences(files, TextSettings()))
    assert sentences == [["one", "two"], ["three", "four"], ["five", "six"]]


@pytest.mark.parametrize("suffix", ["txt", "txt.gz"])
def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path, suffix):
    """A file saved with a BOM gave the token '\\ufeffHello' (and a vocabulary entry)."""
    from spacy_elmo.pretrain.vocab import Vocab

    path = tmp_path / f"bom.{suffix}"
    data = "\ufeffHello world .\nA b\n".encode("utf-8")
    if suffix.endswith("gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    plain = tmp_path / "plain.txt"
    plain.write_bytes(b"Hi\nthere\n")  # no BOM: the first line stays whole
    assert list(iter_sentences([path, plain], TextSettings())) == [
        ["Hello", "world", "."], ["A", "b"], ["Hi"], ["there"]]
    pieces = list(read_pieces(path))
    assert pieces == [(b"Hello world .\n", 17), (b"A b\n", 21)]  # offsets of the file
    assert list(read_pieces(path, offset=17)) == [(b"A b\n", 21)]  # a resume's offset
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes("\ufeff<S>\n</S>\n<UNK>\nHello\n".encode("utf-8"))
    assert Vocab.from_file(vocab).words[0] == "<S>"


def test_missing_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(ElmoError, match="No corpus files match"):
        resolve_files([str(tmp_path / "nothing*.txt")])


def test_spacy_tokenizer_and_sentence_split():
    settings = TextSettings(lang="en")
    text = "Dr. Smith went to Washington. He said: \"It's fine!\" Then he left."
    from spacy_elmo.pretrain.corpus import LineToSentences

    sentences = LineToSentences(settings)(text)
    assert sentences[0] == ["Dr.", "Smith", "went", "to", "Washington", "."]
    assert len(sentences) == 3 and sentences[2][-1] == "."
    assert split_sentences("a b. C d".split(), glued=True) == [["a", "b."], ["C", "d"]]
    assert split_sentences("see Mr. Jones".split(), glued=True) == [["see", "Mr.", "Jones"]]
    with pytest.raises(ElmoError, match="no language"):
        TextSettings(lang="xx-nope") and LineToSentences(TextSettings(lang="xx-nope"))


def test_megabyte_line_is_cut_into_bounded_pieces(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text(("word " * 200_000) + "\nshort line\n", encoding="utf-8")
    pieces = list(read_pieces(path, max_bytes=10_000))
    assert max(len(p) for p, _ in pieces) <= 10_000
    assert b"".join(p for p, _ in pieces) == path.read_bytes()
    settings = TextSettings(max_sentence_tokens=50, max_line_bytes=10_000)
    sentences = list(iter_sentences([path], settings))
    assert max(len(s) for s in sentences) <= 50
    assert sum(len(s) for s in sentences) == 200_002


def test_binary_garbage_is_skipped_with_a_count(tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"good line here\n\xff\xfe\x00\x81garbage\n\x00\x00\x00\nmore text\n")
    counter = [0]
    assert list(iter_sentences([path], TextSettings(), counter)) == [
        ["good", "line", "here"], ["more", "text"]]
    assert counter[0] == 2


def test_source_resumes_exactly_and_shards_by_rank(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("".join(f"s{i} a. B{i} c\n" for i in range(30)), encoding="utf-8")
    settings = TextSettings()
    source = SentenceSource([path], settings, seed=1)
    head = [source.next_sentence() for _ in range(7)]
    saved = SourceState(**vars(source.state))
    saved.pending = [list(s) for s in source.state.pending]
    rest = [source.next_sentence() for _ in range(70)]
    resumed = SentenceSource([path], settings, seed=1, state=saved)
    assert [resumed.next_sentence() for _ in range(70)] == rest
    assert head[0] == ["s0", "a."]
    ranks = [SentenceSource([path], settings, rank=r, world_size=2) for r in range(2)]
    firsts = [{tuple(r.next_sentence()) for _ in range(20)} for r in ranks]
    assert not firsts[0] & firsts[1]


def test_shuffle_buffer_mixes_sentences_and_resumes_exactly(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("".join(f"s{i}\n" for i in range(100)), encoding="utf-8")
    source = SentenceSource([path], TextSettings(), seed=3, buffer_size=20, shuffle=False)
    head = [source.next_sentence()[0] for _ in range(60)]
    assert head != [f"s{i}" for i in range(60)]  # not in file order
    assert len(set(head)) == 60  # nothing drawn twice within the first pass
    # a draw comes from the next `buffer_size` unread sentences: no sentence runs far ahead
    assert all(int(w[1:]) < k + 20 for k, w in enumerate(head))
    saved = SourceState(**copy.deepcopy(vars(source.state)))
    rest = [source.next_sentence() for _ in range(150)]
    resumed = SentenceSource([path], TextSettings(), seed=3, buffer_size=20, shuffle=False,
                             state=saved)
    assert [resumed.next_sentence() for _ in range(150)] == rest
    other_seed = SentenceSource([path], TextSettings(), seed=4, buffer_size=20, shuffle=False)
    assert [other_seed.next_sentence()[0] for _ in range(60)] != head


def test_nothing_usable_is_an_error(tmp_path):
    path = tmp_path / "bin.txt"
    path.write_bytes(b"\xff\xfe\x00\x81\n\x00\x00\n")
    source = SentenceSource([path], TextSettings())
    with pytest.raises(ElmoError, match="no usable text"):
        source.next_sentence()


def test_chinese_segmenters_characters_or_jieba_words(tmp_path):
    text = tmp_path / "zh.txt"
    text.write_text("我爱北京天安门。今天天气很好。\n", encoding="utf-8")
    chars = list(iter_sentences([text], TextSettings(lang="zh")))
    assert [t for s in chars for t in s][:4] == ["我", "爱", "北", "京"]
    import jieba  # noqa: F401  (in the test extra; optional for users)
    words = list(iter_sentences([text], TextSettings(lang="zh", segmenter="jieba")))
    flat = [t for s in words for t in s]
    assert "北京" in flat and "天安门" in flat
    assert "".join(flat) == "".join(t for s in chars for t in s)


@pytest.mark.parametrize("lang,segmenter,match", [
    ("en", "jieba", "only spaCy's Chinese tokenizer"),
    ("zh", "pkuseg", "segment the text beforehand"),
])
def test_wrong_segmenter_is_a_clear_error(tmp_path, lang, segmenter, match):
    text = tmp_path / "t.txt"
    text.write_text("text\n", encoding="utf-8")
    with pytest.raises(ElmoError, match=match):
        list(iter_sentences([text], TextSettings(lang=lang, segmenter=segmenter)))

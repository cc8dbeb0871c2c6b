"""The layer probes (spacy_elmo_lab.probe_wsd and .probe_pos) and the run report's probe
columns, on SemCor / unified-framework / CoNLL-U files made up here and tiny biLMs."""

import importlib.util
import json
import lzma
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import pytest
import torch
import typer
from spacy_elmo_lab import probe_pos, probe_wsd
from spacy_elmo_lab.probes import MIX, best_layer, layer_names, probe_data
from typer.testing import CliRunner

from spacy_elmo.errors import ElmoError, ElmoWarning

FINANCE, RIVER, HAPPEN = "bank%1:14:00::", "bank%1:17:01::", "take_place%2:30:00::"
ROOT = Path(__file__).resolve().parents[2]


def semcor_line(tokens: List[str], senses: Dict[int, List[str]]) -> str:
    return json.dumps({"id": "x", "tokens": tokens,
                       "senses": [senses.get(i, []) for i in range(len(tokens))]})


SEMCOR = [  # bank: finance twice (tagged first), river once; one multiword expression
    semcor_line(["the", "bank", "lends", "money"], {1: [FINANCE]}),
    semcor_line(["a", "bank", "of", "rivers"], {1: [RIVER]}),
    semcor_line(["the", "bank", "lends", "cash"], {1: [FINANCE]}),
    semcor_line(["it", "took_place", "today"], {1: [HAPPEN]}),
]


def write_semcor(path: Path, lines: Sequence[str] = SEMCOR) -> Path:
    text = "\n".join(lines) + "\n"
    if path.name.endswith(".xz"):
        path.write_bytes(lzma.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def instance(id_: str, lemma: str, pos: str, text: str) -> str:
    return f'<instance id="{id_}" lemma="{lemma}" pos="{pos}">{text}</instance>'


SENTENCES = [  # (words and instances, gold lines)
    (['<wf lemma="a" pos="DET">a</wf>', instance("d0.s0.t0", "bank", "NOUN", "bank"),
      '<wf lemma="of" pos="ADP">of</wf>', '<wf lemma="water" pos="NOUN">water</wf>'],
     [f"d0.s0.t0 {RIVER}"]),
    (['<wf lemma="the" pos="DET">the</wf>', instance("d0.s1.t0", "bank", "NOUN", "bank"),
      '<wf lemma="lend" pos="VERB">lends</wf>'],
     [f"d0.s1.t0 bank%1:06:00:: {FINANCE}"]),  # two gold keys: either one is right
    (['<wf lemma="it" pos="PRON">it</wf>', instance("d0.s2.t0", "take_place", "VERB",
                                                   "took place"),
      instance("d0.s2.t1", "zebra", "NOUN", "zebra")],  # a lemma SemCor never tags
     [f"d0.s2.t0 {HAPPEN}", "d0.s2.t1 zebra%1:05:00::"]),
]


def write_unified(directory: Path, name: str = "toy", sentences=SENTENCES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = "".join(f'<sentence id="d0.s{i}">' + "".join(nodes) + "</sentence>"
                   for i, (nodes, _) in enumerate(sentences))
    (directory / f"{name}.data.xml").write_text(
        f'<?xml version="1.0" encoding="UTF-8" ?><corpus lang="en"><text id="d0">{body}'
        "</text></corpus>", encoding="utf-8")
    gold = [line for _, lines in sentences for line in lines]
    (directory / f"{name}.gold.key.txt").write_text("\n".join(gold) + "\n", encoding="utf-8")
    return directory


class ContextEmbedder:
    """Made-up 'layers' whose nearest centroids are known: layer 0 is the word itself (one
    vector per word, as a token layer), layer 1 the next word, layer 2 the previous word."""

    def __init__(self) -> None:
        self.vocab: Dict[str, int] = {}

    def _hot(self, word: str) -> np.ndarray:
        out = np.zeros(64, dtype="float32")
        out[self.vocab.setdefault(word, len(self.vocab))] = 1.0
        return out

    def embed(self, sentences):
        for words in sentences:
            padded = ["<S>", *words, "</S>"]
            yield np.stack([np.stack([self._hot(padded[i + 1 + shift]) for i in
                                      range(len(words))]) for shift in (0, 1, -1)])


def test_sense_keys_give_the_lemma_and_coarse_pos():
    assert probe_wsd.sense_lemma("Bank%1:14:00::") == ("bank", "NOUN")
    assert probe_wsd.sense_lemma("run%2:38:00::") == ("run", "VERB")
    assert probe_wsd.sense_lemma("peculiar%5:00:00:specific:00") == ("peculiar", "ADJ")
    assert probe_wsd.sense_lemma("far%4:02:00::") == ("far", "ADV")
    for bad in ("bank", "bank%9:00::", "%1:14:00::", "bank%1"):
        assert probe_wsd.sense_lemma(bad) is None


def test_semcor_splits_multiword_expressions_into_their_words(tmp_path):
    data = probe_wsd.read_semcor(write_semcor(tmp_path / "semcor.jsonl.xz"))
    assert data.sentences[3] == ["it", "took", "place", "today"]
    mwe = data.targets[-1]
    assert (mwe.start, mwe.end, mwe.lemma) == (1, 3, ("take_place", "VERB"))
    model = probe_wsd.SenseModel(data)
    assert model.senses[("bank", "NOUN")] == [FINANCE, RIVER]
    assert model.mfs(("bank", "NOUN")) == FINANCE and model.mfs(("zebra", "NOUN")) is None


def test_most_frequent_sense_ties_go_to_the_sense_tagged_first(tmp_path):
    lines = [semcor_line(["bank"], {0: [RIVER]}), semcor_line(["bank"], {0: [FINANCE]})]
    model = probe_wsd.SenseModel(probe_wsd.read_semcor(write_semcor(tmp_path / "s.jsonl",
                                                                     lines)))
    assert model.mfs(("bank", "NOUN")) == RIVER
    more = lines + [semcor_line(["bank"], {0: [FINANCE]})]
    model = probe_wsd.SenseModel(probe_wsd.read_semcor(write_semcor(tmp_path / "t.jsonl",
                                                                     more)))
    assert model.mfs(("bank", "NOUN")) == FINANCE


@pytest.mark.parametrize("line,code", [
    ("not json", "E220"),
    (json.dumps({"tokens": ["a", "b"], "senses": [[]]}), "E220"),
    (json.dumps({"tokens": "a b", "senses": [[], []]}), "E220"),
    (json.dumps({"senses": [[]]}), "E220"),
    (json.dumps(["a"]), "E220"),
    (json.dumps({"tokens": ["bank"], "senses": [["bank-1"]]}), "E225"),
])
def test_a_line_that_is_no_semcor_sentence_is_a_catalogue_error(tmp_path, line, code):
    path = write_semcor(tmp_path / "s.jsonl", [SEMCOR[0], line])
    with pytest.raises(ElmoError, match=rf"\[{code}\].*[Ll]ine 2"):
        probe_wsd.read_semcor(path)


def test_semcor_without_tags_or_damaged_is_a_catalogue_error(tmp_path):
    with pytest.raises(ElmoError, match=r"\[E226\]"):
        probe_wsd.read_semcor(write_semcor(tmp_path / "s.jsonl", [semcor_line(["a"], {})]))
    broken = tmp_path / "b.jsonl.xz"
    broken.write_bytes(lzma.compress(b'{"tokens": []}\n' * 50)[:30])
    with pytest.raises(ElmoError, match=r"\[E002\]"):
        probe_wsd.read_semcor(broken)


def test_a_unified_set_reads_multiword_instances_and_every_gold_key(tmp_path):
    directory = write_unified(tmp_path / "toy")
    for given in (directory, directory / "toy.data.xml"):
        data = probe_wsd.read_unified(given)
        assert data.name == "toy"
        assert data.sentences[2] == ["it", "took", "place", "zebra"]
        assert [(t.start, t.end) for t in data.targets] == [(1, 2), (1, 2), (1, 3), (3, 4)]
        assert data.targets[1].keys == ("bank%1:06:00::", FINANCE)


def test_a_bad_unified_set_is_a_catalogue_error(tmp_path):
    with pytest.raises(ElmoError, match=r"\[E001\]"):
        probe_wsd.read_unified(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ElmoError, match=r"\[E221\].*0 \*\.data\.xml"):
        probe_wsd.read_unified(tmp_path / "empty")
    directory = write_unified(tmp_path / "toy")
    (directory / "toy.gold.key.txt").rename(directory / "other.txt")
    with pytest.raises(ElmoError, match=r"\[E221\].*toy\.gold\.key\.txt"):
        probe_wsd.read_unified(directory)
    directory = write_unified(tmp_path / "short")
    gold = directory / "toy.gold.key.txt"
    gold.write_text(f"d0.s0.t0 {RIVER}\n", encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E223\].*3 instance.*d0\.s1\.t0"):
        probe_wsd.read_unified(directory)
    gold.write_text("d0.s0.t0\n", encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E224\].*[Ll]ine 1"):
        probe_wsd.read_unified(directory)
    gold.write_text(f"d0.s0.t0 {RIVER}\n", encoding="utf-8")
    (directory / "toy.data.xml").write_text("<corpus><sentence>", encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E002\].*XML"):
        probe_wsd.read_unified(directory)
    no_lemma = [(['<instance id="d0.s0.t0" pos="NOUN">bank</instance>'],
                 [f"d0.s0.t0 {RIVER}"])]
    with pytest.raises(ElmoError, match=r"\[E222\].*d0\.s0\.t0"):
        probe_wsd.read_unified(write_unified(tmp_path / "lemma", sentences=no_lemma))


def test_each_layer_takes_its_nearest_centroid_and_unseen_lemmas_count_wrong(tmp_path):
    semcor = probe_wsd.read_semcor(write_semcor(tmp_path / "semcor.jsonl"))
    data = probe_wsd.read_unified(write_unified(tmp_path / "toy"))
    model = probe_wsd.SenseModel(semcor)
    run = ContextEmbedder()
    model.fit(run, {t.lemma for t in data.targets})  # type: ignore[arg-type]
    assert sorted(model.row) == sorted([FINANCE, RIVER, HAPPEN])
    result = probe_wsd.score(model, data, probe_wsd.instance_vectors(run, data))  # type: ignore
    # "a bank of": the next word (layer 1) and the previous word (layer 2) are the river
    # sentence's; the token layer is the same for both senses, so the first-tagged sense
    # (finance) wins the tie. "the bank lends": finance, one of its two gold keys, on every
    # layer. "took place": its only sense. "zebra": not in SemCor, wrong.
    assert result["instances"] == 4 and result["covered"] == 3 and result["coverage"] == 75
    assert result["layers"] == {"0": 50.0, "1": 75.0, "2": 75.0, MIX: 75.0}
    assert result["mfs"] == 50.0  # finance for both banks, the MWE right, zebra wrong
    assert result["layers_covered"]["1"] == 100.0
    assert result["mfs_covered"] == pytest.approx(200 / 3)


def test_probe_wsd_writes_every_layer_of_each_set(tmp_path, tiny_weights_dir):
    semcor = write_semcor(tmp_path / "semcor.jsonl.xz")
    sets = [write_unified(tmp_path / "dev", "dev"), write_unified(tmp_path / "test", "test")]
    out = tmp_path / "wsd.json"
    result = CliRunner().invoke(_app(probe_wsd.main), [
        str(semcor), *map(str, sets), "--weights", str(tiny_weights_dir), "--output",
        str(out), "--batch-size", "2", "--threads", "1"])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert [s["set"] for s in written["sets"]] == ["dev", "test"]
    for entry in written["sets"]:
        assert list(entry["layers"]) == layer_names(3) == ["0", "1", "2", MIX]
        assert entry["mfs"] == 50.0 and entry["coverage"] == 75.0
        # the token layer is context-free: the same vector for both banks, so every layer-0
        # centroid of bank is the same and the first-tagged sense is always taken
        assert entry["layers"]["0"] == 50.0
        assert all(0 <= v <= 75 for v in entry["layers"].values())
    assert "| dev | 4 | 75.0 | 50.0 |" in result.output and "SemCor MFS" in result.output
    again = CliRunner().invoke(_app(probe_wsd.main), [str(semcor), str(sets[0]), "--weights",
                                                      str(tiny_weights_dir), "--output",
                                                      str(out)])
    assert again.exit_code == 1 and "[E026]" in again.output


def _app(main):
    app = typer.Typer(add_completion=False)
    app.command()(main)
    return app


CONLLU = """# sent_id = 1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2-3\tdog's\t_\t_\t_\t_\t_\t_\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_
3\t's\t's\tPART\tPOS\t_\t2\tcase\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t_\t_
4\truns\trun\tVERB\tVBZ\t_\t2\tdep\t_\t_

1\tCats\tcat\tNOUN\tNNS\t_\t0\troot\t_\t_
"""


def test_conllu_words_skip_ranges_and_empty_nodes(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    data = probe_pos.read_conllu(path)
    assert data.sentences == [["The", "dog", "'s", "runs"], ["Cats"]]
    assert data.tags["xpos"] == ["DT", "NN", "POS", "VBZ", "NNS"]
    assert data.tags["upos"] == ["DET", "NOUN", "PART", "VERB", "NOUN"]
    path.write_text(CONLLU.replace("\tdog\tdog\tNOUN", "\tdog dog NOUN"), encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E227\].*[Ll]ine 4"):
        probe_pos.read_conllu(path)


def test_the_treebank_needs_each_split_once(tmp_path):
    with pytest.raises(ElmoError, match=r"\[E001\]"):
        probe_pos.split_file(tmp_path / "none", "train")
    (tmp_path / "train.conllu").write_text(CONLLU, encoding="utf-8")
    assert probe_pos.split_file(tmp_path, "train").name == "train.conllu"
    with pytest.raises(ElmoError, match=r"\[E228\].*dev"):
        probe_pos.split_file(tmp_path, "dev")
    (tmp_path / "en_x-ud-train.conllu").write_text(CONLLU, encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E228\].*found 2"):
        probe_pos.split_file(tmp_path, "train")


def test_the_linear_probe_learns_a_separable_layer_and_counts_unseen_tags_wrong():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8)).astype("float32") * 4

    def sample(labels):
        x = centres[labels] + rng.normal(size=(len(labels), 8)).astype("float32") * 0.1
        return x, np.asarray(labels, dtype=np.int64)

    train = sample(rng.integers(0, 3, 20000))
    dev = sample(rng.integers(0, 3, 60))
    x_test, y_test = sample(rng.integers(0, 3, 40))
    y_test[:10] = -1  # a tag never seen in training: never right
    torch.manual_seed(0)
    fit = probe_pos.fit_layer(train, dev, (x_test, y_test), 3, [0.0, 1e-4], 3, seed=0)
    assert fit.dev == 100.0 and fit.test == 75.0
    assert fit.l2 in (0.0, 1e-4) and 1 <= fit.epochs <= 3
    def noise(labels):  # a layer that carries nothing about the tags
        return rng.normal(size=(len(labels), 8)).astype("float32"), labels

    assert probe_pos.fit_layer(noise(train[1]), noise(dev[1]), None, 3, [0.0], 2,
                               seed=0).dev < 60


TEST_CONLLU = """1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_
3\t!!\t!!\tPUNCT\tZZ\t_\t2\tpunct\t_\t_

1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tbank\tbank\tNOUN\tNN\t_\t0\troot\t_\t_
"""


def ud_dir(tmp_path: Path) -> Path:
    out = tmp_path / "ud"
    out.mkdir()
    sample = ROOT / "tests" / "fixtures" / "ud_ewt_sample"
    for split in ("train", "dev"):
        (out / f"toy-ud-{split}.conllu").write_bytes((sample / f"{split}.conllu").read_bytes())
    (out / "toy-ud-test.conllu").write_text(TEST_CONLLU, encoding="utf-8")
    return out


def test_probe_pos_writes_every_layer_per_tag_set(tmp_path, tiny_weights_dir):
    ud = ud_dir(tmp_path)
    out = tmp_path / "pos.json"
    with pytest.warns(ElmoWarning, match=r"\[W035\] 1 test token.*XPOS.*ZZ"):
        result = CliRunner().invoke(_app(probe_pos.main), [
            str(ud), "--weights", str(tiny_weights_dir), "--output", str(out), "--epochs", "2",
            "--l2", "0,1e-3", "--threads", "1", "--batch-size", "8"])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    counts = {split: len(probe_pos.read_conllu(ud / f"toy-ud-{split}.conllu").tags["xpos"])
              for split in ("train", "dev")}
    assert written["tokens"] == {**counts, "test": 5}
    for tagset in ("xpos", "upos"):
        layers = written[tagset]["layers"]
        assert list(layers) == ["0", "1", "2", MIX]
        for row in layers.values():
            assert row["l2"] in (0.0, 1e-3) and row["epochs"] in (1, 2)
            assert 0 <= row["dev"] <= 100 and row["test"] in {0.0, 20.0, 40.0, 60.0, 80.0, 100.0}
    # the test token tagged ZZ (never in training) is wrong whatever the layer
    assert all(row["test"] <= 80.0 for row in written["xpos"]["layers"].values())
    assert "| XPOS | test |" in result.output and "| UPOS | dev |" in result.output


def test_probe_pos_bad_settings_are_one_line(tmp_path, tiny_weights_dir):
    ud = ud_dir(tmp_path)
    for args, code in ((["--tagsets", "xpos,lemma"], "E012"), (["--l2", "a"], "E020"),
                       (["--l2", "-1"], "E020"), (["--epochs", "0"], "E020")):
        result = CliRunner().invoke(_app(probe_pos.main), [str(ud), *args])
        assert result.exit_code == 1 and f"[{code}]" in result.output, (args, result.output)
        assert "Traceback" not in result.output
    (ud / "toy-ud-dev.conllu").write_text("# only a comment\n", encoding="utf-8")
    result = CliRunner().invoke(_app(probe_pos.main), [str(ud), "--weights",
                                                       str(tiny_weights_dir)])
    assert result.exit_code == 1 and "[E229]" in result.output


def test_probe_data_and_best_layer(tmp_path):
    with pytest.raises(ElmoError, match=r"\[E001\].*semcor30"):
        probe_data(tmp_path, ("semcor",))
    assert best_layer({"0": 41.8, "1": 52.8, "2": 54.7, MIX: 52.8}) == "54.7 (layer 2)"


def test_the_run_report_probes_each_snapshot_once_and_lists_the_columns(tmp_path):
    from spacy_elmo.pretrain.trainer import train

    from ..pretrain.conftest import tiny_config

    spec = importlib.util.spec_from_file_location("run_report",
                                                  ROOT / "benchmarks" / "run_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    train(tiny_config(tmp_path, max_steps=2, eval_every=2, snapshot_every=2), progress=False)
    data = tmp_path / "data"
    (data / "wsd").mkdir(parents=True)
    write_semcor(data / "wsd" / "semcor30.jsonl.xz")
    write_unified(data / "wsd" / "semeval2007", "semeval2007")
    ud = ud_dir(tmp_path)
    ud.rename(data / "ud_en_ewt")
    snap = tmp_path / "run" / "snapshots" / "step_0000002"
    assert "WSD" not in report.report(tmp_path / "run", None)  # nothing probed yet
    text = report.report(tmp_path / "run", None, probes=data)
    wsd = json.loads((snap / "probe_wsd.json").read_text())
    pos = json.loads((snap / "probe_pos.json").read_text())
    assert list(pos) == ["tokens", "xpos"] and "test" not in pos["tokens"]
    line = next(x for x in text.splitlines() if x.startswith("| step_0000002 |"))
    dev_pos = {k: v["dev"] for k, v in pos["xpos"]["layers"].items()}
    assert line.endswith(f"| - | - | {best_layer(wsd['layers'])} | {best_layer(dev_pos)} |")
    assert "most frequent sense: 50.0" in text
    # kept: without the data the same row is listed, read from the snapshot
    (snap / "probe_pos.json").write_text(json.dumps({"xpos": {"layers": {
        "0": {"dev": 1.0}, "1": {"dev": 2.0}}}}))
    assert report.report(tmp_path / "run", None).count("| step_0000002 |") == 1
    assert "| 2.0 (layer 1) |" in report.report(tmp_path / "run", None, probes=data)
    with pytest.raises(ElmoError, match=r"\[E001\]"):
        report.report(tmp_path / "run", None, probes=tmp_path / "nowhere")

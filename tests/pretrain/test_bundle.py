"""spacy_elmo_lab.bundle: a run becomes a language's bundled biLM with its model card."""

import json
import re

import pytest
import typer
from spacy_elmo_lab import bundle as bundle_module

from spacy_elmo.bilm import load_bilm
from spacy_elmo.pretrain.rundir import read_metrics
from spacy_elmo.pretrain.trainer import train

from ..test_project import ROOT
from .conftest import tiny_config


@pytest.fixture(scope="module")
def bundle():
    return bundle_module


@pytest.fixture(scope="module")
def report():
    """benchmarks/run_report.py as a module (a script, not in a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_report",
                                                  ROOT / "benchmarks" / "run_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundle_writes_the_checkpoints_biLM_and_a_card_with_its_figures(tmp_path, bundle):
    result = train(tiny_config(tmp_path, max_steps=4, eval_every=4), progress=False)
    out = tmp_path / "elmo_zh_small"
    bundle.main(tmp_path / "run", lang="zh", snapshot=None, output=out, wic=None,
                perplexity=[f"held-out text={tmp_path / 'corpus.txt'}"])
    bilm = load_bilm(out)
    for (name, a), b in zip(bilm.named_parameters(), result.model.bilm.parameters(), strict=True):
        assert a.detach().equal(b.detach()), name
    card = (out / "README.md").read_text(encoding="utf-8")
    dev = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()
           if '"dev"' in line][-1]
    assert card.startswith("# elmo_zh_small: the bundled Chinese biLM\n")
    assert "CC BY-SA 4.0" in card
    assert f"| dev perplexity | {dev['dev_ppl']:.1f} at step 4" in card
    # the dev text measured again through the export gives the logged dev perplexity
    assert re.search(rf"\| perplexity on held-out text \| {dev['dev_ppl']:.1f} per token, "
                     rf"[0-9.]+ per character \({dev['dev_tokens']:,} tokens of corpus.txt\) \|",
                     card)
    assert not (out / "softmax.hdf5").exists()
    assert out.stat().st_mode & 0o777 == 0o755  # readable by every user of the package
    # the hardware the run recorded when it started, not the bundling machine's guess
    start = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["type"] == "start"]
    assert len(start) == 1
    assert (f"h of training steps; {start[0]['hardware']}, {start[0]['threads']} thread(s), "
            "fp32 |") in card


def test_bundle_history_is_a_row_before_the_runs_own_training(tmp_path, bundle):
    train(tiny_config(tmp_path, max_steps=2, eval_every=2), progress=False)
    out = tmp_path / "elmo_en_small"
    bundle.main(tmp_path / "run", lang="en", snapshot=None, output=out, wic=None,
                perplexity=[], history="two earlier legs, 158,820 steps",
                data="Wikipedia with a quarter of the laws")
    rows = [line for line in (out / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith(("| training data |", "| earlier training |", "| training |"))]
    assert rows[0] == "| training data | Wikipedia with a quarter of the laws |"
    assert rows[1] == "| earlier training | two earlier legs, 158,820 steps |"
    assert rows[2].startswith("| training | 2 steps of ")



def test_bundle_earlier_steps_and_tokens_give_the_whole_training(tmp_path, bundle):
    train(tiny_config(tmp_path, max_steps=2, eval_every=2), progress=False)
    out = tmp_path / "elmo_en_small"
    bundle.main(tmp_path / "run", lang="en", snapshot=None, output=out, wic=None,
                perplexity=[], history="two earlier legs", earlier_steps=208_998,
                earlier_tokens=267_000_000)
    card = (out / "README.md").read_text(encoding="utf-8")
    tokens = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1]
                        )["tokens"]
    total = [line for line in card.splitlines() if line.startswith("| training in all |")]
    assert total == [f"| training in all | 209,000 steps, {(267e6 + tokens) / 1e6:.1f}M tokens "
                     "(the earlier training and this run's) |"]
    for steps, tokens_ in ((5, None), (None, 5), (-1, 5)):
        with pytest.raises(typer.BadParameter, match="--earlier"):
            bundle.main(tmp_path / "run", lang="en", snapshot=None, output=out, wic=None,
                        perplexity=[], earlier_steps=steps, earlier_tokens=tokens_)
    assert (out / "README.md").read_text(encoding="utf-8") == card  # refused: kept

def test_a_failed_bundle_keeps_the_bundled_biLM(tmp_path, bundle):
    """A snapshot without dev.json: the weights were copied over the bundled biLM, then
    the script failed, leaving them beside the old model card."""
    train(tiny_config(tmp_path, max_steps=2, eval_every=2), progress=False)
    out = tmp_path / "data" / "elmo_zh_small"
    out.mkdir(parents=True)
    for name, text in (("weights.hdf5", "old weights"), ("README.md", "old card")):
        (out / name).write_text(text)
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for name in ("options.json", "weights.hdf5"):
        (snapshot / name).write_bytes((tmp_path / "run" / "model" / name).read_bytes())
    with pytest.raises(FileNotFoundError, match="dev.json"):
        bundle.main(tmp_path / "run", lang="zh", snapshot=snapshot, output=out, wic=None,
                    perplexity=[])
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "weights.hdf5": "old weights", "README.md": "old card"}
    assert [p.name for p in out.parent.iterdir()] == ["elmo_zh_small"]  # no staging left
    bundle.main(tmp_path / "run", lang="zh", snapshot=None, output=out, wic=None,
                perplexity=[])
    assert load_bilm(out) is not None and "old card" not in (out / "README.md").read_text()
    assert sorted(p.name for p in out.parent.iterdir()) == ["elmo_zh_small"]


def test_bundle_refuses_an_unknown_language(tmp_path, bundle):
    import typer

    with pytest.raises(typer.BadParameter, match="en or zh|\\['en', 'zh'\\]"):
        bundle.main(tmp_path, lang="fr", snapshot=None, output=None, wic=None, perplexity=[])


def test_run_report_lists_each_dev_evaluation_beside_a_bundled_cards_curve(tmp_path, bundle,
                                                                          report):
    train(tiny_config(tmp_path, max_steps=4, eval_every=2), progress=False)
    bundle.main(tmp_path / "run", lang="en", snapshot=None, output=tmp_path / "card",
                wic=None, perplexity=[])
    curve = report.card_curve(tmp_path / "card" / "README.md")
    dev = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()
           if '"dev"' in line]
    assert curve == {r["step"]: pytest.approx(round(r["dev_ppl"], 1)) for r in dev}
    text = report.report(tmp_path / "run", "spacy-elmo pretrain ...", tmp_path / "card" /
                         "README.md")
    assert "step 4 of 4" in text and "spacy-elmo pretrain --output" in text
    row = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert row.endswith(f"| {dev[0]['dev_ppl']:.1f} |")
    # a run continuing another's export: its steps also as the whole run's, no card curve
    text = report.report(tmp_path / "run", None, tmp_path / "card" / "README.md",
                         step_offset=1000)
    assert "| step of the whole run |" in text and "at that step" not in text
    row = next(line for line in text.splitlines() if line.startswith("| 2 |"))
    assert row.endswith("| 1,002 |")
    last = max(curve)
    assert (f"dev perplexity {curve[last]:.1f} at its step {last:,} (its model card)"
            in text)


def test_run_report_probes_each_snapshot_on_wic_once_and_lists_it(tmp_path, bundle, report):
    from ..test_wic_probe import ROWS, write_wic

    train(tiny_config(tmp_path, max_steps=4, eval_every=2, snapshot_every=2), progress=False)
    write_wic(tmp_path / "wic", "train", ROWS)
    write_wic(tmp_path / "wic", "dev", ROWS[:2])
    snapshots = sorted((tmp_path / "run" / "snapshots").iterdir())
    assert [s.name for s in snapshots] == ["step_0000002", "step_0000004"]
    assert "WiC" not in report.report(tmp_path / "run", None)  # nothing probed yet
    text = report.report(tmp_path / "run", None, wic=tmp_path / "wic")
    for snap in snapshots:
        rows = json.loads((snap / "wic.json").read_text())
        chosen = max(rows, key=lambda r: r["train"])
        dev = json.loads((snap / "dev.json").read_text())
        line = next(x for x in text.splitlines() if x.startswith(f"| {snap.name} |"))
        assert f"| {dev['dev_ppl']:.1f} | {chosen['dev']:.1f} (layer {chosen['layer']}) |" in line
    # kept: a report without the WiC directory lists the same rows without probing again
    assert report.report(tmp_path / "run", None).count("| step_000000") == 2
    # a compared bundled biLM gets its own row, probed once into the run directory
    bundle.main(tmp_path / "run", lang="en", snapshot=None, output=tmp_path / "card",
                wic=None, perplexity=[])
    card = tmp_path / "card" / "README.md"
    text = report.report(tmp_path / "run", None, card, wic=tmp_path / "wic")
    rows = json.loads(next((tmp_path / "run").glob("wic_card_*.json")).read_text())
    line = next(x for x in text.splitlines() if x.startswith("| card (compared) |"))
    assert f"{max(rows, key=lambda r: r['train'])['dev']:.1f} (layer" in line


def test_bundle_writes_into_the_librarys_data_directory_by_default(tmp_path, bundle,
                                                                    monkeypatch):
    from spacy_elmo.bilm.io import sources
    assert bundle.DATA_DIR == sources.DATA_DIR == ROOT / "spacy_elmo" / "data"
    monkeypatch.setattr(bundle, "DATA_DIR", tmp_path / "data")
    train(tiny_config(tmp_path, max_steps=2, eval_every=2), progress=False)
    bundle.main(tmp_path / "run", lang="zh", snapshot=None, output=None, wic=None,
                perplexity=[])
    assert (tmp_path / "data" / "elmo_zh_small" / "weights.hdf5").is_file()


def test_run_report_gives_each_snapshots_perplexity_on_other_text_once(tmp_path, bundle, report):
    train(tiny_config(tmp_path, max_steps=4, eval_every=2, snapshot_every=2), progress=False)
    text_file = tmp_path / "corpus.txt"  # the dev text: each snapshot's own dev perplexity
    bundle.main(tmp_path / "run", lang="zh", snapshot=None, output=tmp_path / "card",
                wic=None, perplexity=[f"news={text_file}"])
    text = report.report(tmp_path / "run", None, tmp_path / "card" / "README.md",
                         perplexity=[f"news={text_file}"])
    assert "## Perplexity of the snapshots on other text" in text
    card = (tmp_path / "card" / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"\| perplexity on news \| [0-9.]+ per token, ([0-9.]+) per character",
                       card)[1]
    assert f"| card (compared) | {stated} |" in text
    for snap in sorted((tmp_path / "run" / "snapshots").iterdir()):
        kept = json.loads((snap / "perplexity_news.json").read_text())
        assert kept["text"] == str(text_file)
        assert f"| {snap.name} | {kept['ppl_per_char']:.1f} |" in text
    last = sorted((tmp_path / "run" / "snapshots").iterdir())[-1]
    assert f"| {last.name} | {stated} |" in text  # the card measures the last one too
    (last / "perplexity_news.json").write_text(json.dumps({"text": "x", "ppl_per_char": 7.0}))
    again = report.report(tmp_path / "run", None, perplexity=[f"news={text_file}"])
    assert f"| {last.name} | 7.0 |" in again  # read, not measured again

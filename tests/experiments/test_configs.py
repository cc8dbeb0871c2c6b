"""The composed configs: every config the table runner composes, for every cell of every
table, resolves to a pipeline without training; variants differ from their base only by
their overrides; static vectors without vectors stop with E090."""

import warnings
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.cli._util import parse_config_overrides
from spacy.training.initialize import init_nlp
from spacy.util import load_config, load_model_from_config, registry
from spacy_elmo_lab.table import TABLES, Cell, make_cells
from spacy_elmo_lab.tiny import toy_docs

from spacy_elmo.errors import ElmoError

ROOT = Path(__file__).resolve().parents[2]


def _overrides(cell: Cell, **paths) -> dict:
    """The cell's command-line overrides as `spacy train` reads them (--output and the
    device aside), each --paths.X in `paths` replaced (e.g. by real weights)."""
    args = cell.command[cell.command.index("--output") + 2:]
    args = args[:args.index("--gpu-id")] + args[args.index("--gpu-id") + 2:]
    overrides = parse_config_overrides(args)
    overrides.update({f"paths.{k}": v for k, v in paths.items()
                      if f"paths.{k}" in overrides})
    return overrides


def _all_cells(weights: str):
    values = {"weights": weights, "news_weights": weights, "jieba_weights": weights,
              "w2v": "vectors/w2v"}
    budget = ["--training.max_steps", "3000", "--training.eval_frequency", "500",
              "--gpu-id", "-1"]
    return [cell for name, table in TABLES.items()
            for cell in make_cells(name, list(table), None, [0], values, budget)]


def test_the_tables_compose_from_at_most_twelve_config_files():
    """NER and text classification from at most 12 `spacy train` configs; the UD table
    from its own 3 (CNN, ELMo, [features ; ELMo]); span categorization, in no table, from
    its own (tests/pipeline/test_spancat_config.py)."""
    cells = _all_cells("W")
    assert {c.task for c in cells} == {t for table in TABLES.values() for t in table}
    # the NER and textcat cells (with the biLSTM rows) and the UD rows (with theirs), seed 0
    assert len(cells) == 83 + 9
    used = {str(c.needs[0]) for c in cells}
    shipped = {f"configs/{p.name}" for p in (ROOT / "configs").glob("*.cfg")}
    assert used <= shipped
    train = {p for p in shipped if not p.startswith("configs/pretrain_")}
    ud = {p for p in train if p.startswith("configs/ud_")}
    assert ud == {"configs/ud_cnn.cfg", "configs/ud_elmo.cfg", "configs/ud_elmo_concat.cfg"}
    outside = {"configs/spancat_elmo.cfg"}
    assert outside <= train and not outside & used
    assert len(train - ud - outside) <= 12


def test_every_cell_config_resolves_without_training(tiny_weights_dir, monkeypatch):
    """spaCy's own path up to training: load the config with the cell's overrides, build and
    validate the pipeline, resolve [training] and [initialize] and run its before_init
    check (static vectors switched on need --paths.vectors: every cell gives them)."""
    pytest.importorskip("jieba")
    monkeypatch.chdir(ROOT)
    for cell in _all_cells(str(tiny_weights_dir)):
        overrides = _overrides(cell, train="corpus/x/train.spacy", dev="corpus/x/dev.spacy",
                               vectors="vectors/w2v", init_tok2vec="pretrain/model.bin")
        config = load_config(cell.needs[0], overrides=overrides)
        nlp = load_model_from_config(config, auto_fill=True, validate=True)
        filled = nlp.config.interpolate()
        assert filled["nlp"]["lang"] == ("zh" if cell.task in TABLES["zh"] else "en"), cell.run
        assert filled["system"]["seed"] == cell.seed
        assert filled["training"]["max_steps"] == 3000
        registry.resolve(filled["training"])
        init = registry.resolve(filled["initialize"])
        table = next(name for name, tasks in TABLES.items() if cell.task in tasks)
        kind = TABLES[table][cell.task].kind
        components = UD_COMPONENTS if kind == "ud" else [kind]
        assert set(components) <= set(nlp.pipe_names), cell.run
        if "w2v" in cell.row:
            assert filled["initialize"]["vectors"] == "vectors/w2v", cell.run
            assert init["before_init"] is not None
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                init["before_init"](nlp)  # vectors given and read: no error, no warning
        if cell.row == "elmo_ft":
            assert filled["components"][kind]["model"]["tok2vec"]["grad_factor"] == 1.0


UD_COMPONENTS = ["tagger", "morphologizer", "parser", "trainable_lemmatizer"]


def _flat(config, prefix=""):
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _composed(cell):
    return _flat(load_config(ROOT / cell.needs[0], overrides=_overrides(cell),
                             interpolate=False))


def test_a_ud_row_sets_the_encoder_of_every_listener():
    """The UD pipeline's four components each listen with their own encoder: a biLSTM row
    (and ELMo again at the output) reaches all four, and its other settings stay the
    row's; the CNN baseline's one shared tok2vec takes the biLSTM itself."""
    by_row = {c.row: _composed(c) for c in _all_cells("W") if c.task == "ud"}
    for row, at_output in [("elmo_bilstm", False), ("elmo_bilstm_out", True),
                           ("elmo_concat_bilstm", False)]:
        for name in UD_COMPONENTS:
            tok2vec = f"components.{name}.model.tok2vec."
            assert by_row[row][tok2vec + "encode.kind"] == "bilstm", (row, name)
            assert by_row[row][tok2vec + "elmo_at_output"] is at_output, (row, name)
        base = by_row[row.replace("_bilstm", "").replace("_out", "")]
        differing = {k for k in base if base[k] != by_row[row][k]}
        assert len(differing) == 4 * (1 + at_output), row
    cnn = by_row["cnnw2vall_bilstm"]
    assert cnn["components.tok2vec.model.encode.kind"] == "bilstm"
    assert cnn["components.tok2vec.model.embed.include_static_vectors"] is True


def test_a_variant_differs_from_its_row_only_by_its_overrides():
    """Word2vec rows are their row plus the vectors, Chinese rows their English row in
    Chinese."""
    by_run = {(c.task, c.row): c for c in _all_cells("W")}
    pairs = [(("ner", "cnn"), ("ner", "cnnw2vall")), (("sst5", "cnn"), ("sst5", "cnnw2vall")),
             (("ner", "elmo_concat"), ("ner", "elmo_concat_w2v")),
             (("thucnews", "cnn"), ("thucnews", "cnnw2v")), (("msra", "cnn"), ("msra", "cnnw2v"))]
    for base, variant in pairs:
        a, b = _composed(by_run[base]), _composed(by_run[variant])
        differing = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        differing -= {"paths.vectors"}
        assert len(differing) == 1 and differing.pop().endswith("include_static_vectors")
        assert a["initialize.vectors"] == b["initialize.vectors"] == "${paths.vectors}"
    for en, zh in [(("ner", "elmo_concat"), ("msra", "elmo_concat")),
                   (("sst5", "cnn"), ("thucnews", "cnn"))]:
        a, b = _composed(by_run[en]), _composed(by_run[zh])
        differing = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        assert differing - {"paths.train", "paths.dev"} == {"nlp.lang"}


@pytest.mark.parametrize("config_name,layer", [
    ("ner_cnn.cfg", "components.tok2vec.model.embed.include_static_vectors"),
    ("textcat_elmo_concat.cfg", "components.textcat.model.tok2vec.features."
                                "include_static_vectors")])
def test_static_vectors_without_vectors_stop_with_a_message(config_name, layer, toy_corpus,
                                                            tiny_weights_dir):
    """Issue 31: spaCy failed inside StaticVectors with 'IndexError: index -1 is out of
    bounds'; now the config's before_init check says to pass --paths.vectors."""
    config = load_config(ROOT / "configs" / config_name, overrides={
        layer: True, "paths.train": str(toy_corpus / "train.spacy"),
        "paths.dev": str(toy_corpus / "dev.spacy"), **(
            {"paths.elmo_weights": str(tiny_weights_dir)} if "elmo" in config_name else {})})
    with pytest.raises(ElmoError, match=r"\[E090\].*--paths.vectors"):
        init_nlp(config)


def test_vectors_that_no_layer_reads_are_a_warning(tmp_path, toy_corpus):
    nlp = spacy.blank("en")
    for doc in toy_docs(nlp, 2):
        for token in doc:
            nlp.vocab.set_vector(token.text, numpy.array([1.0, 2.0], dtype="f"))
    nlp.to_disk(tmp_path / "vectors")
    config = load_config(ROOT / "configs" / "ner_cnn.cfg", overrides={
        "paths.vectors": str(tmp_path / "vectors"),
        "paths.train": str(toy_corpus / "train.spacy"),
        "paths.dev": str(toy_corpus / "dev.spacy")})
    with pytest.warns(UserWarning, match=r"\[W020\].*include_static_vectors true"):
        init_nlp(config)


def test_the_check_is_an_entry_point_so_plain_spacy_train_finds_it():
    """configs/ner_cnn.cfg names no spacy-elmo component: `spacy train` finds the callback
    through setup.cfg's spacy_callbacks entry point, which names the registered function."""
    import configparser
    import importlib

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    lines = setup["options.entry_points"]["spacy_callbacks"].strip().splitlines()
    assert len(lines) == 1
    name, target = (part.strip() for part in lines[0].split("="))
    module, attr = target.split(":")
    function = getattr(importlib.import_module(module), attr)
    assert registry.callbacks.get(name) is function
    assert f'@callbacks = "{name}"' in (ROOT / "configs" / "ner_cnn.cfg").read_text()

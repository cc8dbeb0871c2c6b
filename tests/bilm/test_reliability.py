"""Nothing silently wrong when weights are read, downloaded or embedded (issue 31): non-finite
weights, truncated downloads, a byte order mark, '-' as OUTPUT, a pretraining run given as
a biLM, warnings printed as their message alone."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_elmo.bilm import load_bilm, save_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.bilm.io.sources import BUNDLED, DATA_DIR, fetch
from spacy_elmo.cli import app
from spacy_elmo.embed.files import read_lines
from spacy_elmo.embed.job import embed_file
from spacy_elmo.errors import ElmoError, ElmoWarning, Warnings, warn
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.trainer import make_bilm

from ..conftest import make_random_bilm
from .test_efml import EFML_DIR

runner = CliRunner()
V1_0_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "v1_0" / "pretrain" / "run"


def words(result):
    return " ".join(result.output.split())


@pytest.fixture
def nan_weights(tmp_path):
    """A tiny biLM whose weights.hdf5 holds 5 NaN in 'CNN_proj/W_proj' and an infinity in
    'char_embed' (as a file with bytes overwritten by 0xFF would)."""
    directory = tmp_path / "nan"
    save_bilm(make_random_bilm(), directory)
    with h5py.File(directory / "weights.hdf5", "r+") as f:
        proj = f["CNN_proj/W_proj"][...]
        proj.reshape(-1)[:5] = np.nan
        f["CNN_proj/W_proj"][...] = proj
        embed = f["char_embed"][...]
        embed[3, 1] = np.inf
        f["char_embed"][...] = embed
    return directory


NON_FINITE = (r"\[E046\] '.*weights.hdf5' holds 1 non-finite value\(s\) \(NaN or infinity\) "
              r"in 'char_embed' and in 1 other array\(s\): .* Download or export the weights "
              r"again")


def test_non_finite_weights_are_refused_when_read(nan_weights):
    with pytest.raises(ElmoError, match=NON_FINITE):
        load_bilm(nan_weights)


def test_non_finite_weights_stop_info_and_embed(nan_weights, tmp_path):
    result = runner.invoke(app, ["info", str(nan_weights)])
    assert result.exit_code == 1 and "[E046]" in words(result)
    assert "'char_embed'" in words(result)
    text = tmp_path / "in.txt"
    text.write_text("The bank .\n", encoding="utf-8")
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "out.hdf5"),
                                 "--weights", str(nan_weights)])
    assert result.exit_code == 1 and "[E046]" in words(result)
    assert not (tmp_path / "out.hdf5").exists()


def test_non_finite_weights_stop_pretraining_from_them(nan_weights, tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("a b c .\n" * 10, encoding="utf-8")
    with pytest.raises(ElmoError, match=NON_FINITE):
        make_bilm(PretrainConfig(train=[str(text)], init_weights=str(nan_weights)))


def test_a_non_finite_efml_tensor_is_refused(tmp_path):
    import torch

    model = shutil.copytree(EFML_DIR / "model", tmp_path / "model")
    state = torch.load(model / "encoder.pkl", weights_only=True)
    name = next(iter(state))
    state[name].view(-1)[:2] = float("nan")
    torch.save(state, model / "encoder.pkl")
    with pytest.raises(ElmoError, match=rf"\[E046\] .*encoder.pkl' holds 2 non-finite "
                                        rf"value\(s\) .* in '{name}'"):
        load_bilm(model)


# downloads -------------------------------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(folder))
    return folder


def test_a_truncated_download_is_not_cached(tmp_path, cache):
    """A weights file cut short (its HDF5 signature intact, its length as served) was kept
    for good: the same command failed after the source was fixed."""
    source = tmp_path / "served"
    save_bilm(make_random_bilm(), source)
    whole = (source / "weights.hdf5").read_bytes()
    (source / "weights.hdf5").write_bytes(whole[: len(whole) // 2])
    url = (source / "weights.hdf5").as_uri()
    with pytest.raises(ElmoError, match=r"\[E067\] .* was downloaded completely but is not a "
                                        r"readable ELMo weights file .* nothing was kept in the "
                                        rf"cache \('{cache}/[0-9a-f]+/weights.hdf5'\)"):
        load_bilm(url)
    assert list(cache.iterdir()) == []  # no file, no folder
    (source / "weights.hdf5").write_bytes(whole)
    assert load_bilm(url).options.projection_dim == make_random_bilm().options.projection_dim
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == ["options.json",
                                                                       "weights.hdf5"]


def test_an_hdf5_download_that_is_no_elmo_file_is_not_cached(tmp_path, cache):
    other = tmp_path / "other_weights.hdf5"
    with h5py.File(other, "w") as f:
        f.create_dataset("something", data=np.zeros(3))
    with pytest.raises(ElmoError, match=r"\[E067\] .*no dataset 'char_embed'"):
        fetch(other.as_uri())
    assert list(cache.iterdir()) == []


def test_options_that_are_no_json_object_are_not_cached(tmp_path, cache):
    options = tmp_path / "options.json"
    options.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E067\] .* not a JSON options file \(the top level "
                                        r"is not an object\); nothing was kept in the cache"):
        fetch(options.as_uri(), "options")
    assert list(cache.iterdir()) == []


def test_a_failed_download_leaves_no_empty_cache_folder(tmp_path, cache):
    with pytest.raises(ElmoError, match=rf"\[E060\] Could not download .* into the cache "
                                        rf"\('{cache}/"):
        fetch((tmp_path / "missing_weights.hdf5").as_uri())
    assert list(cache.iterdir()) == []


# embed -----------------------------------------------------------------------------------
def test_a_byte_order_mark_is_no_part_of_the_first_token(tmp_path, tiny_weights_dir):
    with_bom = tmp_path / "bom.txt"
    with_bom.write_bytes("\ufeffThe bank .\nThe bank .\n".encode("utf-8"))
    assert list(read_lines(with_bom)) == ["The bank .", "The bank ."]
    embed_file(with_bom, tmp_path / "out.hdf5", weights=tiny_weights_dir, progress=False)
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        np.testing.assert_array_equal(out["0"][...], out["1"][...])
        assert json.loads(out["sentence_to_index"][0]) == {"The bank .": "1"}


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_standard_output_is_refused_as_embed_output(tmp_path, tiny_weights_dir, monkeypatch,
                                                    overwrite):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("Hi .\n", encoding="utf-8")
    result = runner.invoke(app, ["embed", "in.txt", "-", "--weights", str(tiny_weights_dir),
                                 *overwrite])
    assert result.exit_code == 1
    assert "[E070] '-' (standard output) is not supported for OUTPUT" in words(result)
    assert "already exists" not in words(result)
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("lang", sorted(BUNDLED))
def test_embed_without_weights_uses_the_bundled_biLM_of_its_language(tmp_path, lang):
    if not (DATA_DIR / BUNDLED[lang] / "weights.hdf5").exists():
        pytest.skip("bundled biLM not installed")
    text = tmp_path / "in.txt"
    text.write_text("The bank .\n", encoding="utf-8")
    args = ["embed", str(text), str(tmp_path / "out.hdf5"), "--layers", "top"]
    result = runner.invoke(app, args + ([] if lang == "en" else ["--lang", lang]))
    assert result.exit_code == 0, result.output
    expected = next(Embedder(load_bilm(None, lang=lang), layers="top").embed([["The", "bank",
                                                                               "."]]))
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        np.testing.assert_array_equal(out["0"][...], expected)


def test_embed_refuses_a_language_without_a_bundled_biLM(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("Hi .\n", encoding="utf-8")
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"), "--lang", "fr"])
    assert result.exit_code == 1 and "[E064] No biLM is bundled for the language 'fr'" in \
        words(result)


# a pretraining run given as a biLM -------------------------------------------------------
@pytest.fixture
def run_dir(tmp_path):
    """The 1.0 fixture's run, without its export."""
    return shutil.copytree(V1_0_RUN, tmp_path / "run", ignore=shutil.ignore_patterns("model"))


def test_info_on_a_pretraining_run_says_to_export_it(run_dir, tmp_path):
    result = runner.invoke(app, ["info", str(run_dir)])
    assert result.exit_code == 1
    message = words(result)
    assert "[E045]" in message and "is a pretraining run directory of `spacy-elmo pretrain`" \
        in message
    assert f"`spacy-elmo export {run_dir} OUT`" in message and "config_path" not in message
    save_bilm(make_random_bilm(), run_dir / "model")
    (run_dir / "model" / "weights.hdf5").touch()
    result = runner.invoke(app, ["info", str(run_dir)])
    assert f"or use '{run_dir / 'model'}', which the run exported" in words(result)


@pytest.mark.parametrize("name", ["checkpoint.pt", "config.json"])
def test_a_run_file_as_weights_says_to_export_the_run(run_dir, tmp_path, name):
    text = tmp_path / "in.txt"
    text.write_text("Hi .\n", encoding="utf-8")
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"),
                                 "--weights", str(run_dir / name)])
    assert result.exit_code == 1
    message = words(result)
    assert "[E045]" in message and f"`spacy-elmo export {run_dir} OUT`" in message
    assert "[E016]" not in message and "No options file" not in message


# warnings --------------------------------------------------------------------------------
def test_a_warning_prints_its_message_alone(tiny_weights_dir):
    """warnings.warn printed the file, line and source line of the caller with it (here:
    embedder.py:92: UserWarning: [W002] ... and the line `for piece, array in ...`)."""
    script = ("import sys\n"
              "from spacy_elmo.bilm import load_bilm\n"
              "from spacy_elmo.bilm.embedder import Embedder\n"
              "list(Embedder(load_bilm(sys.argv[1])).embed([['x' * 80]]))\n")
    result = subprocess.run([sys.executable, "-W", "default", "-c", script,
                             str(tiny_weights_dir)], capture_output=True, text=True, check=True)
    assert result.stderr.startswith("[W002] 1 token(s) are longer than")
    assert result.stderr.count("\n") == 1, result.stderr


def test_a_command_prints_a_warning_without_source_lines(tmp_path, tiny_weights_dir):
    text = tmp_path / "in.txt"
    text.write_text("x" * 80 + " .\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "spacy_elmo", "embed", str(text),
                             str(tmp_path / "out.hdf5"), "--weights", str(tiny_weights_dir)],
                            capture_output=True, text=True, check=True)
    lines = [line for line in result.stderr.splitlines() if "[W002]" in line]
    # the message, then the next line (the progress bar's): no file, line or source line
    assert len(lines) == 1 and lines[0].endswith("(Shown once per model.)")
    assert "Warning:" not in result.stderr and ".py:" not in result.stderr


def test_a_warning_is_still_a_python_warning():
    with pytest.warns(ElmoWarning, match=r"\[W003\]"):
        warn(Warnings.W003)
    with pytest.warns(UserWarning):
        warn(Warnings.W003)


def test_no_module_calls_warnings_warn_itself():
    root = Path(__file__).resolve().parents[2] / "spacy_elmo"
    calls = [p.name for p in root.rglob("*.py") if p.name != "errors.py"
             and "warnings.warn(" in p.read_text(encoding="utf-8")]
    assert calls == []


def test_a_missing_network_config_is_named_once(tmp_path):
    model = shutil.copytree(EFML_DIR / "model", tmp_path / "model")
    run = json.loads((model / "config.json").read_text())
    (model / run["config_path"]).unlink()
    with pytest.raises(ElmoError) as info:
        load_bilm(model)
    message = str(info.value)
    assert message.count(str(model / run["config_path"])) == 1, message


def test_embed_never_writes_over_its_model_even_with_overwrite(tmp_path, tiny_weights_dir):
    """`embed in.txt MODEL/weights.hdf5 --weights MODEL --overwrite` replaced the weights."""
    from spacy_elmo.embed.job import embed_file

    model = tmp_path / "model"
    shutil.copytree(tiny_weights_dir, model)
    text = tmp_path / "in.txt"
    text.write_text("a b c\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    for weights, output, error in (
            (model, model / "weights.hdf5", r"\[E167\] .* would replace the weights.hdf5"),
            (model, model / "new.hdf5", r"\[E025\]"),  # the model named as a directory
            (model / "weights.hdf5", model / "options.json", r"\[E167\]"),
            (model / "weights.hdf5", model / "weights.hdf5", r"\[E167\]")):
        with pytest.raises(ElmoError, match=error):
            embed_file(text, output, weights=weights, overwrite=True, progress=False)
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before

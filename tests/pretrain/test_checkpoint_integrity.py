"""A checkpoint's checksum covers all of its content, a damaged checkpoint is told apart
from a file that is not a checkpoint at all, and checkpoints of spacy-elmo 0.1 (without that
checksum) are refused with the way to go on, nothing of the run changed."""

import shutil
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import save_bilm
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import (
    CHECKSUM,
    OLD_CHECKSUM,
    content_checksum,
    load_checkpoint,
    save_checkpoint,
)
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.export import export
from spacy_elmo.pretrain.trainer import train

from ..conftest import make_random_bilm
from .conftest import V1_0_PRETRAIN, as_written_by_0_1, tiny_config

DAMAGED = "could not be read as a pretraining checkpoint: it is damaged"
CHANGED = "is damaged: its content does not match the checksum"
NOT_A_CHECKPOINT = "is not a pretraining checkpoint"


@pytest.fixture(scope="module")
def intact(tmp_path_factory) -> bytes:
    """The bytes of a tiny run's checkpoint, written by today's code."""
    tmp = tmp_path_factory.mktemp("integrity")
    with pytest.MonkeyPatch.context() as mp:  # curves are not what these tests check
        mp.setattr(trainer_module, "draw_curves", lambda metrics, png: True)
        train(tiny_config(tmp, dev=[], max_steps=2), progress=False)
    return (tmp / "run" / "checkpoint.pt").read_bytes()


@pytest.fixture
def path(tmp_path, intact) -> Path:
    out = tmp_path / "checkpoint.pt"
    out.write_bytes(intact)
    return out


def pickle_span(data: bytes, tmp_path: Path) -> range:
    """Where the pickle (`data.pkl`) lies in a checkpoint's bytes."""
    probe = tmp_path / "probe.zip"
    probe.write_bytes(data)
    with zipfile.ZipFile(probe) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("/data.pkl"))
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:
                                                    info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len
    return range(start, start + info.file_size)


def test_new_checkpoints_carry_a_checksum_over_all_content(path):
    raw = torch.load(path, weights_only=True)
    assert raw[CHECKSUM] == content_checksum(raw)
    assert "tensors_sha256" not in raw
    changed = dict(raw, vocab=[*raw["vocab"][:-1], raw["vocab"][-1] + "x"])
    assert content_checksum(changed) != raw[CHECKSUM]


def test_a_changed_word_in_the_pickle_is_found(path, intact):
    """Changing "river" to "rixer" inside checkpoint.pt loaded silently: the checksum
    covered the tensors only."""
    assert intact.count(b"river") >= 1
    path.write_bytes(intact.replace(b"river", b"rixer", 1))
    assert "rixer" in torch.load(path, weights_only=True)["vocab"]  # torch reads it
    with pytest.raises(ElmoError, match=CHANGED):
        load_checkpoint(path)


def test_a_changed_number_outside_the_tensors_is_found(path):
    data = torch.load(path, weights_only=True)
    data["tokens"] += 1  # as damage would: the checksum is left as it was written
    torch.save(data, path)
    with pytest.raises(ElmoError, match=CHANGED):
        load_checkpoint(path)


def test_checksums_tell_values_of_other_types_and_places_apart():
    variants = [{"a": 1}, {"a": 1.0}, {"a": True}, {"a": "1"}, {"a": [1]}, {"a": (1,)},
                {"a": ["ab", "c"]}, {"a": ["a", "bc"]}, {"b": 1}, {"a": None},
                {"a": torch.tensor([1])}, {"a": torch.tensor([1.0])},
                {"a": torch.tensor([[1.0]])}]
    assert len({content_checksum(v) for v in variants}) == len(variants)
    assert content_checksum({"a": 1, "b": 2}) == content_checksum({"b": 2, "a": 1})


def test_save_and_load_keep_the_checksum(tmp_path):
    bilm = make_random_bilm()
    payload = {"model": bilm.state_dict(), "vocab": ["<S>", "</S>", "é"], "step": 3,
               "elapsed": 0.1, "nested": {0: {"x": None, "y": [True, 2.5]}},
               "frozen": {}, "ranks": []}
    save_checkpoint(tmp_path / "c.pt", payload)
    loaded = load_checkpoint(tmp_path / "c.pt")
    assert loaded["vocab"] == ["<S>", "</S>", "é"]
    assert loaded["nested"] == {0: {"x": None, "y": [True, 2.5]}}


def test_a_truncated_checkpoint_is_damaged_not_foreign(path, intact):
    """A cut-short checkpoint was reported as holding foreign Python objects / not being a
    checkpoint (E108)."""
    for size in (len(intact) // 2, len(intact) - 10, 300):
        path.write_bytes(intact[:size])
        with pytest.raises(ElmoError, match=DAMAGED) as info:
            load_checkpoint(path)
        assert "Python objects" not in str(info.value)


def test_flipped_bytes_in_the_pickle_are_damage(path, intact, tmp_path):
    """A byte changed in the pickle: a CRC-32 mismatch, not a foreign file."""
    span = pickle_span(intact, tmp_path)
    at = span.start + 2  # the first opcode after the protocol: the checkpoint's dict
    path.write_bytes(intact[:at] + b"\xff" + intact[at + 1:])
    with pytest.raises(ElmoError, match=DAMAGED) as info:
        load_checkpoint(path)
    assert "CRC-32" in str(info.value) and "data.pkl" in str(info.value)
    assert NOT_A_CHECKPOINT not in str(info.value)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_no_single_flipped_byte_passes_unnoticed_or_reads_as_foreign(path, intact, tmp_path):
    """Wherever a bit flips, loading fails as damage (E125, E119) or gives the same
    content; never a checkpoint that is "not a checkpoint", never other content."""
    original = content_checksum(load_checkpoint(path))
    span = pickle_span(intact, tmp_path)
    positions = sorted({*range(0, 80), *range(span.start, min(span.stop, span.start + 120)),
                        *range(span.start, span.stop, max(1, len(span) // 60)),
                        *range(0, len(intact), max(1, len(intact) // 60)),
                        *range(len(intact) - 100, len(intact))})
    key = intact.find(CHECKSUM.encode(), span.start)  # its own name: damage, not 0.1's
    for at in sorted({*positions, *range(key, key + len(CHECKSUM))}):
        path.write_bytes(intact[:at] + bytes([intact[at] ^ 0x04]) + intact[at + 1:])
        try:
            loaded = load_checkpoint(path)
        except ElmoError as err:
            assert DAMAGED in str(err) or CHANGED in str(err), (at, str(err))
            continue
        assert content_checksum(loaded) == original, at


def test_a_foreign_zip_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(ElmoError, match=NOT_A_CHECKPOINT):
        load_checkpoint(path)


def test_a_weights_file_is_not_a_checkpoint(tmp_path):
    """`spacy-elmo export weights.hdf5 out` said the file held foreign Python objects."""
    _, weights = save_bilm(make_random_bilm(), tmp_path / "model")
    with pytest.raises(ElmoError, match=NOT_A_CHECKPOINT) as info:
        export(weights, tmp_path / "out")
    message = str(info.value)
    assert "HDF5" in message and "weights file is already an export" in message
    assert "Python objects" not in message
    result = CliRunner().invoke(app, ["export", str(weights), str(tmp_path / "out2")])
    assert result.exit_code == 1
    assert "weights file is already an export" in " ".join(result.output.split())
    assert not (tmp_path / "out2").exists()



# checkpoints of spacy-elmo 0.1 ------------------------------------------------------------
def files_of(run: Path):
    return {p.name: p.read_bytes() for p in run.iterdir() if p.name != ".lock"}


def test_a_checkpoint_of_0_1_is_refused_by_resume_and_export(tmp_path, monkeypatch):
    """The 1.0 fixture's run with its checkpoint as 0.1 wrote it (a checksum over the tensors
    only): refused with the way to go on, and nothing of the run changed."""
    shutil.copytree(V1_0_PRETRAIN, tmp_path / "pretrain", ignore=shutil.ignore_patterns("model"))
    monkeypatch.chdir(tmp_path / "pretrain")  # the run names its files by relative paths
    run = Path("run")
    as_written_by_0_1(run / "checkpoint.pt")
    before = files_of(run)
    fix = r"--init-weights run/model.*spacy-elmo export run OUT"
    with pytest.raises(ElmoError, match=r"\[E251\] 'run/checkpoint.pt' is a checkpoint of "
                                        r"spacy-elmo 0.1 \(a checksum over its tensors only"):
        load_checkpoint(run)
    config = PretrainConfig.from_record(run / "config.json", [
        ("training.max_steps", 3, "--max-steps")])
    with pytest.raises(ElmoError, match=r"\[E251\].*" + fix):
        train(config, resume=True, progress=False)
    with pytest.raises(ElmoError, match=r"\[E251\]"):
        export(run, tmp_path / "export")
    assert files_of(run) == before
    assert not (tmp_path / "export").exists() and not (run / "model").exists()


@pytest.mark.parametrize("checksum", [OLD_CHECKSUM, None])
def test_today_s_checkpoint_rewritten_as_0_1_is_refused(tmp_path, monkeypatch, checksum):
    """0.1 wrote a checksum over the tensors only, and before that none (nor the shuffle
    buffer's settings, nor CPU time): neither is read, whatever else it holds."""
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)
    train(tiny_config(tmp_path, max_steps=4), progress=False)
    path = tmp_path / "run" / "checkpoint.pt"
    as_written_by_0_1(path, checksum)
    found = "a checksum over its tensors only" if checksum else "no checksum"
    with pytest.raises(ElmoError, match=rf"\[E251\] .* \({found}, not the checksum over"):
        train(tiny_config(tmp_path, max_steps=8), resume=True, progress=False)
    assert torch.load(path, weights_only=True)["step"] == 4  # left as it was

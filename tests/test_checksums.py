"""The one checksum helper gives the digests the helpers it replaced gave; a checkpoint of
spacy-elmo 0.1, with a checksum over its tensors only, is refused (E251)."""

import hashlib
from pathlib import Path

import pytest
import torch

from spacy_elmo.checksums import bytes_sha256, content_sha256, tensors_sha256
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.checkpoint import load_checkpoint

V1_0_CHECKPOINT = (Path(__file__).parent / "fixtures" / "v1_0" / "pretrain" / "run"
                   / "checkpoint.pt")


def sample():
    return {"format": "x", "step": 3, "lr": 0.5, "name": "é", "flag": True, "none": None,
            "raw": b"ab", "list": [1, (2.0, "z")],
            "model": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                      "b": torch.tensor([1, 2], dtype=torch.int64)}}


def test_checksums_are_those_of_the_earlier_helpers():
    """Digests computed by the three helpers this module replaced (serialize.state_sha256,
    checkpoint.content_checksum, checkpoint.tensors_checksum) on the same values."""
    data = sample()
    assert content_sha256(data) == ("31e0048d791af6c1ada92a0b13648a647fc1fefafcbdca1484a98d"
                                    "029e387e45")
    assert tensors_sha256(data) == ("a98e0bffe38443118defa03b253827294c690c691c34222ffc3e1c"
                                    "b3ff630cc8")
    assert bytes_sha256(b"state") == hashlib.sha256(b"state").hexdigest()
    # the checksums stored beside the content are left out of it
    data.update(content_sha256="zz", tensors_sha256="yy")
    assert content_sha256(data) == content_sha256(sample())
    assert tensors_sha256(data) == tensors_sha256(sample())


def test_a_checkpoint_of_0_1_is_refused_not_verified(tmp_path):
    """The 1.0 fixture's checkpoint as 0.1 wrote it: its tensors' checksum right, and no
    checksum over its whole content."""
    raw = torch.load(V1_0_CHECKPOINT, map_location="cpu", weights_only=True)
    assert raw["content_sha256"] == content_sha256(raw) and "tensors_sha256" not in raw
    del raw["content_sha256"]
    raw["tensors_sha256"] = tensors_sha256(raw)
    torch.save(raw, tmp_path / "checkpoint.pt")
    with pytest.raises(ElmoError, match=r"\[E251\] .* \(a checksum over its tensors only, "
                                        r"not the checksum over its whole content"):
        load_checkpoint(tmp_path / "checkpoint.pt")

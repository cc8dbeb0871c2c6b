"""Saving and loading the biLM of an ElmoModel (thinc's shim calls these), with a checksum
of its tensors; `reading`: damaged serialized data as a catalogue error (E002) that names
what was being read; and `configured_wins`: which settings a loaded pipeline takes from its
config rather than from its saved data."""

from __future__ import annotations

import io
import pickle
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Dict, Iterator, Optional, Tuple

import srsly
import torch

from ..bilm import BiLM, BiLMOptions
from ..bilm.dictionary import TokenDictionary
from ..checksums import bytes_sha256
from ..errors import ElmoError, Errors, damaged
from .holder import BiLMHolder

# Written with the biLM's tensors; a biLM saved without one (before 1.0) is refused (E260).
CHECKSUM = "state_sha256"
MISMATCH = "the biLM's tensors do not match the checksum saved with them"
SHAPE = "its recorded output shape {recorded} is not its biLM's {shape}"
# What a damaged biLM is reported as being read from, and as (E002); `reading` sets
# it for the file or bytes at hand.
_SOURCE: ContextVar[Tuple[str, str]] = ContextVar(
    "elmo_source", default=("a component's serialized bytes", "ELMo biLM weights"))
# What damaged serialized data raises while msgpack, torch and thinc read it.
DAMAGE = (ValueError, TypeError, KeyError, IndexError, EOFError, OSError, RuntimeError,
          pickle.UnpicklingError)
# The `elmo` component's settings (its cfg) that a loaded pipeline takes from its config,
# not from its saved data, so that spacy.load(..., config=...) can change them. (ElmoModel's
# own are never read from saved data: `settings.ElmoSettings`.) The biLM, and where it came
# from, are saved.
CONFIGURED = ("store_layers", "set_vector_hooks", "mix_weights", "gamma")


@contextmanager
def configured_wins(settings: Dict[str, Any]) -> Iterator[None]:
    """Within, `settings` may be overwritten by saved data; afterwards those of CONFIGURED
    that it held have their values from before again."""
    kept = {key: settings[key] for key in CONFIGURED if key in settings}
    yield
    settings.update(kept)


@contextmanager
def reading(source: Optional[str] = None, kind: Optional[str] = None) -> Iterator[None]:
    """Within: damaged serialized data (DAMAGE) raises Errors.E002 naming `source` as `kind`
    (default: the ones set by an enclosing `reading`)."""
    outer_source, outer_kind = _SOURCE.get()
    token = _SOURCE.set((source or outer_source, kind or outer_kind))
    try:
        yield
    except ElmoError:
        raise
    except DAMAGE as err:
        raise _damaged(err) from err
    finally:
        _SOURCE.reset(token)


def _damaged(err: object) -> ElmoError:
    """E002 for what `reading` reads now."""
    path, kind = _SOURCE.get()
    return damaged(path, kind, err)


def serialize_holder(holder: BiLMHolder) -> bytes:
    """The holder's biLM as msgpack bytes: options, tensors (torch.save) with their
    checksum, and an EFML model's dictionary; empty bytes for an empty holder."""
    if holder.bilm is None:
        return b""
    buffer = io.BytesIO()
    torch.save(holder.bilm.state_dict(), buffer)
    state = buffer.getvalue()
    msg = {"options": holder.bilm.options.to_json_dict(), "state": state,
           CHECKSUM: bytes_sha256(state)}
    if holder.bilm.dictionary is not None:  # an ELMoForManyLangs model's characters and words
        msg["dictionary"] = holder.bilm.dictionary.to_dict()
    return srsly.msgpack_dumps(msg)


def deserialize_holder(holder: BiLMHolder, data: bytes, device: Any) -> BiLMHolder:
    """Put the biLM of `serialize_holder`'s bytes into `holder` (in eval mode, on `device`);
    damage raises E002 (see `reading`)."""
    if not data:
        return holder
    with reading():
        bilm = _read_bilm(data)
    holder.put(bilm.to(device).eval())  # outside: a device out of memory is no damage
    return holder


def _read_bilm(data: bytes) -> BiLM:
    """The biLM `serialize_holder` wrote, its tensors checked against their checksum."""
    msg = srsly.msgpack_loads(data)
    if CHECKSUM not in msg:
        raise ElmoError(Errors.E260.format(path=_SOURCE.get()[0]))
    if msg[CHECKSUM] != bytes_sha256(msg["state"]):
        raise _damaged(MISMATCH)
    dictionary = msg.get("dictionary")
    bilm = BiLM(BiLMOptions.from_json_dict(msg["options"]),
                dictionary=None if dictionary is None else TokenDictionary.from_dict(dictionary))
    state = torch.load(io.BytesIO(msg["state"]), map_location="cpu", weights_only=True)
    bilm.load_state_dict(state)
    return bilm


def check_shape(model: Any, width: int, n_layers: int) -> None:
    """E002 (within `reading`) unless an ElmoModel's recorded dims are those of its biLM:
    a changed byte there loaded, then failed on every doc."""
    shape = {"nO": width, "nL": n_layers}
    recorded = {dim: model.get_dim(dim) if model.has_dim(dim) else None for dim in shape}
    if recorded != shape:
        raise _damaged(SHAPE.format(recorded=recorded, shape=shape))

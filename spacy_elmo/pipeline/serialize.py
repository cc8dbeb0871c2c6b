"""Saving and loading the biLM of an ElmoModel (thinc's shim calls these), with a checksum
of its tensors, and `reading`: damaged serialized data as a catalogue error (E002) that
names what was being read."""

from __future__ import annotations

import hashlib
import io
import pickle
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Tuple

import srsly
import torch

from ..bilm import BiLM, BiLMOptions
from ..bilm.dictionary import TokenDictionary
from ..errors import ElmoError, Errors, first_line

if TYPE_CHECKING:
    from .elmo_model import BiLMHolder

# Written with the biLM's tensors since checksums came in; biLMs saved before have none
# and load unchecked.
CHECKSUM = "state_sha256"
# What a damaged biLM is reported as being read from, and as (Errors.E002); `reading` sets
# it for the file or bytes at hand.
_SOURCE: ContextVar[Tuple[str, str]] = ContextVar(
    "elmo_source", default=("a component's serialized bytes", "ELMo biLM weights"))
# What damaged serialized data raises while msgpack, torch and thinc read it.
DAMAGE = (ValueError, TypeError, KeyError, IndexError, EOFError, OSError, RuntimeError,
          pickle.UnpicklingError)


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
        raise ElmoError(Errors.E002.format(**_source(), err=first_line(err).rstrip("."))
                        ) from err
    finally:
        _SOURCE.reset(token)


def _source() -> Dict[str, str]:
    """E002's path and kind for what `reading` reads now."""
    path, kind = _SOURCE.get()
    return {"path": path, "kind": kind}


def _checksum(state: bytes) -> str:
    return hashlib.sha256(state).hexdigest()


def serialize_holder(holder: BiLMHolder) -> bytes:
    """The holder's biLM as msgpack bytes: options, tensors (torch.save) with their
    checksum, and an EFML model's dictionary; empty bytes for an empty holder."""
    if holder.bilm is None:
        return b""
    buffer = io.BytesIO()
    torch.save(holder.bilm.state_dict(), buffer)
    state = buffer.getvalue()
    msg = {"options": holder.bilm.options.to_json_dict(), "state": state,
           CHECKSUM: _checksum(state)}
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
    holder.bilm = bilm.to(device).eval()  # outside: a device out of memory is no damage
    holder.char_ids = bilm.token_ids()
    holder.generation += 1
    return holder


def _read_bilm(data: bytes) -> BiLM:
    """The biLM `serialize_holder` wrote, its tensors checked against their checksum."""
    msg = srsly.msgpack_loads(data)
    if CHECKSUM in msg and msg[CHECKSUM] != _checksum(msg["state"]):
        raise ElmoError(Errors.E002.format(
            **_source(), err="the biLM's tensors do not match the checksum saved with them"))
    dictionary = msg.get("dictionary")
    bilm = BiLM(BiLMOptions.from_json_dict(msg["options"]),
                dictionary=None if dictionary is None else TokenDictionary.from_dict(dictionary))
    state = torch.load(io.BytesIO(msg["state"]), map_location="cpu", weights_only=True)
    bilm.load_state_dict(state)
    return bilm

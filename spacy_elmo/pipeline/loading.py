"""Where biLM weights come from: a local file or directory, a URL (cached), or the bundle."""

from __future__ import annotations

import hashlib
import os
import urllib.request
from pathlib import Path
from typing import Optional, Union

from thinc.api import Model
from tqdm import tqdm

from ..bilm import load_bilm
from ..bilm.files import atomic_write
from ..errors import ElmoError, Errors
from .elmo_model import has_bilm, set_bilm

BUNDLED_DIR = Path(__file__).resolve().parent.parent / "data" / "elmo_en_small"
URL_SCHEMES = ("http://", "https://", "file://")


def cache_dir() -> Path:
    return Path(os.environ.get("SPACY_ELMO_CACHE", Path.home() / ".cache" / "spacy_elmo"))


def bundled_weights() -> Optional[Path]:
    """The small English biLM shipped with the package, if this install has it."""
    return BUNDLED_DIR if (BUNDLED_DIR / "weights.hdf5").exists() else None


def fetch(location: Union[str, Path]) -> Path:
    """A local path for `location`; URLs are downloaded once into the cache directory."""
    text = str(location)
    if not text.startswith(URL_SCHEMES):
        return Path(text).expanduser()
    name = Path(text.split("?")[0]).name or "download"
    target = cache_dir() / hashlib.sha1(text.encode()).hexdigest()[:16] / name
    if target.exists():
        return target
    try:
        with atomic_write(target) as tmp, urllib.request.urlopen(text) as response, \
                open(tmp, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=name) as bar:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    bar.update(len(chunk))
    except OSError as err:
        raise ElmoError(Errors.E054.format(url=text, err=err)) from err
    return target


def load_weights_into(model: Model, weights: Optional[str], options: Optional[str], *,
                      reload: bool = True, weights_format: str = "auto") -> None:
    """Load a biLM into an ElmoModel. `weights` None means the bundled English biLM;
    `weights_format` is "auto", "allennlp" or "efml" (see `load_bilm`).

    With reload=False a model that already holds a biLM (e.g. from a saved pipeline) is
    left as it is.
    """
    if has_bilm(model) and not reload:
        return
    if weights is None:
        bundled = bundled_weights()
        if bundled is None:
            raise ElmoError(Errors.E051)
        weights_path = bundled
    else:
        weights_path = fetch(weights)
    set_bilm(model, load_bilm(weights_path, fetch(options) if options else None,
                              format=weights_format))

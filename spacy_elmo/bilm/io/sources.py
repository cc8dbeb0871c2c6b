"""Where a biLM comes from: what a user writes for `weights` turned into local files.

`locate` is the one place that does it, for the `elmo` component, the private tok2vec,
`spacy-elmo embed`, `info`, `perplexity` and `pretrain --init-weights` alike. It takes a
weights file, a directory (bilm-tf/AllenNLP or ELMoForManyLangs), a published model's name
(`allennlp/original`, ...), an http(s):// or file:// URL, or nothing: the biLM bundled for
the language. A URL is downloaded once into the cache (`$SPACY_ELMO_CACHE`, default
`~/.cache/spacy_elmo`) with a progress bar, and kept only once checked: the size the server
announced, and what the file claims to be (HDF5 weights that h5py opens and reads in full,
JSON options); a failed download leaves nothing in the cache. `$SPACY_ELMO_URL_PREFIX`
replaces the address the published models are downloaded from (a mirror, or a local copy
as file:///...).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import h5py
from tqdm import tqdm

from ...errors import ElmoError, Errors, first_line
from ...files import PathLike, names
from ...files.atomic import atomic_write
from .efml import is_efml_dir, is_efml_file

FORMATS = ("auto", "allennlp", "efml")
URL_SCHEMES = ("http://", "https://", "file://")
CACHE_ENV = "SPACY_ELMO_CACHE"
URL_PREFIX_ENV = "SPACY_ELMO_URL_PREFIX"
# seconds a download may wait for the server (to connect, and between bytes): a server that
# accepts the connection and then says nothing fails with E060 instead of hanging
TIMEOUT_ENV = "SPACY_ELMO_DOWNLOAD_TIMEOUT"
DOWNLOAD_TIMEOUT_S = 60.0
# AllenNLP's published English biLMs, as allennlp.org/elmo lists them: the options and
# weights of each are <prefix><stem>_options.json and <prefix><stem>_weights.hdf5.
PUBLISHED_PREFIX = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/"
PUBLISHED = {
    "allennlp/small": "2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway",
    "allennlp/medium": "2x2048_256_2048cnn_1xhighway/elmo_2x2048_256_2048cnn_1xhighway",
    "allennlp/original": "2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway",
    "allennlp/original-5.5B": ("2x4096_512_2048cnn_2xhighway_5.5B/"
                               "elmo_2x4096_512_2048cnn_2xhighway_5.5B"),
}
DATA_DIR = Path(__file__).resolve().parents[2] / "data"
# The biLM used when no `weights` are given, per spaCy language code: a directory of DATA_DIR.
BUNDLED = {"en": "elmo_en_small", "zh": "elmo_zh_small"}
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@dataclass(frozen=True)
class BiLMFiles:
    """The local files of one biLM. format "allennlp": `weights` is the weights.hdf5 and
    `options` its options.json; "efml": `weights` is the ELMoForManyLangs model directory (or
    one of its files) and `options` its network config when one was given."""

    format: str
    weights: Path
    options: Optional[Path]


@dataclass(frozen=True)
class BilmSource:
    """Where a biLM comes from, as a user configures it: `weights` (anything `locate` takes;
    None: the biLM bundled for the language), `options` (when not beside the weights) and
    `weights_format` ("auto", "allennlp" or "efml"). The settings keep these three names in
    configs and saved settings (`from_cfg`, `to_cfg`)."""

    weights: Optional[str] = None
    options: Optional[str] = None
    weights_format: str = "auto"

    @classmethod
    def from_cfg(cls, cfg: Dict[str, Any]) -> BilmSource:
        """The source named by a component's settings (paths as text)."""
        return cls(weights=_text(cfg["weights"]), options=_text(cfg["options"]),
                   weights_format=cfg["weights_format"])

    def to_cfg(self) -> Dict[str, Any]:
        return {"weights": self.weights, "options": self.options,
                "weights_format": self.weights_format}

    def locate(self, lang: str = "en") -> BiLMFiles:
        return locate(self.weights, self.options, format=self.weights_format, lang=lang)


def _text(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def check_format(value: Any, name: str = "the weights format") -> None:
    """Raise E012 unless `value` is one of FORMATS (`name`: the setting as the user gives it;
    the component, the private tok2vec and `locate` all check it so)."""
    if value not in FORMATS:
        raise ElmoError(Errors.E012.format(value=value, name=name, choices=list(FORMATS)))


def locate(weights: Optional[PathLike], options: Optional[PathLike] = None, *,
           format: str = "auto", lang: str = "en") -> BiLMFiles:
    """The local files for `weights` (see the module's docstring; None: the biLM bundled for
    `lang`) and `options` (a path or URL, for options that are not beside the weights).

    A local path wins over a published name of the same spelling. format: "auto" (detected),
    "allennlp" or "efml"."""
    check_format(format)
    options_path = None if options is None else fetch(options, "options")
    if weights is None:
        local = bundled(lang)
    else:
        local = fetch(weights)
        name = str(weights)
        if not local.exists() and name.split("/")[0] == "allennlp":
            weights_url, published_options = published_urls(name)
            options_path = options_path or fetch(published_options, "options")
            local = fetch(weights_url)
        elif options_path is None and name.startswith(URL_SCHEMES):
            options_path = fetch_options_beside(name)
    refuse_run(local)
    if format == "auto":
        format = detect_format(local)
    if format == "efml":
        return BiLMFiles("efml", local, options_path)
    options_path, weights_path = resolve_paths(local, options_path)
    return BiLMFiles("allennlp", weights_path, options_path)


def refuse_run(path: Path) -> None:
    """E045 when `path` is a pretraining run directory of `spacy-elmo pretrain` (it holds
    checkpoint.pt and no weights), its checkpoint, or another file of a run: a run is no
    biLM until exported."""
    if path.is_dir() and _is_run(path):
        run, what = path, "a pretraining run directory"
    elif path.is_file() and path.name == names.CHECKPOINT_NAME:
        run, what = path.parent, "a pretraining run's checkpoint"
    elif path.is_file() and _is_run(path.parent):
        run, what = path.parent, "a file of a pretraining run"
    else:
        return
    model = run / names.MODEL_DIR
    finished = (f", or use '{model}', which the run exported when it finished"
                if (model / names.WEIGHTS_NAME).exists() else "")
    raise ElmoError(Errors.E045.format(path=path, what=what, run=run, finished=finished))


def _is_run(directory: Path) -> bool:
    return ((directory / names.CHECKPOINT_NAME).is_file()
            and not (directory / names.WEIGHTS_NAME).exists())


def published_urls(name: str) -> Tuple[str, str]:
    """(weights URL, options URL) of a published biLM, from `$SPACY_ELMO_URL_PREFIX` when it
    is set."""
    if name not in PUBLISHED:
        raise ElmoError(Errors.E061.format(name=name, names=sorted(PUBLISHED)))
    prefix = os.environ.get(URL_PREFIX_ENV) or PUBLISHED_PREFIX
    base = prefix.rstrip("/") + "/" + PUBLISHED[name]
    return base + names.PUBLISHED_WEIGHTS_SUFFIX, base + names.PUBLISHED_OPTIONS_SUFFIX


def options_url(weights_url: str) -> str:
    """Where a weights URL's options are: `<name>_options.json` beside
    `<name>_weights.hdf5` (AllenNLP's naming), else `options.json` beside the weights."""
    base, _, name = weights_url.split("?")[0].rpartition("/")
    if name.endswith(names.PUBLISHED_WEIGHTS_SUFFIX):
        stem = name.removesuffix(names.PUBLISHED_WEIGHTS_SUFFIX)
        return f"{base}/{stem}{names.PUBLISHED_OPTIONS_SUFFIX}"
    return f"{base}/{names.OPTIONS_NAME}"


def fetch_options_beside(weights_url: str) -> Path:
    """The options file downloaded from beside a weights URL (E066 when there is none)."""
    url = options_url(weights_url)
    try:
        return fetch(url, "options")
    except ElmoError as err:
        raise ElmoError(Errors.E066.format(weights=weights_url, url=url,
                                           err=first_line(err))) from err


# How the weights are given where none is bundled (E064): in a pipeline, on the command line
GIVE_WEIGHTS = {
    "pipeline": ("`weights` must be given: e.g. nlp.add_pipe('elmo', config={'weights': "
                 "'path/to/model'}), or `weights` in [components.elmo] of a training config "
                 "(or of a spacy-elmo.ElmoTok2Vec block)"),
    "command": "give --weights (e.g. --weights path/to/model)",
}


def bundled(lang: str, where: str = "pipeline") -> Path:
    """The directory of the biLM bundled for a spaCy language code; E064 (saying how to
    give weights `where` they are missing: "pipeline" or "command") when there is none."""
    if lang not in BUNDLED:
        raise ElmoError(Errors.E064.format(lang=lang, languages=sorted(BUNDLED),
                                           give=GIVE_WEIGHTS[where]))
    directory = DATA_DIR / BUNDLED[lang]
    if not (directory / names.WEIGHTS_NAME).exists():
        raise ElmoError(Errors.E065.format(lang=lang, path=directory))
    return directory


def detect_format(path: PathLike) -> str:
    """"efml" for an ELMoForManyLangs model directory (or one of its files), else "allennlp"
    (bilm-tf layout: a weights file, or a directory with options.json/weights.hdf5). A
    directory with neither set of files is an error."""
    path = Path(path)
    if is_efml_file(path):
        return "efml"
    if (path.is_dir() and not (path / names.WEIGHTS_NAME).exists()
            and not (path / names.OPTIONS_NAME).exists()):
        if is_efml_dir(path):
            return "efml"
        raise ElmoError(Errors.E030.format(path=path))
    return "allennlp"


def resolve_paths(weights: PathLike, options: Optional[PathLike] = None
                  ) -> Tuple[Path, Path]:
    """(options, weights) of a bilm-tf/AllenNLP biLM: a weights file (+ options file) or a
    directory with both.

    Without `options`, looks beside the weights for `options.json`, and for AllenNLP's
    naming, `<name>_options.json` beside `<name>_weights.hdf5`.
    """
    weights = Path(weights)
    if weights.is_dir():
        directory = weights
        weights = directory / names.WEIGHTS_NAME
        if not weights.exists():
            raise ElmoError(Errors.E008.format(path=directory, name=names.WEIGHTS_NAME))
    if not weights.exists():
        raise ElmoError(Errors.E001.format(path=weights, cwd=Path.cwd()))
    if options is None:
        candidates = options_beside(weights)
        found = [c for c in candidates if c.exists()]
        if not found:
            raise ElmoError(Errors.E016.format(
                weights=weights, tried=", ".join(str(c) for c in candidates)))
        return found[0], weights
    options = Path(options)
    if not options.exists():
        raise ElmoError(Errors.E001.format(path=options, cwd=Path.cwd()))
    return options, weights


def options_beside(weights: Path) -> List[Path]:
    """Where the options of a weights file are looked for, in order: AllenNLP's
    `<name>_options.json` beside `<name>_weights.hdf5`, then `options.json`."""
    candidates = [weights.with_name(names.OPTIONS_NAME)]
    if weights.name.endswith(names.PUBLISHED_WEIGHTS_SUFFIX):
        stem = weights.name.removesuffix(names.PUBLISHED_WEIGHTS_SUFFIX)
        candidates.insert(0, weights.with_name(stem + names.PUBLISHED_OPTIONS_SUFFIX))
    return candidates


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "spacy_elmo")


def fetch(location: PathLike, kind: str = "weights") -> Path:
    """A local path for `location`: a URL is downloaded once into the cache (one folder per
    URL) and kept only once checked as `kind` ("weights": an HDF5 ELMo weights file whose
    every dataset reads; "options": a JSON object); anything else is a path (`~`
    expanded). A failed download leaves nothing in the cache, not even its folder."""
    text = str(location)
    if not text.startswith(URL_SCHEMES):
        try:
            return Path(text).expanduser()
        except RuntimeError:  # ~user of no such user: reported as a missing file
            return Path(text)
    name = Path(text.split("?")[0]).name or "download"
    target = cache_dir() / hashlib.sha1(text.encode()).hexdigest()[:16] / name
    if not target.exists():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ElmoError(Errors.E009.format(
                path=target.parent, err=f"{err}; downloads are kept in ${CACHE_ENV} "
                                        f"(default ~/.cache/spacy_elmo): point it at a "
                                        f"writable directory")) from err
        try:
            download(text, target, kind)
        finally:
            if not target.exists():
                _remove_if_empty(target.parent)
    return target


def _remove_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:  # not empty: another download of the same URL is under way
        pass


def download_timeout() -> float:
    """DOWNLOAD_TIMEOUT_S, or the positive number of seconds SPACY_ELMO_DOWNLOAD_TIMEOUT
    gives (E020 for anything else)."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    if not value:
        return DOWNLOAD_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise ElmoError(Errors.E020.format(key=TIMEOUT_ENV, what="a positive number of seconds",
                                           value=repr(value), fix=""))
    return seconds


def download(url: str, target: Path, kind: str = "weights") -> None:
    """Write `url` to `target` with a progress bar; the file appears only when complete and
    checked as `kind` (see `check_download`)."""
    try:
        with atomic_write(target) as tmp:
            with urllib.request.urlopen(url, timeout=download_timeout()) as response, \
                    open(tmp, "wb") as out:
                expected = int(response.headers.get("Content-Length") or 0) or None
                got = 0
                with tqdm(total=expected, unit="B", unit_scale=True, desc=target.name) as bar:
                    while chunk := response.read(1 << 20):
                        out.write(chunk)
                        got += len(chunk)
                        bar.update(len(chunk))
            if expected is not None and got != expected:
                raise ElmoError(Errors.E062.format(url=url, got=got, expected=expected,
                                                   path=target))
            check_download(url, tmp, kind, target)
    except ElmoError:
        raise
    except (OSError, http.client.HTTPException) as err:
        raise ElmoError(Errors.E060.format(url=url, err=err, path=target)) from err


def check_download(url: str, path: Path, kind: str, target: Path) -> None:
    """Raise unless the downloaded file at `path` is what it claims to be (a server's error
    page or a truncated file fails here): weights open with h5py, hold `char_embed` and
    every dataset reads in full; options parse as a JSON object. `target`: where it would
    be kept (named in the errors)."""
    with open(path, "rb") as f:
        head = f.read(64)
    if kind == "weights":
        if not head.startswith(HDF5_SIGNATURE):
            raise ElmoError(Errors.E063.format(url=url, kind="an HDF5 file", head=head[:32],
                                               path=target))
        problem = _weights_problem(path)
        if problem is not None:
            raise ElmoError(Errors.E067.format(url=url, kind="a readable ELMo weights file",
                                               err=problem, path=target))
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ElmoError(Errors.E063.format(url=url, kind="JSON", head=head[:32],
                                           path=target)) from None
    if not isinstance(data, dict):
        raise ElmoError(Errors.E067.format(url=url, kind="a JSON options file",
                                           err="the top level is not an object", path=target))


def _weights_problem(path: Path) -> Optional[str]:
    """What keeps an HDF5 file from being ELMo weights: no `char_embed`, or a dataset that
    cannot be read in full (a cut file); None when each dataset reads."""
    try:
        with h5py.File(path, "r") as f:
            if not isinstance(f.get("char_embed"), h5py.Dataset):
                return "it has no dataset 'char_embed'"
            datasets: List[str] = []
            f.visititems(lambda name, obj: datasets.append(name)
                         if isinstance(obj, h5py.Dataset) else None)
            for name in datasets:
                f[name][...]
    except (OSError, KeyError, ValueError, RuntimeError) as err:
        return first_line(err)
    return None

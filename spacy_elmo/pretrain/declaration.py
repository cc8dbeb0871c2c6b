"""Settings declared once: each field of a settings dataclass carries its config section, its
rule, its help and whether a resumed run must keep it (`setting`). The checks, the `.cfg`
layout, the command line (`--section.key` overrides and shortcut flags), `--help` and the
docs' table are all derived from those declarations."""

from __future__ import annotations

import copy
import difflib
import json
import re
import typing
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import ElmoError, Errors
from ..validation import Rule

META = "spacy_elmo.setting"
Override = Tuple[str, Any, str]  # (section.key, value, the flag as written)


@dataclass(frozen=True)
class Declared:
    """One setting as declared: its attribute `name`, `section` in the config file, default,
    rule, help, shortcut flags (the first is the canonical one) and the type annotation."""

    name: str
    section: str
    default: Any
    rule: Rule
    help: str
    frozen: bool
    flags: Tuple[str, ...]
    hint: Any

    @property
    def is_bool(self) -> bool:
        """A true/false setting: its flag may stand alone (true)."""
        return bool(_unwrap(self.hint)[0] is bool)

    @property
    def path(self) -> str:
        """Its dotted name in the config file: `section.name`."""
        return f"{self.section}.{self.name}"


def setting(section: str, default: Any, rule: Rule, help: str, *, frozen: bool = False,
            flags: Optional[Tuple[str, ...]] = None) -> Any:
    """A dataclass field declaring one setting. `flags`: its shortcut flags (default:
    `--name` with dashes; `()` for none); `frozen`: a resumed run must keep the value."""
    meta = {META: {"section": section, "rule": rule, "help": help, "frozen": frozen,
                   "flags": flags}}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


_DECLARED: Dict[type, Tuple[Declared, ...]] = {}


def declared(cls: type) -> Tuple[Declared, ...]:
    """The settings of a dataclass made with `setting`, in declaration order."""
    if cls not in _DECLARED:
        hints = typing.get_type_hints(cls)
        _DECLARED[cls] = tuple(_declared(f, hints[f.name]) for f in fields(cls))
    return _DECLARED[cls]


def _declared(f: Field, hint: Any) -> Declared:  # type: ignore[type-arg]
    meta = f.metadata[META]
    default = f.default
    if default is MISSING and callable(f.default_factory):
        default = f.default_factory()
    flags = meta["flags"]
    if flags is None:
        flags = ("--" + f.name.replace("_", "-"),)
    return Declared(f.name, meta["section"], default, meta["rule"], meta["help"],
                    meta["frozen"], flags, hint)


def sections(cls: type) -> Dict[str, List[Declared]]:
    """The settings by config section, in declaration order."""
    result: Dict[str, List[Declared]] = {}
    for item in declared(cls):
        result.setdefault(item.section, []).append(item)
    return result


def by_path(cls: type) -> Dict[str, Declared]:
    return {item.path: item for item in declared(cls)}


def by_name(cls: type) -> Dict[str, Declared]:
    return {item.name: item for item in declared(cls)}


def by_flag(cls: type) -> Dict[str, Declared]:
    return {flag: item for item in declared(cls) for flag in item.flags}


def nest(cls: type, flat: Mapping[str, Any], source: str) -> Dict[str, Dict[str, Any]]:
    """Flat values (attribute names, as a run records them) in config-file sections; a
    name not declared is E111."""
    where = {item.name: item.section for item in declared(cls)}
    unknown = sorted(set(flat) - set(where))
    if unknown:
        raise ElmoError(Errors.E111.format(path=source, keys=unknown, known=list(where)))
    nested: Dict[str, Dict[str, Any]] = {}
    for name, value in flat.items():
        nested.setdefault(where[name], {})[name] = copy.deepcopy(value)
    return nested


def flatten(cls: type, nested: Mapping[str, Any], source: str) -> Dict[str, Any]:
    """Config-file sections as flat values; a section or key not declared is E111 (a key in
    the wrong section says which one it belongs to)."""
    known = by_path(cls)
    names = {item.name: item for item in declared(cls)}
    flat: Dict[str, Any] = {}
    unknown: List[str] = []
    for section, values in nested.items():
        if not isinstance(values, dict):
            unknown.append(f"{section} (a value outside any section)")
            continue
        for key, value in values.items():
            if f"{section}.{key}" in known:
                flat[key] = value
            elif key in names:
                unknown.append(f"{section}.{key} (it belongs in [{names[key].section}])")
            else:
                unknown.append(f"{section}.{key}")
    if unknown:
        raise ElmoError(Errors.E111.format(path=source, keys=unknown, known=sorted(known)))
    return flat


def set_path(cls: type, nested: Dict[str, Any], path: str, value: Any, flag: str) -> None:
    """Set `section.key` (or a key below a dict-valued setting, `model.options.lstm_dim`)
    in config-file sections; a path that names no setting is E127."""
    known = by_path(cls)
    parts = path.split(".")
    head = ".".join(parts[:2])
    if head not in known or (len(parts) > 2 and not isinstance(known[head].default, dict)):
        raise ElmoError(Errors.E127.format(flag=flag, close=suggest(cls, flag)))
    item = known[head]
    section = nested.setdefault(item.section, {})
    if len(parts) == 2:
        value = coerce(value, item.hint)
        if isinstance(item.default, dict) and isinstance(value, dict) and isinstance(
                section.get(item.name), dict):  # keys given replace theirs, as KEY.sub does
            value = {**section[item.name], **value}
        section[item.name] = value
        return
    target = section.get(item.name)
    if not isinstance(target, dict):
        target = section[item.name] = {}
    for part in parts[2:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


def suggest(cls: type, flag: str) -> str:
    """A hint naming the setting that `flag` (a shortcut or `--section.key`) was likely
    meant to be: the same key in its own section, or the closest spelling."""
    name = flag.lstrip("-").replace("-", "_")
    for item in declared(cls):
        if item.name == name.split(".")[-1]:
            shortcut = f" (or {item.flags[0]})" if item.flags else ""
            return f" Did you mean --{item.path}{shortcut}?"
    spellings = [f for f in by_flag(cls) if f.startswith("--")] + [
        f"--{path}" for path in by_path(cls)]
    close = difflib.get_close_matches(flag, spellings, n=1)
    return f" Did you mean {close[0]}?" if close else ""


# How a true/false setting may be written on the command line
BOOL_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def is_bool_word(text: str) -> bool:
    """Whether a command-line word is meant as the value of a true/false flag: a word of
    BOOL_WORDS, or a number (which the rule then refuses), never a file name."""
    if text.strip().lower() in BOOL_WORDS:
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_override(text: Optional[str]) -> Any:
    """The value of a `--section.key` override, read as `spacy train` reads its overrides:
    as JSON, else as the text itself; the flag alone (None) is true."""
    if text is None:
        return True
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_command_line(cls: type, args: Sequence[str]) -> Tuple[List[str], List[Override]]:
    """The positional arguments of a command line and its overrides, in order:
    `--section.key VALUE` (`parse_override`) and shortcut flags (parsed as their setting's
    type). A list setting takes every value up to the next flag, from all its flags
    together (`--dev a b --paths.dev c`: a, b, c; a JSON list counts as its items), in the
    override where it was first given. A true/false setting takes a following
    true/false/yes/no/1/0 (or a number, which its rule refuses), and stands alone for
    true. A flag that names no setting is E127, a flag without its value E132."""
    shortcuts, known = by_flag(cls), by_path(cls)
    positionals: List[str] = []
    overrides: List[Override] = []
    lists: Dict[str, List[Any]] = {}
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if not _is_flag(token):
            positionals.append(token)
            continue
        name, _, inline = token.partition("=")
        value: Optional[str] = inline if "=" in token else None
        path = name.lstrip("-").replace("-", "_")
        item = shortcuts.get(name) if "." not in path else known.get(".".join(
            path.split(".")[:2]))
        if item is None and "." not in path:
            raise ElmoError(Errors.E127.format(flag=name, close=suggest(cls, name)))
        if item is not None and isinstance(item.default, list) and path.count(".") <= 1:
            values = [] if value is None else [value]
            while rest and not _is_flag(rest[0]):
                values.append(rest.pop(0))
            if not values:
                raise ElmoError(Errors.E132.format(flag=name))
            if item.path not in lists:
                lists[item.path] = []
                overrides.append((item.path, lists[item.path], name))
            lists[item.path].extend(entry for text in values for entry in list_items(text))
            continue
        takes_bool = item is not None and item.is_bool
        if value is None and rest and not rest[0].startswith("--") and (
                not takes_bool or is_bool_word(rest[0])):
            value = rest.pop(0)
        if "." in path:  # set_path names a path below no setting (E127)
            overrides.append((path, parse_override(value), name))
        elif item is not None:
            if value is None and not takes_bool:
                raise ElmoError(Errors.E132.format(flag=name))
            overrides.append((item.path, parse_flag(value, item.hint), name))
    return positionals, overrides


def _is_flag(token: str) -> bool:
    return token.startswith("-") and token != "-"


def list_items(text: str) -> List[Any]:
    """The entries one command-line value gives a list setting: the items of a JSON list,
    the text of a JSON string, else the text itself."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return [text]
    if isinstance(parsed, list):
        return parsed
    return [parsed] if isinstance(parsed, str) else [text]


def coerce(value: Any, hint: Any) -> Any:
    """A value parsed as JSON from the command line, made the declared type where that is
    what was meant: a number for a text setting becomes its text, a single text for a list
    of texts becomes a list, 1/0 and the words of BOOL_WORDS for a true/false setting its
    boolean. Anything else is left for the rule to judge."""
    base, _ = _unwrap(hint)
    if base is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    if _origin(base) is list and isinstance(value, str):
        return [value]
    if base is bool and not isinstance(value, bool) and str(value).lower() in BOOL_WORDS:
        return BOOL_WORDS[str(value).lower()]
    return value


def parse_flag(text: Optional[str], hint: Any) -> Any:
    """A shortcut flag's text as the declared type (None: the flag without a value, which
    only a true/false setting takes). Text that does not parse is left for the rule."""
    base, optional = _unwrap(hint)
    if text is None:
        return True if base is bool else None
    if optional and text.lower() in ("null", "none"):
        return None
    if base is bool:
        return BOOL_WORDS.get(text.strip().lower(), text)
    for kind in (int, float):
        if base is kind:
            try:
                return kind(text)
            except ValueError:
                return text
    if _origin(base) is dict:
        return _json_object(text)
    return text


def _json_object(text: str) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ElmoError(Errors.E118.format(text=text, err=err)) from err
    if not isinstance(value, dict):
        raise ElmoError(Errors.E118.format(text=text, err="not a JSON object"))
    return value


def _unwrap(hint: Any) -> Tuple[Any, bool]:
    """(the type inside Optional[...], whether None is allowed)."""
    args = typing.get_args(hint)
    if _origin(hint) is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return hint, False


def _origin(hint: Any) -> Any:
    return typing.get_origin(hint)


def type_name(hint: Any) -> str:
    """The type as the docs spell it: int, float, bool, str, list of str, dict; `or null`."""
    base, optional = _unwrap(hint)
    name = {list: "list of str", dict: "dict"}.get(_origin(base), getattr(base, "__name__",
                                                                           str(base)))
    return name + (" or null" if optional else "")


def show(value: Any) -> str:
    """A default as the config file writes it."""
    return json.dumps(value, ensure_ascii=False)


def markdown_table(cls: type, intro: Iterable[str]) -> str:
    """The docs' table of every setting (docs/pretrain_settings.md is this text)."""
    lines = [*intro, "", "| Setting | Shortcut | Type | Default | Rule | Help |",
             "| --- | --- | --- | --- | --- | --- |"]
    for item in declared(cls):
        cell = item.help + (" Kept on resume." if item.frozen else "")
        lines.append(f"| `{item.path}` | {' '.join(f'`{f}`' for f in item.flags) or '-'} | "
                     f"{type_name(item.hint)} | `{show(item.default)}` | "
                     f"{item.rule.what + (' or null' if item.rule.optional else '')} | "
                     f"{cell.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def help_lines(cls: type) -> List[str]:
    """One line per setting for `--help`: section.key, shortcut, default and help."""
    lines = []
    for section, items in sections(cls).items():
        lines.append(f"{section}:")
        for item in items:
            shortcut = f" ({', '.join(item.flags)})" if item.flags else ""
            lines.append(f"  --{item.path}{shortcut} = {show(item.default)}: {item.help}")
    return lines


def read_cfg(path: Path) -> Dict[str, Any]:
    """A `.cfg` file's sections, not interpolated (overrides come first); E131 when it
    cannot be parsed."""
    from thinc.api import Config

    if not path.is_file():
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark is no part of it
    except (OSError, UnicodeDecodeError) as err:
        raise ElmoError(Errors.E131.format(path=path, err=err)) from err
    try:
        return dict(Config().from_str(_with_parent_sections(text), interpolate=False))
    except Exception as err:  # thinc and configparser raise several kinds
        raise ElmoError(Errors.E131.format(path=path, err=str(err).strip())) from err


def _with_parent_sections(text: str) -> str:
    """A .cfg text with the sections above its subsections declared (`[model.options]`
    alone means `[model]` too, which thinc would otherwise refuse)."""
    declared = set(re.findall(r"(?m)^\[([^\]\n]+)\]\s*$", text))
    missing = sorted({".".join(name.split(".")[:i]) for name in declared
                      for i in range(1, name.count(".") + 1)} - declared,
                     key=lambda name: name.count("."))
    return "".join(f"[{name}]\n" for name in missing) + text


def interpolate(nested: Dict[str, Any], source: str) -> Dict[str, Any]:
    """Resolve `${section.key}` references, as spaCy's configs do."""
    from thinc.api import Config

    try:
        return dict(Config(nested).interpolate())
    except Exception as err:
        raise ElmoError(Errors.E131.format(path=source, err=str(err).strip())) from err


def cfg_text(cls: type, flat: Mapping[str, Any]) -> str:
    """Flat values as a `.cfg` file, every section and setting in declaration order; a
    dict-valued setting is a subsection (`[model.options]`). Values are written as JSON, so
    that reading the file gives them back (loading interpolates `${section.key}`, so a text
    holding `${` would be read as a reference; a lone `$` stays as it is)."""
    lines: List[str] = []
    for section, items in sections(cls).items():
        lines.append(f"[{section}]")
        below = [item for item in items if isinstance(item.default, dict)]
        lines += [f"{item.name} = {show(flat[item.name])}" for item in items
                  if item not in below]
        for item in below:
            lines += ["", f"[{item.path}]"]
            lines += [f"{key} = {show(value)}" for key, value in flat[item.name].items()]
        lines.append("")
    return "\n".join(lines)

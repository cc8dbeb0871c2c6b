"""One place that checks the type and range of every setting a user writes: options.json and
`--options`, pretraining configs and flags, the component's and the models' config values,
the CLI's numbers. An error names the key, what it must be, what it got, and the fix."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from .errors import ElmoError, Errors


@dataclass(frozen=True)
class Rule:
    """What a value must be: `what` for the message, `ok` the test (None allowed when
    `optional`), `kind` the JSON type expected (for the fix hint)."""

    what: str
    ok: Callable[[Any], bool]
    kind: str = ""
    optional: bool = False


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def integer(minimum: Optional[int] = None, maximum: Optional[int] = None, *,
            optional: bool = False) -> Rule:
    what = {None: "an integer", 0: "an integer >= 0", 1: "a positive integer"}.get(
        minimum, f"an integer >= {minimum}")
    if maximum is not None:
        what = f"an integer in [{minimum}, {maximum}]"
    return Rule(what, lambda v: is_int(v) and (minimum is None or v >= minimum)
                and (maximum is None or v <= maximum), "int", optional)


# More torch CPU threads than any machine has cores for: creating 20,000 made GNU OpenMP
# fail ("Thread creation failed"), 100,000 crashed `embed` (exit 139) here.
MAX_THREADS = 1024
# Seeds: torch takes 64-bit ones, and pretraining derives others from the seed (seed *
# 7919 + 1 + rank); 10**23 overflowed.
SEED_RANGE = (-(2**31), 2**31 - 1)


def thread_count(*, optional: bool = False) -> Rule:
    """A count of torch CPU threads: 1 to MAX_THREADS."""
    return integer(1, MAX_THREADS, optional=optional)


def random_seed() -> Rule:
    """A random seed: a 32-bit integer."""
    return integer(*SEED_RANGE)


def number(low: Optional[float] = None, high: Optional[float] = None, *,
           low_open: bool = False, high_open: bool = False, optional: bool = False) -> Rule:
    """A finite int or float within [low, high] (an open end with `*_open`)."""
    if low is not None and high is not None:
        what = (f"a number in {'(' if low_open else '['}{low:g}, {high:g}"
                f"{')' if high_open else ']'}")
    elif low is not None:
        what = f"a number {'>' if low_open else '>='} {low:g}"
        what = "a positive number" if (low, low_open) == (0, True) else what
    else:
        what = "a number"

    def ok(v: Any) -> bool:
        if not is_number(v):
            return False
        if low is not None and (v <= low if low_open else v < low):
            return False
        return high is None or (v < high if high_open else v <= high)

    return Rule(what, ok, "number", optional)


def boolean(*, optional: bool = False) -> Rule:
    return Rule("true or false", lambda v: isinstance(v, bool), "bool", optional)


def choice(values: Sequence[Any], *, optional: bool = False) -> Rule:
    return Rule(f"one of {list(values)}", lambda v: isinstance(v, str) and v in values, "",
                optional)


def string(*, optional: bool = False) -> Rule:
    return Rule("a string", lambda v: isinstance(v, str), "", optional)


def path(*, optional: bool = False) -> Rule:
    return Rule("a path (a string)", lambda v: isinstance(v, (str, os.PathLike)), "", optional)


def strings(*, optional: bool = False) -> Rule:
    return Rule("a list of strings",
                lambda v: isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v),
                "list", optional)


def regex(*, optional: bool = False) -> Rule:
    def ok(v: Any) -> bool:
        if not isinstance(v, str):
            return False
        try:
            re.compile(v)
        except re.error:
            return False
        return True

    return Rule("a valid regular expression", ok, "", optional)


def torch_device() -> Rule:
    """A torch device for pretraining: auto, cpu, cuda or cuda:N."""
    return Rule("auto, cpu, cuda or cuda:N",
                lambda v: isinstance(v, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?", v)
                is not None, "")


def mapping() -> Rule:
    return Rule("an object of key-value pairs (a dict)", lambda v: isinstance(v, dict), "")


def numbers(*, low: float = 0.0, optional: bool = False) -> Rule:
    """A non-empty list of numbers >= low with a positive sum (layer weights)."""
    return Rule(f"a non-empty list of numbers >= {low:g} with a positive sum",
                lambda v: (isinstance(v, (list, tuple)) and len(v) > 0
                           and all(is_number(x) and x >= low for x in v) and sum(v) > 0),
                "list", optional)


def fix_hint(value: Any, rule: Rule) -> str:
    """How to write `value` so that it passes, when that is clear from its type."""
    if isinstance(value, str):
        text = value.strip()
        if rule.kind == "bool" and text.lower() in ("true", "false"):
            return f" Write {text.lower()} without quotes."
        if rule.kind in ("int", "number"):
            try:
                parsed = float(text)
            except ValueError:
                return ""
            if not math.isfinite(parsed):  # NaN or infinity: no setting takes them
                return ""
            if rule.kind == "number" or parsed.is_integer():
                return f" Write {text} without quotes."
        if rule.kind == "list":
            return f" Write a list: {json.dumps([value])}."
        return ""
    if isinstance(value, (list, tuple)) and len(value) == 1 and rule.kind in (
            "int", "number", "bool"):
        return f" Write a single value, {value[0]!r}, not a list."
    if rule.kind == "int" and isinstance(value, float) and value.is_integer():
        return f" Write {int(value)}, not {value!r}."
    return ""


def describe_value(value: Any) -> str:
    """The value as written, with its type where the type is the problem."""
    if isinstance(value, str):
        return f"{value!r} (a string)"
    if isinstance(value, (list, tuple)):
        return f"{list(value)!r} (a list)"
    return repr(value)


def check(key: str, value: Any, rule: Rule, template: str = Errors.E020) -> None:
    """Raise `template` (with key, what, value, fix) unless `value` passes `rule`."""
    if value is None and rule.optional:
        return
    if not rule.ok(value):
        what = rule.what + (" or null" if rule.optional else "")
        raise ElmoError(template.format(key=key, what=what, value=describe_value(value),
                                        fix=fix_hint(value, rule)))


def check_all(values: Mapping[str, Any], rules: Mapping[str, Rule],
              template: str = Errors.E020, names: Optional[Mapping[str, str]] = None) -> None:
    """`check` every key of `rules` present in `values` (`names`: how to show a key)."""
    for key, rule in rules.items():
        if key in values:
            check((names or {}).get(key, key), values[key], rule, template)


def check_keys(given: Sequence[str], known: Sequence[str], where: str) -> None:
    """Raise E027 for keys not in `known`."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ElmoError(Errors.E027.format(keys=unknown, where=where, known=sorted(known)))

"""The package's imports: no cycles (TYPE_CHECKING and function-level imports included), the
layering of CONTRIBUTING.md: errors/files <- bilm <- ml <- pipeline, pretrain, embed <- serve
<- cli (the project's lab on top: tests/experiments/test_boundaries.py), and the biLM's
computation apart from its files (`bilm/io` imports the biLM, never the other way)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

PACKAGE = "spacy_elmo"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# The layer of each part of the package: a module may import its own part and lower layers
# only. The top-level modules other than those named are the base (errors, files, ...).
LAYERS = {"bilm": 1, "ml": 2, "pretrain": 2, "pipeline": 3, "embed": 3, "serve": 4, "cli": 5,
          "__main__": 6}
# Third-party packages a part must not import (pretrain may: spaCy's tokenizers split its
# corpus).
FORBIDDEN = {"bilm": ("spacy", "thinc")}
# The biLM's files (`bilm.io`) stand on its computation; the computation reads no files.
IO = "spacy_elmo.bilm.io"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(name: str, path: Path, known: Set[str]) -> Set[str]:
    """Every module `name` imports (anywhere in its file), resolved; for `from X import y`
    the submodule X.y when there is one, else X."""
    is_package = path.name == "__init__.py"
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(name, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return found


def resolve(name: str, is_package: bool, level: int, module: Optional[str]) -> str:
    if level == 0:
        return module or ""
    parts = name.split(".")
    if not is_package:
        parts.pop()
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def graph() -> Dict[str, Set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def internal(graph_: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """The graph restricted to the package's own modules; a package's __init__ is not an
    edge of its own submodules' imports (`from .x import y` inside it is)."""
    return {name: {m for m in deps if m in graph_ and m != name} for name, deps in graph_.items()}


def find_cycle(edges: Dict[str, Set[str]]) -> Optional[List[str]]:
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def part(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(name: str) -> int:
    return LAYERS.get(part(name), 0)


def layering_violations(graph_: Dict[str, Set[str]]) -> List[Tuple[str, str]]:
    bad = []
    for name, deps in graph_.items():
        for dep in deps:
            if dep.split(".")[0] == PACKAGE:
                if dep == PACKAGE or part(dep) == part(name) or layer(dep) == layer(name) == 0:
                    continue
                if layer(dep) >= layer(name):
                    bad.append((name, dep))
            elif dep.split(".")[0] in FORBIDDEN.get(part(name), ()):
                bad.append((name, dep))
    return sorted(bad)


def io_violations(graph_: Dict[str, Set[str]]) -> List[Tuple[str, str]]:
    """Imports of `bilm.io` by the rest of `bilm` (its package's __init__ may re-export)."""
    return sorted((name, dep) for name, deps in graph_.items()
                  if name.startswith("spacy_elmo.bilm.") and not name.startswith(IO)
                  for dep in deps if dep.startswith(IO))


def test_bilm_computation_reads_no_files() -> None:
    assert io_violations(graph()) == []


def test_no_import_cycle() -> None:
    cycle = find_cycle(internal(graph()))
    assert cycle is None, " -> ".join(cycle or [])


def test_layering() -> None:
    assert layering_violations(graph()) == []


def test_checks_find_what_they_look_for() -> None:
    """The checks see TYPE_CHECKING and function-level imports, and relative ones."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    fake = {"spacy_elmo.bilm.x": {"spacy_elmo.ml.y", "thinc.api"},
            "spacy_elmo.ml.y": {"spacy_elmo.pretrain.z", "spacy_elmo.bilm.x"},
            "spacy_elmo.cli.c": {"spacy_elmo.ml.y", "spacy_elmo.errors"}}
    assert layering_violations(fake) == [
        ("spacy_elmo.bilm.x", "spacy_elmo.ml.y"), ("spacy_elmo.bilm.x", "thinc.api"),
        ("spacy_elmo.ml.y", "spacy_elmo.pretrain.z")]
    assert io_violations({"spacy_elmo.bilm.model": {"spacy_elmo.bilm.io.weights"},
                          "spacy_elmo.bilm.io.weights": {"spacy_elmo.bilm.model"}}) == [
        ("spacy_elmo.bilm.model", "spacy_elmo.bilm.io.weights")]
    edges = graph()
    assert "spacy_elmo.errors" in edges["spacy_elmo.files.atomic"]
    assert "spacy_elmo.ml.elmo_model" in edges["spacy_elmo.ml.assemble"]


@pytest.mark.parametrize("source,expected", [
    ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
     "if TYPE_CHECKING:\n    from .b import B\n", "spacy_elmo.pipeline.b"),
    ("def f():\n    from ..bilm import weights\n", "spacy_elmo.bilm.weights"),
])
def test_hidden_imports_are_seen(tmp_path: Path, source: str, expected: str) -> None:
    path = tmp_path / "a.py"
    path.write_text(source, encoding="utf-8")
    known = {"spacy_elmo.pipeline.b", "spacy_elmo.bilm.weights", "spacy_elmo.bilm"}
    assert expected in imports("spacy_elmo.pipeline.a", path, known)


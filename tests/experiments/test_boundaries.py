"""The project's lab (`lab/spacy_elmo_lab`) sits on top of the library: it may import the
pipeline, pretraining and biLM packages, never the CLI; the library never imports it; no file
edits the module search path."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "spacy_elmo"
LAB = ROOT / "lab" / "spacy_elmo_lab"


def _imports(path: Path):
    """The absolute names of the modules a file imports (relative imports resolved)."""
    base_dir = ROOT / "lab" if path.is_relative_to(ROOT / "lab") else ROOT
    module = ".".join(path.relative_to(base_dir).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            name = f"{base}.{node.module}" if node.level and node.module else (
                base if node.level else node.module)
            yield name
            yield from (f"{name}.{alias.name}" for alias in node.names)


def test_the_lab_never_imports_the_cli():
    assert len(list(LAB.glob("*.py"))) > 10
    for path in LAB.glob("*.py"):
        bad = [n for n in _imports(path) if n == "spacy_elmo.cli" or
               n.startswith("spacy_elmo.cli.")]
        assert not bad, (path.name, bad)


def test_the_library_never_imports_the_lab():
    for path in PACKAGE.rglob("*.py"):
        bad = [n for n in _imports(path) if n.startswith("spacy_elmo_lab")]
        assert not bad, (path, bad)


def _edits_search_path(tree: ast.AST) -> bool:
    """Whether the code changes the module search path: a call on `sys.path` (insert,
    append, ...), an assignment to it or to a slice of it, or pytest's `syspath_prepend`."""
    def is_search_path(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                is_search_path(node.func.value) or node.func.attr == "syspath_prepend"):
            return True
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(is_search_path(t.value if isinstance(t, ast.Subscript) else t)
                   for t in targets):
                return True
    return False


def test_no_sys_path_edits_in_scripts_benchmarks_or_tests():
    """The experiments were once imported as `from compare import ...` after editing the
    module search path; every file imports the package instead."""
    assert _edits_search_path(ast.parse("import sys\nsys.path[:0] = ['x']"))
    for folder in ("scripts", "benchmarks", "tests", "spacy_elmo", "lab"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            assert not _edits_search_path(tree), path


def test_scripts_are_thin():
    for path in (ROOT / "scripts").glob("*.py"):
        code = [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith(("#", '"""'))]
        assert len(code) <= 10, path.name
        assert "spacy_elmo_lab" in path.read_text(encoding="utf-8"), path.name

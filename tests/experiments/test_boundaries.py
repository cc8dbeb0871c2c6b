"""The project's lab (`lab/spacy_elmo_lab`) sits on top of the library: it may import the
pipeline, pretraining and biLM packages, never the CLI; the library never imports it; no file
edits the module search path."""

import ast
import os
import re
import subprocess
import sys
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


def test_no_sys_path_edits_in_the_lab_benchmarks_or_tests():
    """The experiments were once imported as `from compare import ...` after editing the
    module search path; every file imports the package instead."""
    assert _edits_search_path(ast.parse("import sys\nsys.path[:0] = ['x']"))
    for folder in ("benchmarks", "tests", "spacy_elmo", "lab"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            assert not _edits_search_path(tree), path


# runs each lab command module as `python -m` does, with --help (a typer command exits 0)
HELP = """
import runpy, sys
for name in sys.argv[1:]:
    sys.argv = [name, "--help"]
    try:
        runpy.run_module(f"spacy_elmo_lab.{name}", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        print(name, stop.code, flush=True)
    else:
        print(name, "no exit", flush=True)
"""


def test_every_lab_command_runs_as_a_module():
    """The commands of project.yml and the docs are `python -m spacy_elmo_lab.MODULE`: each
    such module exists and answers --help."""
    commands = sorted(p.stem for p in LAB.glob("*.py")
                      if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8"))
    named = set(re.findall(r"python -m spacy_elmo_lab\.(\w+)",
                           (ROOT / "project.yml").read_text(encoding="utf-8")))
    assert named and named <= set(commands)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", HELP, *commands], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.endswith((" 0", " exit"))]
    assert lines == [f"{name} 0" for name in commands], done.stdout

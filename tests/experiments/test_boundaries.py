"""The experiments package sits on top: it may import the pipeline, pretraining and biLM
packages, never the CLI; none of those imports it; no file edits sys.path to import."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "spacy_elmo"


def _imports(path: Path):
    """The absolute names of the modules a file imports (relative imports resolved)."""
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
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


def test_experiments_never_import_the_cli():
    for path in (PACKAGE / "experiments").glob("*.py"):
        bad = [n for n in _imports(path) if n == "spacy_elmo.cli" or
               n.startswith("spacy_elmo.cli.")]
        assert not bad, (path.name, bad)


def test_the_library_never_imports_the_experiments():
    for sub in ("bilm", "pipeline", "pretrain", "cli"):
        for path in (PACKAGE / sub).rglob("*.py"):
            bad = [n for n in _imports(path) if n.startswith("spacy_elmo.experiments")]
            assert not bad, (path, bad)


def test_no_sys_path_edits_in_scripts_benchmarks_or_tests():
    """The experiments were imported as `from compare import ...` after sys.path.insert."""
    for folder in ("scripts", "benchmarks", "tests", "spacy_elmo"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__):
                continue
            text = path.read_text(encoding="utf-8")
            assert "sys.path.insert" not in text and "syspath_prepend" not in text, path


def test_scripts_are_thin():
    for path in (ROOT / "scripts").glob("*.py"):
        code = [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith(("#", '"""'))]
        assert len(code) <= 10, path.name
        assert "spacy_elmo.experiments" in path.read_text(encoding="utf-8"), path.name

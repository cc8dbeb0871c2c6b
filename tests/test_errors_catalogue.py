"""The error catalogues, the package's (`spacy_elmo.errors`) and the lab's
(`spacy_elmo_lab.errors`, which extends it with the messages only the lab shows): every
message carries its code, every code is used where its catalogue is, and every error or
warning the package shows a user comes from the catalogue."""

import ast
import warnings
from pathlib import Path

import pytest
from spacy_elmo_lab import errors as lab_errors

from spacy_elmo.errors import CODE, ElmoError, Errors, Warnings


def codes(catalogue):
    """Every code of `Errors` or `Warnings` with its message (code in front), in the order
    of the catalogue."""
    return {name: getattr(catalogue, name) for name in vars(catalogue) if CODE.fullmatch(name)}

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_elmo"
# Calls that show a message to a user: exceptions of the catalogue, the CLI's stderr
# printers, Python warnings, tqdm's message line.
SINKS = {"ElmoError", "DiskFull", "fail", "warn", "warnings.warn", "tqdm.write"}
# Arguments that hold a catalogue message one step away: an ElmoError's text, a template
# passed in by the caller (validation.check), a message chosen just before, a method that
# returns Warnings.W002/W004.
INDIRECT = ("str(err)", "template.format(", "error.format(", "self.truncation_warning(")


LAB = PACKAGE.parent / "lab" / "spacy_elmo_lab"  # the project's lab, with its own catalogue


def sources(*folders):
    for path in sorted(p for folder in folders or (PACKAGE, LAB) for p in folder.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


def dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


@pytest.mark.parametrize("catalogue", [Errors, Warnings, lab_errors.Errors,
                                       lab_errors.Warnings])
def test_every_message_starts_with_its_code_and_codes_are_in_order(catalogue):
    found = codes(catalogue)
    assert len(found) >= 1
    for code, message in found.items():
        assert message.startswith(f"[{code}] "), code
        assert message.count(f"[{code}]") == 1
    assert list(found) == sorted(found), "sections or codes out of order"
    assert catalogue.__name__ in ("Errors", "Warnings")  # other attributes read as usual


def test_a_formatted_message_keeps_its_code():
    assert Errors.E001.format(path="x", cwd="/").startswith("[E001] No such file: 'x'.")
    with pytest.raises(ElmoError, match=r"^\[E055\] "):
        raise ElmoError(Errors.E055)


def used_codes(folder):
    """The codes read in `folder`'s code (attribute access), not merely named in comments."""
    used = set()
    for path, text in sources(folder):
        tree = ast.parse(text)
        # in errors.py, the codes its functions raise (errors.damaged: E002)
        roots = ([n for n in tree.body if isinstance(n, ast.FunctionDef)]
                 if path.name == "errors.py" else [tree])
        used |= {node.attr for root in roots for node in ast.walk(root)
                 if isinstance(node, ast.Attribute) and dotted(node.value) in
                 ("Errors", "Warnings") and CODE.fullmatch(node.attr)}
    return used


def test_every_code_is_used_in_the_package():
    used = used_codes(PACKAGE)
    defined = set(codes(Errors)) | set(codes(Warnings))
    assert defined - used == set(), "codes defined but never used"
    assert used - defined == set(), "codes used but not defined"


def test_every_lab_code_is_used_in_the_lab_and_only_there():
    """The lab's catalogue holds the messages only the lab shows: each is used in the lab,
    none has a code of the package's, and a code the lab reads is the lab's or the
    package's."""
    package = set(codes(Errors)) | set(codes(Warnings))
    lab = set(codes(lab_errors.Errors)) | set(codes(lab_errors.Warnings))
    used = used_codes(LAB)
    assert lab and not lab & package
    assert lab - used == set(), "lab codes defined but never used"
    assert used - lab - package == set(), "codes used in the lab but not defined"
    assert lab_errors.Errors.E220.startswith("[E220] ")
    assert lab_errors.Errors.E001 == Errors.E001  # the package's codes read through it


def test_every_message_shown_to_a_user_comes_from_the_catalogue():
    bad = []
    for path, text in sources():
        if path.parent.name == "spacy_elmo_lab":  # the project's scripts, moved in as they were:
            continue  # argument problems as typer.BadParameter (their codes: E090-E099)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                args = node.exc.args
                if args and isinstance(args[0], (ast.Constant, ast.JoinedStr)):
                    bad.append(f"{path.name}:{node.lineno} raises a literal message")
            if not (isinstance(node, ast.Call) and dotted(node.func) in SINKS and node.args):
                continue
            if path.name == "errors.py":  # errors.warn hands its message on
                continue
            arg = ast.get_source_segment(text, node.args[0]) or ""
            if not ("Errors." in arg or "Warnings." in arg or arg.startswith(INDIRECT)):
                bad.append(f"{path.name}:{node.lineno} {dotted(node.func)}({arg[:40]})")
    assert bad == []


def test_errors_and_warnings_reach_the_user_with_their_code(tmp_path, tiny_weights_dir):
    from typer.testing import CliRunner

    from spacy_elmo.bilm import load_bilm
    from spacy_elmo.bilm.embedder import Embedder
    from spacy_elmo.cli import app

    result = CliRunner().invoke(app, ["info", str(tmp_path / "missing.hdf5")])
    assert result.exit_code == 1
    assert "[E001] No such file" in " ".join(result.output.split())
    embedder = Embedder(load_bilm(tiny_weights_dir))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(embedder.embed([["x" * 80]]))
    assert [str(w.message)[:7] for w in caught] == ["[W002] "]


def test_damage_is_reported_one_way():
    """A damaged file is E002 through errors.damaged only (it was built in four places)."""
    builders = [path.name for path, text in sources() if path.name != "errors.py"
                for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Attribute) and dotted(node) == "Errors.E002"]
    assert builders == []
    users = {path.name for path, text in sources() if "damaged(" in text}
    assert {"json_io.py", "weights.py", "efml.py", "serialize.py", "export.py"} <= users


def test_a_damage_error_names_the_file_kind_and_first_line():
    from spacy_elmo.errors import damaged

    error = damaged("x.hdf5", "an HDF5 weights file", OSError("truncated file.\nmore"))
    assert str(error) == Errors.E002.format(path="x.hdf5", kind="an HDF5 weights file",
                                            err="truncated file")


def test_the_warnings_that_are_no_python_warnings_are_those_the_docs_name():
    """docs/reliability.md says every warning is an ElmoWarning but those it names; a
    message of the catalogue handed to a logger or to tqdm.write is one of them (W011 and
    W015 were printed while the docs said otherwise)."""
    import re

    printed = set()
    for _, text in sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and (dotted(node.func) in (
                    "log.warning", "log.error", "log.info", "tqdm.write", "print")
                    or dotted(node.func).endswith("guard.count")):  # logs what it counts
                printed |= {n.attr for arg in node.args for n in ast.walk(arg)
                            if isinstance(n, ast.Attribute) and dotted(n.value) == "Warnings"}
    doc = (PACKAGE.parent / "docs" / "reliability.md").read_text(encoding="utf-8")
    named = doc[doc.index("are not Python warnings"):].split("\n\n")[0]
    assert printed == set(re.findall(r"W\d{3}", named)) == {
        "W012", "W014", "W016", "W031", "W032", "W033", "W034", "W041"}

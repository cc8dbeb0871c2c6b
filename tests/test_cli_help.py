"""Every `spacy-elmo` help text reaches the terminal whole: no markup eats `[serve]` or
`<S>`, and the top-level command list is one flowing paragraph a command."""
import re
from typing import Any, Iterator, List, Tuple

import pytest
import typer
from typer.testing import CliRunner

from spacy_elmo.cli import app

# what a markup language would take for its own: [tags], <html>, `code`, *emphasis*
FRAGILE = re.compile(r"\[[^\]\s]+\]|</?[A-Za-z]+>|`[^`]+`|\*[^*\s]+\*")


def commands() -> List[Tuple[str, Any]]:
    group: Any = typer.main.get_command(app)  # typer's own click, vendored in new releases
    return [(name, group.commands[name]) for name in sorted(group.commands)]


def source_texts(command: Any) -> Iterator[str]:
    """The help texts written in the code: the command's and each parameter's."""
    yield command.help or ""
    for param in command.params:
        yield getattr(param, "help", None) or ""


def flat(text: str) -> str:
    """The text without its line breaks (a wrap may also break after a hyphen)."""
    return re.sub(r"-\s+", "-", " ".join(text.split()))


@pytest.mark.parametrize("name", [name for name, _ in commands()])
def test_every_fragment_of_a_help_text_is_printed(name):
    command = dict(commands())[name]
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    shown = flat(result.output)
    fragments = [m.group(0) for text in source_texts(command) for m in FRAGILE.finditer(text)]
    for fragment in fragments:
        assert flat(fragment) in shown, f"{name} --help lost {fragment!r}"


def test_serve_help_names_the_extra_to_install():
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "100"})
    assert "pip install 'spacy-elmo[serve]'" in flat(result.output)


def test_the_command_list_is_one_line_a_command():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    listing = result.output.split("Commands:", 1)[1].strip().splitlines()
    names = [name for name, _ in commands()]
    assert sorted(line.split()[0] for line in listing) == names
    for line in listing:
        assert len(line.split(None, 1)) == 2, f"a command without its summary: {line!r}"

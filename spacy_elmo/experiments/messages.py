"""How the experiment scripts report a problem the user can fix: its one-line message on
standard error and exit status 1 (as the spacy-elmo CLI does), not a traceback."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import typer
from wasabi import Printer

from ..errors import ElmoError

_stderr = Printer(no_print=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Inside: an ElmoError ends the command with its message and exit status 1."""
    try:
        yield
    except ElmoError as err:
        typer.echo(_stderr.fail(str(err)), err=True)
        raise typer.Exit(1) from None

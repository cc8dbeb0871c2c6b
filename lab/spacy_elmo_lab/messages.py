"""How the lab's commands report a problem the user can fix: its one-line message on
standard error and exit status 1 (as the spacy-elmo CLI does), not a traceback, nor click's
usage box with exit status 2. A command runs through `one_line_errors`, or `user_errors`
inside it."""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

import typer
from wasabi import Printer

from spacy_elmo.errors import ElmoError

_stderr = Printer(no_print=True)
T = TypeVar("T")


@contextmanager
def user_errors() -> Iterator[None]:
    """Inside: an ElmoError, or a bad value a command's own checks report
    (typer.BadParameter), ends the command with its message and exit status 1."""
    try:
        yield
    except ElmoError as err:
        typer.echo(_stderr.fail(str(err)), err=True)
        raise typer.Exit(1) from None
    except typer.BadParameter as err:
        typer.echo(_stderr.fail(err.message), err=True)
        raise typer.Exit(1) from None


def one_line_errors(command: Callable[..., T]) -> Callable[..., T]:
    """`command` as a script runs it (`typer.run(one_line_errors(main))`, or registered so
    on a script's app): the problems `user_errors` reports in one line, exit 1. The function
    itself still raises them, for callers in Python."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> T:
        with user_errors():
            return command(*args, **kwargs)

    return run

"""The errors cclab reports to a user: each carries exactly one line of text.

The CLI prints `error: <line>` on stderr and exits with `exit_code`; the Python API raises
them as ordinary exceptions.
"""

from __future__ import annotations


class CclabError(Exception):
    """An error with a one-line message meant for the user."""

    exit_code = 2

    def __init__(self, line: str) -> None:
        # Keep the promise of one line even if a caller passes a multi-line message.
        self.line = " ".join(line.split())
        super().__init__(self.line)


class SpecError(CclabError):
    """The scenario spec is invalid: `<field>: <what is wrong> (got <value>)`."""


class EngineUnavailable(CclabError):
    """The requested engine cannot be used on this installation."""


class EngineError(CclabError):
    """The engine accepted the config but failed while running it."""

    exit_code = 1

"""The error a spec validator raises to name a field below the model that raised it."""

from __future__ import annotations


class FieldError(ValueError):
    """A validation error about a field below the model that raised it."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        self.loc = loc
        super().__init__(message)

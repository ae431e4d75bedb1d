"""The kernel engine's error: one line a user can act on."""

from __future__ import annotations

try:  # The CLI prints `error: <line>` for any CclabError; stand alone if cclab.errors is absent.
    from cclab.errors import EngineError as _Base
except ImportError:  # pragma: no cover - only when the package is used without its siblings
    _Base = RuntimeError  # type: ignore[misc, assignment]


class KernelEngineError(_Base):  # type: ignore[misc, valid-type]
    """The kernel engine cannot run this config here, or failed while running it."""

    def __init__(self, line: str) -> None:
        line = " ".join(str(line).split())
        super().__init__(line)
        self.line = line


class KernelPreflightError(KernelEngineError):
    """The kernel engine refuses this config here, before anything is created: exit status 2
    as for any config an engine does not accept (the CLI's 1 is for failures while running)."""

    exit_code = 2


class UserSourceError(KernelEngineError):
    """A user's C source that clang or the BPF verifier refuses: bad input, exit status 2,
    in one line with the file, the line and the compiler's or the verifier's words."""

    exit_code = 2

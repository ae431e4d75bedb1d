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


class KernelEngineRefused(KernelEngineError):
    """The kernel engine cannot run this config here, found before anything was created:
    exit status 2 like any config the CLI refuses (the engine never started)."""

    exit_code = 2

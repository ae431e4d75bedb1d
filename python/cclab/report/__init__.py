"""`cclab report`: one self-contained report.html for a run, sweep, study or validate folder.

The page opens without a network: Plotly's JavaScript is inlined, figures are data URIs.

    write_report(folder)              detect the folder's kind, write folder/report.html
    write_run(result, out_dir)        RunResult.write with report.html in the same atomic step
"""

from __future__ import annotations

import os
from pathlib import Path

from cclab.errors import CclabError
from cclab.results import RunResult

REPORT_FILE = "report.html"
KINDS = ("run", "sweep", "study", "validate")


def folder_kind(folder: str | os.PathLike[str]) -> str:
    """run (a RunResult), validate (set.json + summary.md), study (summary.md) or sweep (runs/)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CclabError(f"{folder}: no such folder")
    if (folder / "result.json").is_file() and (folder / "spec.json").is_file():
        return "run"
    if (folder / "summary.md").is_file():
        return "validate" if (folder / "set.json").is_file() else "study"
    if (folder / "runs").is_dir() or (folder / "flows.parquet").is_file():
        return "sweep"
    raise CclabError(f"{folder}: not a run, sweep, study or validate folder (no result.json, summary.md or runs/)")


def render_report(folder: str | os.PathLike[str]) -> str:
    """The report page of `folder` as an HTML string."""
    folder = Path(folder)
    kind = folder_kind(folder)
    if kind == "run":
        from cclab.report.run import render_run

        return render_run(RunResult.read(folder), f"Run {folder.resolve().name}")
    if kind == "sweep":
        from cclab.report.sweep import render_sweep

        return render_sweep(folder, f"Sweep {folder.resolve().name}")
    from cclab.report.documents import render_document

    return render_document(folder, kind)


def write_report(folder: str | os.PathLike[str]) -> Path:
    """Write `folder/report.html` (atomically: a reader sees the old page or the new one)."""
    folder = Path(folder)
    return _write_atomic(folder / REPORT_FILE, render_report(folder))


def write_run_report(result: RunResult, folder: str | os.PathLike[str], title: str | None = None) -> Path:
    from cclab.report.run import render_run

    folder = Path(folder)
    return _write_atomic(folder / REPORT_FILE, render_run(result, title or f"Run {folder.name}"))


def write_run(result: RunResult, out_dir: str | os.PathLike[str]) -> Path:
    """Store a run's result with its report.html, both in RunResult.write's one atomic step."""
    out_dir = Path(out_dir)
    title = f"Run {out_dir.resolve().name}"
    return result.write(out_dir, also=lambda staging: write_run_report(result, staging, title))


def _write_atomic(target: Path, text: str) -> Path:
    # A plain open (not mkstemp) so the page gets the usual permissions, readable like the rest.
    staging = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        staging.write_text(text, encoding="utf-8")
        os.replace(staging, target)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    return target

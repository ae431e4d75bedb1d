"""The `cclab` command: parse arguments and delegate to the library.

Every error is one line on stderr (`error: ...`) with exit status 2 (1 if the engine
failed while running). With --json, stdout carries exactly one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from cclab.api import load
from cclab.engines import ENGINE_NAMES, get_engine
from cclab.errors import CclabError
from cclab.summary import render_summary

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="cclab: a congestion-control lab (BBR, CUBIC, Reno) in a simulator or on the Linux kernel.",
)

SpecArgument = Annotated[Path, typer.Argument(metavar="SPEC.toml", help="scenario spec (see README)", show_default=False)]


def _progress(line: str) -> None:
    # Plain text, never wrapped or styled: stderr may be a log file.
    sys.stderr.write(line + "\n")


def _fail(error: CclabError) -> NoReturn:
    sys.stderr.write(f"error: {error.line}\n")
    raise typer.Exit(error.exit_code)


@app.command()
def run(
    spec: SpecArgument,
    out: Annotated[Path | None, typer.Option("--out", help="result directory [default: out/<spec name>]")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the result as one JSON object on stdout")] = False,
    engine: Annotated[str | None, typer.Option(help=f"{' | '.join(ENGINE_NAMES)} [default: the spec's engine]")] = None,
) -> None:
    """Run a scenario and store its result (Parquet + JSON)."""
    try:
        scenario = load(spec)
        runner = get_engine(engine or scenario.engine)
        _progress(f"running {spec} on the {runner.name} engine")
        result = runner.run(scenario)
        written = result.write(out if out is not None else Path("out") / spec.stem)
    except CclabError as error:
        _fail(error)
    _progress(f"wrote {written}")
    if json_output:
        sys.stdout.write(json.dumps(result.to_json_dict(), allow_nan=False) + "\n")
    else:
        Console().print(render_summary(result))


@app.command()
def validate(spec: SpecArgument) -> None:
    """Check a scenario and print the resolved engine config."""
    try:
        config = load(spec).resolve()
    except CclabError as error:
        _fail(error)
    sys.stdout.write(json.dumps(config, indent=2) + "\n")

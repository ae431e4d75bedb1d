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

from cclab.engines.base import ENGINE_NAMES, get_engine
from cclab.errors import CclabError
from cclab.spec import load

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="cclab: a congestion-control lab (Reno, CUBIC, BBRv1-v3, DCTCP, Prague, your own BPF CC) in a simulator or on the Linux kernel.",
)

SpecArgument = Annotated[Path, typer.Argument(metavar="SPEC.toml", help="scenario spec (see docs/GUIDE.md)", show_default=False)]


ExecutorOption = Annotated[str, typer.Option("--executor", help='where runs go: local (this machine) | ray (a Ray cluster; pip install "cclab\\[ray]")')]
AddressOption = Annotated[
    str | None,
    typer.Option("--address", help="with --executor ray: HOST:PORT of the cluster's head, or auto: RAY_ADDRESS, else the cluster started on this machine with `ray start` [default: as auto, else a local cluster started for the command]"),
]


def _executor_choice(executor: str, address: str | None, jobs: int | None, *, kernel: bool = False):  # -> ExecutorChoice
    """The --executor/--address choice, checked before anything runs (Ray installed, the
    cluster answers, and takes kernel runs if `kernel`)."""
    from cclab.executor_choice import ExecutorChoice

    choice = ExecutorChoice(executor, address)
    if choice.kind == "ray" and jobs is not None:
        raise CclabError("--jobs: not used with --executor ray (the cluster's CPUs and kernel hosts set how many runs go at once)")
    choice.preflight(kernel=kernel)
    return choice


def _progress(line: str) -> None:
    # Plain text, never wrapped or styled: stderr may be a log file.
    sys.stderr.write(line + "\n")


def _fail(error: CclabError) -> NoReturn:
    sys.stderr.write(f"error: {error.line}\n")
    raise typer.Exit(error.exit_code)


ForceOption = Annotated[bool, typer.Option("--force", help="run even past the soft limits on estimated wall time and memory")]


@app.command()
def run(
    spec: SpecArgument,
    out: Annotated[Path | None, typer.Option("--out", help="result directory [default: out/<spec name>]")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print the result as one JSON object on stdout")] = False,
    engine: Annotated[str | None, typer.Option(help=f"{' | '.join(ENGINE_NAMES)} [default: the spec's engine]")] = None,
    force: ForceOption = False,
    until_steady: Annotated[bool, typer.Option("--until-steady", help="simulator: double duration_s (same seed) until the run converges")] = False,
    max_duration_s: Annotated[float | None, typer.Option("--max-duration-s", help="with --until-steady: the longest run [default: 16 x duration_s]")] = None,
) -> None:
    """Run a scenario and store its result (Parquet + JSON) and report.html."""
    from cclab.engines import budget
    from cclab.progress import SHOW_AFTER_S, RunProgressBar

    try:
        if max_duration_s is not None and not until_steady:
            raise CclabError("--max-duration-s: only with --until-steady")
        scenario = load(spec)
        runner = get_engine(engine or scenario.engine)
        config = scenario.resolve()
        if hasattr(runner, "check"):  # an engine's own refusals, before the run is announced
            runner.check(config)
        cost = budget.estimate(config, runner.name)
        budget.check(cost, force=force)
        # What runs, judges and writes a result (pandas, plotting) is imported once the spec is
        # known to be good: a refusal costs a third of the time.
        from cclab.analysis.steady import not_converged_line
        from cclab.api import run_until_steady
        from cclab.report import write_run
        from cclab.summary import render_summary

        line = f"running {spec} on the {runner.name} engine"
        if cost.wall_s > SHOW_AFTER_S:
            line += f" (estimated at most {cost.wall_s:.0f} s)"
        _progress(line)
        with RunProgressBar(spec.stem) as bar:
            if until_steady:
                steady = run_until_steady(
                    scenario, max_duration_s=max_duration_s, engine=runner.name, force=force, progress=bar, notify=_progress
                )
                result = steady.result
            else:
                result = runner.run(scenario, progress=bar)
        if until_steady:
            _progress(f"until steady: settled on duration_s = {steady.settled_duration_s:g}" + ("" if steady.converged else " (the cap)"))
        written = write_run(result, out if out is not None else Path("out") / spec.stem)
    except CclabError as error:
        _fail(error)
    except KeyboardInterrupt:
        # The result is written only once complete (atomically), so there is nothing to undo.
        _progress("interrupted: nothing written")
        raise typer.Exit(130) from None
    _progress(f"wrote {written}")
    warning = not_converged_line(result.steady_state)
    if warning is not None:
        _progress(warning)
    if json_output:
        sys.stdout.write(json.dumps(result.to_json_dict(), allow_nan=False) + "\n")
    else:
        Console().print(render_summary(result))


@app.command()
def report(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="a run, sweep, study or validate folder", show_default=False)],
) -> None:
    """Write DIR/report.html: one self-contained page (interactive charts, tables, figures) that opens offline."""
    from cclab.report import write_report

    try:
        written = write_report(folder)
    except CclabError as error:
        _fail(error)
    _progress(f"wrote {written}")


@app.command()
def check(spec: SpecArgument) -> None:
    """Check a scenario and print the resolved engine config."""
    try:
        config = load(spec).resolve()
    except CclabError as error:
        _fail(error)
    sys.stdout.write(json.dumps(config, indent=2) + "\n")


cc_app = typer.Typer(no_args_is_help=True, help="Your own congestion control from its BPF C source: check it, compare it hook by hook.")
app.add_typer(cc_app, name="cc")


@cc_app.command("check")
def cc_check(source: Annotated[str, typer.Argument(metavar="FILE.c[:NAME]", help="a BPF struct_ops tcp_congestion_ops source", show_default=False)]) -> None:
    """Build a source for both engines, list what it calls and whether each engine has it, and run it for 1 s in the simulator."""
    from cclab.engines import cc_check as checker

    try:
        result = checker.check(source, Path.cwd())
    except ValueError as error:
        _fail(CclabError(f"{source}: {error}"))
    sys.stdout.write("\n".join(checker.render(result)) + "\n")
    if not result.ok:
        _fail(CclabError(result.simulator_build or result.kernel_build or "failed"))


@cc_app.command("compare")
def cc_compare(
    source: Annotated[str, typer.Argument(metavar="FILE.c[:NAME]", help="the congestion control to compare: a C source or a built-in name", show_default=False)],
    against: Annotated[str, typer.Option("--against", help="the congestion control it is compared with, which drives the run: a built-in name or a C source", show_default=False)],
    spec: Annotated[Path | None, typer.Argument(metavar="[SPEC]", help="the scenario; its first flow is the one compared (default: one flow at 100 Mbit/s, 20 ms, 1 BDP, for 10 s)", show_default=False)] = None,
    define: Annotated[list[str] | None, typer.Option("--define", "-D", metavar="NAME=VALUE", help="a build parameter for the C sources, as clang's -D (repeatable)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as one JSON object")] = False,
) -> None:
    """Drive two congestion controls through the same hook calls of a simulated run and show where their answers first part."""
    from cclab.engines import cc_compare as comparer

    defines = {}
    for given in define or []:
        name, sep, value = given.partition("=")
        if not sep or not name.isidentifier():
            _fail(CclabError(f"--define: {given!r} is not NAME=VALUE"))
        defines[name] = value
    try:
        comparison = comparer.compare(source, against, spec, defines)
    except CclabError as error:
        _fail(error)
    sys.stdout.write((json.dumps(comparison) if as_json else "\n".join(comparer.render(comparison))) + "\n")


@app.command()
def validate(
    set_name: Annotated[str, typer.Option("--set", help="validation set: default (37 cases, ~20 min) | bbr23 (BBRv2/v3, ~6 min) | aqm (queue disciplines and ECN, ~6 min) | rtt (different RTTs, starved flows, high BDP; 5 runs each, ~25 min) | all | quick (3 cases)")] = "default",
    out: Annotated[Path | None, typer.Option("--out", help="output folder [default: out/validate-<set>]; finished runs there are reused")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", help="parallel simulator runs [default: all CPUs]; kernel runs go one at a time")] = None,
    repetitions: Annotated[int | None, typer.Option("--repetitions", help="at least this many runs an engine for the cases that compare medians and spreads (5 in the rtt set; 10 or more give the spread test power); finished runs are reused")] = None,
    case: Annotated[list[str] | None, typer.Option("--case", help="only this case of the set (repeat for more); the report covers only these")] = None,
    executor: ExecutorOption = "local",
    address: AddressOption = None,
) -> None:
    """Run a validation set on the simulator and the kernel and report how far they agree."""
    from cclab.executor_choice import use_executor
    from cclab.fidelity.sets import requested

    try:
        requested(set_name, case, repetitions)  # a refusal before importing what runs a set (pandas)
    except CclabError as error:
        _fail(error)
    from cclab.fidelity.report import console_lines
    from cclab.fidelity.runner import run_validation
    from cclab.report import write_report
    from cclab.sweep import SweepInterrupted

    try:
        with use_executor(_executor_choice(executor, address, jobs)):
            report = run_validation(set_name, out if out is not None else Path("out") / f"validate-{set_name}", jobs=jobs, repetitions=repetitions, cases=case)
        page = write_report(report.out_dir)
    except CclabError as error:
        _fail(error)
    except SweepInterrupted:
        _progress("interrupted: finished runs are kept; run the same command again to resume")
        raise typer.Exit(130) from None
    sys.stdout.write("\n".join(console_lines(report)) + "\n")
    _progress(f"wrote {report.summary_path}")
    _progress(f"wrote {page}")


@app.command()
def sweep(
    sweep_file: Annotated[Path, typer.Argument(metavar="SWEEP.toml", help="sweep file (see docs/GUIDE.md)", show_default=False)],
    out: Annotated[Path | None, typer.Option("--out", help="output folder; resumes what is already there [default: out/<sweep name>]")] = None,
    engine: Annotated[str | None, typer.Option(help=f"{' | '.join(ENGINE_NAMES)} [default: the base scenario's engine]")] = None,
    jobs: Annotated[int | None, typer.Option(help="parallel runs [default: CPU count for sim, 1 for kernel]")] = None,
    executor: ExecutorOption = "local",
    address: AddressOption = None,
    force: ForceOption = False,
) -> None:
    """Run every combination of a sweep's axes in parallel; rerun to resume."""
    from cclab.executor_choice import use_executor
    from cclab.sweep import SweepInterrupted, run_sweep

    try:
        with use_executor(_executor_choice(executor, address, jobs, kernel=engine == "kernel")):
            report = run_sweep(sweep_file, out if out is not None else Path("out") / sweep_file.stem, engine=engine, jobs=jobs, force=force)
    except CclabError as error:
        _fail(error)
    except SweepInterrupted as interrupt:
        sys.stdout.write("\n".join(interrupt.report.summary_lines()) + "\n")
        _progress("interrupted: finished runs are kept; run the same command again to resume")
        raise typer.Exit(130) from None
    sys.stdout.write("\n".join(report.summary_lines()) + "\n")
    if report.failed:
        raise typer.Exit(1)


@app.command()
def query(
    out_dir: Annotated[Path, typer.Argument(metavar="DIR", help="a sweep's output folder", show_default=False)],
    sql: Annotated[str, typer.Argument(metavar="SQL", help="DuckDB SQL over flows, flow_series, queue_series, events", show_default=False)],
    csv: Annotated[bool, typer.Option("--csv", help="print CSV")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="print a JSON array of row objects")] = False,
) -> None:
    """Query a sweep's results with SQL (DuckDB) and print a table."""
    from cclab.store import query as run_query
    from cclab.store import render_table

    try:
        frame = run_query(out_dir, sql)
    except CclabError as error:
        _fail(error)
    if csv:
        sys.stdout.write(frame.to_csv(index=False))
    elif json_output:
        sys.stdout.write(frame.to_json(orient="records") + "\n")
    else:
        Console().print(render_table(frame))


@app.command()
def reproduce(
    name: Annotated[str, typer.Argument(metavar="NAME", help="study name; an unknown name lists the studies", show_default=False)],
    engine: Annotated[str, typer.Option(help=" | ".join(ENGINE_NAMES))] = "sim",
    quick: Annotated[bool, typer.Option("--quick", help="a coarse subset in seconds (demos, CI)")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="study folder [default: out/<NAME>]; finished runs there are reused")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", help="parallel runs [default: all CPUs on sim, 1 on kernel]")] = None,
    include_invalid: Annotated[bool, typer.Option("--include-invalid", help="keep kernel runs that failed their validity checks")] = False,
    seeds: Annotated[int, typer.Option("--seeds", help="at least this many seeds (repetitions) per point; the summary shows their spread")] = 1,
    cc: Annotated[str | None, typer.Option("--cc", metavar="FILE.c[:NAME]", help="your congestion control (a BPF C source) in BBR's place (cao2019)")] = None,
    executor: ExecutorOption = "local",
    address: AddressOption = None,
) -> None:
    """Reproduce a paper's study: run its sweep, write figures (PNG, SVG), summary.md and report.html."""
    from cclab.executor_choice import use_executor
    from cclab.studies import get_study, run_study, study_cc

    try:
        if engine not in ENGINE_NAMES:
            raise CclabError(f"--engine: must be one of {', '.join(ENGINE_NAMES)} (got {engine!r})")
        if seeds < 1:
            raise CclabError(f"--seeds: must be at least 1 (got {seeds})")
        options = {} if cc is None else {"cc": study_cc(name, cc)}
        study = get_study(name)
        out_dir = out if out is not None else Path("out") / name
        with use_executor(_executor_choice(executor, address, jobs, kernel=engine == "kernel")):
            summary_path = run_study(study, out_dir, seeds=seeds, engine=engine, quick=quick, jobs=jobs, include_invalid=include_invalid, **options)
        from cclab.report import write_report  # pandas and plotting: not on the refusals' path

        report_path = write_report(out_dir)
    except CclabError as error:
        _fail(error)
    _progress(f"wrote {summary_path}")
    _progress(f"wrote {report_path}")


def _parse_loss(text: str) -> float:
    try:
        return float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise CclabError(f"--loss: expected a probability like 0.01 or 1% (got {text!r})") from None


@app.command()
def recommend(
    rate: Annotated[str, typer.Option("--rate", help="bottleneck rate, e.g. 500mbit", show_default=False)],
    rtt: Annotated[str, typer.Option("--rtt", help="base RTT, e.g. 200ms", show_default=False)],
    buffer: Annotated[str, typer.Option("--buffer", help="bottleneck buffer, e.g. 100KB, 250pkt, 1bdp", show_default=False)],
    loss: Annotated[str, typer.Option("--loss", help="random loss probability, e.g. 0.01 or 1%")] = "0",
    study: Annotated[Path | None, typer.Option("--study", help="a cao2019 study folder [default: the bundled model]")] = None,
    bbr: Annotated[str, typer.Option("--bbr", help="the BBR to weigh against CUBIC: bbr (BBRv1), bbr2 or bbr3")] = "bbr",
    json_output: Annotated[bool, typer.Option("--json", help="print the answer as one JSON object")] = False,
) -> None:
    """BBR (v1, v2 or v3) or CUBIC for a network, with expected goodput, retransmissions and confidence."""
    from cclab.analysis.recommend import load_model, recommend as answer, render
    from cclab.units import parse_duration_ns, parse_rate_bps, parse_size

    try:
        try:
            rate_bps = parse_rate_bps(rate)
            rtt_ns = parse_duration_ns(rtt)
            buffer_bytes = parse_size(buffer).bytes_for(rate_bps, rtt_ns)
        except ValueError as error:
            raise CclabError(str(error)) from None
        loss_probability = _parse_loss(loss)
        model, source = load_model(study)
        query = {"rate_mbps": rate_bps / 1e6, "rtt_ms": rtt_ns / 1e6, "buffer_bytes": float(buffer_bytes), "loss": loss_probability}
        result = answer(model, **query, bbr=bbr)
    except CclabError as error:
        _fail(error)
    if json_output:
        sys.stdout.write(json.dumps({"query": query, "model": source, **result.to_dict()}, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render(result, model=model, source=source, **query) + "\n")

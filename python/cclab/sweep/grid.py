"""What a sweep is and the runs it expands to: the sweep file's model, its axes, skip rules and
repetitions, each combination validated as a scenario, and the run key that names a run."""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cclab.engines.base import ENGINE_NAMES
from cclab.errors import SpecError
from cclab.spec import Scenario, _one_line, _show, read_toml
from cclab.spec.bpf_source import sources_beside
from cclab.spec.scenario import paths_beside

if TYPE_CHECKING:
    pass

# A sweep keeps the queue backlog every 10 ms, not every 1 ms as a single run does: a
# 60 s run then stores 6,000 queue samples instead of 60,000. Measured: 1 ms samples add
# 40-100 ms of JSON, DataFrame and Parquet work to each run, as much as many simulations.
SWEEP_QUEUE_SAMPLE_INTERVAL_MS = 10.0
# A guard against an axis typo that would plan millions of runs, not a limit of the runner.
MAX_RUNS = 1_000_000

AxisValue = str | int | float | bool | dict[str, Any]


class SkipRule(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    reason: str = Field(min_length=1)
    when: dict[str, AxisValue | list[AxisValue]] = Field(min_length=1)

    def matches(self, axis_values: dict[str, Any]) -> bool:
        for path, wanted in self.when.items():
            options = wanted if isinstance(wanted, list) else [wanted]
            if not any(_same(axis_values[path], option) for option in options):
                return False
        return True


class Sweep(BaseModel):
    """A base scenario and the axes that vary it. Build with `Sweep.from_toml` or directly."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = Field(default="sweep", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    # The base in scenario-spec form (a dict shaped like the TOML); `from_toml` and the
    # validator below turn a path or a Scenario into it.
    base: dict[str, Any]
    axes: dict[str, list[AxisValue]] = Field(default_factory=dict)
    repetitions: int = Field(default=1, ge=1)
    skip: list[SkipRule] = Field(default_factory=list)
    queue_sample_interval_ms: float | None = Field(default=SWEEP_QUEUE_SAMPLE_INTERVAL_MS, gt=0)
    flow_sample_interval_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _base_from_scenario_or_path(cls, data: Any) -> Any:
        if isinstance(data, dict) and "base" in data:
            base = data["base"]
            if isinstance(base, Scenario):
                data = {**data, "base": base.model_dump(exclude_unset=True)}
            elif isinstance(base, (str, PathLike)):
                data = {**data, "base": read_toml(Path(base), what="base")}
        return data

    @field_validator("axes")
    @classmethod
    def _axes_are_lists_of_distinct_values(cls, axes: dict[str, list[AxisValue]]) -> dict[str, list[AxisValue]]:
        for path, values in axes.items():
            if not values:
                raise SpecError(f'axes."{path}": needs at least one value')
            for i, value in enumerate(values):
                if any(_same(value, earlier) for earlier in values[:i]):
                    raise SpecError(f'axes."{path}": value {_show(value)} appears twice')
        return axes

    @model_validator(mode="after")
    def _skip_rules_name_axes_and_their_values(self) -> Self:
        for index, rule in enumerate(self.skip):
            for path, wanted in rule.when.items():
                where = f'skip[{index}].when."{path}"'
                if path not in self.axes:
                    guess = difflib.get_close_matches(path, list(self.axes), n=1)
                    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
                    raise SpecError(f"{where}: not an axis of this sweep{hint}")
                for option in wanted if isinstance(wanted, list) else [wanted]:
                    if not any(_same(option, value) for value in self.axes[path]):
                        raise SpecError(f"{where}: {_show(option)} is not a value of that axis")
        return self

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, name: str | None = None) -> Sweep:
        if name is not None and "name" not in data:
            data = {**data, "name": name}
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise SpecError(_sweep_one_line(error)) from None

    @classmethod
    def from_toml(cls, path: str | PathLike[str]) -> Sweep:
        path = Path(path)
        data = read_toml(path, what="sweep")
        base = data.get("base")
        if isinstance(base, str):
            # A base path is relative to the sweep file, not to the working directory, and so
            # are the paths inside it (a trace, a C source) to the base file.
            data = {**data, "base": paths_beside(read_toml(path.parent / base, what="base"), (path.parent / base).parent)}
        elif isinstance(base, dict):
            data = {**data, "base": paths_beside(base, path.parent)}
        axes = data.get("axes")
        if isinstance(axes, dict):
            data = {**data, "axes": {axis: sources_beside(values, path.parent) for axis, values in axes.items()}}
        return cls.from_dict(data, name=path.stem)

    @property
    def base_scenario(self) -> Scenario:
        try:
            return Scenario.from_dict(self.base)
        except SpecError as error:
            raise SpecError(f"base.{error.line}") from None


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its scenario, the axis values that made it and its repetition."""

    run_key: str
    scenario: Scenario
    axis_values: dict[str, Any]
    repetition: int
    engine: str

    @property
    def seed(self) -> int:
        return self.scenario.seed


@dataclass(frozen=True)
class Skipped:
    axis_values: dict[str, Any]
    reason: str


@dataclass
class Expansion:
    runs: list[RunSpec] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # Combinations whose resolved config equals an earlier one's (e.g. "1bdp" and the same
    # size in bytes): run once, listed here.
    duplicates: list[RunSpec] = field(default_factory=list)


#: Resolved-config keys of the simulator's model of the kernel engine's host timing (Scenario.jitter_us,
#: stall_per_packet, [noise]): a kernel run has its own host and never reads them.
SIM_NOISE_KEYS = ("jitter_ns", "stall_per_packet", "noise")


def run_key(config: dict[str, Any], engine: str) -> str:
    """A stable name for a run: hash of its resolved engine config, the engine and the
    engine's model version (so a changed simulator never reuses an old run)."""
    from cclab.engines.base import get_engine

    model = get_engine(engine).model_version
    if engine != "sim":
        # The simulator's stand-ins for timing noise: a kernel run has its own and never reads them.
        config = {key: value for key, value in config.items() if key not in SIM_NOISE_KEYS}
    if any("bpf_source" in flow for flow in config.get("flows", [])):
        # A C source counts by its content (sha256), not by where the folder is; in the
        # simulator, also by the shim it runs with (its hooks' view of the socket).
        config = {**config, "flows": [{**f, "bpf_source": {**f["bpf_source"], "path": None}} if "bpf_source" in f else f for f in config["flows"]]}
        if engine == "sim":
            from cclab.engines.native_cc import shim_digest

            config = {**config, "native_shim": shim_digest()}
    text = json.dumps({"engine": engine, "model": model, "config": config}, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def expand(sweep: Sweep, engine: str | None = None) -> list[RunSpec]:
    """Every run of the sweep, in axis order then repetition (skipped ones left out)."""
    return expand_all(sweep, engine).runs


def expand_all(sweep: Sweep, engine: str | None = None) -> Expansion:
    """The runs, the skipped combinations with their reasons, and duplicate configs."""
    if engine is not None and engine not in ENGINE_NAMES:
        choices = " or ".join(json.dumps(name) for name in ENGINE_NAMES)
        raise SpecError(f"engine: must be one of {choices} (got {json.dumps(engine)})")
    sweep.base_scenario  # a bad base is reported as such, before any axis
    paths = list(sweep.axes)
    planned = math.prod(len(values) for values in sweep.axes.values()) * sweep.repetitions
    if planned > MAX_RUNS:
        raise SpecError(f"axes: {planned} runs exceed the limit of {MAX_RUNS}")
    combos = itertools.product(*(sweep.axes[path] for path in paths))
    expansion = Expansion()
    seen: set[str] = set()
    for combo in combos:
        axis_values = dict(zip(paths, combo, strict=True))
        rule = next((rule for rule in sweep.skip if rule.matches(axis_values)), None)
        if rule is not None:
            expansion.skipped.append(Skipped(axis_values, rule.reason))
            continue
        data = _with_sweep_output(sweep, copy.deepcopy(sweep.base))
        for path, value in axis_values.items():
            _set_path(data, path, value)
        scenario = _validated(data, axis_values)
        for repetition in range(sweep.repetitions):
            seeded = scenario.model_copy(update={"seed": scenario.seed + repetition})
            # The engine: the caller's (--engine), else the scenario's, which an axis may vary.
            run_engine = engine or seeded.engine
            spec = RunSpec(run_key(seeded.resolve(), run_engine), seeded, axis_values, repetition, run_engine)
            if spec.run_key in seen:
                expansion.duplicates.append(spec)
                continue
            seen.add(spec.run_key)
            expansion.runs.append(spec)
    return expansion


def value_at(data: Any, path: str) -> Any:
    """The value at a dotted path of a spec-form dict (list indices as numbers); None if absent."""
    for part in path.split("."):
        if isinstance(data, list):
            if not part.isdigit() or int(part) >= len(data):
                return None
            data = data[int(part)]
        elif isinstance(data, dict):
            if part not in data:
                return None
            data = data[part]
        else:
            return None
    return data


def _same(a: Any, b: Any) -> bool:
    # 1 and 1.0 are the same axis value, True and 1 are not.
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b



def _with_sweep_output(sweep: Sweep, data: dict[str, Any]) -> dict[str, Any]:
    """Apply the sweep's sample intervals, unless the base scenario sets its own."""
    output = dict(data.get("output") or {})
    if sweep.queue_sample_interval_ms is not None:
        output.setdefault("queue_sample_interval_ms", sweep.queue_sample_interval_ms)
    if sweep.flow_sample_interval_ms is not None:
        output.setdefault("flow_sample_interval_ms", sweep.flow_sample_interval_ms)
    if output:
        data["output"] = output
    return data


def _axis_error(path: str, value: Any, message: str) -> SpecError:
    return SpecError(f'axes."{path}" = {_show(value)}: {message}')


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit():
                raise _axis_error(path, value, f"{'.'.join(parts[:depth])} is a list: {part!r} must be an index")
            index = int(part)
            if index >= len(node):
                raise _axis_error(path, value, f"the base scenario has {len(node)} {'entry' if len(node) == 1 else 'entries'} in {'.'.join(parts[:depth])} (no index {index})")
            if last:
                node[index] = _merged(node[index], value)
            else:
                node = node[index]
            continue
        if not isinstance(node, dict):
            raise _axis_error(path, value, f"{'.'.join(parts[:depth])} is not a table")
        if last:
            node[part] = _merged(node.get(part), value)
        else:
            if part not in node:
                node[part] = {}
            node = node[part]


def _merged(old: Any, new: Any) -> Any:
    # A table value sets several fields of the table at its path at once, e.g.
    # "flows.0" = [{cc = "cubic"}, {cc = "bbr", probe_bw_gain = 1.5}].
    if isinstance(new, dict) and isinstance(old, dict):
        return {**old, **copy.deepcopy(new)}
    return copy.deepcopy(new)


def _validated(data: dict[str, Any], axis_values: dict[str, Any]) -> Scenario:
    try:
        return Scenario.from_dict(data)
    except SpecError as error:
        field_path = _dotted(error.line.split(":", 1)[0])
        culprit = next((p for p in axis_values if field_path == p or field_path.startswith(p + ".")), None)
        if culprit is None:
            culprit = next((p for p in axis_values if p.startswith(field_path + ".") or p == field_path), None)
        others = [f"{p} = {_show(v)}" for p, v in axis_values.items() if p != culprit]
        context = f" (with {', '.join(others)})" if others else ""
        if culprit is None:
            combo = ", ".join(f"{p} = {_show(v)}" for p, v in axis_values.items())
            raise SpecError(f"axes: the combination {combo or '(base only)'} is an invalid scenario: {error.line}") from None
        raise SpecError(
            f'axes."{culprit}" = {_show(axis_values[culprit])}{context} is an invalid scenario: {error.line}'
        ) from None


def _dotted(loc: str) -> str:
    """`flows[0].cc` -> `flows.0.cc`, the form axes are written in."""
    return loc.replace("[", ".").replace("]", "")


def _sweep_one_line(error: ValidationError) -> str:
    details = error.errors()
    detail = next((d for d in details if d["type"] == "extra_forbidden"), details[0])
    loc = tuple(detail["loc"])
    kind = detail["type"]
    if kind == "extra_forbidden" and len(loc) == 1:
        guess = difflib.get_close_matches(str(loc[0]), list(Sweep.model_fields), n=1)
        return f"{loc[0]}: unknown key" + (f" (did you mean {guess[0]!r}?)" if guess else "")
    if loc == ("name",) and kind == "string_pattern_mismatch":
        return f"name: must be letters, digits, '_', '.' or '-' (got {_show(detail['input'])})"
    if loc and loc[0] == "axes" and len(loc) >= 2:
        # Axis paths contain dots: quote them so the line reads like the TOML.
        prefix = f'axes."{loc[1]}"' + "".join(f"[{p}]" for p in loc[2:])
        if kind == "list_type":
            return f"{prefix}: must be a list of values, e.g. [10, 100] (got {_show(detail['input'])})"
        line = _one_line(error)
        return f"{prefix}: {line.split(': ', 1)[1] if ': ' in line else line}"
    return _one_line(error)



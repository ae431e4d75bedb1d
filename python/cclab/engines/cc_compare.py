"""`cclab cc compare FILE --against NAME [SPEC]`: two congestion controls driven by the same
hook calls, and where their answers part.

The scenario's first flow runs `--against` (a built-in CC or a C source) in the simulator,
as any run would; every hook call that may change state is also made, from the same socket
state, on a fresh copy of it and on FILE (crates/cclab-cc/src/differential.rs). The report
says, per hook, how many calls gave a different answer and, per field (cwnd, ssthresh,
pacing rate, mode, the named estimates), the first call where the two parted. A C source
runs in a child process (engines/sim_child.py), so one that crashes ends only the comparison.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cclab.engines import native_cc
from cclab.errors import CclabError
from cclab.spec import load
from cclab.spec.bpf_source import STRUCT_OPS_MAP, is_source
from cclab.spec.scenario import paths_beside, read_toml

#: The scenario when none is given: one flow at 100 Mbit/s, 20 ms, 1 BDP for 10 s, where a
#: loss-based CC fills the buffer and recovers from its overflows several times.
DEFAULT_SPEC: dict[str, Any] = {"duration_s": 10, "seed": 1, "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "1bdp"}, "flows": [{"cc": "cubic"}]}


def _absolute(cc: str) -> str:
    """A C source named relative to the working folder, as a path that any spec folder keeps."""
    if not is_source(cc):
        return cc
    path, sep, name = cc.partition(":")  # as spec/bpf_source.py reads FILE.c[:NAME]
    return str(Path(path).resolve()) + sep + name


def configs(candidate: str, against: str, spec: Path | None, defines: Mapping[str, str] | None = None) -> tuple[dict, dict]:
    """The resolved config the reference drives, and the candidate's first flow (its CC
    built natively where it is a C source, with `defines`). Raises CclabError naming the field."""
    data = paths_beside(read_toml(spec), spec.parent) if spec is not None else json.loads(json.dumps(DEFAULT_SPEC))
    flows = data.get("flows") or [{}]
    first = flows[0] if isinstance(flows[0], dict) else {}
    resolved = []
    for cc in (against, candidate):
        # The spec's BBR gain goes with BBR only: the spec refuses it for any other CC.
        first = {k: v for k, v in first.items() if k != "probe_bw_gain" or cc == "bbr"}
        if is_source(cc) and defines:
            # A source with build parameters (the project's BBR ports): its map's name is a
            # macro the spec cannot read, so the flow is resolved with a stand-in and given
            # the library built with them.
            config = load({**data, "engine": "sim", "flows": [{**first, "cc": "reno"}, *flows[1:]]}).resolve()
            config["flows"][0] = {**config["flows"][0], "cc": Path(cc.partition(":")[0]).name, "native_cc": str(_built_with(cc, defines))}
        else:
            config = load({**data, "engine": "sim", "flows": [{**first, "cc": _absolute(cc)}, *flows[1:]]}).resolve()
        config["flows"] = [_with_library(flow, defines) for flow in config["flows"]]
        resolved.append(config)
    return resolved[0], resolved[1]["flows"][0]


def _built_with(cc: str, defines: Mapping[str, str]) -> Path:
    """The library of a source whose struct_ops map is named by a macro (the project's ports;
    its key covers the headers it includes, as the kernel engine's does)."""
    file_text, _, wanted = cc.partition(":")
    path = Path(file_text).resolve()
    if not path.is_file():
        raise CclabError(f"{cc}: no such file")
    variables = [match.group(1) for match in STRUCT_OPS_MAP.finditer(path.read_text(encoding="utf-8"))]
    variable = wanted or (variables[0] if len(variables) == 1 else "")
    if variable not in variables:
        raise CclabError(f"{cc}: name one of its struct_ops maps as FILE.c:NAME ({', '.join(variables) or 'it has none'})")
    try:
        return native_cc.build_port(path, variable, defines)
    except native_cc.NativeBuildError as error:
        raise CclabError(f"{cc}: {error.line}") from None


def _with_library(flow: dict, defines: Mapping[str, str] | None) -> dict:
    if "bpf_source" not in flow:
        return flow
    try:
        library = native_cc.build(flow["bpf_source"], defines=defines)
    except native_cc.NativeBuildError as error:
        raise CclabError(f"flows[{flow['flow_id']}].cc: {error.line}") from None
    return {**{k: v for k, v in flow.items() if k != "bpf_source"}, "native_cc": str(library)}


def compare(candidate: str, against: str, spec: Path | None = None, defines: Mapping[str, str] | None = None) -> dict:
    """The comparison (crates/cclab-sim/src/differential.rs's JSON, with the scenario); C
    sources are built with `defines` (-D NAME=VALUE)."""
    config, candidate_flow = configs(candidate, against, spec, defines)
    native = [flow["cc"] for flow in [*config["flows"], candidate_flow] if flow.get("native_cc")]
    if native:
        comparison = _compare_in_child(config, candidate_flow, native)
    else:
        from cclab import _sim

        try:
            comparison = json.loads(_sim.compare_json(json.dumps(config), json.dumps(candidate_flow)))
        except ValueError as error:
            raise CclabError(str(error)) from None
    link = config["bottleneck"]
    comparison["scenario"] = {"rate_mbps": link["rate_bps"] / 1e6, "rtt_ms": link["rtt_ns"] / 1e6, "duration_s": config["duration_ns"] / 1e9,
                              "flows": len(config["flows"]), "seed": config["seed"], "spec": str(spec) if spec else None}  # fmt: skip
    return comparison


def _compare_in_child(config: dict, candidate_flow: dict, sources: list[str]) -> dict:
    from cclab.engines import sim_child

    try:
        return json.loads(sim_child.run_in_child(["compare"], json.dumps({"config": config, "candidate": candidate_flow}), sources, "the comparison"))
    except sim_child.ChildFailed as failed:
        raise CclabError(str(failed)) from None


def render(comparison: dict) -> list[str]:
    """The report, a line each."""
    scenario = comparison["scenario"]
    lines = [
        f"{comparison['candidate']} against {comparison['reference']}, driven by {comparison['reference']}: "
        f"{scenario['duration_s']:g} s at {scenario['rate_mbps']:g} Mbit/s, {scenario['rtt_ms']:g} ms ({scenario['spec'] or 'the default scenario'}, seed {scenario['seed']})",
        f"{comparison['calls']:,} hook calls; {comparison['differing_calls']:,} answered differently",
        f"  {'hook':16} {'calls':>9} {'differing':>10}",
    ]
    lines += [f"  {h['hook']:16} {h['calls']:>9,} {h['differing_calls']:>10,}" for h in comparison["hooks"]]
    if not comparison["fields"]:
        lines.append("every field agreed on every call")
        return lines
    lines.append("first difference per field (reference / candidate):")
    for f in sorted(comparison["fields"], key=lambda f: f["first_call"]):
        lines.append(f"  {f['field']:26} call {f['first_call']:,} ({f['first_hook']} at {f['first_time_ns'] / 1e9:.6f} s): "
                     f"{f['reference']} / {f['candidate']}; differs on {f['calls']:,} calls")  # fmt: skip
    return lines

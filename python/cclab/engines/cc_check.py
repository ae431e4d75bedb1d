"""`cclab cc check FILE[:NAME]`: what a user's C congestion control asks of each engine.

It builds the file both ways (natively for the simulator, engines/native_cc.py; for the
kernel, engines/kernel/user_cc.py, where the BPF toolchain is installed), lists the
tcp_congestion_ops members the map sets and the kfuncs and helpers the file calls with
whether each engine has them, and runs a one-second flow in the simulator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cclab.engines import native_cc
from cclab.spec.bpf_source import STRUCT_OPS_MAP, BpfSource
from cclab.spec.bpf_source import load as load_source

#: `extern <type> NAME(...) __ksym;`: a kfunc the file declares.
KFUNC_DECLARATION = re.compile(r"extern\s[^;{}]*?\b(\w+)\s*\([^;{}]*\)\s*__ksym\s*;")
CALL = re.compile(r"\b(bpf_[a-z0-9_]+)\s*\(")
#: Names that look like helper calls but are libbpf macros (bpf/bpf_helpers.h, bpf_core_read.h).
HELPER_MACROS = frozenset({"bpf_printk", "bpf_core_read", "bpf_core_field_exists", "bpf_core_type_exists", "bpf_core_field_size",
                           "bpf_core_enum_value_exists", "bpf_probe_read_kernel"})  # fmt: skip
#: Members of tcp_congestion_ops that are not hooks.
NOT_HOOKS = frozenset({"name", "flags", "owner", "key", "list"})
#: The one-second smoke flow.
SMOKE_SPEC = {"duration_s": 1, "seed": 1, "bottleneck": {"rate_mbps": 10, "rtt_ms": 20, "buffer": "1bdp"}}


@dataclass(frozen=True)
class Call:
    name: str
    kind: str  # "kfunc" or "helper"
    simulator: bool
    kernel: bool | None  # None: not known here (no BTF), or left to the verifier (helpers)


@dataclass
class CcCheck:
    source: BpfSource
    ops: list[str]
    calls: list[Call]
    simulator_build: str | None = None  # None: built; else the one-line error
    kernel_build: str | None = None  # None: built; else the error, or why it was not tried
    kernel_tried: bool = False
    smoke: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """At least one engine built it (the other's limits are in the report)."""
        return self.simulator_build is None or (self.kernel_tried and self.kernel_build is None)


def check(cc: str, base_dir: Path) -> CcCheck:
    """Raises ValueError (one line) for a file that cannot be used at all."""
    source = load_source(cc, base_dir)
    text = source.path.read_text(encoding="utf-8")
    headers = "".join(h.read_text(encoding="utf-8", errors="replace") for h in sorted(source.path.parent.glob("*.h")))
    result = CcCheck(source, map_members(text, source.map.variable), calls_of(text + headers))
    resolved = source.resolved()
    try:
        native_cc.build(resolved)
    except native_cc.NativeBuildError as error:
        result.simulator_build = error.line
    result.kernel_tried, result.kernel_build = _kernel_build(resolved)
    if result.simulator_build is None:
        result.smoke = _smoke(str(source.path) + ":" + source.map.variable)
    return result


def map_members(text: str, variable: str) -> list[str]:
    """The tcp_congestion_ops hooks the map `variable` sets, in its order."""
    for match in STRUCT_OPS_MAP.finditer(text):
        if match.group(1) == variable:
            return [m for m in re.findall(r"\.(\w+)\s*=", match.group(2)) if m not in NOT_HOOKS]
    return []


def calls_of(text: str) -> list[Call]:
    kfuncs = sorted(set(KFUNC_DECLARATION.findall(text)))
    helpers = sorted({name for name in CALL.findall(text) if name not in HELPER_MACROS and name not in kfuncs})
    in_kernel = kernel_btf_names(kfuncs)
    return [Call(name, "kfunc", name in native_cc.SHIM_KFUNCS, in_kernel.get(name)) for name in kfuncs] + [
        Call(name, "helper", name in native_cc.shim_helpers(), None) for name in helpers
    ]


def kernel_btf_names(names: list[str]) -> dict[str, bool]:
    """Whether the running kernel's BTF names each function (a kfunc must be there)."""
    from cclab.engines.kernel.bpf_cc import BTF_PATH

    try:
        btf = BTF_PATH.read_bytes()
    except OSError:
        return {}
    return {name: b"\0" + name.encode() + b"\0" in btf for name in names}


def _kernel_build(resolved: dict) -> tuple[bool, str | None]:
    from cclab.engines.kernel import bpf_cc, user_cc

    problem = bpf_cc.toolchain_problem()
    if problem is not None:
        return False, f"not tried: {problem}"
    try:
        user_cc.build(resolved)
    except bpf_cc.KernelEngineError as error:
        return True, str(error)
    return True, None


def _smoke(cc: str) -> dict:
    from cclab.engines.sim import SimEngine
    from cclab.spec import load

    try:
        result = SimEngine().run(load({**SMOKE_SPEC, "flows": [{"cc": cc}]}))
    except Exception as error:  # the CC failed its run: report, not raise
        return {"error": str(error)}
    flow, series = result.flows.iloc[0], result.flow_series
    return {"goodput_mbps": round(float(flow.goodput_mbps), 2), "retrans_segments": int(flow.retrans_segments),
            "cwnd_min_pkts": int(series.cwnd_pkts.min()), "cwnd_max_pkts": int(series.cwnd_pkts.max())}  # fmt: skip


def render(result: CcCheck) -> list[str]:
    """The report, a line each."""
    source = result.source
    yes = {True: "yes", False: "NO", None: "-"}
    lines = [f"{source.label}  sha256 {source.sha256[:16]}  (.name {source.map.name!r}{', TCP_CONG_NEEDS_ECN' if source.map.needs_ecn else ''})",
             f"maps in the file: {', '.join(m.variable for m in source.maps)}", f"hooks: {', '.join(result.ops)}",
             "calls (simulator / kernel):"]  # fmt: skip
    lines += [f"  {c.kind:6} {c.name:24} {yes[c.simulator]:4} {yes[c.kernel] if c.kind == 'kfunc' else 'verifier'}" for c in result.calls] or ["  none"]
    lines.append(f"simulator build: {result.simulator_build or 'ok'}")
    lines.append(f"kernel build: {result.kernel_build or 'ok'}")
    if result.smoke:
        smoke = result.smoke
        lines.append(f"1 s in the simulator (10 Mbit/s, 20 ms): {smoke['error']}" if "error" in smoke else
                     f"1 s in the simulator (10 Mbit/s, 20 ms): {smoke['goodput_mbps']} Mbit/s, {smoke['retrans_segments']} retransmissions, "
                     f"cwnd {smoke['cwnd_min_pkts']}-{smoke['cwnd_max_pkts']} packets")  # fmt: skip
    return lines

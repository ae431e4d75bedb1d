"""The bottleneck's AQM (`bottleneck.aqm`) on the kernel engine: the kernel's own qdisc as
tbf's child where this kernel has it, else cclab's userspace bottleneck (the delay line's
`--bottleneck` mode, crates/cclab-delayline/src/bottleneck.rs, running crates/cclab-aqm).

Kernel path: `tc qdisc add dev rx parent 1:1 handle 10: <kind> ...` under the engine's tbf
(tbf shapes, the AQM queues: tbf_dequeue peeks its child), every parameter from the resolved
config; counters from `tc -s -j qdisc show` (iproute2 tc/q_<kind>.c print_xstats names).

Userspace path: the router's data direction goes to NFQUEUE queue USERSPACE_QUEUE; the tbf
stays on the interface at PASSTHROUGH_RATE_FACTOR x the rate, so it never shapes but still
counts bytes. Which path: the config key `aqm_implementation`, else $CCLAB_AQM, else
`auto` (fifo: tbf alone as always; any other AQM: the kernel's qdisc if a scratch namespace
accepts it, the userspace bottleneck otherwise). Never guessed: detection adds the qdisc.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from cclab.engines.kernel import switches
from cclab.engines.kernel.errors import KernelEngineError, KernelPreflightError
from cclab.engines.kernel.shaping import queue_limit_bytes

CONFIG_KEY = "aqm_implementation"
ENV = "CCLAB_AQM"
AUTO, KERNEL, CCLAB = "auto", "kernel", "cclab"
CHOICES = (AUTO, KERNEL, CCLAB)
FIFO = "fifo"
KINDS = ("codel", "fq_codel", "pie", "red", "cake", "dualpi2")
#: The AQM qdisc's handle, and tbf's class it hangs from (tbf has one class, 1:1).
CHILD_HANDLE = "10:"
TBF_CLASS = "1:1"
#: NFQUEUE queue number of the userspace bottleneck (the delay line's queues are 0..n-1).
USERSPACE_QUEUE = 1000
#: Fastest link the userspace bottleneck emulates faithfully on 2 cores, measured (CUBIC,
#: 20 ms, 1 BDP, 10 s, sharing CPU0 with the ACK delay line): 200 Mbit/s ran valid with the
#: process at ~70% of its CPU (~30 us per data packet: copy, verdict, checksum); at 400
#: Mbit/s the ACK delay line's release lateness went past 1% of the RTT.
MAX_USERSPACE_RATE_BPS = 200_000_000
#: With the userspace bottleneck, the interface's tbf runs this much faster: it never holds
#: a packet for long and never drops one, but keeps counting bytes for utilization.
PASSTHROUGH_RATE_FACTOR = 10


# --- choosing the implementation -----------------------------------------------------------


@dataclass(frozen=True)
class QdiscProbe:
    kind: str
    available: bool
    detail: str


@dataclass(frozen=True)
class AqmChoice:
    kind: str
    implementation: str  # KERNEL or CCLAB
    requested: str
    source: str
    probe: QdiscProbe | None  # None when not probed (fifo on tbf, or cclab asked for)
    why: str

    @property
    def userspace(self) -> bool:
        return self.implementation == CCLAB


def aqm_of(config: Mapping) -> dict:
    return dict(config["bottleneck"].get("aqm") or {"kind": FIFO})


def requested_implementation(config: Mapping, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    return switches.requested(config, CONFIG_KEY, ENV, CHOICES, environ)


def choose(
    config: Mapping,
    environ: Mapping[str, str] | None = None,
    probe: Callable[[str], QdiscProbe] | None = None,
    userspace_problem: Callable[[dict], str | None] | None = None,
) -> AqmChoice:
    """Where the bottleneck's AQM runs; raises one line if nowhere."""
    aqm = aqm_of(config)
    kind = aqm["kind"]
    requested, source = requested_implementation(config, environ)
    why_not_userspace = userspace_problem or userspace_problem_now

    def userspace(why: str, result: QdiscProbe | None) -> AqmChoice:
        problem = why_not_userspace(aqm)
        if problem:
            missing = f"this kernel has no sch_{kind} (tc: {result.detail}) and " if result and not result.available else ""
            raise KernelPreflightError(
                f"bottleneck.aqm: {kind} cannot run here: {missing}the userspace bottleneck is unavailable: {problem}"
            )
        return AqmChoice(kind, CCLAB, requested, source, result, why)

    if requested == CCLAB:
        return userspace(f"the userspace bottleneck was asked for ({source})", None)
    if config["bottleneck"].get("trace_ms"):
        if requested == KERNEL:
            raise KernelPreflightError(f"bottleneck.trace: a trace replays only in cclab's userspace bottleneck, not with {source}=kernel")
        return userspace("a trace replays only in the userspace bottleneck (tc has no trace-driven qdisc)", None)
    if kind == FIFO:
        return AqmChoice(kind, KERNEL, requested, source, None, "tail drop at the buffer is the engine's tbf itself")
    result = (probe or qdisc_probe)(kind)
    if result.available:
        return AqmChoice(kind, KERNEL, requested, source, result, f"sch_{kind} is available")
    if requested == KERNEL:
        raise KernelPreflightError(
            f"{source}=kernel asks for the kernel's {kind}, but this kernel has no sch_{kind} (tc: {result.detail}); "
            f"try `modprobe sch_{kind}`, or {ENV}=auto for cclab's userspace bottleneck"
        )
    return userspace(f"sch_{kind} is not in this kernel", result)


def userspace_problem_now(aqm: dict) -> str | None:
    """Why the userspace bottleneck cannot run `aqm` here, or None."""
    from cclab.engines.kernel.delayline import find_binary

    binary = find_binary()
    if binary is None:
        return "cclab-delayline is not built: run `cargo build --release -p cclab-delayline`"
    out = subprocess.run([binary, "--check-aqm", json.dumps(aqm)], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        detail = " ".join(out.stderr.split()) or f"exit status {out.returncode}"
        return f"this cclab-delayline cannot build {aqm['kind']} ({detail}); rebuild it from a tree that has it"
    if (os.cpu_count() or 1) < 2:
        return "it needs 2 CPUs (one for the delay line, one for packet processing)"
    return None


def userspace_rate_problem(rate_bps: int) -> str | None:
    if rate_bps > MAX_USERSPACE_RATE_BPS:
        return (
            f"bottleneck.rate: {rate_bps / 1e6:.0f} Mbit/s is beyond what the userspace bottleneck shapes faithfully "
            f"here (at most {MAX_USERSPACE_RATE_BPS / 1e6:.0f} Mbit/s); use a kernel with the qdisc, or the sim engine"
        )
    return None


def probe_args(kind: str) -> list[str]:
    """A tc command adding `kind` with tc's defaults on a scratch namespace's loopback."""
    extra = {"red": ["limit", "400000", "avpkt", "1000", "bandwidth", "10mbit"]}.get(kind, [])
    return ["tc", "qdisc", "add", "dev", "lo", "root", "handle", CHILD_HANDLE, kind, *extra]


def probe_qdisc_now(kind: str) -> QdiscProbe:
    from cclab.engines.kernel.netem import run_in_scratch_netns

    if shutil.which("tc") is None:
        return QdiscProbe(kind, False, "tc is missing (apt-get install iproute2)")
    out = run_in_scratch_netns(probe_args(kind))
    if out.returncode == 0:
        return QdiscProbe(kind, True, f"a {kind} qdisc was accepted in a scratch namespace")
    detail = " ".join((out.stderr or out.stdout).split()) or f"exit status {out.returncode}"
    return QdiscProbe(kind, False, detail)


@lru_cache(maxsize=None)
def qdisc_probe(kind: str) -> QdiscProbe:
    """probe_qdisc_now(kind), once per process and kind."""
    return probe_qdisc_now(kind)


def userspace_backlog_packets(router_ns: str) -> int | None:
    """Packets the userspace bottleneck holds (the kernel's queue_total of its NFQUEUE queue,
    /proc/net/netfilter/nfnetlink_queue of the router namespace), or None if unbound."""
    from cclab.engines.kernel.netns import inside

    with inside(router_ns), open("/proc/thread-self/net/netfilter/nfnetlink_queue") as f:
        for line in f:
            fields = line.split()
            if fields and int(fields[0]) == USERSPACE_QUEUE:
                return int(fields[2])
    return None


def wait_userspace_queue_empty(router_ns: str, timeout_s: float) -> None:
    """As finite.wait_queue_empty, for the userspace bottleneck: its queue is not tbf's."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not userspace_backlog_packets(router_ns):
            return
        time.sleep(0.005)


# --- the kernel path: tc arguments and counters ---------------------------------------------


def buffer_packets(bottleneck: Mapping, frame_bytes: int) -> int:
    """The scenario's buffer in full frames (for qdiscs whose only limit counts packets)."""
    if bottleneck.get("queue_limit_packets") is not None:
        return int(bottleneck["queue_limit_packets"])
    return max(1, int(bottleneck["queue_limit_bytes"]) // frame_bytes)


def _us(ns: int) -> str:
    """tc's time syntax at its own resolution (get_time: microseconds)."""
    return f"{max(1, round(int(ns) / 1000))}us"


def _ecn(on: bool) -> str:
    return "ecn" if on else "noecn"


def kernel_qdisc_args(ifname: str, aqm: Mapping, bottleneck: Mapping, rate_bps: int, frame_bytes: int) -> tuple[list[str], str]:
    """(tc command adding the AQM under tbf, how the scenario's buffer was applied); `frame_bytes`:
    a full frame on the device (its MTU + 14), in which a packet-counted limit is reckoned."""
    kind = aqm["kind"]
    head = ["tc", "qdisc", "add", "dev", ifname, "parent", TBF_CLASS, "handle", CHILD_HANDLE, kind]
    pkts = buffer_packets(bottleneck, frame_bytes)
    buffer_bytes = queue_limit_bytes(bottleneck, frame_bytes)
    if kind in ("codel", "fq_codel", "pie"):
        limit = min(int(aqm["limit_packets"]), pkts)
        how = f"limit = min(limit_packets {aqm['limit_packets']}, buffer {pkts} full frames) packets: {kind} has no byte limit"
    if kind == "codel":
        args = ["limit", str(limit), "target", _us(aqm["target_ns"]), "interval", _us(aqm["interval_ns"]), _ecn(aqm["ecn"])]
        if aqm.get("ce_threshold_ns") is not None:
            args += ["ce_threshold", _us(aqm["ce_threshold_ns"])]
    elif kind == "fq_codel":
        args = [
            "limit", str(limit), "flows", str(aqm["flows"]), "target", _us(aqm["target_ns"]),
            "interval", _us(aqm["interval_ns"]), "quantum", str(aqm["quantum_bytes"]),
            "memory_limit", str(aqm["memory_limit_bytes"]), "drop_batch", str(aqm["drop_batch"]), _ecn(aqm["ecn"]),
        ]  # fmt: skip
        if aqm.get("ce_threshold_ns") is not None:
            args += ["ce_threshold", _us(aqm["ce_threshold_ns"])]
        how += "; memory_limit (skb truesize) kept as configured"
    elif kind == "pie":
        args = [
            "limit", str(limit), "target", _us(aqm["target_ns"]), "tupdate", _us(aqm["tupdate_ns"]),
            "alpha", str(aqm["alpha"]), "beta", str(aqm["beta"]), _ecn(aqm["ecn"]),
            "bytemode" if aqm["bytemode"] else "nobytemode",
            "dq_rate_estimator" if aqm["dq_rate_estimator"] else "no_dq_rate_estimator",
        ]  # fmt: skip
    elif kind == "red":
        limit_bytes = min(int(aqm["limit_bytes"]), buffer_bytes)
        args = [
            "limit", str(limit_bytes), "min", str(aqm["min_bytes"]), "max", str(aqm["max_bytes"]),
            "avpkt", str(aqm["avpkt_bytes"]), "burst", str(aqm["burst_packets"]),
            "probability", repr(float(aqm["probability"])),
            # RED ages its average queue over idle time at this rate (q_red.c); null: the link's.
            "bandwidth", f"{int(aqm.get('bandwidth_bps') or rate_bps)}bit",
        ]  # fmt: skip
        args += [flag for flag in ("ecn", "harddrop", "adaptive") if aqm.get(flag)]
        how = f"limit = min(limit_bytes {aqm['limit_bytes']}, buffer {buffer_bytes}) bytes"
    elif kind == "cake":
        # tbf shapes; cake runs unshaped beneath it. cake takes no target (it derives it from rtt).
        args = ["unlimited", "rtt", _us(aqm["rtt_ns"]), aqm["flow_mode"]]
        memlimit = buffer_bytes
        if aqm.get("memory_limit_bytes") is not None:
            memlimit = min(memlimit, int(aqm["memory_limit_bytes"]))
        args += ["memlimit", str(memlimit)]
        how = (f"memlimit = {memlimit} bytes (the buffer, or memory_limit if smaller): cake has no packet limit and "
               "counts skb truesize, so fewer frames fit than in a byte-exact buffer")  # fmt: skip
    elif kind == "dualpi2":
        args, how = dualpi2_args(aqm, pkts)
    else:
        raise ValueError(f"no kernel qdisc for aqm kind {kind!r}")
    return head + args, how


def dualpi2_args(aqm: Mapping, buffer_pkts: int) -> tuple[list[str], str]:
    """iproute2 tc/q_dualpi2.c's options for the resolved `dualpi2` config. Its alpha and beta
    are Hz, which tc truncates to Hz x 256: the config's Hz x 256 over 256 is exact."""
    limit = min(int(aqm["limit_packets"]), buffer_pkts)
    step = f"{aqm['step_thresh_packets']}packets" if aqm.get("step_thresh_packets") is not None else _us(aqm["step_thresh_ns"])
    args = [
        "limit", str(limit), "memlimit", str(aqm["memory_limit_bytes"]), "target", _us(aqm["target_ns"]),
        "tupdate", _us(aqm["tupdate_ns"]), "alpha", repr(aqm["alpha"] / 256), "beta", repr(aqm["beta"] / 256),
        "step_thresh", step, "min_qlen_step", str(aqm["min_qlen_step"]), "coupling_factor", str(aqm["coupling_factor"]),
        "drop_on_overload" if aqm["drop_overload"] else "overflow", "drop_enqueue" if aqm["drop_early"] else "drop_dequeue",
        "classic_protection", str(aqm["c_protection_percent"]), "any_ect" if aqm["ecn_mask"] == 3 else "l4s_ect",
    ]  # fmt: skip
    return args, f"limit = min(limit_packets {aqm['limit_packets']}, buffer {buffer_pkts} full frames) packets"


@dataclass(frozen=True)
class AqmCounters:
    """A qdisc's drops split as the result JSON wants them, and its own delay figures."""

    drops: int
    overflow_drops: int
    aqm_drops: int
    ce_marks: int
    delay: dict  # what the qdisc itself says about delay (not per-packet percentiles)
    note: str | None = None


def counters_from_tc_json(text: str, kind: str, handle: str = CHILD_HANDLE) -> AqmCounters:
    """Counters of the `kind` qdisc with `handle` in `tc -s -j qdisc show dev X` output."""
    entries = [q for q in json.loads(text) if q.get("kind") == kind and q.get("handle") == handle]
    if not entries:
        raise KernelEngineError(f"tc shows no {kind} qdisc {handle} on the bottleneck")
    q = entries[0]
    drops = int(q.get("drops", 0))
    note = None
    if kind in ("codel", "fq_codel"):
        overflow = int(q.get("drop_overlimit", 0))
        ce = int(q.get("ecn_mark", 0)) + int(q.get("ce_mark", 0))
        delay = {"ldelay_us": q.get("ldelay")} if kind == "codel" else {}
    elif kind == "pie":
        overflow = int(q.get("overlimit", 0))
        ce = int(q.get("ecn_mark", 0))
        delay = {"delay_us": q.get("delay")}
    elif kind == "red":
        overflow = int(q.get("pdrop", 0)) + int(q.get("other", 0))
        ce = int(q.get("marked", 0))
        delay = {}
    elif kind == "cake":
        tins = q.get("tins") or []
        overflow = 0
        ce = sum(int(t.get("ecn_mark", 0)) for t in tins)
        delay = {k: [t.get(k) for t in tins] for k in ("avg_delay_us", "peak_delay_us", "base_delay_us")}
        note = "cake counts its memory-limit drops with its CoDel drops (tin drops): all are reported as aqm_drops"
    elif kind == "dualpi2":
        # sch_dualpi2.c counts a tail drop as an overlimit; ecn_mark counts every CE mark
        # (q_dualpi2.c print_xstats names them with dashes).
        overflow = int(q.get("overlimits", 0))
        ce = int(q.get("ecn-mark", 0))
        delay = {"delay_c_us": q.get("delay-c"), "delay_l_us": q.get("delay-l"), "step_marks": q.get("step-mark")}
    else:
        raise ValueError(f"no kernel counters for aqm kind {kind!r}")
    return AqmCounters(drops, overflow, max(0, drops - overflow), ce, delay, note)


def describe(
    choice: AqmChoice,
    aqm: Mapping,
    *,
    kernel_args: list[str] | None,
    hard_limit: str | None,
    counters: AqmCounters | None = None,
) -> dict:
    """provenance["aqm"]."""
    if choice.userspace:
        sojourn = "per packet: release time - kernel receive time at the router (userspace bottleneck)"
    else:
        sojourn = "time-sampled: tbf backlog x 8 / rate at each queue sample (tc has no per-packet sojourn)"
    return {
        "kind": choice.kind,
        "implementation": choice.implementation,
        "requested": choice.requested,
        "requested_by": choice.source,
        "why": choice.why,
        "kernel_probe": choice.probe.detail if choice.probe else None,
        "params": dict(aqm),
        "tc_command": kernel_args,
        "hard_limit": hard_limit,
        "sojourn_basis": sojourn,
        "qdisc_delay": counters.delay if counters else None,
        "counter_note": counters.note if counters else None,
        "tbf": f"rate x {PASSTHROUGH_RATE_FACTOR}, never the bottleneck" if choice.userspace else "the shaper",
    }

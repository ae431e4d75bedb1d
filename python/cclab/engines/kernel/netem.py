"""Path delay with sch_netem where the kernel has it, and the choice between netem and the
native NFQUEUE delay line (delayline.py).

Where netem exists it goes on the router, on its egress towards each sender: that is the
ACK direction, and each sender has its own router interface, so every flow gets its own
delay (RTT + extra_rtt). Never on a sender: there netem would hold the sender's own skbs,
which TCP small queues and the socket's write-memory accounting see, and so distort TCP.
The whole RTT goes on the ACK direction, as with the delay line; for a single-bottleneck
dumbbell the sender sees the same RTT.

netem's `limit` (packets it may hold) defaults to 1000 in tc; at 1 Gbit/s x 200 ms about
16 k ACKs are in flight at once, so the default silently drops ACKs (seed 004: BBR reached
12% instead of 84% of the link). The limit here is computed from rate x delay with a wide
margin, recorded, and every run checks that netem dropped nothing.

Random loss stays on the iptables `statistic` rule on the data direction with either
mechanism (shaping.py): it works on every kernel, so both mechanisms lose packets alike.

Which mechanism: resolved config key `delay_mechanism`, else $CCLAB_DELAY, else `auto`
(netem when this kernel has it, the delay line otherwise).
"""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from cclab.engines.kernel import switches
from cclab.engines.kernel.errors import KernelEngineError
from cclab.engines.kernel.kconfig import kernel_config
from cclab.engines.kernel.netns import CLONE_NEWNET, iproute_in, ns_run
from cclab.engines.kernel.probes import QdiscProbe, QdiscStats
from cclab.units import FRAME_BYTES

DELAY_ENV = "CCLAB_DELAY"
CONFIG_KEY = "delay_mechanism"
AUTO, NETEM, DELAY_LINE = "auto", "netem", "delayline"
CHOICES = (AUTO, NETEM, DELAY_LINE)
#: The names provenance records (the delay line's name predates this module).
PROVENANCE_NAME = {NETEM: "netem", DELAY_LINE: "nfqueue-delay-line"}

QDISC_KIND = "netem"
#: Handle of the netem root qdisc on each router interface towards a sender.
NETEM_HANDLE = "2:"
#: tc's default netem limit (iproute2 tc/q_netem.c sets opt.limit = 1000 packets).
TC_DEFAULT_LIMIT_PKTS = 1000
#: A full data frame at the default MTU as tbf counts it (docs/ARCHITECTURE.md): the bottleneck
#: cannot deliver data frames faster than rate / FRAME_BITS, and each delivered frame causes at
#: most one ACK (a larger MTU only means fewer frames, so fewer ACKs).
FRAME_BITS = FRAME_BYTES * 8
#: At most one ACK per data frame: quick-ack in slow start and the dup-ACK/SACK of every
#: segment in recovery (tcp_input.c __tcp_ack_snd_check) ack every frame, not every second.
MAX_ACKS_PER_FRAME = 1
#: Safety factor over the worst case: netem's limit only caps the queue, nothing is
#: allocated up front, so a wide margin costs no memory unless ACKs actually pile up.
LIMIT_MARGIN = 4
#: Scratch-namespace probe: a netem qdisc on that namespace's own loopback.
PROBE_ARGS = ("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
_libc = ctypes.CDLL(None, use_errno=True)


# --- the limit and the tc command: pure functions ------------------------------------------


def acks_in_flight(rate_bps: int, delay_ns: int) -> int:
    """Worst-case ACKs a netem holds at once: every frame the bottleneck can deliver during
    one delay causes an ACK (at most MAX_ACKS_PER_FRAME)."""
    return math.ceil(rate_bps / FRAME_BITS * MAX_ACKS_PER_FRAME * delay_ns / 1e9)


def netem_limit_pkts(rate_bps: int, delay_ns: int) -> int:
    """A netem limit that never drops: LIMIT_MARGIN x the worst case, never below tc's default."""
    return max(TC_DEFAULT_LIMIT_PKTS, LIMIT_MARGIN * acks_in_flight(rate_bps, delay_ns))


def netem_add_args(ifname: str, delay_ns: int, limit_pkts: int) -> list[str]:
    """tc arguments for a constant-delay netem as the root qdisc of `ifname`. The delay is
    given in ns (tc's get_time64 parses the `ns` suffix and sends TCA_NETEM_LATENCY64); no
    jitter (so no reordering), no loss, no rate: loss and rate are done elsewhere."""
    if delay_ns <= 0 or limit_pkts <= 0:
        raise ValueError("netem needs a positive delay and limit")
    return [
        "tc", "qdisc", "add", "dev", ifname, "root", "handle", NETEM_HANDLE,
        QDISC_KIND, "delay", f"{int(delay_ns)}ns", "limit", str(int(limit_pkts)),
    ]  # fmt: skip


# --- choosing the mechanism ---------------------------------------------------------------


@dataclass(frozen=True)
class NetemProbe:
    """Whether this kernel accepted a netem qdisc, and the evidence."""

    available: bool
    detail: str
    kernel_config: str | None  # CONFIG_NET_SCH_NETEM: "y", "m", "not set", or None if unknown


@dataclass(frozen=True)
class DelayChoice:
    mechanism: str  # NETEM or DELAY_LINE
    requested: str  # one of CHOICES
    source: str  # where `requested` came from
    probe: NetemProbe | None  # None when the delay line was asked for (netem not probed)

    @property
    def provenance_name(self) -> str:
        return PROVENANCE_NAME[self.mechanism]


def requested_mechanism(config: Mapping, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(requested mechanism, where it came from): the config key wins over $CCLAB_DELAY."""
    return switches.requested(config, CONFIG_KEY, DELAY_ENV, CHOICES, environ)


def choose(
    config: Mapping,
    environ: Mapping[str, str] | None = None,
    probe: Callable[[], NetemProbe] | None = None,
) -> DelayChoice:
    """The delay mechanism for `config`; raises one line if netem is asked for but missing."""
    requested, source = requested_mechanism(config, environ)
    if requested == DELAY_LINE:
        return DelayChoice(DELAY_LINE, requested, source, None)
    result = (probe or netem_probe)()
    if result.available:
        return DelayChoice(NETEM, requested, source, result)
    if requested == NETEM:
        setting = f"{CONFIG_KEY}=netem" if source.startswith("config") else f"{DELAY_ENV}=netem"
        raise KernelEngineError(
            f"{setting} asks for netem, but this kernel has no sch_netem (tc: {result.detail}); "
            f"try `modprobe sch_netem`, or use {DELAY_ENV}=auto for the NFQUEUE delay line"
        )
    return DelayChoice(DELAY_LINE, requested, source, result)


def _kernel_config_value() -> str | None:

    config = kernel_config()
    if not config:
        return None
    return config.get("CONFIG_NET_SCH_NETEM", "not set")


def _enter_new_netns() -> None:  # pragma: no cover - runs in the forked child
    if _libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")


def run_in_scratch_netns(args: list[str]) -> subprocess.CompletedProcess:
    """Runs `args` in a new network namespace of its own (unshare(CLONE_NEWNET)). It has no
    name and no bind mount, so the kernel deletes it when the command exits, even if this
    process is killed midway: nothing to clean up, nothing in the run registry, and the
    root namespace's qdiscs, addresses and routes are never touched."""
    if shutil.which("unshare"):
        return subprocess.run(["unshare", "--net", *args], capture_output=True, text=True, timeout=30)
    return subprocess.run(args, capture_output=True, text=True, timeout=30, preexec_fn=_enter_new_netns)


def probe_netem_now() -> NetemProbe:
    """Tries to add a netem qdisc to the loopback of a scratch network namespace. Needs root."""
    kconfig = _kernel_config_value()
    if shutil.which("tc") is None:
        return NetemProbe(False, "tc is missing (apt-get install iproute2)", kconfig)
    out = run_in_scratch_netns(list(PROBE_ARGS))
    if out.returncode == 0:
        return NetemProbe(True, "a netem qdisc was accepted in a scratch namespace", kconfig)
    detail = " ".join((out.stderr or out.stdout).split()) or f"exit status {out.returncode}"
    return NetemProbe(False, detail, kconfig)


@lru_cache(maxsize=1)
def netem_probe() -> NetemProbe:
    """probe_netem_now(), once per process (the kernel does not change under a run)."""
    return probe_netem_now()


# --- installing and reading the router's netem qdiscs -------------------------------------


@dataclass(frozen=True)
class NetemQdisc:
    flow_index: int
    ifname: str  # router interface towards sender `flow_index`
    ifindex: int
    delay_ns: int
    limit_pkts: int
    acks_in_flight: int  # the worst case the limit was computed from


def plan(sender_ifnames: list[str], delays_ns: list[int], rate_bps: int) -> list[NetemQdisc]:
    """One netem per router interface towards a sender (ifindex filled in by install)."""
    return [
        NetemQdisc(i, ifname, 0, d, netem_limit_pkts(rate_bps, d), acks_in_flight(rate_bps, d))
        for i, (ifname, d) in enumerate(zip(sender_ifnames, delays_ns, strict=True))
    ]


def install(router_ns: str, sender_ifnames: list[str], delays_ns: list[int], rate_bps: int) -> list[NetemQdisc]:
    """Adds the planned netem qdiscs in the router namespace and returns them with ifindex."""
    installed = []
    with iproute_in(router_ns) as ipr:
        for q in plan(sender_ifnames, delays_ns, rate_bps):
            try:
                ns_run(router_ns, *netem_add_args(q.ifname, q.delay_ns, q.limit_pkts))
            except RuntimeError as error:  # tc's own message, as one line
                raise KernelEngineError(f"netem could not be added on router interface {q.ifname}: {error}") from error
            ifindex = ipr.link_lookup(ifname=q.ifname)[0]
            installed.append(NetemQdisc(q.flow_index, q.ifname, ifindex, q.delay_ns, q.limit_pkts, q.acks_in_flight))
    return installed


def read_stats(router_ns: str, qdiscs: list[NetemQdisc]) -> dict[str, QdiscStats | None]:
    """Counters of each netem (rtnetlink, TCA_STATS2); None where the qdisc is gone."""
    stats: dict[str, QdiscStats | None] = {}
    for q in qdiscs:
        probe = QdiscProbe(router_ns, q.ifindex, QDISC_KIND)
        try:
            stats[q.ifname] = probe.sample()
        finally:
            probe.close()
    return stats


def validity_reasons(qdiscs: list[NetemQdisc], stats: dict[str, QdiscStats | None]) -> list[str]:
    """A run is invalid if any netem vanished or dropped a packet (the default-limit trap)."""
    reasons = []
    for q in qdiscs:
        s = stats.get(q.ifname)
        if s is None:
            reasons.append(f"netem on router interface {q.ifname} disappeared during the run")
        elif s.drops:
            reasons.append(
                f"netem on router interface {q.ifname} dropped {s.drops} packets (limit {q.limit_pkts}): "
                "ACKs were lost to delay emulation"
            )
    return reasons


def describe(qdiscs: list[NetemQdisc], stats: dict[str, QdiscStats | None], rate_bps: int) -> list[dict]:
    """Per-interface record for provenance: delay, limit and how it was computed, counters."""
    rows = []
    for q in qdiscs:
        s = stats.get(q.ifname)
        rows.append({
            "flow_index": q.flow_index,
            "router_interface": q.ifname,
            "delay_ns": q.delay_ns,
            "limit_pkts": q.limit_pkts,
            "limit_basis": {
                "rate_bps": rate_bps, "frame_bits": FRAME_BITS, "max_acks_per_frame": MAX_ACKS_PER_FRAME,
                "acks_in_flight": q.acks_in_flight, "margin": LIMIT_MARGIN, "floor_pkts": TC_DEFAULT_LIMIT_PKTS,
            },
            "packets": s.packets if s else None,
            "drops": s.drops if s else None,
            "backlog_pkts_at_end": s.qlen if s else None,
        })  # fmt: skip
    return rows

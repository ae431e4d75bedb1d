"""Checks made before anything is created; each failure is one line saying what to do."""

from __future__ import annotations

import os
import shutil

from cclab.engines.kernel import aqm, bpf_cc, netem, user_cc
from cclab.engines.kernel.delayline import find_binary
from cclab.engines.kernel.kconfig import kernel_config, kernel_has
from cclab.engines.kernel.errors import KernelEngineError, KernelPreflightError
from cclab.engines.kernel.topology import MAX_FLOWS
from cclab.spec.bpf_source import is_source as is_bpf_source
from cclab.spec.host import effective
from cclab.units import FRAME_BYTES

AVAILABLE_CC = "/proc/sys/net/ipv4/tcp_available_congestion_control"
#: Envelope measured on 2 cores (docs/KERNEL_TESTBED.md, bench/kernel_envelope.py):
#: 1.5 Gbit/s ran clean; at 2 Gbit/s packets were lost outside tbf (per-CPU backlog overflow).
MAX_FAITHFUL_RATE_BPS = 1_500_000_000
#: Held ACKs per queued packet in the kernel: keep well under the delay line's queue maxlen.
MAX_HELD_ACKS = 200_000
#: Delayed ACKs acknowledge about every second full frame (tcp_send_delayed_ack / quick ack).
FRAMES_PER_ACK = 2
#: Full frames at the default MTU (a larger MTU means fewer frames, so fewer ACKs held).
FRAME_BITS = FRAME_BYTES * 8
#: Linux BBRv1's PROBE_BW up-gain (tcp_bbr.c bbr_pacing_gain[0] = BBR_UNIT * 5 / 4); BBR
#: at any other gain runs as a BPF congestion control (bpf_cc.py).
KERNEL_BBR_PROBE_BW_GAIN = 1.25
TOOLS = {
    "ip": "iproute2",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "ethtool": "ethtool",
    "iperf3": "iperf3",
    "ss": "iproute2",
    "ping": "iputils-ping",
}


def held_acks(rate_bps: int, delay_ns: int) -> int:
    return int(rate_bps / FRAME_BITS / FRAMES_PER_ACK * delay_ns / 1e9)


def preflight(config: dict) -> None:
    """Raises KernelPreflightError with one clear line if this config cannot run faithfully here."""
    try:
        _preflight(config)
    except KernelPreflightError:
        raise
    except KernelEngineError as error:
        raise KernelPreflightError(error.line) from None


def _preflight(config: dict) -> None:
    if os.geteuid() != 0:
        raise KernelEngineError("kernel engine needs root (network namespaces, tc, iptables): run it with sudo")
    for tool, package in TOOLS.items():
        if shutil.which(tool) is None:
            raise KernelEngineError(f"{tool} is missing: apt-get install {package}")
    needed = {
        "CONFIG_NET_SCH_TBF": ("sch_tbf", "tbf qdisc missing from this kernel (CONFIG_NET_SCH_TBF)"),
        "CONFIG_NETFILTER_XT_MATCH_STATISTIC": ("xt_statistic", "iptables statistic match missing (random loss)"),
    }
    _require(needed)
    # Probes netem in a scratch namespace unless the delay line was asked for; raises one
    # line if netem was asked for explicitly and this kernel lacks it.
    choice = netem.choose(config)
    if choice.mechanism == netem.DELAY_LINE:
        _require({"CONFIG_NETFILTER_XT_TARGET_NFQUEUE": ("xt_NFQUEUE", "iptables NFQUEUE target missing (delay line)")})
        if find_binary() is None:
            raise KernelEngineError("cclab-delayline is not built: run `cargo build --release -p cclab-delayline`")
    elif shutil.which("tc") is None:
        raise KernelEngineError("tc is missing (netem delay): apt-get install iproute2")

    flows = config["flows"]
    if not flows:
        raise KernelEngineError("flows: at least one flow is needed")
    if len(flows) > MAX_FLOWS:
        raise KernelEngineError(f"flows: the kernel engine supports at most {MAX_FLOWS} flows (got {len(flows)})")
    with open(AVAILABLE_CC) as f:
        available = f.read().split()
    native = bpf_cc.native_versions(available)
    bpf_problem: str | None | bool = False  # not asked yet
    for f in flows:
        gain = f.get("probe_bw_gain")
        try:
            kernel_cc = user_cc.kernel_cc_of(f, native)
        except ValueError as error:
            raise KernelEngineError(f"flow {f['flow_id']}: {error} (the kernel engine builds BBR per 0.001 of gain)") from None
        if bpf_cc.is_bpf_name(kernel_cc):
            if bpf_problem is False:
                bpf_problem = bpf_cc.toolchain_problem() or _hz_problem()
            if bpf_problem:
                raise KernelEngineError(f"flow {f['flow_id']}: {_why_bpf(f['cc'], gain, native)}, but {bpf_problem}; "
                                        "run `make install` or use the sim engine")  # fmt: skip
        elif kernel_cc not in available and f["cc"] not in native:  # a native module loads when selected
            raise KernelEngineError(
                f"flow {f['flow_id']}: this kernel lacks CC {f['cc']} ({AVAILABLE_CC} lists {' '.join(available)}); "
                f"try `modprobe tcp_{f['cc']}`"
            )
        if f.get("rwnd_bytes") is not None:
            raise KernelEngineError(f"flow {f['flow_id']}: rwnd_bytes is not supported by the kernel engine")
        if f["start_ns"] >= config["duration_ns"]:
            raise KernelEngineError(f"flow {f['flow_id']}: starts at or after the end of the run")
    if config["duration_ns"] < 1_000_000_000:
        raise KernelEngineError("duration: the kernel engine needs at least 1 s (iperf3 runs whole seconds)")

    check_host(config)
    for f in flows:
        if f.get("accecn"):
            problem = accecn_problem()
            if problem:
                raise KernelEngineError(
                    f'flows[{f["flow_id"]}].ecn: "accecn" needs Accurate ECN (net.ipv4.tcp_ecn = 3), which this kernel '
                    f"refuses ({problem}); use ecn = true or the sim engine"
                )
    if any(f.get("ecn") for f in flows):
        # ECN itself is per-namespace TCP (net.ipv4.tcp_ecn); the receiver counts CE marks with xt_ecn.
        _require({"CONFIG_NETFILTER_XT_MATCH_ECN": ("xt_ecn", "iptables ecn match missing (CE marks received per flow)")})
    b = config["bottleneck"]
    # The kernel's qdisc where a scratch namespace accepts it, else the userspace bottleneck;
    # one line if neither can run it.
    aqm_choice = aqm.choose(config)
    # The fastest and the longest the link gets over its schedule.
    schedule = b.get("schedule") or []
    top_rate = max([int(b["rate_bps"]), *(int(c["rate_bps"]) for c in schedule if c.get("rate_bps") is not None)])
    top_rtt = max([int(b["rtt_ns"]), *(int(c["rtt_ns"]) for c in schedule if c.get("rtt_ns") is not None)])
    if aqm_choice.userspace:
        problem = aqm.userspace_rate_problem(top_rate)
        if problem:
            raise KernelPreflightError(problem)
        _require({"CONFIG_NETFILTER_XT_TARGET_NFQUEUE": ("xt_NFQUEUE", "iptables NFQUEUE target missing (userspace bottleneck)")})
    rate = top_rate
    if rate > MAX_FAITHFUL_RATE_BPS:
        raise KernelEngineError(
            f"bottleneck.rate: {rate / 1e6:.0f} Mbit/s is beyond what this machine emulates faithfully "
            f"(at most {MAX_FAITHFUL_RATE_BPS / 1e6:.0f} Mbit/s); use the sim engine"
        )
    if choice.mechanism != netem.DELAY_LINE:
        return  # netem's limit is sized from rate x RTT (netem.netem_limit_pkts)
    if (os.cpu_count() or 1) < 2:
        raise KernelEngineError("kernel engine needs 2 CPUs: one for the delay line, one for packet processing")
    max_delay = max(top_rtt + int(f.get("extra_rtt_ns") or 0) for f in flows)
    if held_acks(rate, max_delay) > MAX_HELD_ACKS:
        raise KernelEngineError(
            f"bottleneck: rate x RTT ({rate / 1e6:.0f} Mbit/s x {max_delay / 1e6:.0f} ms) needs more held ACKs "
            f"than the delay line holds faithfully ({MAX_HELD_ACKS}); use the sim engine"
        )


def accecn_problem() -> str | None:
    """Why this kernel cannot negotiate Accurate ECN, or None: a scratch namespace is asked
    to set net.ipv4.tcp_ecn = 3 (kernels before AccECN refuse the value)."""
    from cclab.engines.kernel.netem import run_in_scratch_netns

    out = run_in_scratch_netns(["sysctl", "-q", "-w", "net.ipv4.tcp_ecn=3"])
    if out.returncode == 0:
        return None
    return " ".join((out.stderr or out.stdout).split()) or f"exit status {out.returncode}"


#: The most SO_SNDBUF/SO_RCVBUF take (net.core.wmem_max/rmem_max): per namespace in Linux 6.18,
#: but a child namespace may not raise them, so the host's values hold for every run.
NET_CORE_BUFFER_MAX = {"sndbuf": "/proc/sys/net/core/wmem_max", "rcvbuf": "/proc/sys/net/core/rmem_max"}


def check_host(config: dict) -> None:
    """The host settings this host can give a run (`[host]` and the flows' socket buffers), or
    one line why not: cheap, so the CLI asks before it announces the run."""
    for flow in config["flows"]:
        check_socket_buffers(flow)
    if effective(config.get("host"))["sender_qdisc"] == "fq" and not aqm.qdisc_probe("fq").available:
        raise KernelPreflightError(f"host.sender_qdisc: this kernel has no sch_fq ({aqm.qdisc_probe('fq').detail}); use the sim engine")


def check_socket_buffers(flow: dict) -> None:
    """A flow's SO_SNDBUF/SO_RCVBUF (iperf3 -w) the kernel engine can set, or one line why not."""
    index = flow["flow_id"]
    for side, path in NET_CORE_BUFFER_MAX.items():
        requested = flow.get(f"{side}_bytes")
        if requested is None:
            continue
        with open(path) as f:
            limit = int(f.read())
        if requested > limit:
            raise KernelPreflightError(
                f"flows[{index}].{side}: {requested} bytes is more than this host's {path[len('/proc/sys/'):].replace('/', '.')} "
                f"({limit}), which Linux clamps it to and a namespace cannot raise; use at most {limit} or the sim engine"
            )
    # iperf3 -w, a client option, sets both buffers at both ends of a bulk flow; receiver.py
    # serves a finite flow with its own receive buffer.
    sndbuf, rcvbuf = flow.get("sndbuf_bytes"), flow.get("rcvbuf_bytes")
    if flow.get("size_bytes") is None and rcvbuf != sndbuf:
        shown = ["autotune" if value is None else f"{value} bytes" for value in (sndbuf, rcvbuf)]
        raise KernelPreflightError(
            f"flows[{index}].rcvbuf: a bulk flow's buffers are both set by iperf3 -w on the kernel engine, so rcvbuf "
            f"must equal sndbuf (got sndbuf {shown[0]}, rcvbuf {shown[1]}); use the sim engine for others"
        )


def _why_bpf(cc: str, gain: float | None, native: dict[str, str]) -> str:
    """Why this flow needs a BPF congestion control, for the refusal line."""
    if is_bpf_source(cc):
        return f"cc {cc} is built from its C source as a BPF congestion control"
    if cc in bpf_cc.PORTS:
        return f"cc {cc} is not in this kernel and runs as a BPF port ({bpf_cc.PORTS[cc]})"
    if "bbr3" in native and gain in (None, KERNEL_BBR_PROBE_BW_GAIN):
        return "cc bbr (v1) runs as a BPF port, since this kernel's bbr is google/bbr v3"
    return (f"probe_bw_gain {gain} needs BBR built as a BPF congestion control "
            f"(kernel BBR's gain is fixed at {KERNEL_BBR_PROBE_BW_GAIN})")  # fmt: skip


def _hz_problem() -> str | None:
    if not kernel_config().get("CONFIG_HZ"):
        return "the kernel's CONFIG_HZ is unknown (/proc/config.gz is not readable)"
    return None


def _require(needed: dict[str, tuple[str, str]]) -> None:
    for option, (module, message) in needed.items():
        if kernel_has(option, module) is False:
            raise KernelEngineError(f"{message}; try `modprobe {module}`")

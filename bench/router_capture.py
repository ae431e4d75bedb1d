"""Kernel runs with every packet into and out of the bottleneck captured, and what they show.

    sudo .venv/bin/python bench/router_capture.py SCENARIO.toml --out DIR [--runs 3]
        [--duration 1] [--window 0.1 1.0]

For each run, tcpdump listens on the router's interfaces: `s<i>` (flow i's data arriving
from its sender, and its ACKs leaving) and `rx` (what left tbf for the receiver). The run's
result goes to DIR/run-<n>/ beside `s<i>.pcap` and `rx.pcap`. The summary per flow: data
segments in and out of the bottleneck, drops (in minus out, matched per sequence number in
FIFO order), how many drops were retransmissions, and the arrival runs (frames of one flow
less than 30 us apart) inside the window, in seconds after the first SYN; in the same window,
how many of those runs end with PSH (Linux forces it on every skb of more than one segment),
and the receiver's ACKs by the segments each newly covers and whether the last of them carried
PSH (an ACK of one pushed segment is the read's, `ICSK_ACK_PUSHED`). Over the whole run, the
bottleneck's service stalls: departures that left a backlogged queue more than 200 us later
than a frame's transmit time after the one before, their length's Pareto exponent, and the
link time tbf's bucket could not make up (pooled over the runs at the end; the simulator's
stall.rs draws from these). `--summarize-only` prints the summary of the runs already in DIR
without running anything. docs/FIDELITY.md ("Paced senders defer short skbs too", "The CUBIC
pair at 1:2", "The bottleneck stalls") was found this way.
"""

from __future__ import annotations

import collections
import dataclasses
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import kernel_runs_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np  # noqa: E402

import cclab  # noqa: E402
from cclab.engines.kernel.netns import NETNS_DIR, NAME_PREFIX  # noqa: E402
from cclab.engines.kernel.shaping import FRAME_BYTES, HEADERS_BYTES, tbf_burst_bytes  # noqa: E402
from cclab.engines.kernel.topology import MTU_BYTES  # noqa: E402
from cclab.spec import Scenario  # noqa: E402

#: Frames of one flow closer than this arrived back to back (one GSO skb).
RUN_GAP_S = 30e-6
#: A departure pairs with an arrival of its sequence number at most this much earlier.
MAX_QUEUE_DELAY_S = 0.5
SNAPLEN_BYTES = 96
#: A dequeue this much later than the link could have sent is a stall (shorter lateness is
#: what the simulator's ACK jitter stands for).
STALL_MIN_S = 200e-6
#: Ethernet, IP and TCP (with timestamps) headers: a data frame as tbf counts it.
FRAME_OVERHEAD_BYTES = FRAME_BYTES - MTU_BYTES + HEADERS_BYTES
POLL_S = 0.002


def read_pcap(path: Path) -> list[tuple[float, str, str, int, int, int, int, int, int]]:
    """(time, src, dst, sport, dport, seq, ack, flags, payload bytes) of each IPv4 TCP frame."""
    frames = []
    with path.open("rb") as f:
        header = f.read(24)
        nanos = struct.unpack("<I", header[:4])[0] == 0xA1B23C4D
        while len(record := f.read(16)) == 16:
            seconds, fraction, captured, _ = struct.unpack("<IIII", record)
            data = f.read(captured)
            ip = data[14:]
            if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            ihl = (ip[0] & 15) * 4
            tcp = ip[ihl:]
            if len(tcp) < 14:
                continue
            total = struct.unpack(">H", ip[2:4])[0]
            sport, dport, seq, ack = struct.unpack(">HHII", tcp[:12])
            payload = total - ihl - (tcp[12] >> 4) * 4
            t = seconds + fraction * (1e-9 if nanos else 1e-6)
            frames.append((t, ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20])), sport, dport, seq, ack, tcp[13], payload))
    return frames


def data_segments(frames, conn) -> list[tuple[float, int]]:
    """(time, sequence number relative to the SYN) of the connection's data segments."""
    syn = next(f for f in frames if (f[1], f[3]) == conn and f[7] & 0x02)
    return [(f[0], (f[5] - syn[5]) % 2**32) for f in frames if (f[1], f[3]) == conn and f[8] > 0]


def match_drops(arrivals, departures) -> list[tuple[float, int]]:
    """Arrivals that never left: FIFO per flow, so departures pair with arrivals in order."""
    dropped, j = [], 0
    for t_out, seq in departures:
        k = j
        while k < len(arrivals) and not (arrivals[k][1] == seq and 0 <= t_out - arrivals[k][0] < MAX_QUEUE_DELAY_S):
            k += 1
        if k == len(arrivals):
            continue  # its arrival was not captured: count nothing as dropped for it
        dropped.extend(arrivals[j:k])
        j = k + 1
    return dropped


def arrival_runs(times: list[float]) -> collections.Counter:
    runs, length = collections.Counter(), 1
    for a, b in zip(times, times[1:]):
        if b - a < RUN_GAP_S:
            length += 1
        else:
            runs[length] += 1
            length = 1
    if times:
        runs[length] += 1
    return runs


def capture_run(scenario: Scenario, out: Path, n_flows: int) -> None:
    """One kernel run with tcpdump on the router's interfaces of the namespaces it creates."""
    before = {p.name for p in NETNS_DIR.glob(f"{NAME_PREFIX}*")} if NETNS_DIR.is_dir() else set()
    procs: list[subprocess.Popen] = []
    stop = threading.Event()

    ifnames = [f"s{i}" for i in range(n_flows)] + ["rx"]

    def interfaces_up(router: str) -> bool:
        listed = subprocess.run(["ip", "-n", router, "-o", "link", "show"], capture_output=True, text=True).stdout
        return all(f" {ifname}@" in listed or f" {ifname}:" in listed for ifname in ifnames)

    def watch() -> None:
        # The router's namespace comes first, its veths a moment later: wait for them all.
        while not stop.is_set():
            routers = [p.name for p in NETNS_DIR.glob(f"{NAME_PREFIX}*-r") if p.name not in before] if NETNS_DIR.is_dir() else []
            if routers and interfaces_up(routers[0]):
                for ifname in ifnames:
                    cmd = ["ip", "netns", "exec", routers[0], "tcpdump", "-i", ifname, "-s", str(SNAPLEN_BYTES), "-U", "-w", str(out / f"{ifname}.pcap"), "tcp"]
                    procs.append(subprocess.Popen(cmd, stderr=subprocess.DEVNULL))
                return
            time.sleep(POLL_S)

    out.mkdir(parents=True, exist_ok=True)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        cclab.run(scenario, "kernel").write(out / "result")
    finally:
        stop.set()
        watcher.join()
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            proc.wait(timeout=10)


def pushed_runs(frames, conn, t0: float, window: tuple[float, float]) -> tuple[int, int]:
    """(runs of the connection's data frames less than RUN_GAP_S apart, of them ending with
    PSH) inside the window."""
    times_flags = [(f[0] - t0, f[7]) for f in frames if (f[1], f[3]) == conn and f[8] > 0]
    times_flags = [(t, flags) for t, flags in times_flags if window[0] <= t < window[1]]
    runs = pushed = 0
    for k, (t, flags) in enumerate(times_flags):
        if k + 1 == len(times_flags) or times_flags[k + 1][0] - t >= RUN_GAP_S:
            runs += 1
            pushed += bool(flags & 0x08)
    return runs, pushed


def acks_by_coverage(departed, conn, mss_bytes: int, t0: float, window: tuple[float, float]) -> collections.Counter:
    """The receiver's ACKs of the connection inside the window (as they pass the router), by
    (segments newly acknowledged, capped at 3; whether the last of them carried PSH)."""
    data_flags = {(f[5] + f[8]) % 2**32: f[7] for f in departed if (f[1], f[3]) == conn and f[8] > 0}
    counts: collections.Counter = collections.Counter()
    last_ack = None
    for f in departed:
        if (f[2], f[4]) != conn or not f[7] & 0x10 or f[7] & 0x02:
            continue
        advance = None if last_ack is None else (f[6] - last_ack) % 2**32
        if advance is not None and 0 < advance < 2**31:
            if window[0] <= f[0] - t0 < window[1]:
                pushed = bool(data_flags.get(f[6], 0) & 0x08)
                counts[(min(3, round(advance / mss_bytes)), pushed)] += 1
            last_ack = f[6]
        elif last_ack is None:
            last_ack = f[6]
    return counts


@dataclasses.dataclass
class Stalls:
    """The bottleneck's service stalls over one run or several."""

    lengths_s: list[float] = dataclasses.field(default_factory=list)  # beyond a frame's transmit time
    lost_s: float = 0.0  # link time tbf's bucket could not make up
    backlogged_s: float = 0.0
    departures: int = 0

    def add(self, other: Stalls) -> None:
        self.lengths_s += other.lengths_s
        self.lost_s += other.lost_s
        self.backlogged_s += other.backlogged_s
        self.departures += other.departures

    def line(self) -> str:
        head = f"service stalls (> {STALL_MIN_S * 1e6:.0f} us late, queue backlogged):"
        if not self.lengths_s:
            return f"{head} none in {self.departures} departures"
        excess = np.array(self.lengths_s)
        # Maximum-likelihood exponent of a Pareto tail from STALL_MIN_S.
        exponent = len(excess) / np.log(excess / STALL_MIN_S).sum()
        p50, p90 = np.percentile(excess * 1e6, [50, 90])
        return (
            f"{head} {len(excess)} in {self.departures} departures ({len(excess) / self.departures:.2e} each), "
            f"length p50 {p50:.0f} us, p90 {p90:.0f} us, max {excess.max() * 1e6:.0f} us, Pareto exponent {exponent:.2f}; "
            f"link time lost {self.lost_s * 1e3:.2f} ms ({100 * self.lost_s / max(self.backlogged_s, 1e-9):.3f}% of {self.backlogged_s:.1f} s backlogged)"
        )


def service_stalls(departed, flows, rate_bps: float) -> Stalls:
    """tbf's bucket replayed over the departures of every flow's data. A departure
    that waited (arrivals so far outnumber departures and drops) and left more than
    STALL_MIN_S late is a stall; the link loses time when the bucket would overflow while
    packets wait."""
    conns = {flow[4] for flow in flows}
    departures = [(f[0], f[8] + FRAME_OVERHEAD_BYTES) for f in departed if (f[1], f[3]) in conns and f[8] > 0]
    arrival_times = np.sort([t for flow in flows for t, _ in flow[0]])
    drop_times = np.sort([t for flow in flows for t, _ in match_drops(flow[0], flow[1])])
    t_out = np.array([t for t, _ in departures])
    waiting = np.searchsorted(arrival_times, t_out, side="right") - np.arange(1, len(t_out) + 1) - np.searchsorted(drop_times, t_out, side="right")
    bytes_per_s, burst_bytes = rate_bps / 8, tbf_burst_bytes(int(rate_bps))
    stalls, tokens = Stalls(departures=len(departures)), float(burst_bytes)
    for i in range(1, len(departures)):
        gap_s, frame_bytes = departures[i][0] - departures[i - 1][0], departures[i][1]
        filled = tokens + bytes_per_s * gap_s
        if waiting[i - 1] > 0:
            stalls.backlogged_s += gap_s
            late_s = gap_s - frame_bytes / bytes_per_s
            if late_s > STALL_MIN_S:
                stalls.lengths_s.append(late_s)
            stalls.lost_s += max(0.0, filled - burst_bytes) / bytes_per_s
        # A departure sooner than the tokens allow is the capture's timing, not tbf's.
        tokens = max(0.0, min(float(burst_bytes), filled) - frame_bytes)
    return stalls


def summarize(out: Path, n_flows: int, window: tuple[float, float], rate_bps: float, pooled: Stalls) -> list[str]:
    """The run's summary lines; its stalls are added to `pooled`."""
    departed = read_pcap(out / "rx.pcap")
    flows = []
    for i in range(n_flows):
        frames = read_pcap(out / f"s{i}.pcap")
        # The data connection carries the most payload (iperf3's control one the least).
        conn = collections.Counter((f[1], f[3]) for f in frames if f[8] > 0).most_common(1)[0][0]
        mss_bytes = max(f[8] for f in frames if (f[1], f[3]) == conn)
        flows.append((data_segments(frames, conn), data_segments(departed, conn), min(f[0] for f in frames if (f[1], f[3]) == conn), frames, conn, mss_bytes))
    t0 = min(flow[2] for flow in flows)
    lines = []
    for i, (arrivals, departures, _, frames, conn, mss_bytes) in enumerate(flows):
        dropped = collections.Counter(match_drops(arrivals, departures))
        seen: collections.Counter = collections.Counter()
        resent_drops = 0
        for t, seq in arrivals:
            seen[seq] += 1
            resent_drops += bool(dropped[(t, seq)]) and seen[seq] > 1
        runs = arrival_runs([t - t0 for t, _ in arrivals if window[0] <= t - t0 < window[1]])
        mean = sum(k * v for k, v in runs.items()) / max(1, sum(runs.values()))
        common = ", ".join(f"{k}:{v}" for k, v in runs.most_common(5))
        lines.append(
            f"flow {i}: {len(arrivals)} in, {len(departures)} out, {sum(dropped.values())} dropped "
            f"({resent_drops} of them resent); arrival runs in [{window[0]}, {window[1]}) s: mean {mean:.2f} frames ({common})"
        )
        n_runs, n_pushed = pushed_runs(frames, conn, t0, window)
        acks = acks_by_coverage(departed, conn, mss_bytes, t0, window)
        n_acks = max(1, sum(acks.values()))
        share = {key: 100 * n / n_acks for key, n in acks.items()}
        coverage = ", ".join(
            f"{segs}{'+' if segs == 3 else ''} seg {share.get((segs, True), 0) + share.get((segs, False), 0):.0f}% "
            f"({share.get((segs, True), 0):.0f}% pushed)"
            for segs in (1, 2, 3)
        )
        lines.append(f"  runs ending with PSH {100 * n_pushed / max(1, n_runs):.0f}%; {sum(acks.values())} ACKs by segments newly acked: {coverage}")
    stalls = service_stalls(departed, flows, rate_bps)
    lines.append(stalls.line())
    pooled.add(stalls)
    return lines


def print_summary(title: str, out: Path, n_flows: int, window: tuple[float, float], rate_bps: float, pooled: Stalls) -> None:
    print(title)
    for line in summarize(out, n_flows, window, rate_bps, pooled):
        print("  " + line)


def main() -> None:
    parser = kernel_runs_cli.parser(__doc__)
    parser.add_argument("--window", type=float, nargs=2, default=(0.1, 1.0), metavar=("FROM_S", "TO_S"))
    parser.add_argument("--summarize-only", action="store_true", help="summarize the runs already in --out")
    args = parser.parse_args()
    spec = kernel_runs_cli.spec_of(args)
    rate_bps = Scenario.model_validate(spec).resolve()["bottleneck"]["rate_bps"]
    pooled = Stalls()
    if args.summarize_only:
        n_flows = len(Scenario.model_validate(spec).resolve()["flows"])
        for out in sorted(args.out.glob("run-*"), key=lambda p: int(p.name.split("-")[1])):
            print_summary(f"{out}:", out, n_flows, tuple(args.window), rate_bps, pooled)
        print("all runs: " + pooled.line())
        return
    if shutil.which("tcpdump") is None:
        # Not one of cclab's own dependencies: only this bench tool captures.
        print("error: router_capture needs tcpdump (apt-get install tcpdump)", file=sys.stderr)
        sys.exit(2)
    for n in range(1, args.runs + 1):
        spec["seed"] = n
        scenario = Scenario.model_validate(spec)
        n_flows = len(scenario.resolve()["flows"])
        out = args.out / f"run-{n}"
        capture_run(scenario, out, n_flows)
        print_summary(f"run {n} ({out}):", out, n_flows, tuple(args.window), rate_bps, pooled)
    print("all runs: " + pooled.line())


if __name__ == "__main__":
    main()

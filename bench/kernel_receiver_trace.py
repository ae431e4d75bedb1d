"""The kernel engine's receiver, traced: when data arrives, when the application reads it, and
how receive-buffer autotuning measures it.

    sudo .venv/bin/python bench/kernel_receiver_trace.py SCENARIO.toml --out DIR [--runs 3]
        [--duration 1] [--flow 0]

Each run goes to DIR/run-<n>/ with the tracepoints' text in DIR/run-<n>.trace: `tcp:tcp_probe`
(every segment the receiving socket processes), `tcp:tcp_rcv_space_adjust` (every skb the
application copies: tcp_recvmsg calls it after each) and `tcp:tcp_rcvbuf_grow` (each step of
autotuning, with `copied`, `inq` and `space`), filtered to one flow's server port. tracefs is
global, not per namespace: the events, their filters and the buffer size are put back as
they were when the script ends, also on failure. The summary per run, for that flow's data
connection:
- arrival to the next read: percentiles over all data segments;
- the first read of each burst (data after 5 ms without any): its delay and how many
  segments had arrived by then;
- waits: data left unread for more than 5 ms, behind a slow reader or a hole at `rcv_nxt`
  (`tcp_probe` carries no sequence number to tell which);
- the autotuning steps: `copied`, `inq` and `space` in segments.
(iperf3's control connection shares the port; the data connection is the one that received
the most.)
docs/FIDELITY.md ("The read sends the ACK the input path held back") was measured this way.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

import kernel_runs_cli
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import cclab  # noqa: E402
from cclab.engines.kernel.traffic import SERVER_BASE_PORT  # noqa: E402
from cclab.spec import Scenario  # noqa: E402

TRACEFS = Path("/sys/kernel/tracing")
EVENTS = ("tcp_probe", "tcp_rcv_space_adjust", "tcp_rcvbuf_grow")
BUFFER_KB = 60_000
MSS_BYTES = 1448
#: Data after this long without any starts a burst.
BURST_GAP_S = 0.005
#: Data left unread this long is a wait (a slow reader, or a hole before it).
WAIT_S = 0.005
LINE = re.compile(r"\s(\d+\.\d+): (tcp_\w+): (.*)")


class Tracing:
    """The receiver's tracepoints on for a block; tracefs as it was afterwards."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.saved: dict[Path, str] = {}

    def _set(self, relative: str, value: str) -> None:
        path = TRACEFS / relative
        # A buffer never written reads "7 (expanded: 1408)": only the number writes back.
        self.saved.setdefault(path, path.read_text().strip().split(" (expanded")[0])
        path.write_text(value)

    def __enter__(self) -> Tracing:
        self._set("buffer_size_kb", str(BUFFER_KB))
        (TRACEFS / "trace").write_text("")
        for event in EVENTS:
            self._set(f"events/tcp/{event}/filter", f"sport == {self.port}")
            self._set(f"events/tcp/{event}/enable", "1")
        return self

    def __exit__(self, *exc: object) -> None:
        for path, value in reversed(self.saved.items()):
            # A filter file reads "none" when there is none; writing 0 clears it.
            path.write_text("0" if path.name == "filter" and value == "none" else value)
        (TRACEFS / "trace").write_text("")


def parse(trace_text: str) -> list[tuple[float, str, dict[str, str]]]:
    """The data connection's events: (time, event, fields)."""
    events = []
    for line in trace_text.splitlines():
        m = LINE.search(line)
        if m:
            fields = dict(re.findall(r"(\w+)=(\S+)", m.group(3)))
            events.append((float(m.group(1)), m.group(2), fields))
    received = collections.Counter()
    for _, name, f in events:
        if name == "tcp_probe":
            received[f.get("sock_cookie")] += int(f.get("data_len", 0))
    if not received:
        return []
    data = received.most_common(1)[0][0]
    return [e for e in events if e[2].get("sock_cookie") == data]


def summarize(events: list[tuple[float, str, dict[str, str]]]) -> list[str]:
    arrivals = np.array([t for t, name, f in events if name == "tcp_probe" and int(f.get("data_len", 0)) >= MSS_BYTES // 2])
    reads = np.array([t for t, name, _ in events if name == "tcp_rcv_space_adjust"])
    if len(arrivals) == 0 or len(reads) == 0:
        return ["  no data segment or no read traced"]
    lines = []
    nxt = np.searchsorted(reads, arrivals)
    waited_us = (reads[nxt[nxt < len(reads)]] - arrivals[nxt < len(reads)]) * 1e6
    pct = np.percentile(waited_us, [10, 25, 50, 75, 90, 99])
    lines.append("  arrival to the next read (us): p10 %.0f, p25 %.0f, p50 %.0f, p75 %.0f, p90 %.0f, p99 %.0f" % tuple(pct))
    # Waits: data unread for longer than WAIT_S, when each began and how long it lasted.
    waits = []
    for a, k in zip(arrivals, nxt):
        if k < len(reads) and reads[k] - a > WAIT_S and (not waits or a > waits[-1][0] + waits[-1][1]):
            waits.append((a, reads[k] - a))
    shown = ", ".join(f"{a - arrivals[0]:.2f} s: {d * 1e3:.1f} ms" for a, d in waits[:10])
    lines.append(f"  waits over {WAIT_S * 1e3:g} ms (a slow reader or a hole): {len(waits)} ({shown})")
    starts = [i for i in range(len(arrivals)) if i == 0 or arrivals[i] - arrivals[i - 1] > BURST_GAP_S]
    firsts = []
    for i in starts:
        k = np.searchsorted(reads, arrivals[i])
        if k < len(reads):
            firsts.append((arrivals[i] - arrivals[0], (reads[k] - arrivals[i]) * 1e6, int(np.searchsorted(arrivals, reads[k]) - i)))
    shown = ", ".join(f"{t:.2f} s: {d:.0f} us / {n}" for t, d, n in firsts[:10])
    lines.append(f"  first read of a burst (delay / segments arrived by then): {shown}")
    steps = []
    for _, name, f in events:
        if name == "tcp_rcvbuf_grow":
            copied, inq, space = (int(f[k]) for k in ("copied", "inq", "space"))
            steps.append(f"{copied / MSS_BYTES:.0f}-{inq / MSS_BYTES:.0f}/{space / MSS_BYTES:.0f}")
    lines.append(f"  autotuning steps, copied-inq/space (segments): {' '.join(steps[:10])}")
    return lines


def main() -> None:
    parser = kernel_runs_cli.parser(__doc__, duration_s=1.0)
    parser.add_argument("--flow", type=int, default=0, help="which flow's receiving socket (its index in the spec)")
    args = parser.parse_args()
    spec = kernel_runs_cli.spec_of(args)
    args.out.mkdir(parents=True, exist_ok=True)
    for n in range(1, args.runs + 1):
        scenario = Scenario.model_validate({**spec, "seed": n})
        with Tracing(SERVER_BASE_PORT + args.flow):
            cclab.run(scenario, "kernel").write(args.out / f"run-{n}")
            trace_text = (TRACEFS / "trace").read_text()
        (args.out / f"run-{n}.trace").write_text(trace_text)
        print(f"run {n} ({args.out / f'run-{n}'}):")
        print("\n".join(summarize(parse(trace_text))), flush=True)


if __name__ == "__main__":
    main()

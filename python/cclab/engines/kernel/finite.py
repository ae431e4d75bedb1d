"""Finite flows (`size_bytes` set): when each one started and when its last byte arrived.

Start: the SYN of the flow's data connection, stamped by the kernel as it leaves the
sender. The iperf3 client first sets up its control connection (a few RTTs, plus process
start-up), so neither the scheduled start nor the client's launch is when the flow's TCP
connection began. Each finite flow's sender namespace gets an AF_PACKET socket on its eth0
before the client starts; outgoing frames reach it from dev_queue_xmit_nit() with a
SO_TIMESTAMPNS stamp taken there, so the stamp is right however late this process reads it
(polling sock_diag for the SYN_SENT socket was tried first: under load, with 20 flows
starting together, it saw SYNs up to ~30 ms late). Until the first data segment only the
control connection's, the handshake's and the cookie's few packets pass (each flow has its
own sender namespace), so the tap costs nothing; it is closed once that segment is seen.

End: the receiver (receiver.py, one process in the receiver namespace serving every finite
flow) times the read that brings the byte count to `size_bytes` with the kernel's receive
stamp of the last segment.

The FCT therefore counts the handshake, as the usual definition does: its floor is one RTT
(SYN out, SYN-ACK back) plus the transmission time of the bytes. (The simulator has no
handshake and splits the RTT across both directions, where this testbed puts it all on the
ACK path: its floor is half an RTT plus the transmission time.)
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cclab.engines.kernel import probes
from cclab.engines.kernel.netns import inside, ns_run
from cclab.engines.kernel.topology import HOST_IFNAME
from cclab.engines.kernel.traffic import FlowPlan

RECEIVER_SCRIPT = Path(__file__).with_name("receiver.py")
# include/uapi/linux/if_ether.h, asm-generic/socket.h, RFC 9293 section 3.1
ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35
TIMESPEC_BYTES = 16
ETH_HEADER_BYTES = 14
TCP_SYN = 0x02
TCP_ACK = 0x10
#: iperf3's cookie, the first payload on its data connection (iperf_api.h COOKIE_SIZE).
IPERF3_COOKIE_BYTES = 37
#: Ethernet + IPv4 with options + TCP header up to its flags: all `tcp_segment` reads.
FRAME_HEAD_BYTES = 128
RECEIVER_STOP_TIMEOUT_S = 10.0
#: How long a stopped flow's last segments may take to leave the bottleneck queue.
QUEUE_DRAIN_TIMEOUT_S = 2.0


def stop_at_run_end(p: FlowPlan, client: subprocess.Popen) -> None:
    """Stops a finite flow that is still going when the run ends. Killing the client is not
    enough: its orphaned socket would go on sending what it had queued (megabytes, with
    autotuned buffers), so the data socket is destroyed too (`ss -K`, SOCK_DESTROY), which
    resets the connection and ends its traffic at once."""
    client.kill()
    ns_run(p.sender_ns, "ss", "-K", "-tn", "sport", "=", f":{p.ports.client}", check=False)


def wait_queue_empty(tbf: probes.TbfProbe) -> None:
    """Waits (briefly) for segments already in the bottleneck queue to reach the receiver,
    so that the router's and the receiver's packet counters agree."""
    deadline = time.monotonic() + QUEUE_DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        stats = tbf.sample()
        if stats is None or stats.backlog_bytes == 0:
            return
        time.sleep(0.005)


class Receiver:
    """receiver.py in the receiver namespace, serving the finite flows' iperf3 ports."""

    def __init__(self, receiver_ns: str, plans: list[FlowPlan], workdir: Path) -> None:
        plan_path = workdir / "receiver-plan.json"
        self.report_path = workdir / "receiver-report.json"
        flows = [{"flow_id": p.flow_id, "port": p.ports.server, "size_bytes": p.size_bytes, "rcvbuf_bytes": p.rcvbuf_bytes} for p in plans]
        plan_path.write_text(json.dumps({"flows": flows}))
        self.log_path = workdir / "receiver.log"
        self.cpu_s: float | None = None  # the receiver's CPU time, once stopped
        self.ended = "running"  # how it ended, for an error line
        with open(self.log_path, "w") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", receiver_ns, sys.executable, str(RECEIVER_SCRIPT),
                 str(plan_path), str(self.report_path)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip

    def set_run_end(self, at_s: float) -> None:
        """Bytes arriving after `at_s` (time.monotonic()) are not counted."""
        with contextlib.suppress(OSError):
            self.proc.stdin.write(f"{at_s!r}\n")
            self.proc.stdin.flush()

    def stop(self) -> dict[int, dict]:
        """Ends the receiver (it reports what it has) and returns its record per flow id;
        an empty dict if it wrote none."""
        self.ended = "exited by itself"
        if self.proc.poll() is None:
            self.proc.terminate()  # `ip netns exec` execs the script: same pid
            self.ended = "ended by SIGTERM"
        try:
            self.proc.wait(timeout=RECEIVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            self.ended = f"killed, {RECEIVER_STOP_TIMEOUT_S:g} s after SIGTERM"
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            report = json.loads(self.report_path.read_text())
        except (OSError, ValueError):
            return {}
        self.cpu_s = report.get("cpu_s")
        return {int(f["flow_id"]): f for f in report["flows"]}

    def log_tail(self) -> str:
        """How it ended (its exit status) and the end of its log, for an error line."""
        tail = ""
        with contextlib.suppress(OSError):
            tail = self.log_path.read_text()[-300:].strip()
        return f"{self.ended}, exit status {self.proc.returncode}; log: {tail or '(empty)'}"


class StartClock:
    """Kernel stamps of each flow's data-connection SYN and of its first data segment (module
    docstring). The first payload from the client port is iperf3's cookie; the data begins
    past it. How long after its SYN a flow's data begins varies (iperf3 starts sending when
    its control connection says so: two path RTTs plus 0.8-13.7 ms, p50 1.7, over 300 flows
    of `cclab validate --set rtt`), which is what a pairing of engines by start must follow."""

    def __init__(self, plans: list[FlowPlan]) -> None:
        self._socks: dict[int, socket.socket] = {}
        self._cport = {p.flow_id: p.ports.client for p in plans}
        self._data_seq: dict[int, int] = {}  # flow id -> the first sequence number past the cookie
        self.syn_s: dict[int, float] = {}  # flow id -> time.monotonic() of the SYN
        self.data_s: dict[int, float] = {}  # flow id -> time.monotonic() of the first data segment
        try:
            for p in plans:
                with inside(p.sender_ns):
                    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                self._socks[p.flow_id] = sock
                sock.bind((HOST_IFNAME, ETH_P_ALL))  # the name resolves in the socket's namespace
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            self._close()
            raise
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set() and self._socks:
            ready, _, _ = select.select(list(self._socks.values()), [], [], 0.05)
            for sock in ready:
                fid = next(f for f, s in self._socks.items() if s is sock)
                read = self._read(sock, self._cport[fid])
                if read is None:
                    continue
                segment, stamp = read
                if segment.flags & TCP_SYN and not segment.flags & TCP_ACK:
                    self.syn_s[fid] = stamp
                    self._data_seq[fid] = (segment.seq + 1 + IPERF3_COOKIE_BYTES) % 2**32
                elif fid in self._data_seq and segment.payload_bytes and seq_at_or_after(segment.seq, self._data_seq[fid]):
                    self.data_s[fid] = stamp
                    self._socks.pop(fid).close()

    @staticmethod
    def _read(sock: socket.socket, cport: int) -> tuple[Segment, float] | None:
        """Reads one frame; the segment and its stamp (monotonic seconds) if it is from `cport`."""
        try:
            frame, ancdata, _flags, _addr = sock.recvmsg(FRAME_HEAD_BYTES, socket.CMSG_SPACE(TIMESPEC_BYTES))
        except OSError:
            return None
        segment = tcp_segment(frame)
        if segment is None or segment.sport != cport:
            return None
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC_BYTES:
                sec, nsec = struct.unpack_from("=qq", data, 0)
                return segment, sec + nsec / 1e9 - (time.time() - time.monotonic())
        return segment, time.monotonic()  # no stamp: when it was read

    def _close(self) -> None:
        for sock in self._socks.values():
            sock.close()
        self._socks = {}

    def stop(self) -> tuple[dict[int, float], dict[int, float]]:
        """The SYN stamps and the first-data stamps, by flow id."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._close()
        return dict(self.syn_s), dict(self.data_s)


@dataclass(frozen=True)
class Segment:
    sport: int
    flags: int
    seq: int
    payload_bytes: int


def tcp_segment(frame: bytes) -> Segment | None:
    """The TCP header fields of an Ethernet frame carrying IPv4 TCP; None for anything else."""
    if len(frame) < ETH_HEADER_BYTES + 20 or frame[12:14] != b"\x08\x00" or frame[ETH_HEADER_BYTES + 9] != 6:
        return None
    ip_header_bytes = (frame[ETH_HEADER_BYTES] & 0x0F) * 4
    tcp = ETH_HEADER_BYTES + ip_header_bytes
    if len(frame) < tcp + 14:
        return None
    ip_total_bytes = struct.unpack_from("!H", frame, ETH_HEADER_BYTES + 2)[0]
    tcp_header_bytes = (frame[tcp + 12] >> 4) * 4
    sport, seq = struct.unpack_from("!H", frame, tcp)[0], struct.unpack_from("!I", frame, tcp + 4)[0]
    return Segment(sport, frame[tcp + 13], seq, max(0, ip_total_bytes - ip_header_bytes - tcp_header_bytes))


def seq_at_or_after(seq: int, mark: int) -> bool:
    """`seq` is `mark` or later in sequence space (RFC 9293's modular comparison)."""
    return (seq - mark) % 2**32 < 2**31


def is_syn_from(frame: bytes, sport: int) -> bool:
    """Whether an Ethernet frame is an IPv4 TCP SYN (not SYN-ACK) from source port `sport`."""
    segment = tcp_segment(frame)
    return segment is not None and segment.sport == sport and segment.flags & TCP_SYN != 0 and segment.flags & TCP_ACK == 0

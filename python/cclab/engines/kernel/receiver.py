"""Receiver for finite flows: speaks the iperf3 server protocol and keeps reading until
every byte of the flow has arrived, timing the moment the last one did.

Why not `iperf3 -s`: with `-n`, the iperf3 client sends TEST_END as soon as it has *written*
the bytes into its socket; the 3.12 server then closes its data socket at once (unread
data -> RST), so the receiver never gets the tail that was still in the send buffer or in
flight (measured: 8-9.5 of 10 MB arrived). This server answers the client like iperf3 does
but only moves past TEST_END when `size_bytes` have been read (or the data connection
closed), so the iperf3 client stays the traffic generator and exits once the flow is done.

Protocol (iperf3 src/iperf_api.h, iperf_server_api.c, 3.x): the client opens a control
connection and sends a 37-byte cookie; the server answers with one-byte states:
PARAM_EXCHANGE (client sends 4-byte length + JSON parameters), CREATE_STREAMS (client
connects the data socket and sends the cookie again), TEST_START, TEST_RUNNING; the client
sends TEST_END when done writing; then EXCHANGE_RESULTS (length-prefixed JSON each way,
client first), DISPLAY_RESULTS, and the client answers IPERF_DONE.

Timing the last byte: every data read uses recvmsg with SO_TIMESTAMPING software receive
timestamps, so the read that reaches `size_bytes` carries the kernel's arrival time of the
last segment it consumed (tcp_recv_timestamp(); a coalesced skb keeps the newest stamp).
That time does not depend on when this process was scheduled, which matters on a loaded
2-core machine. The stamp is CLOCK_REALTIME; it is mapped to CLOCK_MONOTONIC (the engine's
clock) by the offset measured at that read. If no stamp comes back, or it is implausible,
the user-space time of the read is used instead (tens of microseconds later when idle).

Runs as a script in the receiver namespace with only the standard library:
    python receiver.py <plan.json> <report.json>
plan: {"flows": [{"flow_id": 0, "port": 5201, "size_bytes": 5000000, "rcvbuf_bytes": null}, ...]}
(`rcvbuf_bytes`: the listener's SO_RCVBUF, or null to autotune).
The report is written when every flow is finished or on SIGTERM (flows still going are
reported with what they received so far). A line on stdin gives the end of the run
(CLOCK_MONOTONIC seconds): bytes that arrive later are not counted, because a client the
engine kills at the end still has its socket send what it had queued.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import struct
import sys
import threading
import time

# States, iperf3 src/iperf_api.h
TEST_START = 1
TEST_RUNNING = 2
TEST_END = 4
PARAM_EXCHANGE = 9
CREATE_STREAMS = 10
CLIENT_TERMINATE = 12
EXCHANGE_RESULTS = 13
DISPLAY_RESULTS = 14
IPERF_DONE = 16
COOKIE_BYTES = 37  # COOKIE_SIZE, iperf3 src/iperf.h
#: iperf_add_stream() numbers the first stream 1; the client matches results by this id.
FIRST_STREAM_ID = 1
# include/uapi/asm-generic/socket.h and linux/net_tstamp.h
SO_TIMESTAMPING = 37
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
TIMESPEC_BYTES = 16
READ_BYTES = 1 << 20
#: A kernel stamp later than the read, or this much earlier, is not believed.
MAX_STAMP_AGE_S = 0.5
#: How long to wait for the client's control messages after the data has arrived.
CONTROL_TIMEOUT_S = 30.0


class FlowState:
    def __init__(self, flow_id: int, port: int, size_bytes: int) -> None:
        self.flow_id = flow_id
        self.port = port
        self.size_bytes = size_bytes
        self.bytes_received = 0
        self.accept_s: float | None = None  # data connection accepted (monotonic)
        self.last_byte_s: float | None = None  # when bytes_received reached size_bytes
        self.last_byte_clock: str | None = None  # "kernel" or "user"
        self.last_byte_read_s: float | None = None  # when this process read it (user time)
        self.latest_s: float | None = None  # arrival of the newest byte read so far
        self.error: str | None = None
        self.done = threading.Event()

    def report(self) -> dict:
        return {
            "flow_id": self.flow_id, "port": self.port, "size_bytes": self.size_bytes,
            "bytes_received": self.bytes_received, "accept_s": self.accept_s,
            "last_byte_s": self.last_byte_s, "last_byte_clock": self.last_byte_clock,
            "last_byte_read_s": self.last_byte_read_s,
            "latest_s": self.latest_s, "error": self.error,
        }  # fmt: skip


class Cutoff:
    """The end of the run, once the engine has said it (stdin)."""

    def __init__(self) -> None:
        self.at_s = float("inf")

    def read(self, stream) -> None:  # noqa: ANN001
        line = stream.readline()
        if line.strip():
            self.at_s = float(line)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("control connection closed")
        buf += chunk
    return bytes(buf)


def _read_json(sock: socket.socket) -> dict:
    (length,) = struct.unpack("!I", _read_exact(sock, 4))
    return json.loads(_read_exact(sock, length))


def _write_json(sock: socket.socket, obj: dict) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _state(sock: socket.socket, state: int) -> None:
    sock.sendall(struct.pack("b", state))


def _stamp_s(ancdata: list) -> float | None:
    """The software receive stamp (scm_timestamping.ts[0]) as CLOCK_MONOTONIC seconds."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= TIMESPEC_BYTES:
            sec, nsec = struct.unpack_from("=qq", data, 0)
            if sec == 0 and nsec == 0:
                return None
            return sec + nsec / 1e9 - (time.time() - time.monotonic())
    return None


def _receive_data(data: socket.socket, flow: FlowState, cutoff: Cutoff) -> None:
    """Reads until `size_bytes` have arrived (timing that moment) or the peer closes;
    bytes that arrive after the end of the run are read but not counted."""
    buf = bytearray(READ_BYTES)
    view = memoryview(buf)
    while True:
        n, ancdata, _flags, _addr = data.recvmsg_into([view], socket.CMSG_SPACE(3 * TIMESPEC_BYTES))
        now = time.monotonic()
        if n == 0:
            return
        stamp = _stamp_s(ancdata)
        believable = stamp is not None and now - MAX_STAMP_AGE_S <= stamp <= now
        arrived_s = stamp if believable else now
        if arrived_s > cutoff.at_s:
            continue
        flow.latest_s = arrived_s
        before = flow.bytes_received
        flow.bytes_received += n
        if before < flow.size_bytes <= flow.bytes_received:
            flow.last_byte_s = flow.latest_s
            flow.last_byte_clock = "kernel" if believable else "user"
            flow.last_byte_read_s = now
            return


def _drain(data: socket.socket) -> None:
    """Reads whatever the client still sends (an iperf3 block past `size_bytes`) until it
    closes, so that closing here never resets a connection with data in flight."""
    data.settimeout(CONTROL_TIMEOUT_S)
    while data.recv(READ_BYTES):
        pass


def serve(listener: socket.socket, flow: FlowState, cutoff: Cutoff) -> None:
    """One iperf3 test on `listener`: control connection, one data stream."""
    control = data = None
    try:
        control, _ = listener.accept()
        cookie = _read_exact(control, COOKIE_BYTES)
        _state(control, PARAM_EXCHANGE)
        params = _read_json(control)
        if int(params.get("parallel", 1)) != 1 or params.get("reverse") or params.get("bidirectional"):
            raise ValueError(f"unsupported iperf3 parameters: {params}")
        _state(control, CREATE_STREAMS)
        data, _ = listener.accept()
        flow.accept_s = time.monotonic()
        if _read_exact(data, COOKIE_BYTES) != cookie:
            raise ValueError("data connection sent a different cookie")
        data.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE)
        if params.get("congestion"):
            # As iperf3's server does (iperf_server_api.c, after accepting a data stream): the
            # receiving socket takes the client's CC, which for DCTCP is what echoes CE marks
            # (tcp_dctcp.h's CE state machine runs on the receiver's CC).
            data.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, str(params["congestion"]).encode())
        running_s = time.monotonic()
        _state(control, TEST_START)
        _state(control, TEST_RUNNING)
        _receive_data(data, flow, cutoff)
        control.settimeout(CONTROL_TIMEOUT_S)
        state = _read_exact(control, 1)[0]
        if state != TEST_END:
            raise ConnectionError(f"client sent state {state} instead of TEST_END")
        _state(control, EXCHANGE_RESULTS)
        _read_json(control)  # the client's own results; the engine reads them from its JSON
        end_s = flow.last_byte_s if flow.last_byte_s is not None else time.monotonic()
        stream = {"id": FIRST_STREAM_ID, "bytes": flow.bytes_received, "retransmits": -1, "jitter": 0,
                  "errors": 0, "packets": 0, "start_time": 0, "end_time": max(0.0, end_s - running_s)}  # fmt: skip
        _write_json(control, {"cpu_util_total": 0, "cpu_util_user": 0, "cpu_util_system": 0,
                              "sender_has_retransmits": 0, "streams": [stream]})  # fmt: skip
        _state(control, DISPLAY_RESULTS)
        _drain(data)
        _read_exact(control, 1)  # IPERF_DONE
    except (OSError, ValueError, ConnectionError) as error:
        if flow.error is None and flow.last_byte_s is None:
            flow.error = f"{type(error).__name__}: {error}"
    finally:
        for s in (data, control, listener):
            if s is not None:
                s.close()
        flow.done.set()


def main(plan_path: str, report_path: str) -> None:
    with open(plan_path) as f:
        plan = json.load(f)
    flows = [FlowState(int(p["flow_id"]), int(p["port"]), int(p["size_bytes"])) for p in plan["flows"]]
    rcvbuf_of_port = {int(p["port"]): p.get("rcvbuf_bytes") for p in plan["flows"]}
    # SIGTERM sets a flag, not an Event: the handler runs in the main thread between two of
    # its bytecodes, and Event.set() would wait for the Event's lock, which that thread may
    # hold inside Event.wait() itself (a deadlock: once, CI's receiver was killed 10 s later).
    stopped: list[bool] = []
    cutoff = Cutoff()
    threading.Thread(target=cutoff.read, args=(sys.stdin,), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    print("receiver: serving", len(flows), "flows", flush=True)  # for the engine's error line if none is reported
    for flow in flows:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if rcvbuf_of_port.get(flow.port) is not None:
            # The flow's SO_RCVBUF, before listen(): the data connection inherits it, locked
            # (sk_clone_lock), as from iperf3 -w; the client's own -w does not reach here.
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(rcvbuf_of_port[flow.port]))
        listener.bind(("0.0.0.0", flow.port))
        listener.listen(4)
        threading.Thread(target=serve, args=(listener, flow, cutoff), daemon=True).start()
    while not stopped and not all(f.done.is_set() for f in flows):
        time.sleep(0.01)
    print("receiver: reporting,", "stopped" if stopped else "every flow done", flush=True)
    tmp = report_path + ".tmp"
    with open(tmp, "w") as f:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        json.dump({"flows": [flow.report() for flow in flows], "cpu_s": usage.ru_utime + usage.ru_stime}, f)
    os.replace(tmp, report_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

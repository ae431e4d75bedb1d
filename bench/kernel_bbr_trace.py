"""The kernel's BBRv1 state, ACK by ACK, beside a kernel run: what tcp_info does not show.

    sudo .venv/bin/python bench/kernel_bbr_trace.py SCENARIO.toml --out DIR [--runs 3]
        [--duration 2] [--until 2]

A BPF program on the tcp:tcp_probe raw tracepoint (kernel_bbr_trace.bpf.c) copies each BBR
socket's `struct bbr` (net/ipv4/tcp_bbr.c) at every segment it receives: the mode and gain
cycle, the bandwidth filter and STARTUP's full-pipe test (full_bw, full_bw_cnt), the round
counter, and the ACK-aggregation allowance (extra_acked[2] and its window). Each run's
records go to DIR/run-<n>/bbr_state.csv beside its result; the summary gives, per BBR flow,
when STARTUP ended and at what estimate, and each extra_acked window with its largest value.
docs/FIDELITY.md ("BBR + CUBIC at 2 BDP") was found this way.

The program is loaded by a helper in a private mount namespace with its own bpffs, so it and
its maps go when the helper exits: after each run, and on failure or Ctrl-C. It needs clang, bpftool and this kernel's BTF, as the
kernel engine's BPF congestion controls do.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import platform
import subprocess
import sys
from pathlib import Path

import kernel_runs_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import pandas as pd  # noqa: E402

import cclab  # noqa: E402
from cclab.engines.kernel import bpf_cc  # noqa: E402
from cclab.engines.kernel.topology import sender_ip  # noqa: E402
from cclab.spec import Scenario  # noqa: E402

SOURCE = Path(__file__).with_name("kernel_bbr_trace.bpf.c")
PROGRAM = "bbr_state"
TRACEPOINT = b"tcp_probe"
MAX_RECORDS = 262144  # kernel_bbr_trace.bpf.c
# include/uapi/linux/bpf.h: the commands used here, and the syscall's number per architecture.
BPF_MAP_LOOKUP_ELEM, BPF_OBJ_GET, BPF_RAW_TRACEPOINT_OPEN = 1, 7, 17
NR_BPF = {"x86_64": 321, "aarch64": 280}
# tcp_bbr.c `enum bbr_mode`; include/net/tcp.h `enum tcp_ca_state`.
MODES = ("startup", "drain", "probe_bw", "probe_rtt")
CA_STATES = ("open", "disorder", "cwr", "recovery", "loss")
# bw and full_bw are packets per microsecond << BW_SCALE (24).
BW_UNIT = 1 << 24


class Record(ctypes.Structure):
    """`struct record` of kernel_bbr_trace.bpf.c."""

    _fields_ = [
        ("t_ns", ctypes.c_uint64),
        ("saddr", ctypes.c_uint32),
        ("cwnd", ctypes.c_uint32),
        ("bits", ctypes.c_uint32),
        ("full_bw", ctypes.c_uint32),
        ("bw", ctypes.c_uint32),
        ("min_rtt_us", ctypes.c_uint32),
        ("extra_acked", ctypes.c_uint16 * 2),
        ("rtt_cnt", ctypes.c_uint32),
        ("delivered", ctypes.c_uint32),
        ("in_flight", ctypes.c_uint32),
        ("pacing_rate_kbps", ctypes.c_uint32),
    ]


_libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: bytearray) -> int:
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    fd = _libc.syscall(NR_BPF[platform.machine()], cmd, buf, len(attr))
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"bpf command {cmd} failed")
    return fd


def obj_get(path: Path) -> int:
    name = ctypes.create_string_buffer(str(path).encode())
    attr = bytearray(24)
    attr[0:8] = ctypes.addressof(name).to_bytes(8, "little")
    return _bpf(BPF_OBJ_GET, attr)


def raw_tracepoint_open(prog_fd: int) -> int:
    name = ctypes.create_string_buffer(TRACEPOINT)
    attr = bytearray(24)
    attr[0:8] = ctypes.addressof(name).to_bytes(8, "little")
    attr[8:12] = prog_fd.to_bytes(4, "little")
    return _bpf(BPF_RAW_TRACEPOINT_OPEN, attr)


def lookup(map_fd: int, key: int, value: ctypes.Structure | ctypes.c_uint32) -> None:
    k = ctypes.c_uint32(key)
    attr = bytearray(32)
    attr[0:4] = map_fd.to_bytes(4, "little")
    attr[8:16] = ctypes.addressof(k).to_bytes(8, "little")
    attr[16:24] = ctypes.addressof(value).to_bytes(8, "little")
    _bpf(BPF_MAP_LOOKUP_ELEM, attr)


def compile_program(out: Path) -> Path:
    header_dir = bpf_cc.vmlinux_header_dir(bpf_cc.cache_dir())
    obj = out / "kernel_bbr_trace.o"
    # -mcpu=v3: the record index is an atomic fetch-and-add.
    args = [*bpf_cc.clang_args(header_dir), "-mcpu=v3", "-c", str(SOURCE), "-o", str(obj)]
    subprocess.run(args, check=True, capture_output=True, text=True)
    return obj


def serve(obj: Path, records_path: Path) -> None:
    """Inside a private mount namespace: load and attach the program, say "ready", and on a
    line from stdin detach and write the records. Its pins live in this namespace's own bpffs,
    so they and the program go when this process exits, however it exits."""
    subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=True, capture_output=True)
    pins = Path("/sys/fs/bpf")
    bpftool = bpf_cc.find_bpftool() or "bpftool"
    subprocess.run([bpftool, "prog", "loadall", str(obj), str(pins / "progs"), "pinmaps", str(pins / "maps")], check=True, capture_output=True)
    prog_fd = obj_get(pins / "progs" / PROGRAM)
    link_fd = raw_tracepoint_open(prog_fd)
    print("ready", flush=True)
    sys.stdin.readline()
    os.close(link_fd)
    count_fd, records_fd = obj_get(pins / "maps" / "count"), obj_get(pins / "maps" / "records")
    made = ctypes.c_uint32()
    lookup(count_fd, 0, made)
    with records_path.open("wb") as out:
        out.write(made.value.to_bytes(4, "little"))
        for i in range(min(made.value, MAX_RECORDS)):
            record = Record()
            lookup(records_fd, i, record)
            out.write(bytes(record))


def traced_run(scenario: Scenario, obj: Path, records_path: Path) -> tuple[object, list[Record], int]:
    """One kernel run with the program attached (by a helper in its own mount namespace, as
    this host has no bpffs mounted); its records and how many were made."""
    helper = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", sys.executable, __file__, "--serve", str(obj), str(records_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if helper.stdout is None or helper.stdout.readline().strip() != "ready":
            raise RuntimeError("the BPF tracer did not attach (see its error above)")
        result = cclab.run(scenario, "kernel")
        helper.communicate("done\n", timeout=300)
        if helper.returncode != 0:
            raise RuntimeError(f"the BPF tracer failed (exit {helper.returncode})")
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
    data = records_path.read_bytes()
    made = int.from_bytes(data[:4], "little")
    size = ctypes.sizeof(Record)
    records = [Record.from_buffer_copy(data, offset) for offset in range(4, len(data) - size + 1, size)]
    records_path.unlink()
    return result, records, made


def frame(records: list[Record], n_flows: int) -> pd.DataFrame:
    flows = {int(ipaddress.IPv4Address(sender_ip(i))): i for i in range(n_flows)}
    t0 = min((r.t_ns for r in records), default=0)
    rows = []
    for r in records:
        flow = flows.get(int.from_bytes(r.saddr.to_bytes(4, "little"), "big"))
        if flow is None:
            continue
        b = r.bits
        rows.append(
            {
                "time_s": (r.t_ns - t0) / 1e9,
                "flow_id": flow,
                "mode": MODES[b & 7] if b & 7 < len(MODES) else str(b & 7),
                "round_start": b >> 3 & 1,
                "full_bw_reached": b >> 4 & 1,
                "full_bw_cnt": b >> 5 & 3,
                "cycle_idx": b >> 7 & 7,
                "extra_acked_win_idx": b >> 10 & 1,
                "extra_acked_win_rtts": b >> 11 & 31,
                "packet_conservation": b >> 16 & 1,
                "prev_ca_state": CA_STATES[b >> 17 & 7] if b >> 17 & 7 < len(CA_STATES) else str(b >> 17 & 7),
                "bw_mbps": r.bw * 1e6 / BW_UNIT * 1448 * 8 / 1e6,
                "full_bw_mbps": r.full_bw * 1e6 / BW_UNIT * 1448 * 8 / 1e6,
                "min_rtt_ms": r.min_rtt_us / 1e3,
                "cwnd_pkts": r.cwnd,
                "in_flight_pkts": r.in_flight,
                "extra_acked_0": r.extra_acked[0],
                "extra_acked_1": r.extra_acked[1],
                "rtt_cnt": r.rtt_cnt,
                "pacing_rate_mbps": r.pacing_rate_kbps / 1e3,
            }
        )
    return pd.DataFrame(rows)


def summary(states: pd.DataFrame, until_s: float) -> list[str]:
    lines = []
    for flow, f in states.groupby("flow_id"):
        f = f[f.time_s <= until_s]
        after = f[f["mode"] != "startup"]
        exit_line = "STARTUP to the end"
        if len(after):
            x = after.iloc[0]
            exit_line = f"STARTUP ended at {x.time_s:.3f} s with bw {x.bw_mbps:.1f} Mbit/s (full_bw {x.full_bw_mbps:.1f})"
        windows = []
        for _, span in f.groupby((f.extra_acked_win_idx.diff() != 0).cumsum()):
            idx = int(span.extra_acked_win_idx.iloc[0])
            windows.append(f"{span.time_s.iloc[0]:.2f}-{span.time_s.iloc[-1]:.2f} s: {int(span[f'extra_acked_{idx}'].max())}")
        lines.append(f"  flow {flow}: {exit_line}; {f.rtt_cnt.max() - f.rtt_cnt.min()} rounds by {until_s:g} s")
        lines.append(f"    extra_acked per window (largest): {'; '.join(windows)}")
    return lines


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    parser = kernel_runs_cli.parser(__doc__)
    parser.add_argument("--until", type=float, default=2.0, help="summarize the first this many seconds")
    args = parser.parse_args()
    spec = kernel_runs_cli.spec_of(args)
    args.out.mkdir(parents=True, exist_ok=True)
    obj = compile_program(args.out)
    for n in range(1, args.runs + 1):
        scenario = Scenario.model_validate(dict(spec, seed=spec.get("seed", 1) + n - 1))
        result, records, made = traced_run(scenario, obj, args.out / "records.bin")
        run_dir = args.out / f"run-{n}"
        result.write(run_dir)
        states = frame(records, len(scenario.resolve()["flows"]))
        states.to_csv(run_dir / "bbr_state.csv", index=False)
        goodputs = ", ".join(f"{g:.1f}" for g in result.flows["goodput_mbps"])
        print(f"run {n} ({run_dir}): goodput {goodputs} Mbit/s; {len(states)} BBR states", flush=True)
        if made > MAX_RECORDS:
            print(f"  only the first {MAX_RECORDS} of {made} records were kept", flush=True)
        for line in summary(states, args.until):
            print(line, flush=True)


if __name__ == "__main__":
    main()

"""`[host] mtu` on the simulator: segments of mtu - 52 bytes in frames of mtu + 14, so jumbo
frames fill a link with about six times fewer packets; `pkt` buffers count frames of the MTU;
the qdiscs read the device's MTU (psched_mtu) as Linux's do; the receive buffer charges each
segment its payload plus a head of fixed size."""

from __future__ import annotations

from pathlib import Path

import pytest

import cclab
from cclab.errors import SpecError
from cclab.spec import load
from cclab.sweep import run_key
from conftest import run_cli

pytestmark = pytest.mark.sim

#: A 1500-byte MTU's segment and frame, and a 9000-byte one's.
MSS_1500, FRAME_1500 = 1448, 1514
MSS_9000, FRAME_9000 = 8948, 9014


def gigabit(mtu: int, duration_s: float = 6) -> dict:
    # 1 Gbit/s, 20 ms, a 1 BDP buffer: CUBIC's sawtooth keeps the link busy at any MTU.
    return {"duration_s": duration_s, "bottleneck": {"rate_mbps": 1000, "rtt_ms": 20}, "flows": [{"cc": "cubic"}],
            "output": {"warmup_s": 2}, "host": {"mtu": mtu}}  # fmt: skip


def test_jumbo_frames_fill_a_gigabit_link_with_six_times_fewer_packets() -> None:
    small, jumbo = cclab.run(gigabit(1500), "sim"), cclab.run(gigabit(9000), "sim")
    assert jumbo.bottleneck["utilization"] >= 0.95
    for result, mss, frame in ((small, MSS_1500, FRAME_1500), (jumbo, MSS_9000, FRAME_9000)):
        # Goodput can carry only the payload's share of each frame.
        assert result.flows.iloc[0].goodput_mbps <= 1000 * mss / frame
        assert result.provenance["host_settings"]["mtu_bytes"] == frame - 14
    # The frames are 9014 / 1514 = 5.95 times larger: as many times fewer packets and events.
    packets = small.stats["data_packets"] / jumbo.stats["data_packets"]
    assert 5.5 < packets < 6.5, packets
    assert small.stats["events_processed"] / jumbo.stats["events_processed"] > 4.5


def test_a_packet_counted_buffer_holds_ten_frames_of_the_mtu() -> None:
    data = {**gigabit(9000, duration_s=3), "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "10pkt"}}
    result = cclab.run(data, "sim")
    # Full: ten jumbo frames, more bytes than ten 1514-byte frames could be.
    assert 10 * FRAME_1500 < result.bottleneck["queue_max_bytes"] <= 10 * FRAME_9000
    assert load(data).bottleneck.buffer_bytes(FRAME_9000) == 10 * FRAME_9000


def test_the_qdiscs_take_the_devices_mtu_as_linux_does() -> None:
    def aqm(kind: str, mtu: int) -> dict:
        data = {"duration_s": 1, "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "aqm": kind}, "flows": [{"cc": "cubic"}], "host": {"mtu": mtu}}
        return load(data).resolve()["bottleneck"]["aqm"]

    # fq_codel_init: quantum = psched_mtu(dev); dualpi2_reset_default: memlimit = limit x 2 x psched_mtu.
    assert aqm("fq_codel", 1500)["quantum_bytes"] == FRAME_1500
    assert aqm("fq_codel", 9000)["quantum_bytes"] == FRAME_9000
    assert aqm("dualpi2", 9000)["memory_limit_bytes"] == 10_000 * 2 * FRAME_9000


def test_a_capped_receive_buffer_charges_each_jumbo_segment_its_payload_and_a_fixed_head() -> None:
    # 512 KiB of tcp_rmem at 100 Mbit/s x 100 ms: the window is the buffer x payload / truesize,
    # truesize = payload + 840 (crates/cclab-sim/src/tcp/receive_window.rs), so jumbo segments
    # waste less of it: 38.3 Mbit/s against 26.5 at 1500 bytes (the kernel engine: 38.2 and 27.1).
    def goodput(mtu: int) -> float:
        data = {"duration_s": 6, "bottleneck": {"rate_mbps": 100, "rtt_ms": 100}, "flows": [{"cc": "cubic"}],
                "output": {"warmup_s": 2}, "host": {"tcp_rmem_max": "512KiB", "mtu": mtu}}  # fmt: skip
        return cclab.run(data, "sim").flows.iloc[0].goodput_mbps

    for mtu, mss in ((1500, MSS_1500), (9000, MSS_9000)):
        window_mbps = 512 * 1024 * mss / (mss + 840) * 8 / 0.100 / 1e6
        assert 0.9 * window_mbps < goodput(mtu) <= window_mbps, mtu


def test_the_mtu_is_in_the_run_key_only_when_it_is_not_ethernets() -> None:
    plain = load(gigabit(1500)).resolve()
    assert "host" not in plain
    jumbo = load(gigabit(9000)).resolve()
    assert jumbo["host"] == {"mtu_bytes": 9000}
    assert run_key(jumbo, "sim") != run_key(plain, "sim")


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"host": {"mtu": 100}}, "host.mtu: must be >= 576 (got 100)"),
        ({"host": {"mtu": 9001}}, "host.mtu: must be <= 9000 (got 9001)"),
        ({"bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "5000B"}}, 'bottleneck.buffer: must hold at least one packet (9014 B) (got "5000B" = 5000 B)'),
        ({"flows": [{"cc": "cubic", "rwnd": "4000B"}]}, 'flows[0].rwnd: must hold at least one segment (8948 B) (got "4000B")'),
    ],
)
def test_a_size_that_cannot_hold_a_jumbo_frame_is_one_line_naming_the_field(change: dict, line: str) -> None:
    data = {**gigabit(9000), **change}
    with pytest.raises(SpecError) as caught:
        load(data)
    assert caught.value.line == line


def test_cli_refuses_an_impossible_mtu_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('duration_s = 1\n[bottleneck]\nrate_mbps = 10\nrtt_ms = 10\n[[flows]]\ncc = "cubic"\n[host]\nmtu = 100\n')
    done = run_cli("run", spec, "--out", tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: host.mtu: must be >= 576 (got 100)"]
    assert not (tmp_path / "out").exists()


def test_python_and_the_simulator_derive_the_same_frames_from_the_default_mtu() -> None:
    from cclab import _sim
    from cclab.units import DEFAULT_MTU_BYTES, frame_bytes, mss_bytes

    mss, frame = mss_bytes(DEFAULT_MTU_BYTES), frame_bytes(DEFAULT_MTU_BYTES)
    assert _sim.constants() == (mss, frame - mss, frame) == (MSS_1500, FRAME_1500 - MSS_1500, FRAME_1500)

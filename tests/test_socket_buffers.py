"""Socket buffers on the simulator: a flow's `sndbuf`/`rcvbuf` (iperf3 -w) caps its flight near
the buffer per RTT whatever the CC, as Linux caps it; `[host] tcp_wmem_max` caps send-buffer
autotuning the same way; "autotune" reaches the link and keeps every config and run key."""

from __future__ import annotations

import pytest

import cclab
from cclab.errors import SpecError
from cclab.spec import load
from cclab.sweep import run_key

pytestmark = pytest.mark.sim

RTT_S = 0.100
#: Linux doubles SO_SNDBUF and SO_RCVBUF (__sock_set_rcvbuf: "to account for struct sk_buff
#: etc. overhead").
DOUBLING = 2
#: The payload a byte of receive memory holds (crates/cclab-sim/src/tcp/receive_window.rs,
#: measured on the kernel engine): a buffer of B bytes advertises at most B x 1448 / 2288.
PAYLOAD_PER_MEMORY = 1448 / 2288
#: iperf3 -w 128K: a receive buffer of 256 KiB, a window of at most 165,900 bytes.
WINDOW_AT_128KIB_BYTES = DOUBLING * 128 * 1024 * PAYLOAD_PER_MEMORY


def spec(flow: dict | None = None, host: dict | None = None, rate_mbps: int = 100, rtt_ms: int = 100) -> dict:
    # 8 s measured after 2 s; the bottleneck buffer 1 BDP.
    data = {
        "duration_s": 10,
        "bottleneck": {"rate_mbps": rate_mbps, "rtt_ms": rtt_ms},
        "flows": [{"cc": "cubic", **(flow or {})}],
        "output": {"warmup_s": 2},
    }
    return data if host is None else {**data, "host": host}


def mbps(window_bytes: float, rtt_s: float = RTT_S) -> float:
    return window_bytes * 8 / rtt_s / 1e6


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_iperf3_w_128k_caps_goodput_near_128k_per_rtt_whatever_the_cc(cc: str) -> None:
    capped = cclab.run(spec({"cc": cc, "sndbuf": "128KiB", "rcvbuf": "128KiB"}), "sim").flows.iloc[0]
    # The receiver's window is the tighter cap: 165,900 bytes a round trip, 13.3 Mbit/s, within
    # a third of 128 KiB a round trip (10.5).
    assert 0.85 * mbps(WINDOW_AT_128KIB_BYTES) < capped.goodput_mbps <= mbps(WINDOW_AT_128KIB_BYTES)
    assert capped.goodput_mbps < 1.3 * mbps(128 * 1024)
    free = cclab.run(spec({"cc": cc}), "sim").flows.iloc[0]
    assert free.goodput_mbps > 0.9 * 100 * 1448 / 1514


def test_a_set_send_buffer_alone_holds_the_flight_under_twice_its_value() -> None:
    flow = cclab.run(spec({"sndbuf": "128KiB"}), "sim").flows.iloc[0]
    ceiling = mbps(DOUBLING * 128 * 1024)  # 21 Mbit/s
    # The writer waits until a third of the buffer is free, so the flight swings between two
    # thirds and all of it.
    assert 0.6 * ceiling < flow.goodput_mbps < ceiling
    assert flow.rwnd_limited_ms == 0  # the receiver, autotuned, never held it


def test_a_set_receive_buffer_alone_caps_the_window_it_advertises() -> None:
    flow = cclab.run(spec({"rcvbuf": "128KiB"}), "sim").flows.iloc[0]
    assert 0.85 * mbps(WINDOW_AT_128KIB_BYTES) < flow.goodput_mbps <= mbps(WINDOW_AT_128KIB_BYTES)
    assert flow.rwnd_limited_ms > 0.5 * 8_000


def test_linuxs_stock_tcp_wmem_max_caps_a_long_fat_path_where_the_default_does_not() -> None:
    # 1 Gbit/s x 200 ms holds 25 MB; a stock 4 MiB send buffer lets about a sixth of it fly.
    long_fat = {"rate_mbps": 1000, "rtt_ms": 200}
    capped = cclab.run(spec({"cc": "bbr"}, {"tcp_wmem_max": "4MiB"}, **long_fat), "sim")
    flow = capped.flows.iloc[0]
    assert 0.5 * mbps(4 * 1024 * 1024, 0.2) < flow.goodput_mbps < mbps(4 * 1024 * 1024, 0.2)
    assert capped.provenance["host_settings"]["tcp_wmem_max_bytes"] == 4 * 1024 * 1024
    free = cclab.run(spec({"cc": "bbr"}, **long_fat), "sim").flows.iloc[0]
    assert free.goodput_mbps > 5 * flow.goodput_mbps


def test_autotune_keeps_the_config_and_run_key_and_a_set_buffer_changes_them() -> None:
    plain = load(spec()).resolve()
    assert load(spec({"sndbuf": "autotune", "rcvbuf": "autotune"})).resolve() == plain
    assert load(spec(host={"tcp_wmem_max": "512MiB"})).resolve() == plain
    set_buffer = load(spec({"sndbuf": "1MB"})).resolve()
    assert set_buffer["flows"][0]["sndbuf_bytes"] == 1_000_000 and "rcvbuf_bytes" not in set_buffer["flows"][0]
    assert run_key(set_buffer, "sim") != run_key(plain, "sim")


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({"flow": {"sndbuf": "-1KB"}}, 'flows[0].sndbuf: must be "autotune" or a size in bytes: must not be negative (got "-1KB")'),
        ({"flow": {"rcvbuf": "2GB"}}, "flows[0].rcvbuf: must be \"autotune\" or between 1 and 1073741823 bytes (got '2GB')"),
        ({"flow": {"sndbuf": "auto"}}, 'flows[0].sndbuf: must be "autotune" or a size in bytes: '),
        ({"host": {"tcp_wmem_max": "8KiB"}}, "host.tcp_wmem_max: must be between tcp_wmem's default, 16KiB, and 2147483647 bytes (got '8KiB')"),
    ],
)
def test_an_impossible_socket_buffer_is_one_line_naming_the_field(changes: dict, line: str) -> None:
    with pytest.raises(SpecError) as error:
        load(spec(**changes))
    assert str(error.value).startswith(line) and "\n" not in str(error.value)

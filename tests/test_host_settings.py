"""`[host]` settings on the simulator: the receive buffer's autotuning cap (`tcp_rmem_max`)
limits a flow to the window that buffer allows, as Linux limits it; without RACK
(`loss_recovery = "classic"`) tail losses wait for the retransmission timer; an untouched host
keeps every config and run key it had."""

from __future__ import annotations

import pytest

import cclab
from cclab.errors import SpecError
from cclab.spec import load
from cclab.spec.host import DEFAULT_TCP_RMEM_MAX_BYTES, DEFAULT_TCP_WMEM_MAX_BYTES
from cclab.sweep import run_key

pytestmark = pytest.mark.sim

#: The memory a full segment costs the receiver (crates/cclab-sim/src/tcp/receive_window.rs,
#: measured on the kernel engine): a buffer of B bytes advertises at most B x 1448 / 2288.
PAYLOAD_PER_MEMORY = 1448 / 2288


def spec(host: dict | None = None, cc: str = "cubic") -> dict:
    # 100 Mbit/s, 100 ms: a BDP of 1.25 MB, the buffer 1 BDP; 8 s measured after 2 s.
    data = {"duration_s": 10, "bottleneck": {"rate_mbps": 100, "rtt_ms": 100}, "flows": [{"cc": cc}], "output": {"warmup_s": 2}}
    return data if host is None else {**data, "host": host}


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_a_capped_receive_buffer_holds_any_cc_to_the_window_it_allows(cc: str) -> None:
    capped = cclab.run(spec({"tcp_rmem_max": "512KiB"}, cc), "sim")
    flow = capped.flows.iloc[0]
    window_mbps = 512 * 1024 * PAYLOAD_PER_MEMORY * 8 / 0.100 / 1e6  # 26.5 Mbit/s
    assert 0.85 * window_mbps < flow.goodput_mbps <= window_mbps
    if cc == "cubic":  # BBR paces at the rate the window lets through: it seldom meets the window itself
        assert flow.rwnd_limited_ms > 0.5 * 8_000  # waiting for the window most of the time
    assert capped.provenance["host_settings"] == {"tcp_rmem_max_bytes": 512 * 1024, "tcp_wmem_max_bytes": DEFAULT_TCP_WMEM_MAX_BYTES, "access_rate_bps": None, "sender_qdisc": "none", "loss_recovery": "rack", "mtu_bytes": 1500}
    # Autotuning up to the default cap reaches the link.
    free = cclab.run(spec(cc=cc), "sim")
    assert free.flows.iloc[0].goodput_mbps > 0.9 * 100 * 1448 / 1514
    assert free.provenance["host_settings"] == {"tcp_rmem_max_bytes": DEFAULT_TCP_RMEM_MAX_BYTES, "tcp_wmem_max_bytes": DEFAULT_TCP_WMEM_MAX_BYTES, "access_rate_bps": None, "sender_qdisc": "none", "loss_recovery": "rack", "mtu_bytes": 1500}


def test_an_untouched_host_keeps_the_config_and_run_key_and_a_setting_changes_them() -> None:
    plain = load(spec()).resolve()
    assert "host" not in plain
    assert run_key(plain, "sim") == run_key(load(spec({})).resolve(), "sim")
    # Defaults written out are the defaults: the same config and key.
    assert load(spec({"tcp_rmem_max": "512MiB", "loss_recovery": "rack"})).resolve() == plain
    capped = load(spec({"tcp_rmem_max": "6MiB"})).resolve()
    assert capped["host"] == {"tcp_rmem_max_bytes": 6 * 1024 * 1024}
    assert run_key(capped, "sim") != run_key(plain, "sim")


@pytest.mark.parametrize(
    ("host", "line"),
    [
        ({"tcp_rmem_max": "64KiB"}, "host.tcp_rmem_max: must be between tcp_rmem's default, 128KiB, and 2147483647 bytes (got '64KiB')"),
        ({"tcp_rmem_max": "4GiB"}, "host.tcp_rmem_max: must be between tcp_rmem's default, 128KiB, and 2147483647 bytes (got '4GiB')"),
        ({"tcp_rmem_max": "1bdp"}, "host.tcp_rmem_max: "),
        ({"tcp_rmem": "1MB"}, "host.tcp_rmem: unknown key (did you mean 'tcp_rmem_max'?)"),
        ({"loss_recovery": "fack"}, "host.loss_recovery: "),
    ],
)
def test_an_impossible_host_setting_is_one_line_naming_the_field(host: dict, line: str) -> None:
    with pytest.raises(SpecError) as caught:
        load(spec(host))
    assert caught.value.line.startswith(line) and "\n" not in caught.value.line


def test_without_rack_tail_losses_wait_for_the_retransmission_timer() -> None:
    # 1% random loss at 100 Mbit/s, 40 ms: a loss near the end of a flight has too few SACKed
    # segments above it for the duplicate-ACK scoreboard (3); RACK marks it once the tail loss
    # probe's SACK shows later data arrived, the classic scoreboard waits for the RTO.
    def rtos(recovery: str, seed: int) -> int:
        data = {"duration_s": 20, "seed": seed, "bottleneck": {"rate_mbps": 100, "rtt_ms": 40, "loss": 0.01},
                "flows": [{"cc": "cubic"}], "host": {"loss_recovery": recovery}}  # fmt: skip
        result = cclab.run(data, "sim")
        assert result.provenance["host_settings"]["loss_recovery"] == recovery
        return int(result.flows.iloc[0].rto_count)

    counts = [(rtos("rack", seed), rtos("classic", seed)) for seed in (1, 2, 3, 4)]
    assert all(classic >= rack for rack, classic in counts), counts
    assert sum(classic for _, classic in counts) > sum(rack for rack, _ in counts), counts

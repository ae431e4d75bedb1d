"""The senders' access link on the simulator (`[host] access_rate_mbps`): a NIC much faster than the
bottleneck delivers each flight in line-rate bursts that overflow a shallow buffer, where a NIC
at the bottleneck's rate spaces the packets out; unset, the config and run key stay as they were."""

from __future__ import annotations

import pytest

import cclab
from cclab.errors import SpecError
from cclab.spec import load
from cclab.sweep import run_key

pytestmark = pytest.mark.sim


def spec(access_rate_mbps: float | None = None) -> dict:
    # 100 Mbit/s, 20 ms, a tenth of the BDP (25 KB, 16 frames): the buffer cannot hold a burst.
    data = {"duration_s": 10, "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "0.1bdp"}, "flows": [{"cc": "cubic"}]}
    return data if access_rate_mbps is None else {**data, "host": {"access_rate_mbps": access_rate_mbps}}


def test_a_fast_access_link_overflows_a_shallow_buffer_that_a_paced_one_does_not() -> None:
    fast, matched = (cclab.run(spec(rate), "sim").flows.iloc[0] for rate in (10_000, 100))
    assert fast.retrans_segments > 2 * matched.retrans_segments
    ceiling = 100 * 1448 / 1514
    for flow in (fast, matched):
        assert flow.goodput_mbps <= ceiling
    # The default is cclab's 10 Gbit/s NIC: the same run, bit for bit.
    default = cclab.run(spec(), "sim").flows.iloc[0]
    assert (default.bytes_delivered, default.retrans_segments) == (fast.bytes_delivered, fast.retrans_segments)


def test_an_unset_access_link_keeps_the_run_key_and_a_set_one_changes_it() -> None:
    plain = load(spec()).resolve()
    assert "host" not in plain
    linked = load(spec(1000)).resolve()
    assert linked["host"] == {"access_rate_bps": 1_000_000_000}
    assert run_key(linked, "sim") != run_key(plain, "sim")


@pytest.mark.parametrize(
    ("rate", "line"),
    [
        (50, "host.access_rate_mbps: must be at least the bottleneck's rate, 100 Mbit/s (got 50)"),
        (0, "host.access_rate_mbps: must be > 0 (got 0)"),
    ],
)
def test_an_access_link_slower_than_the_bottleneck_is_one_line_naming_the_field(rate: float, line: str) -> None:
    with pytest.raises(SpecError) as error:
        load(spec(rate))
    assert str(error.value).startswith(line) and "\n" not in str(error.value)

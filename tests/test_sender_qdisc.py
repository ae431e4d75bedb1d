"""The senders' egress qdisc on the simulator (`[host] sender_qdisc`): fq paces every CC on the
clock TCP's internal pacing uses (so BBR runs exactly as without it) and changes CUBIC, which
TCP alone does not pace; a FIFO changes nothing here; unset, the config and run key stay."""

from __future__ import annotations

import pytest

import cclab
from cclab.errors import SpecError
from cclab.spec import load
from cclab.sweep import run_key

pytestmark = pytest.mark.sim


def spec(cc: str, sender_qdisc: str | None = None) -> dict:
    data = {"duration_s": 5, "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "0.5bdp"}, "flows": [{"cc": cc}]}
    return data if sender_qdisc is None else {**data, "host": {"sender_qdisc": sender_qdisc}}


def counts(data: dict) -> tuple[int, int, int]:
    flow = cclab.run(data, "sim").flows.iloc[0]
    return int(flow.bytes_delivered), int(flow.data_segments_sent), int(flow.retrans_segments)


def test_fq_paces_bbr_on_its_own_clock_and_cubic_for_the_first_time() -> None:
    # BBR asks TCP for pacing; under fq the same departure times come from fq (EDT).
    assert counts(spec("bbr", "fq")) == counts(spec("bbr"))
    # CUBIC is paced only under fq (crates/cclab-sim/src/tcp/sender/transmit_tests.rs shows the skbs' spacing).
    assert counts(spec("cubic", "fq")) != counts(spec("cubic"))
    # A FIFO at the sender queues nothing here: the access link outruns TCP.
    assert counts(spec("cubic", "pfifo_fast")) == counts(spec("cubic"))


def test_an_unset_sender_qdisc_keeps_the_run_key_and_a_set_one_changes_it() -> None:
    plain = load(spec("cubic")).resolve()
    assert load(spec("cubic", "none")).resolve() == plain
    fq = load(spec("cubic", "fq")).resolve()
    assert fq["host"] == {"sender_qdisc": "fq"} and run_key(fq, "sim") != run_key(plain, "sim")
    with pytest.raises(SpecError, match=r"^host\.sender_qdisc: "):
        load(spec("cubic", "cake"))

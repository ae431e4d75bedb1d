"""The netem delay path end to end.

Where the kernel has sch_netem, real runs check the delay, the limit and the drop check.
Everywhere, a stand-in qdisc in netem's place checks the engine's wiring: the delay line
is not started, the per-sender router qdiscs are installed and their counters read, and a
qdisc that drops ACKs makes the run invalid.
"""

from __future__ import annotations

import os

import pytest

from cclab.engines.kernel import engine, netem, run
from kernelcase import make_config, requires_kernel_engine

pytestmark = requires_kernel_engine


def _why_no_netem() -> str | None:
    if os.geteuid() != 0:
        return "probing netem needs root"
    probe = netem.netem_probe()
    if probe.available:
        return None
    return (
        f"sch_netem is not available on this kernel (tc: {probe.detail}; CONFIG_NET_SCH_NETEM {probe.kernel_config}); "
        "the netem path is covered here by unit tests and the stand-in qdisc tests"
    )


NO_NETEM_REASON = _why_no_netem()
requires_netem = pytest.mark.skipif(NO_NETEM_REASON is not None, reason=NO_NETEM_REASON or "")


def _netem_config(**bottleneck: object) -> dict:
    config = make_config([{"cc": "cubic"}, {"cc": "bbr", "extra_rtt_ns": 30_000_000}], duration_ns=2_000_000_000,
                         **bottleneck)  # fmt: skip
    config["delay_mechanism"] = "netem"
    return config


# --- real netem (skipped where the kernel lacks it) ----------------------------------------


@pytest.fixture(scope="module")
def netem_result() -> dict:
    return run(_netem_config(loss_probability=0.01))


@requires_netem
def test_with_netem_idle_and_tcp_rtt_of_each_flow_are_within_half_a_millisecond(netem_result: dict) -> None:
    idle = netem_result["provenance"]["idle_rtt_ms"]
    flows = {f["flow_id"]: f for f in netem_result["flows"]}
    for flow_id, rtt_ms in ((0, 20.0), (1, 50.0)):
        assert abs(idle[str(flow_id)] - rtt_ms) < 0.5
        assert abs(flows[flow_id]["rtt_min_ms"] - rtt_ms) < 0.5


@requires_netem
def test_with_netem_each_sender_gets_its_own_router_netem_sized_never_to_drop(netem_result: dict) -> None:
    delay = netem_result["provenance"]["delay"]
    assert delay["mechanism"] == "netem"
    assert [q["router_interface"] for q in delay["qdiscs"]] == ["s0", "s1"]
    assert [q["delay_ns"] for q in delay["qdiscs"]] == [20_000_000, 50_000_000]
    for q in delay["qdiscs"]:
        assert q["limit_pkts"] >= netem.LIMIT_MARGIN * q["limit_basis"]["acks_in_flight"]
        assert q["packets"] > 0
        assert q["drops"] == 0
    assert not [r for r in netem_result["validity"]["reasons"] if "netem" in r or "delay line" in r]


@requires_netem
def test_with_netem_random_loss_stays_on_the_iptables_rule(netem_result: dict) -> None:
    assert netem_result["provenance"]["loss"]["mechanism"] == "iptables statistic --mode random"
    assert all(f["random_loss_segments"] > 0 for f in netem_result["flows"])


@requires_netem
def test_a_netem_limit_below_the_acks_in_flight_drops_acks_and_invalidates_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The seeds' trap: a limit smaller than rate x RTT in ACKs (here 5 against ~80).
    monkeypatch.setattr(netem, "netem_limit_pkts", lambda _rate, _delay: 5)
    result = run(_netem_config())
    assert any(q["drops"] > 0 for q in result["provenance"]["delay"]["qdiscs"])
    assert not result["validity"]["valid"]
    assert any("ACKs were lost to delay emulation" in r for r in result["validity"]["reasons"])


# --- a stand-in qdisc in netem's place (runs on every kernel) ------------------------------


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Makes the engine believe netem exists and installs `spec["args"]` (a qdisc of kind
    `spec["kind"]`) where netem would go. Starting the delay line fails the test."""
    spec: dict = {}
    monkeypatch.setattr(netem, "netem_probe", lambda: netem.NetemProbe(True, "stand-in for the test", None))

    def stand_in_args(ifname: str, _delay_ns: int, limit_pkts: int) -> list[str]:
        return ["tc", "qdisc", "add", "dev", ifname, "root", "handle", netem.NETEM_HANDLE, *spec["args"](limit_pkts)]

    monkeypatch.setattr(netem, "netem_add_args", stand_in_args)

    def no_delay_line(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the delay line must not start when netem is used")

    monkeypatch.setattr(engine, "DelayLine", no_delay_line)

    def use(kind: str, args: object) -> None:
        spec["kind"], spec["args"] = kind, args
        monkeypatch.setattr(netem, "QDISC_KIND", kind)

    spec["use"] = use
    return spec


def test_engine_installs_a_qdisc_per_sender_on_the_router_and_reads_it_instead_of_the_delay_line(
    stand_in: dict,
) -> None:
    stand_in["use"]("pfifo", lambda limit: ["pfifo", "limit", str(limit)])
    config = make_config(duration_ns=1_000_000_000)
    config["delay_mechanism"] = "netem"
    result = run(config)
    prov = result["provenance"]
    assert prov["delay"]["mechanism"] == "netem"
    assert prov["topology"]["rps_cpus_mask"] is None  # no CPU is reserved for a delay line
    (q,) = prov["delay"]["qdiscs"]
    assert q["router_interface"] == "s0"
    assert q["limit_pkts"] == netem.netem_limit_pkts(50_000_000, 20_000_000)
    assert q["packets"] > 500  # the flow's ACKs (~2000 in 1 s at 50 Mbit/s) went through the router qdisc
    assert q["drops"] == 0
    assert prov["idle_rtt_ms"]["0"] < 1.0  # the stand-in adds no delay: no delay line ran
    assert result["flows"][0]["bytes_delivered"] > 0
    assert not [r for r in result["validity"]["reasons"] if "netem" in r or "delay line" in r]


def test_acks_dropped_by_the_router_qdisc_make_the_run_invalid(stand_in: dict) -> None:
    # A 100 kbit/s tbf with room for ~24 ACKs cannot carry a 50 Mbit/s flow's ACKs.
    stand_in["use"]("tbf", lambda _limit: ["tbf", "rate", "100kbit", "burst", "1600", "limit", "1600"])
    config = make_config(duration_ns=2_000_000_000)
    config["delay_mechanism"] = "netem"
    result = run(config)
    (q,) = result["provenance"]["delay"]["qdiscs"]
    assert q["drops"] > 0
    assert not result["validity"]["valid"]
    assert f"netem on router interface s0 dropped {q['drops']} packets" in " ".join(result["validity"]["reasons"])

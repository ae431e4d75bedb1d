"""BBRv2 and BBRv3 on a kernel without them: the BPF struct_ops port of google/bbr v3
(bbr3.bpf.c as `cclab_bbr3`) and, built with -DCCLAB_BBR_V2ALPHA, of tcp_bbr2.c
(`cclab_bbr2`).
Each must fill a 1-BDP link, walk its state machine (counted per ACK in its stats array),
back off at 5% random loss where BBRv1 does not, and leave nothing behind: no namespace, no
qdisc, no struct_ops. Five runs: 7 s clean and 6 s lossy for each version, and one 6 s
lossy BBRv1 run both compare with.
"""

from __future__ import annotations

import pytest

from cclab.engines.kernel import bpf_cc
from cclab.engines.kernel import netns as kernel_netns
from kernelcase import BBR_PORT_SCENARIO as SCENARIO
from kernelcase import assert_sound, assert_walks_v2_v3_states
from kernelcase import cclab_struct_ops, make_config, requires_kernel_engine, root_qdiscs, kernel_run

pytestmark = [
    requires_kernel_engine,
    pytest.mark.skipif(bpf_cc.toolchain_problem() is not None, reason=f"no BPF toolchain: {bpf_cc.toolchain_problem()}"),
]

LOSSY = {**SCENARIO, "loss_probability": 0.05, "duration_ns": 6_000_000_000}
#: The link's payload rate: 50 Mbit/s x 1448/1514.
LINK_PAYLOAD_MBPS = 47.8
VERSIONS = [
    pytest.param(version, marks=pytest.mark.skipif(version in bpf_cc.host_native_versions(), reason=f"this kernel has {version} natively: no port runs"), id=version)
    for version in ("bbr2", "bbr3")
]


def flows(version: str) -> list[dict]:
    return [{"cc": version, "probe_bw_gain": None}]


@pytest.fixture(scope="module", params=VERSIONS)
def clean_run(request: pytest.FixtureRequest) -> tuple[str, dict, str, list[str]]:
    version = request.param
    qdiscs_before = root_qdiscs()
    namespaces_before = kernel_netns.list_cclab_namespaces()
    result = kernel_run(make_config(flows(version), **SCENARIO))
    return version, result, qdiscs_before, namespaces_before


@pytest.fixture(scope="module")
def lossy_bbr1() -> dict:
    return kernel_run(make_config([{"cc": "bbr", "probe_bw_gain": 1.25}], **LOSSY))


def test_the_port_runs_in_place_of_the_missing_native_version(clean_run):
    version, result, _, _ = clean_run
    provenance = result["provenance"]
    assert provenance["cc_implementation"] == {version: "bpf-port"}
    assert provenance["cc_implementation_detail"][version]["kernel_cc"] == f"cclab_{version}"
    assert list(provenance["bpf_congestion_controls"]) == [f"cclab_{version}"]
    assert result["flows"][0]["cc"] == version


def test_one_flow_fills_a_one_bdp_link(clean_run):
    _, result, _, _ = clean_run
    assert_sound(result["validity"])
    # BBR keeps the pipe full: at least 80% of the bottleneck in 7 s, STARTUP and the
    # PROBE_RTTs (0.5 BDP for 200 ms) included.
    assert result["bottleneck"]["utilization"] >= 0.8


def test_the_port_walks_the_versions_state_machine(clean_run):
    version, result, _, _ = clean_run
    assert_sound(result["validity"])
    acks = result["provenance"]["bpf_cc_state_acks"][f"cclab_{version}"]
    # STARTUP -> DRAIN -> PROBE_BW (DOWN, CRUISE, REFILL, UP) and, when due, PROBE_RTT.
    assert_walks_v2_v3_states(acks, SCENARIO["duration_ns"] / 1e9)
    # Most ACKs arrive in CRUISE, the steady state of both (2-3 s between probes).
    assert acks["probe_bw_cruise"] > sum(acks[s] for s in ("probe_bw_down", "probe_bw_refill", "probe_bw_up"))


def test_nothing_of_the_run_is_left_behind(clean_run):
    version, _, qdiscs_before, namespaces_before = clean_run
    assert cclab_struct_ops() == []
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        assert f"cclab_{version}" not in f.read().split()
    assert kernel_netns.list_cclab_namespaces() == namespaces_before
    assert root_qdiscs() == qdiscs_before


@pytest.mark.parametrize("version", VERSIONS)
def test_the_port_backs_off_at_5_percent_random_loss_where_bbr1_does_not(version: str, lossy_bbr1: dict):
    lossy = kernel_run(make_config(flows(version), **LOSSY))
    assert_sound(lossy["validity"])
    assert_sound(lossy_bbr1["validity"])
    # v1 ignores random loss (its policer detector needs 20%); v2 and v3 cut bw_lo and
    # inflight_lo to 0.7x in each lossy round outside probing and end each probe once loss
    # passes 2% (tcp_bbr2.c; google/bbr v3 tcp_bbr.c).
    # Each against the link's payload rate, not against each other: v1 measured 45.6-46.2
    # Mbit/s in six runs here, 33.3-34.1 in two CI runs; v2 13.8-16.9 Mbit/s in three runs of
    # 10 s, v3 6.3-17.2 in five. One CI run drew v1's low and v3's high together (33.3, 17.2).
    assert lossy_bbr1["flows"][0]["goodput_mbps"] > 0.6 * LINK_PAYLOAD_MBPS
    assert lossy["flows"][0]["goodput_mbps"] < 0.5 * LINK_PAYLOAD_MBPS
    acks = lossy["provenance"]["bpf_cc_state_acks"][f"cclab_{version}"]
    assert acks["lower_bound_cuts"] > 0 and acks["inflight_hi_cuts"] > 0

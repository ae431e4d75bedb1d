"""BBRv2 on a kernel without google's v2alpha: bbr3.bpf.c built with -DCCLAB_BBR_V2ALPHA
(`cclab_bbr2`), a port of tcp_bbr2.c.

It must fill a 1-BDP link, walk v2's state machine (counted per ACK in its `bbr2_stats`
array), back off at 5% random loss where BBRv1 does not, and leave nothing behind. Three
runs: 12 s clean, 6 s lossy for v2 and for v1.
"""

from __future__ import annotations

import pytest

from cclab.engines.kernel import bpf_cc
from cclab.engines.kernel import netns as kernel_netns
from kernelcase import BBR_PORT_SCENARIO as SCENARIO
from kernelcase import assert_walks_v2_v3_states
from kernelcase import cclab_struct_ops, make_config, requires_kernel_engine, root_qdiscs, run_valid

pytestmark = [
    requires_kernel_engine,
    pytest.mark.skipif(bpf_cc.toolchain_problem() is not None, reason=f"no BPF toolchain: {bpf_cc.toolchain_problem()}"),
    pytest.mark.skipif("bbr2" in bpf_cc.host_native_versions(), reason="this kernel has BBRv2 natively: no port runs"),
]

BBR2 = [{"cc": "bbr2", "probe_bw_gain": None}]


@pytest.fixture(scope="module")
def bbr2_run() -> tuple[dict, str, list[str]]:
    qdiscs_before = root_qdiscs()
    namespaces_before = kernel_netns.list_cclab_namespaces()
    result = run_valid(make_config(BBR2, **SCENARIO))
    return result, qdiscs_before, namespaces_before


def test_the_bbr2_port_runs_in_place_of_the_missing_native_v2(bbr2_run):
    result, _, _ = bbr2_run
    provenance = result["provenance"]
    assert provenance["cc_implementation"] == {"bbr2": "bpf-port"}
    assert provenance["cc_implementation_detail"]["bbr2"]["kernel_cc"] == "cclab_bbr2"
    assert list(provenance["bpf_congestion_controls"]) == ["cclab_bbr2"]
    assert result["flows"][0]["cc"] == "bbr2"


def test_one_bbr2_flow_fills_a_one_bdp_link(bbr2_run):
    result, _, _ = bbr2_run
    assert result["validity"]["valid"], result["validity"]["reasons"]
    # At least 80% of the bottleneck in 12 s, STARTUP and up to two PROBE_RTTs (every 5 s,
    # 0.5 BDP for 200 ms) included.
    assert result["bottleneck"]["utilization"] >= 0.8


def test_the_port_walks_v2s_state_machine(bbr2_run):
    result, _, _ = bbr2_run
    acks = result["provenance"]["bpf_cc_state_acks"]["cclab_bbr2"]
    assert_walks_v2_v3_states(acks, SCENARIO["duration_ns"] / 1e9)
    # CRUISE is v2's steady state too: a probe every 2-3 s.
    assert acks["probe_bw_cruise"] > sum(acks[s] for s in ("probe_bw_down", "probe_bw_refill", "probe_bw_up"))


def test_nothing_of_the_run_is_left_behind(bbr2_run):
    _, qdiscs_before, namespaces_before = bbr2_run
    assert cclab_struct_ops() == []
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        assert "cclab_bbr2" not in f.read().split()
    assert kernel_netns.list_cclab_namespaces() == namespaces_before
    assert root_qdiscs() == qdiscs_before


def test_bbr2_backs_off_at_5_percent_random_loss_where_bbr1_does_not():
    lossy = {**SCENARIO, "loss_probability": 0.05, "duration_ns": 6_000_000_000}
    v2 = run_valid(make_config(BBR2, **lossy))
    v1 = run_valid(make_config([{"cc": "bbr", "probe_bw_gain": 1.25}], **lossy))
    assert v2["validity"]["valid"] and v1["validity"]["valid"], (v2["validity"], v1["validity"])
    # v1 ignores random loss; v2 cuts bw_lo/inflight_lo to 0.7x in each lossy round outside
    # probing and ends each probe once loss passes 2% (tcp_bbr2.c, as v3).
    # Each against the link's payload rate (50 Mbit/s x 1448/1514), not against each other:
    # v1 measured 45.6-46.2 Mbit/s in six runs here, 33.3-34.1 in two CI runs; v2
    # 13.8-16.9 Mbit/s in three runs of 10 s here. A CI run of the BBRv3 test drew v1's low
    # and v3's high together (33.3 and 17.2).
    link_payload_mbps = 47.8
    assert v1["flows"][0]["goodput_mbps"] > 0.6 * link_payload_mbps
    assert v2["flows"][0]["goodput_mbps"] < 0.5 * link_payload_mbps
    acks = v2["provenance"]["bpf_cc_state_acks"]["cclab_bbr2"]
    assert acks["lower_bound_cuts"] > 0 and acks["inflight_hi_cuts"] > 0

"""DCTCP on the kernel engine: the kernel's own tcp_dctcp where it has it, else the BPF port
(crates/cclab-bpf-l4s/dctcp.bpf.c), against the simulator's port of the same code, behind
the step marking DCTCP is made for (CoDel's ce_threshold) and behind DualPI2 in the
userspace bottleneck. Two 6 s kernel runs.
"""

from __future__ import annotations

import pytest

import cclab
from cclab.engines.kernel import bpf_cc
from kernelcase import assert_sound, host_timing_only, requires_kernel_engine, kernel_run_spec

pytestmark = [
    requires_kernel_engine,
    pytest.mark.skipif(
        "dctcp" not in bpf_cc.host_native_versions() and bpf_cc.toolchain_problem() is not None,
        reason=f"no tcp_dctcp and no BPF toolchain: {bpf_cc.toolchain_problem()}",
    ),
]

#: The marking step: 21 packets at 50 Mbit/s, above the BDP / 7 (12 packets at 20 ms) that the
#: DCTCP paper (Alizadeh et al., SIGCOMM 2010, section 3.3) asks for full throughput. A 1 ms
#: step (as in examples/dctcp_50mbit_10ms_ce_threshold.toml) is within the delay line's
#: jitter on a busy host, whose bursts then set the marks (CUBIC fell to 3% of the link).
STEP_MS = 5
STEP_SPEC = {"duration_s": 6, "output": {"warmup_s": 2}, "flows": [{"cc": "dctcp"}],
             "bottleneck": {"rate_mbps": 50, "rtt_ms": 20, "buffer": "4bdp", "aqm": "codel", "aqm_params": {"ecn": True, "ce_threshold_ms": STEP_MS}}}  # fmt: skip
DUALPI2_SPEC = {"duration_s": 6, "bottleneck": {"rate_mbps": 50, "rtt_ms": 20, "buffer": "4bdp", "aqm": "dualpi2"},
                "flows": [{"cc": "dctcp"}]}  # fmt: skip


@pytest.fixture(scope="module")
def behind_the_step() -> tuple[cclab.RunResult, cclab.RunResult]:
    return kernel_run_spec(STEP_SPEC), cclab.run(STEP_SPEC, "sim")


def test_the_kernels_own_dctcp_runs_where_it_has_one_else_the_bpf_port(behind_the_step) -> None:
    kernel, _ = behind_the_step
    assert_sound(kernel.validity)
    native = "dctcp" in bpf_cc.host_native_versions()
    provenance = kernel.provenance
    assert provenance["cc_implementation"] == {"dctcp": "native" if native else "bpf-port"}
    assert provenance["cc_implementation_detail"]["dctcp"]["kernel_cc"] == ("dctcp" if native else "cclab_dctcp")
    assert kernel.flows.iloc[0]["ecn"]  # TCP_CONG_NEEDS_ECN: negotiated whatever the flow said


def test_dctcp_keeps_the_link_full_while_many_of_its_packets_are_marked_on_both_engines(behind_the_step) -> None:
    # DCTCP's signature (RFC 8257): it cuts by alpha/2 once a window, so it keeps the link full
    # with a steady share of its packets marked, the queue held near the step (the simulator:
    # 6% marked). CUBIC with ECN takes one mark per cycle (0.4% of its packets here). A DCTCP
    # whose receiver echoed CE the RFC 3168 way (ECE until CWR) would see every packet of a
    # marked window as marked and halve each window: far from full at that marking rate.
    assert_sound(behind_the_step[0].validity)
    for result in behind_the_step:
        engine, bottleneck, flow = result.provenance["engine"], result.bottleneck, result.flows.iloc[0]
        assert bottleneck["utilization"] >= 0.95, (engine, bottleneck["utilization"])
        # Marks, not drops: nothing is lost. (A clean-clone run with the suite beside it once
        # retransmitted 6 segments with none dropped: spurious, the host's stalls outlasting
        # RACK's reordering window; the simulator has no such stall.)
        assert bottleneck["drops"] == 0, engine
        assert flow["retrans_segments"] == 0 or engine == "kernel", engine
        assert bottleneck["ce_marks"] >= 0.02 * flow["data_segments_sent"], (engine, bottleneck["ce_marks"], flow["data_segments_sent"])
        assert 0.3 * STEP_MS <= bottleneck["sojourn_p50_ms"] <= 1.5 * STEP_MS, (engine, bottleneck["sojourn_p50_ms"])
    kernel, sim = behind_the_step
    # Every mark the bottleneck made reached the receiver, but for those on their way when the
    # counters were read (at the warm-up's end and the run's): at most the packets of the
    # 10 ms from link to receiver.
    on_their_way = 50e6 * 0.010 / 8 / 1514
    assert abs(kernel.bottleneck["ce_marks"] - kernel.flows.iloc[0]["ce_marks_received"]) <= on_their_way
    g_kernel, g_sim = kernel.flows.iloc[0]["goodput_mbps"], sim.flows.iloc[0]["goodput_mbps"]
    assert abs(g_sim - g_kernel) <= 0.10 * g_kernel, (g_kernel, g_sim)


#: An ssthresh no path of these tests can need (they hold a few hundred packets): the port's
#: largest answer past it is the runaway docs/FIDELITY.md describes.
RUNAWAY_SSTHRESH_PKTS = 1 << 24


def test_dctcp_behind_the_userspace_dualpi2_agrees_with_the_simulator_within_10_percent() -> None:
    # DCTCP sends ECT(0): DualPI2 classifies it as classic and marks it with p_C = (p')^2;
    # the PI controller then holds the classic queue near its 15 ms target on both engines.
    kernel, sim = kernel_run_spec(DUALPI2_SPEC), cclab.run(DUALPI2_SPEC, "sim")
    port = kernel.provenance.get("bpf_cc_state_acks", {}).get("cclab_dctcp", {})
    if port.get("max_ssthresh", 0) > RUNAWAY_SSTHRESH_PKTS:
        # 4 of 27 runs here (2026-12-02): after the sender was limited by the receive window,
        # cwnd leapt to about 2^31 within 20 ms and the buffer overflowed; the run is invalid
        # (retransmissions against drops) and cannot judge the agreement. Not yet explained.
        pytest.skip(f"the kernel run's window ran away (the port's ssthresh reached {port['max_ssthresh']:,}; docs/FIDELITY.md)")
    softnet = [reason for reason in kernel.validity["reasons"] if "softnet_stat drops" in reason]
    if softnet and all(host_timing_only([reason]) or reason in softnet for reason in kernel.validity["reasons"]):
        # The userspace bottleneck's releases overflowing a CPU's backlog (netdev_max_backlog,
        # a sysctl of the whole host, which the engine leaves alone): packets lost outside the
        # bottleneck, which makes the run invalid. Seen once in CI (53 packets) with no runaway.
        pytest.skip(f"the kernel run lost packets outside the bottleneck: {softnet[0]}")
    assert_sound(kernel.validity)
    assert kernel.provenance["aqm"]["kind"] == "dualpi2"
    g_kernel, g_sim = kernel.flows.iloc[0]["goodput_mbps"], sim.flows.iloc[0]["goodput_mbps"]
    assert abs(g_sim - g_kernel) <= 0.10 * g_kernel, (g_kernel, g_sim)
    for result in (kernel, sim):
        # Per queue, under the same names on both engines (the userspace bottleneck counts each).
        bottleneck = result.bottleneck
        assert bottleneck["classic_ce_marks"] > 0 and bottleneck["l4s_packets"] == 0
        assert bottleneck["classic_packets"] > 0.9 * result.flows.iloc[0]["data_segments_sent"]
        assert bottleneck["classic_sojourn_p50_ms"] == pytest.approx(bottleneck["sojourn_p50_ms"], abs=0.5)
        assert 5.0 <= result.bottleneck["sojourn_mean_ms"] <= 25.0, (result.provenance["engine"], result.bottleneck["sojourn_mean_ms"])

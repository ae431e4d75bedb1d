"""DCTCP on the kernel engine: the kernel's own tcp_dctcp where it has it, else the BPF port
(crates/cclab-bpf-l4s/dctcp.bpf.c), against the simulator's port of the same code, behind
the step marking DCTCP is made for (CoDel's ce_threshold at 1 ms, as in
examples/dctcp_50mbit_10ms_ce_threshold.toml but at 20 ms, where the kernel engine's timing
checks allow 200 us) and behind DualPI2 in the userspace bottleneck. Two 6 s kernel runs.
"""

from __future__ import annotations

import pytest

import cclab
from cclab.engines.kernel import bpf_cc
from kernelcase import requires_kernel_engine, run_spec_valid

pytestmark = [
    requires_kernel_engine,
    pytest.mark.skipif(
        "dctcp" not in bpf_cc.host_native_versions() and bpf_cc.toolchain_problem() is not None,
        reason=f"no tcp_dctcp and no BPF toolchain: {bpf_cc.toolchain_problem()}",
    ),
]

STEP_SPEC = {"duration_s": 6, "output": {"warmup_s": 2}, "flows": [{"cc": "dctcp"}],
             "bottleneck": {"rate_mbps": 50, "rtt_ms": 20, "buffer": "4bdp", "aqm": "codel", "aqm_params": {"ecn": True, "ce_threshold_ms": 1}}}  # fmt: skip
DUALPI2_SPEC = {"duration_s": 6, "output": {"warmup_s": 2}, "bottleneck": {"rate_mbps": 50, "rtt_ms": 20, "buffer": "4bdp", "aqm": "dualpi2"},
                "flows": [{"cc": "dctcp"}]}  # fmt: skip


@pytest.fixture(scope="module")
def behind_the_step() -> tuple[cclab.RunResult, cclab.RunResult]:
    return run_spec_valid(STEP_SPEC), cclab.run(STEP_SPEC, "sim")


def test_the_kernels_own_dctcp_runs_where_it_has_one_else_the_bpf_port(behind_the_step) -> None:
    kernel, _ = behind_the_step
    assert kernel.validity["valid"], kernel.validity["reasons"]
    native = "dctcp" in bpf_cc.host_native_versions()
    provenance = kernel.provenance
    assert provenance["cc_implementation"] == {"dctcp": "native" if native else "bpf-port"}
    assert provenance["cc_implementation_detail"]["dctcp"]["kernel_cc"] == ("dctcp" if native else "cclab_dctcp")
    assert kernel.flows.iloc[0]["ecn"]  # TCP_CONG_NEEDS_ECN: negotiated whatever the flow said


def test_dctcp_keeps_the_link_full_over_a_one_ms_marking_step_on_both_engines(behind_the_step) -> None:
    # DCTCP's signature (RFC 8257): it cuts by alpha/2 once a window, so a queue held at the
    # 1 ms step (4 packets, a twentieth of the BDP) still keeps the link busy. CUBIC with ECN
    # behind the same step cuts to 0.7 per marked window: 0.89 of the link on the simulator.
    # A receiver echoing CE the RFC 3168 way (ECE until CWR) would show the sender every
    # packet of a marked window as marked, and DCTCP would then halve each time.
    for result in behind_the_step:
        engine, bottleneck = result.provenance["engine"], result.bottleneck
        assert bottleneck["utilization"] >= 0.95, (engine, bottleneck["utilization"])
        assert bottleneck["ce_marks"] > 0 and bottleneck["drops"] == 0, (engine, bottleneck["ce_marks"], bottleneck["drops"])
        assert bottleneck["sojourn_p50_ms"] < 2.0, (engine, bottleneck["sojourn_p50_ms"])
        assert result.flows.iloc[0]["retrans_segments"] == 0
    kernel, sim = behind_the_step
    # Every mark the bottleneck made reached the receiver.
    assert kernel.flows.iloc[0]["ce_marks_received"] == kernel.bottleneck["ce_marks"]
    g_kernel, g_sim = kernel.flows.iloc[0]["goodput_mbps"], sim.flows.iloc[0]["goodput_mbps"]
    assert abs(g_sim - g_kernel) <= 0.10 * g_kernel, (g_kernel, g_sim)


def test_dctcp_behind_the_userspace_dualpi2_agrees_with_the_simulator_within_10_percent() -> None:
    # DCTCP sends ECT(0): DualPI2 classifies it as classic and marks it with p_C = (p')^2;
    # the PI controller then holds the classic queue near its 15 ms target on both engines.
    kernel, sim = run_spec_valid(DUALPI2_SPEC), cclab.run(DUALPI2_SPEC, "sim")
    assert kernel.validity["valid"], kernel.validity["reasons"]
    assert kernel.provenance["aqm"]["kind"] == "dualpi2"
    g_kernel, g_sim = kernel.flows.iloc[0]["goodput_mbps"], sim.flows.iloc[0]["goodput_mbps"]
    assert abs(g_sim - g_kernel) <= 0.10 * g_kernel, (g_kernel, g_sim)
    for result in (kernel, sim):
        assert result.bottleneck["classic_ce_marks"] > 0 and result.bottleneck["l4s_packets"] == 0
        assert 5.0 <= result.bottleneck["sojourn_mean_ms"] <= 25.0, (result.provenance["engine"], result.bottleneck["sojourn_mean_ms"])

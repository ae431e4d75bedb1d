"""AQM and ECN at the bottleneck on real TCP: the userspace bottleneck against tbf, the
bufferbloat case with tail drop and with CoDel, CE marks reaching an ECN flow, the kernel's
own qdisc where this kernel has it, and nothing left behind."""

from __future__ import annotations

import json
import subprocess

import pytest

from cclab.engines.kernel import aqm
from cclab.engines.kernel import netns as kernel_netns
from cclab.spec.aqm import resolve_aqm
from kernelcase import assert_sound, make_config, requires_kernel_engine, kernel_run

pytestmark = requires_kernel_engine

FRAME_BYTES = 1514
PAYLOAD_BYTES = 1448
#: The bufferbloat case: 100 Mbit/s, 20 ms, a buffer of 10 BDP (2.5 MB), one CUBIC flow.
BLOAT_RATE_BPS, BLOAT_RTT_NS = 100_000_000, 20_000_000
BLOAT_BUFFER_BYTES = 10 * BLOAT_RATE_BPS // 8 * BLOAT_RTT_NS // 1_000_000_000


def resolved(kind: str, **params: object) -> dict:
    return {**resolve_aqm(kind, None, buffer_bytes=BLOAT_BUFFER_BYTES, rate_bps=BLOAT_RATE_BPS), **params}


def userspace_lacks(kind: str) -> str | None:
    return aqm.userspace_problem_now(resolved(kind))


def with_aqm(config: dict, aqm_config: dict, implementation: str | None = None) -> dict:
    config["bottleneck"]["aqm"] = aqm_config
    if implementation is not None:
        config["aqm_implementation"] = implementation
    return config


needs_userspace_codel = pytest.mark.skipif(
    userspace_lacks("codel") is not None, reason="the userspace bottleneck has no codel yet (cclab-aqm)"
)


@pytest.fixture(scope="module")
def tbf_and_userspace_fifo() -> tuple[dict, dict]:
    # 50 Mbit/s, 20 ms, 1 BDP of buffer, 6 s: the same scenario on tbf and on the userspace FIFO.
    def config() -> dict:
        return make_config(rate_bps=50_000_000, rtt_ns=20_000_000, queue_limit_bytes=125_000, duration_ns=6_000_000_000)

    tbf = kernel_run(config())
    userspace = kernel_run(with_aqm(config(), {"kind": "fifo"}, aqm.CCLAB))
    return tbf, userspace


def test_the_userspace_fifo_delivers_the_goodput_of_tbf_within_3_percent(tbf_and_userspace_fifo: tuple) -> None:
    tbf, userspace = tbf_and_userspace_fifo
    assert_sound(tbf["validity"])
    assert_sound(userspace["validity"])
    assert userspace["provenance"]["aqm"]["implementation"] == "cclab"
    assert tbf["provenance"]["aqm"]["implementation"] == "kernel"
    g_tbf, g_user = tbf["flows"][0]["goodput_mbps"], userspace["flows"][0]["goodput_mbps"]
    assert abs(g_user - g_tbf) / g_tbf < 0.03, (g_tbf, g_user)
    # Never above the payload ceiling: the userspace shaper counts the Ethernet header too.
    assert g_user <= 50 * PAYLOAD_BYTES / FRAME_BYTES * 1.01


def test_the_userspace_fifo_never_holds_more_than_the_buffer_and_only_tail_drops(tbf_and_userspace_fifo: tuple) -> None:
    _, r = tbf_and_userspace_fifo
    bn = r["bottleneck"]
    assert max(r["queue_series"]["queue_bytes"]) <= 125_000
    assert bn["aqm"] == "fifo" and bn["aqm_drops"] == 0 and bn["ce_marks"] == 0
    assert bn["drops"] == bn["overflow_drops"] > 0  # CUBIC overflows a 1 BDP buffer
    assert r["flows"][0]["queue_drop_segments"] == bn["drops"]
    # A packet waits at most a full buffer's drain time, 125 kB at 50 Mbit/s = 20 ms, when the
    # bottleneck releases on time (a stalled one holds it longer: the run is late then).
    assert_sound(r["validity"])
    assert bn["sojourn_p99_ms"] <= 20.0 + 1.0


@pytest.fixture(scope="module")
def bufferbloat_fifo() -> dict:
    # 10 s: after slow start's loss CUBIC sits at 0.7 of ~11 BDP, and its window takes about
    # 11 s (K = cbrt(W_max (1 - beta) / C)) to climb back, so the queue stays over 100 ms.
    config = make_config(rate_bps=BLOAT_RATE_BPS, rtt_ns=BLOAT_RTT_NS, queue_limit_bytes=BLOAT_BUFFER_BYTES,
                         duration_ns=10_000_000_000)  # fmt: skip
    return kernel_run(with_aqm(config, {"kind": "fifo"}, aqm.CCLAB))


def test_a_ten_bdp_tail_drop_buffer_holds_cubics_packets_for_hundreds_of_ms(bufferbloat_fifo: dict) -> None:
    r = bufferbloat_fifo
    assert_sound(r["validity"])
    # The full buffer drains in 200 ms; CUBIC keeps it mostly full.
    assert 100.0 <= r["bottleneck"]["sojourn_p50_ms"] <= 205.0
    assert r["flows"][0]["goodput_mbps"] > 0.9 * 100 * PAYLOAD_BYTES / FRAME_BYTES


@needs_userspace_codel
def test_codel_keeps_the_median_sojourn_near_its_5_ms_target() -> None:
    config = make_config(rate_bps=BLOAT_RATE_BPS, rtt_ns=BLOAT_RTT_NS, queue_limit_bytes=BLOAT_BUFFER_BYTES,
                         duration_ns=5_000_000_000)  # fmt: skip
    r = kernel_run(with_aqm(config, resolved("codel")))
    assert_sound(r["validity"])
    bn = r["bottleneck"]
    assert bn["sojourn_p50_ms"] < 15.0, bn
    assert bn["aqm_drops"] > 0 and bn["ce_marks"] == 0  # a non-ECN flow is dropped, not marked
    assert r["flows"][0]["aqm_drop_segments"] == bn["aqm_drops"]


@needs_userspace_codel
def test_an_ecn_cubic_flow_behind_codel_with_ecn_receives_ce_marks_instead_of_drops() -> None:
    config = make_config([{"cc": "cubic", "ecn": True}], rate_bps=BLOAT_RATE_BPS, rtt_ns=BLOAT_RTT_NS,
                         queue_limit_bytes=BLOAT_BUFFER_BYTES, duration_ns=5_000_000_000)  # fmt: skip
    r = kernel_run(with_aqm(config, resolved("codel", ecn=True)))
    assert_sound(r["validity"])
    flow, bn = r["flows"][0], r["bottleneck"]
    assert flow["ecn"] is True
    assert bn["ce_marks"] > 0 and bn["aqm_drops"] == 0
    # Every mark the bottleneck made arrived: nothing downstream drops or rewrites them.
    assert flow["ce_marks_received"] == bn["ce_marks"]
    assert sum(r["queue_series"]["ce_marks"]) <= bn["ce_marks"]
    assert bn["sojourn_p50_ms"] < 15.0


AQM_BOTTLENECK_KEYS = ("aqm", "drops", "overflow_drops", "aqm_drops", "ce_marks", "drops_per_s", "ce_marks_per_s",
                       "sojourn_mean_ms", "sojourn_p50_ms", "sojourn_p95_ms", "sojourn_p99_ms")  # fmt: skip
AQM_FLOW_KEYS = ("ecn", "ce_marks_received", "aqm_drop_segments")


def test_both_engines_report_the_queue_and_ecn_metrics_under_the_same_names(tbf_and_userspace_fifo: tuple) -> None:
    # The fixture's scenario on the simulator; the kernel ran it on tbf and on the userspace FIFO.
    sim = simulated(make_config(rate_bps=50_000_000, rtt_ns=20_000_000, queue_limit_bytes=125_000, duration_ns=6_000_000_000))
    for kernel in tbf_and_userspace_fifo:
        for key in AQM_BOTTLENECK_KEYS:
            assert key in kernel["bottleneck"] and key in sim["bottleneck"], key
            assert type(kernel["bottleneck"][key]) is type(sim["bottleneck"][key]) or {type(kernel["bottleneck"][key]), type(sim["bottleneck"][key])} <= {int, float}, key
        for key in AQM_FLOW_KEYS:
            assert key in kernel["flows"][0] and key in sim["flows"][0], key
        assert "ce_marks" in kernel["queue_series"] and "ce_marks" in sim["queue_series"]
        # The per-second rates are the totals over the run.
        for result in (kernel, sim):
            bn = result["bottleneck"]
            duration_s = max(f["end_s"] for f in result["flows"])
            assert bn["drops_per_s"] == pytest.approx(bn["drops"] / duration_s, rel=0.05)


def simulated(config: dict) -> dict:
    """The same resolved config on the simulator (without the kernel engine's path choice)."""
    from cclab import _sim

    return json.loads(_sim.run_json(json.dumps({k: v for k, v in config.items() if k != "aqm_implementation"})))


def bufferbloat_config(aqm_config: dict, implementation: str | None = None, duration_ns: int = 20_000_000_000) -> dict:
    config = make_config(rate_bps=BLOAT_RATE_BPS, rtt_ns=BLOAT_RTT_NS, queue_limit_bytes=BLOAT_BUFFER_BYTES,
                         duration_ns=duration_ns)  # fmt: skip
    return with_aqm(config, aqm_config, implementation)


@pytest.mark.skipif(userspace_lacks("fq_codel") is not None, reason="the userspace bottleneck has no fq_codel")
def test_fq_codel_cures_the_bufferbloat_of_tail_drop_on_real_tcp_and_the_simulator_agrees(bufferbloat_fifo: dict) -> None:
    # fq_codel settles within a second: 5 s is plenty (the FIFO fixture needs 10 s to fill 10 BDP).
    fq_seconds_ns = 5_000_000_000
    fq = kernel_run(bufferbloat_config(resolved("fq_codel"), aqm.CCLAB, fq_seconds_ns))
    assert_sound(fq["validity"])
    assert_sound(bufferbloat_fifo["validity"])
    assert fq["provenance"]["aqm"] == {**fq["provenance"]["aqm"], "kind": "fq_codel", "implementation": "cclab"}
    # The contrast on real TCP: hundreds of ms behind tail drop, a few ms behind fq_codel.
    assert bufferbloat_fifo["bottleneck"]["sojourn_p50_ms"] >= 100.0
    assert fq["bottleneck"]["sojourn_p50_ms"] <= 15.0
    assert fq["bottleneck"]["aqm_drops"] > 0
    # The simulator, on the same config: goodput within 10%, median queueing delay within 2 ms or 25%.
    for kernel, aqm_config, duration_ns in ((bufferbloat_fifo, {"kind": "fifo"}, 10_000_000_000), (fq, resolved("fq_codel"), fq_seconds_ns)):
        sim = simulated(bufferbloat_config(aqm_config, duration_ns=duration_ns))
        g_kernel, g_sim = kernel["flows"][0]["goodput_mbps"], sim["flows"][0]["goodput_mbps"]
        assert abs(g_sim - g_kernel) <= 0.10 * g_kernel, (aqm_config["kind"], g_kernel, g_sim)
        d_kernel, d_sim = kernel["bottleneck"]["sojourn_p50_ms"], sim["bottleneck"]["sojourn_p50_ms"]
        assert abs(d_sim - d_kernel) <= max(2.0, 0.25 * d_kernel), (aqm_config["kind"], d_kernel, d_sim)


def test_dualpi2_holds_cubic_near_its_classic_target_in_the_userspace_bottleneck_as_in_the_simulator() -> None:
    # This kernel has no sch_dualpi2, nor a sender of ECT(1): the classic queue on both engines.
    config = make_config(rate_bps=50_000_000, rtt_ns=20_000_000, queue_limit_bytes=500_000, duration_ns=5_000_000_000)
    r = kernel_run(with_aqm(config, resolved("dualpi2"), aqm.CCLAB))
    assert_sound(r["validity"])
    assert r["provenance"]["aqm"]["kind"] == "dualpi2" and r["provenance"]["aqm"]["implementation"] == "cclab"
    sim = simulated(with_aqm(config, resolved("dualpi2")))
    g_kernel, g_sim = r["flows"][0]["goodput_mbps"], sim["flows"][0]["goodput_mbps"]
    assert abs(g_sim - g_kernel) <= 0.10 * g_kernel, (g_kernel, g_sim)
    # PI2 holds the classic queue near its 15 ms target, far below the 80 ms buffer.
    for result in (r, sim):
        assert 5.0 <= result["bottleneck"]["sojourn_mean_ms"] <= 25.0, result["bottleneck"]["sojourn_mean_ms"]
        assert result["bottleneck"]["overflow_drops"] == 0


def test_a_flow_without_ecn_does_not_negotiate_it_beside_one_that_does(tbf_and_userspace_fifo: tuple) -> None:
    config = make_config([{"cc": "cubic", "ecn": True}, {"cc": "cubic", "ecn": False}], duration_ns=2_000_000_000)
    r = kernel_run(config)
    assert [f["ecn"] for f in r["flows"]] == [True, False]
    assert_sound(r["validity"])


@pytest.mark.skipif(not aqm.qdisc_probe("fq_codel").available, reason="this kernel has no sch_fq_codel")
def test_the_kernels_fq_codel_under_tbf_keeps_the_queue_short_and_reports_its_counters() -> None:
    config = make_config([{"cc": "cubic", "ecn": True}], rate_bps=BLOAT_RATE_BPS, rtt_ns=BLOAT_RTT_NS,
                         queue_limit_bytes=BLOAT_BUFFER_BYTES, duration_ns=10_000_000_000)  # fmt: skip
    r = kernel_run(with_aqm(config, resolved("fq_codel")))
    assert r["provenance"]["aqm"]["implementation"] == "kernel"
    assert_sound(r["validity"])
    bn = r["bottleneck"]
    assert bn["ce_marks"] > 0  # fq_codel marks ECT packets by default
    assert r["flows"][0]["ce_marks_received"] == bn["ce_marks"]
    assert bn["sojourn_p50_ms"] < 15.0


def test_nothing_is_left_behind_by_a_userspace_bottleneck_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from cclab.engines.kernel import engine

    ids: list[str] = []
    lines: list = []

    def recording_new_run_id() -> str:
        ids.append(kernel_netns.new_run_id())
        return ids[-1]

    class RecordingDelayLine(engine.DelayLine):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            lines.append(self)

    monkeypatch.setattr(engine, "new_run_id", recording_new_run_id)
    monkeypatch.setattr(engine, "DelayLine", RecordingDelayLine)
    r = engine.run(with_aqm(make_config(duration_ns=1_000_000_000), {"kind": "fifo"}, aqm.CCLAB))
    assert r["flows"][0]["bytes_delivered"] > 0
    assert len(ids) == 1 and len(lines) == 1
    # Namespaces hold the run's qdiscs and iptables rules: gone with them.
    assert [n for n in kernel_netns.list_cclab_namespaces() if n.startswith(f"{kernel_netns.NAME_PREFIX}{ids[0]}-")] == []
    assert lines[0].proc.poll() is not None  # the delay line and its bottleneck exited
    root_rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    assert "cclab:" not in root_rules


def test_an_aqm_that_can_run_nowhere_is_refused_in_one_line_before_any_namespace_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cclab.engines.kernel import KernelEngineError, preflight

    if aqm.qdisc_probe("codel").available:
        pytest.skip("this kernel has sch_codel: the kernel path would run it")
    monkeypatch.setenv("CCLAB_DELAYLINE", "/nonexistent/cclab-delayline")
    before = set(kernel_netns.list_cclab_namespaces())
    with pytest.raises(KernelEngineError) as error:
        preflight(with_aqm(make_config(), resolved("codel")))
    # Here the missing delay line is named first (this kernel has no netem either); where
    # netem exists the line names sch_codel too (test_kernel_aqm_unit.py checks that wording).
    assert "cclab-delayline" in error.value.line
    assert "\n" not in error.value.line
    assert set(kernel_netns.list_cclab_namespaces()) <= before

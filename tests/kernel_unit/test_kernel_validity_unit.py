"""Validity reasons from what a run measured, without running one: a late delay line says
whether the hypervisor took the CPU meanwhile, read from /proc/stat's steal column."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cclab.engines.kernel import assemble, probes
from cclab.units import FRAME_BYTES

RTT_NS = 20_000_000  # 1% of it, 200 us, is the lateness limit


def _late_delay_line(p99_lateness_ns: int, cpu: list[tuple[float, int, int, int]]) -> SimpleNamespace:
    report = {"queues": [{"queue": 0, "queue_dropped": 0, "user_dropped": 0}], "packets": 1000, "no_timestamp": 0,
              "lateness_ns": {"p99": p99_lateness_ns}}  # fmt: skip
    return SimpleNamespace(delay_mechanism="delayline", delay_report=report, delay_line_died=False, rtt_ns=RTT_NS,
                           sampler=SimpleNamespace(cpu=cpu))  # fmt: skip


def test_a_late_delay_line_names_the_share_of_cpu_time_the_hypervisor_took() -> None:
    # (t, idle, steal, total) jiffies: 1000 elapsed, 35 of them stolen.
    m = _late_delay_line(900_000, [(0.0, 500, 10, 2000), (5.0, 1100, 45, 3000)])
    assert assemble.cpu_steal_fraction(m) == 0.035
    assert assemble.cpu_idle_fraction(m) == 0.6
    (reason,) = assemble.delay_reasons(m)
    assert reason == "delay line p99 lateness 900 us exceeds 1% of the RTT (200 us); the hypervisor took 3.5% of the CPU time meanwhile"


def test_a_punctual_delay_line_is_no_reason_whatever_the_steal() -> None:
    assert assemble.delay_reasons(_late_delay_line(150_000, [(0.0, 0, 0, 100), (1.0, 10, 90, 200)])) == []


def test_without_two_cpu_samples_the_reason_makes_no_claim_about_steal() -> None:
    (reason,) = assemble.delay_reasons(_late_delay_line(900_000, [(0.0, 0, 0, 100)]))
    assert reason.endswith("(200 us)")


def test_cpu_times_reads_idle_steal_and_total_from_proc_stat() -> None:
    idle, steal, total = probes.cpu_times()
    assert 0 <= steal <= total and 0 <= idle <= total


class _Waits:
    def __init__(self, waited_s: dict[str, float], ran_s: dict[str, float] | None = None) -> None:
        self._waited_s = waited_s
        self._ran_s = ran_s or {}

    def waited_s(self) -> dict[str, float]:
        return self._waited_s

    def ran_s(self) -> dict[str, float]:
        return self._ran_s


def _busy_machine(waited_s: dict[str, float]) -> SimpleNamespace:
    # (t, idle, steal, total) jiffies: 2% idle over a 4 s run.
    return SimpleNamespace(sampler=SimpleNamespace(cpu=[(0.0, 0, 0, 0), (4.0, 16, 0, 800)], cpu_wait=_Waits(waited_s)), wall_s=4.0)


def test_a_busy_machine_invalidates_a_run_only_when_its_own_tasks_waited_for_a_cpu() -> None:
    # Beside a SCHED_IDLE job the machine is never idle, but the run's tasks do not wait.
    quiet = _busy_machine({"iperf3 sender": 0.02, "ksoftirqd/1": 0.05, "iperf3 receiver": 0.6, "delay line": 0.01})
    assert assemble.longest_cpu_wait(quiet) == ("ksoftirqd/1", 0.0125)
    assert assemble.cpu_idle_fraction(quiet) == 0.02
    # The receivers' wait (0.6 s of 4) is left out: it does not tell other load apart.
    held_up = _busy_machine({"iperf3 sender": 0.02, "ksoftirqd/1": 1.0, "iperf3 receiver": 0.6})
    assert assemble.longest_cpu_wait(held_up) == ("ksoftirqd/1", 0.25)


def test_a_task_on_a_cpu_all_run_beside_a_bottleneck_that_never_queued_is_the_host_limiting_it() -> None:
    # Issue 37's case: 820 Mbit/s of 1 Gbit/s, the queue empty, nothing lost; here ksoftirqd ran
    # 3.9 s of a 4 s run.
    saturated = SimpleNamespace(sampler=SimpleNamespace(cpu_wait=_Waits({}, {"iperf3 sender": 2.1, "ksoftirqd/1": 3.9})), wall_s=4.0)
    assert assemble.busiest_task(saturated) == ("ksoftirqd/1", 0.975)
    assert assemble.busiest_task(saturated)[1] >= assemble.HOST_LIMIT_CPU_FRACTION
    empty_link = {"queue_max_bytes": 1514, "drops": 0, "utilization": 0.82}
    assert assemble.never_queued(empty_link, FRAME_BYTES)
    # A link that queued, dropped, or ran full was the limit, however busy the host.
    assert not assemble.never_queued({**empty_link, "queue_max_bytes": 200_000}, FRAME_BYTES)
    assert not assemble.never_queued({**empty_link, "drops": 3}, FRAME_BYTES)
    assert not assemble.never_queued({**empty_link, "utilization": 0.99}, FRAME_BYTES)


def test_softnet_drops_name_their_cpu_and_what_the_hypervisor_took_of_it() -> None:
    m = SimpleNamespace(softnet_growth_per_cpu=[0, 251], steal_fraction_per_cpu=[0.009, 0.214])
    assert assemble.softnet_cpu_note(m) == "; CPU 1: 251, the hypervisor took 21.4% of it"
    assert assemble.softnet_cpu_note(SimpleNamespace(softnet_growth_per_cpu=[], steal_fraction_per_cpu=[])) == ""
    steal = probes.cpu_steal_per_cpu()
    assert len(steal) == len(probes.softnet_dropped_per_cpu()) and all(0 <= s <= t for s, t in steal)


def test_a_tasks_wait_for_a_cpu_and_its_time_on_one_are_read_from_its_schedstat() -> None:
    import os
    import time

    wait = probes.CpuWait()
    wait.watch(os.getpid(), "this test")
    start = time.process_time()
    while time.process_time() - start < 0.05:
        pass
    wait.sample()
    wait.watch(2**22 + 12345, "gone")  # no such task: not watched
    (waited_s,) = wait.waited_s().values()
    assert 0.0 <= waited_s < 5.0 and list(wait.waited_s()) == ["this test"]
    (ran_s,) = wait.ran_s().values()
    assert ran_s >= 0.04  # it spun 50 ms of CPU time
    assert probes.run_delay_ns(os.getpid()) is not None and probes.run_delay_ns(2**22 + 12345) is None


def test_drops_too_close_to_the_end_to_be_retransmitted_are_not_counted_against_the_run() -> None:
    from cclab.engines.kernel.assemble import detection_horizon_s, undetected_drops

    # A 10 BDP queue at 20 ms: RTTs reach 220 ms, so a drop in the last 2 x 0.22 + 0.2 s may
    # not have been retransmitted when the run ended.
    horizon_s = detection_horizon_s([{"rtt_max_ms": 220.0}, {"rtt_max_ms": 30.0}])
    assert horizon_s == pytest.approx(0.64)
    qs = {"time_s": [9.0, 9.5, 9.8, 10.0], "drops": [50, 10, 20, 10]}
    assert undetected_drops(qs, horizon_s) == 40  # the samples after 9.36 s
    assert undetected_drops({"time_s": [], "drops": []}, horizon_s) == 0


def test_kernel_tests_accept_a_run_late_for_host_timing_but_never_one_whose_accounting_fails() -> None:
    import warnings

    import kernelcase

    kernelcase.LATE_RUNS.clear()
    kernelcase.assert_sound({"valid": True, "reasons": []})
    assert kernelcase.LATE_RUNS == []
    late = "delay line p99 lateness 2177 us exceeds 1% of the RTT (200 us); the hypervisor took 12.3% of the CPU time meanwhile"
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        kernelcase.assert_sound({"valid": False, "reasons": [late]})
    assert kernelcase.LATE_RUNS == [late] and issubclass(shown[0].category, kernelcase.HostTimingWarning)
    with pytest.raises(AssertionError):
        kernelcase.assert_sound({"valid": False, "reasons": [late, "retransmits (91) do not match bottleneck drops (overflow 121 + AQM 0) + loss-rule drops (0)"]})
    kernelcase.LATE_RUNS.clear()

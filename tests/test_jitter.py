"""The simulator's seeded timing noise (`jitter_us`, `stall_per_packet`): seeds spread the way
kernel repetitions do, each seed replays exactly, both 0 is the noiseless model, and a kernel
run ignores them."""

from __future__ import annotations

import pytest

import cclab
from cclab.engines.sim import SimEngine
from cclab.spec import Scenario
from cclab.spec.scenario import KERNEL_ACK_JITTER_US, KERNEL_STALL_PER_PACKET
from cclab.sweep import run_key
from conftest import run_cli

pytestmark = pytest.mark.sim


def cubic_pair(**top: object) -> Scenario:
    """Two CUBIC flows at 20 and 40 ms over a 1-BDP tail drop: deterministic but for jitter."""
    return Scenario.from_dict(
        {
            "duration_s": 6,
            "bottleneck": {"rate_mbps": 50, "rtt_ms": 20, "buffer": "1bdp"},
            "flows": [{"cc": "cubic"}, {"cc": "cubic", "extra_rtt_ms": 20}],
            **top,
        }
    )


def goodputs(scenario: Scenario) -> list[float]:
    return [round(g, 6) for g in SimEngine().run(scenario).flows["goodput_mbps"]]


def test_by_default_seeds_differ_and_a_seed_replays_exactly() -> None:
    runs = [goodputs(cubic_pair(seed=seed)) for seed in (1, 2, 3, 4)]
    assert len({tuple(r) for r in runs}) >= 3, runs
    assert goodputs(cubic_pair(seed=3)) == runs[2]
    # Noise moves bytes between flows; the link's capacity stays the ceiling.
    assert all(sum(r) <= 50 * 1448 / 1514 for r in runs)


def test_no_noise_is_the_noiseless_model_where_seeds_do_not_matter() -> None:
    runs = {tuple(goodputs(cubic_pair(seed=seed, jitter_us=0, stall_per_packet=0))) for seed in (1, 2, 3)}
    assert len(runs) == 1, runs


def test_stalls_alone_make_seeds_differ() -> None:
    # A hundred times the measured rate, so that some stall lands in a 6 s run of 50 Mbit/s.
    runs = {tuple(goodputs(cubic_pair(seed=seed, jitter_us=0, stall_per_packet=0.0144))) for seed in (1, 2, 3)}
    assert len(runs) >= 2, runs


def test_the_run_records_which_noise_ran() -> None:
    result = SimEngine().run(cubic_pair(duration_s=1))
    assert result.provenance["jitter"]["ack_mean_ns"] == round(KERNEL_ACK_JITTER_US * 1e3)
    assert result.provenance["jitter"]["stall_per_packet"] == KERNEL_STALL_PER_PACKET
    assert "stall.rs" in result.provenance["jitter"]["model"]
    assert "wake.rs" in result.provenance["jitter"]["model"]
    quiet = SimEngine().run(cubic_pair(duration_s=1, jitter_us=0, stall_per_packet=0))
    assert quiet.provenance["jitter"]["ack_mean_ns"] == 0
    assert quiet.provenance["jitter"]["model"] == "none: the noiseless model"


@pytest.mark.parametrize("quiet_field", ["jitter_us", "stall_per_packet", "noise"])
def test_noise_changes_a_simulator_run_but_not_a_kernel_run(quiet_field: str) -> None:
    quieter = {"noise": {"idle_machine_wake": False}} if quiet_field == "noise" else {quiet_field: 0}
    noisy, quiet = cubic_pair().resolve(), cubic_pair(**quieter).resolve()
    assert run_key(noisy, "sim") != run_key(quiet, "sim")
    assert run_key(noisy, "kernel") == run_key(quiet, "kernel")


def test_noise_switches_left_out_keep_the_config_and_each_one_given_is_in_it_and_in_provenance() -> None:
    from cclab.spec import load

    base = {"duration_s": 2, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20}, "flows": [{"cc": "cubic"}]}
    assert "noise" not in load(base).resolve()
    given = load({**base, "noise": {"idle_machine_wake": False}}).resolve()
    assert given["noise"] == {"idle_machine_wake": False}
    jitter = cclab.run({**base, "noise": {"idle_machine_wake": False}}).provenance["jitter"]
    assert (jitter["ts_clock_phase"], jitter["idle_reader_wake"], jitter["idle_machine_wake"]) == (True, True, False)
    assert "wake.rs" not in jitter["model"] and "TsClock" in jitter["model"]
    quiet = cclab.run({**base, "jitter_us": 0, "noise": {"ts_clock_phase": True}}).provenance["jitter"]
    assert (quiet["ts_clock_phase"], quiet["idle_reader_wake"], quiet["idle_machine_wake"]) == (True, False, False)


def test_a_noise_switch_that_is_not_true_or_false_is_one_line_naming_it(write_spec) -> None:
    toml = 'duration_s = 1\n[noise]\nidle_reader_wake = 1\n[bottleneck]\nrate_mbps = 10\nrtt_ms = 10\n[[flows]]\ncc = "cubic"\n'
    done = run_cli("check", write_spec(toml))
    assert done.returncode == 2
    assert done.stderr.startswith("error: noise.idle_reader_wake: ") and done.stderr.count("\n") == 1, done.stderr

"""A user's congestion control from its BPF C source, in the simulator: built natively with
the shim (crates/cclab-cc/shim), run through the same CC trait as the built-in ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import cclab
from cclab.errors import CclabError, EngineError
from cclab.spec import read_toml
from cclab.store import load_flows
from cclab.sweep import Sweep, run_sweep
from conftest import EXAMPLES, REPO, run_cli

pytestmark = [pytest.mark.sim, pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed (make install)")]

DATA = Path(__file__).parent / "data" / "cc"
MSS_BYTES = 1448


def spec(cc: str, **bottleneck: object) -> dict:
    return {"duration_s": 10, "seed": 3, "bottleneck": {"rate_mbps": 20, "rtt_ms": 40, "buffer": "1bdp", **bottleneck},
            "flows": [{"cc": cc}]}  # fmt: skip


def test_reno_from_c_source_runs_segment_for_segment_as_the_builtin_reno(tmp_path: Path) -> None:
    # The same algorithm (Linux's tcp_reno_* kfuncs, which the shim carries) through the bridge
    # and through the Rust trait: every count and every sample agree, losses and all.
    lossy = {"loss": 0.005}
    source, builtin = cclab.run(spec(str(DATA / "reno.bpf.c"), **lossy)), cclab.run(spec("reno", **lossy))
    columns = ["bytes_delivered", "data_segments_sent", "retrans_segments", "queue_drop_segments", "random_loss_segments"]
    assert source.flows[columns].to_dict("records") == builtin.flows[columns].to_dict("records")
    assert source.flows.iloc[0]["retrans_segments"] > 0  # recovery ran through ssthresh too
    assert source.flow_series.cwnd_pkts.tolist() == builtin.flow_series.cwnd_pkts.tolist()
    provenance = source.provenance
    assert provenance["cc_implementation"] == {"reno.bpf.c:reno_src": "bpf-source-native"}
    assert len(provenance["cc_implementation_detail"]["reno.bpf.c:reno_src"]["shim_sha256"]) == 64


def test_a_window_held_at_20_packets_delivers_20_segments_per_rtt() -> None:
    # A fixed window W on a path that never queues gives W x MSS per RTT (about 5.8 Mbit/s at
    # 40 ms), after the warm-up. Within 2%: an RTT sample times the newest segment an ACK
    # covers, while the one before it waited for it at the receiver (delayed ACKs).
    result = cclab.run({**spec(str(DATA / "fixed_window.bpf.c"), rate_mbps=100), "output": {"warmup_s": 2}})
    flow = result.flows.iloc[0]
    expected_mbps = 20 * MSS_BYTES * 8 / (flow["rtt_mean_ms"] / 1e3) / 1e6
    assert flow["goodput_mbps"] == pytest.approx(expected_mbps, rel=0.02)
    assert flow["goodput_mbps"] <= expected_mbps
    assert set(result.flow_series.cwnd_pkts[result.flow_series.time_s > 0.1]) == {20}


def test_the_examples_beta_of_0_7_backs_off_less_than_renos_half_under_random_loss() -> None:
    # Mathis et al.'s law with a multiplicative decrease b: throughput ~ sqrt((1 + b) / (1 - b)),
    # 1.37 times Reno's (b = 0.5) for b = 0.7; the same seed loses the same packets.
    lossy = {"loss": 0.01, "rate_mbps": 100}
    beta07 = cclab.run(spec(str(EXAMPLES / "cc" / "reno_beta07.bpf.c"), **lossy)).flows.iloc[0]["goodput_mbps"]
    reno = cclab.run(spec("reno", **lossy)).flows.iloc[0]["goodput_mbps"]
    assert 1.15 < beta07 / reno < 1.6, (beta07, reno)


def test_the_vegas_example_keeps_between_alpha_and_beta_packets_queued_where_cubic_fills_the_buffer() -> None:
    # Vegas (tcp_vegas.c: alpha = 2, beta = 4 packets) adds a packet per RTT below alpha and
    # takes one off above beta: its standing queue stays between them, and the link full.
    spec_path = EXAMPLES / "vegas_10mbit_20ms_4bdp.toml"
    vegas = cclab.run(spec_path)
    cubic = cclab.run({**read_toml(spec_path), "flows": [{"cc": "cubic"}]})
    packet_ms = 1514 * 8 / 10e6 * 1e3
    assert 2 <= vegas.bottleneck["sojourn_p50_ms"] / packet_ms <= 4
    assert vegas.bottleneck["utilization"] > 0.99 and vegas.flows.iloc[0]["retrans_segments"] == 0
    assert cubic.bottleneck["sojourn_p50_ms"] / packet_ms > 40  # most of the 58-packet buffer


def test_the_same_seed_gives_the_same_run() -> None:
    first, second = (cclab.run(spec(str(EXAMPLES / "cc" / "reno_beta07.bpf.c"), loss=0.01)) for _ in range(2))
    assert first.flow_series.equals(second.flow_series)


def test_dctcps_bpf_port_in_the_simulator_runs_as_its_rust_port_behind_a_ce_threshold(tmp_path: Path) -> None:
    # crates/cclab-bpf-l4s/dctcp.bpf.c (the kernel engine's DCTCP where the kernel has none)
    # and crates/cclab-cc/src/dctcp.rs are two ports of tcp_dctcp.c: behind the same marking
    # they make the same run, mark for mark (6% of the packets here).
    port = tmp_path / "dctcp.bpf.c"
    text = (REPO / "crates" / "cclab-bpf-l4s" / "dctcp.bpf.c").read_text()
    # As a user's file: the map and its .name literal, not the macro cclab's build defines.
    text = text.replace("tcp_congestion_ops CCLAB_CA_NAME =", "tcp_congestion_ops cclab_dctcp =").replace(".name = STR(CCLAB_CA_NAME)", '.name = "cclab_dctcp"')
    # The ports' common header, which the original finds by a path relative to itself.
    common = REPO / "crates" / "cclab-bpf-common" / "cclab_tcp.h"
    text = text.replace('#include "../cclab-bpf-common/cclab_tcp.h"', f'#include "{common}"')
    port.write_text("#define CCLAB_CA_NAME cclab_dctcp\n" + text)
    step = {"rate_mbps": 50, "rtt_ms": 20, "buffer": "4bdp", "aqm": "codel", "aqm_params": {"ecn": True, "ce_threshold_ms": 5}}
    bpf, rust = cclab.run(spec(f"{port}:cclab_dctcp", **step)), cclab.run(spec("dctcp", **step))
    assert bpf.flows.iloc[0]["ecn"] and bpf.bottleneck["drops"] == 0
    assert bpf.bottleneck["ce_marks"] > 0.02 * bpf.flows.iloc[0]["data_segments_sent"]
    columns = ["bytes_delivered", "data_segments_sent", "ce_marks_received", "retrans_segments"]
    assert bpf.flows[columns].to_dict("records") == rust.flows[columns].to_dict("records")
    assert bpf.bottleneck["ce_marks"] == rust.bottleneck["ce_marks"]
    assert bpf.flow_series.cwnd_pkts.tolist() == rust.flow_series.cwnd_pkts.tolist()


def test_a_source_that_crashes_fails_its_run_in_one_line_and_the_next_run_goes_on() -> None:
    with pytest.raises(EngineError, match=r"crashes\.bpf\.c:crashes crashed the simulator \(SIGSEGV\)"):
        cclab.run(spec(str(DATA / "crashes.bpf.c")))
    assert cclab.run(spec(str(DATA / "reno.bpf.c"))).flows.iloc[0]["bytes_delivered"] > 0


def test_a_window_set_to_zero_fails_its_run_naming_the_hook() -> None:
    with pytest.raises(EngineError, match=r"zero_window\.bpf\.c:zero_window.*set snd_cwnd to 0 in its cong_avoid hook"):
        cclab.run(spec(str(DATA / "zero_window.bpf.c")))


def test_a_sweep_records_the_runs_its_users_ccs_broke_and_finishes_the_rest(tmp_path: Path) -> None:
    sweep = Sweep.from_dict({"name": "mine", "base": spec("reno"), "axes": {"flows.0.cc": [str(DATA / f"{name}.bpf.c") for name in ("reno", "crashes", "zero_window")]}})
    report = run_sweep(sweep, tmp_path, jobs=2, progress=False)
    assert report.done == 1 and len(report.failed) == 2
    errors = sorted(f["error"] for f in report.failed)
    assert "crashed the simulator (SIGSEGV)" in errors[0] and "snd_cwnd to 0" in errors[1], errors
    logged = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert sorted(f["run_key"] for f in logged) == sorted(f["run_key"] for f in report.failed)
    assert list(load_flows(tmp_path).cc) == ["reno.bpf.c:reno_src"]


def test_the_older_style_is_refused_in_one_line_naming_the_flow(tmp_path: Path) -> None:
    old_style = REPO / "tests" / "kernel" / "data" / "old_style" / "halving.bpf.c"
    with pytest.raises(CclabError, match=r"^flows\[0\]\.cc: .*halving\.bpf\.c: the simulator cannot build it: cclab-native: .*vmlinux\.h"):
        cclab.run(spec(f"{old_style}:halving"))


def test_a_compile_error_is_one_line_with_the_file_and_line_and_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.bpf.c"
    broken.write_text((DATA / "reno.bpf.c").read_text().replace("return tcp_reno_ssthresh(sk);", "return tcp_reno_ssthresh(sk)"))
    spec_path = tmp_path / "broken.toml"
    spec_path.write_text('duration_s = 2\n[bottleneck]\nrate_mbps = 10\nrtt_ms = 20\n[[flows]]\ncc = "broken.bpf.c"\n')
    done = run_cli("run", spec_path, "--out", tmp_path / "out")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: flows[0].cc:") and "broken.bpf.c:17:" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_cc_check_lists_the_hooks_and_calls_and_which_engine_has_each(tmp_path: Path) -> None:
    done = run_cli("cc", "check", EXAMPLES / "cc" / "reno_beta07.bpf.c")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert "hooks: init, ssthresh, cong_avoid, undo_cwnd" in out
    assert any(line.split()[:3] == ["kfunc", "tcp_reno_cong_avoid", "yes"] for line in out), out
    assert "simulator build: ok" in out and any(line.startswith("kernel build: ") for line in out)
    assert any(line.startswith("1 s in the simulator (10 Mbit/s, 20 ms): ") and "Mbit/s, " in line for line in out), out

    # A kfunc the shim lacks (tcp_cubic.c's own, which Linux exports to BPF CCs): named in the
    # report, and the simulator's build says which symbol is missing.
    cubic_kfunc = tmp_path / "borrows_cubic.c"
    cubic_kfunc.write_text((DATA / "reno.bpf.c").read_text().replace(
        "extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;",
        "extern void cubictcp_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;").replace(
        "tcp_reno_cong_avoid(sk, ack, acked);", "cubictcp_cong_avoid(sk, ack, acked);"))  # fmt: skip
    done = run_cli("cc", "check", f"{cubic_kfunc}:reno_src")
    out = done.stdout.splitlines()
    assert any(line.split()[:3] == ["kfunc", "cubictcp_cong_avoid", "NO"] for line in out), out
    assert any(line.startswith("simulator build: ") and "cubictcp_cong_avoid, which the simulator's shim does not provide" in line for line in out), out


def test_socket_storage_is_created_zeroed_kept_between_hooks_and_gone_once_deleted() -> None:
    # The source checks each promise itself and sets a window of 0 (a failed run) where one
    # breaks; otherwise it is Linux's Reno, so the run is the built-in Reno's.
    ours, reno = cclab.run(spec(str(DATA / "socket_storage.bpf.c"))), cclab.run(spec("reno"))
    columns = ["bytes_delivered", "data_segments_sent", "retrans_segments"]
    assert ours.flows[columns].to_dict("records") == reno.flows[columns].to_dict("records")

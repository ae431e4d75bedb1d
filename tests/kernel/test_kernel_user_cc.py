"""A congestion control from the user's own BPF C source on the kernel engine (issue 31): built
with clang against this kernel's BTF, registered under cclab's name for the run, selected by
the flow's sockets, recorded in provenance by its hash, and gone afterwards, also when it does
not compile. Both styles of Linux's BPF selftests: vmlinux.h (examples/cc/reno_beta07.bpf.c)
and structs declared beside the file (data/old_style/)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

import cclab
from cclab.engines.kernel import bpf_cc
from cclab.engines.kernel import netns as kernel_netns
from conftest import EXAMPLES, run_cli
from kernelcase import assert_sound, requires_kernel_engine, kernel_run_spec

pytestmark = [
    requires_kernel_engine,
    pytest.mark.skipif(bpf_cc.toolchain_problem() is not None, reason=f"no BPF toolchain: {bpf_cc.toolchain_problem()}"),
]

OLD_STYLE = Path(__file__).parent / "data" / "old_style" / "halving.bpf.c"
#: 20 Mbit/s of frames carries 20 x 1448/1514 Mbit/s of payload.
PAYLOAD_MBPS = 20 * 1448 / 1514


def registered_cclab() -> list[str]:
    """cclab's CCs that TCP offers. (bpftool may list an unregistered one a while longer, until
    the last socket of a dying namespace lets it go: no socket can select it any more.)"""
    return sorted(name for name in bpf_cc.available_ccs() if bpf_cc.is_bpf_name(name))


def test_users_sources_in_both_styles_run_under_their_hashes_and_nothing_stays_registered() -> None:
    # One run, two flows: the example in the vmlinux.h style, and the older style's file
    # (structs in a header beside it) with two maps, of which the flow picks the first.
    source = EXAMPLES / "cc" / "reno_beta07.bpf.c"
    spec = {"duration_s": 3, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20}, "flows": [{"cc": str(source)}, {"cc": f"{OLD_STYLE}:halving"}]}
    result = kernel_run_spec(spec)
    assert_sound(result.validity)
    flows = result.flows.set_index("cc")
    assert list(flows.index) == ["reno_beta07.bpf.c:reno_beta07", "halving.bpf.c:halving"]
    assert (flows.bytes_delivered > 0).all()
    assert 0.8 * PAYLOAD_MBPS < flows.goodput_mbps.sum() <= 1.02 * PAYLOAD_MBPS
    provenance = result.provenance
    assert provenance["cc_implementation"] == dict.fromkeys(flows.index, "bpf-source")
    detail = provenance["cc_implementation_detail"]
    assert detail["reno_beta07.bpf.c:reno_beta07"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()  # no header beside it
    names = [detail[cc]["kernel_cc"] for cc in flows.index]
    assert all(n.startswith("cclab_u") and len(n) <= 15 for n in names) and names[1].endswith("0")
    assert list(provenance["bpf_congestion_controls"]) == names
    assert registered_cclab() == []  # the old-style file's second map too


def test_a_window_held_at_20_packets_delivers_20_segments_per_rtt_on_both_engines() -> None:
    # The physical law of tests/test_native_cc.py, on real TCP too, from the same file: W x MSS
    # per RTT after the warm-up (5.8 Mbit/s at 40 ms on a 100 Mbit/s link that never queues).
    fixed = Path(__file__).parents[1] / "data" / "cc" / "fixed_window.bpf.c"
    spec = {"duration_s": 4, "output": {"warmup_s": 1}, "bottleneck": {"rate_mbps": 100, "rtt_ms": 40, "buffer": "1bdp"},
            "flows": [{"cc": str(fixed)}]}  # fmt: skip
    kernel = kernel_run_spec(spec)
    assert_sound(kernel.validity)
    for result in (kernel, cclab.run(spec, "sim")):
        flow = result.flows.iloc[0]
        expected_mbps = 20 * 1448 * 8 / (flow["rtt_mean_ms"] / 1e3) / 1e6
        assert flow["goodput_mbps"] == pytest.approx(expected_mbps, rel=0.03), (result.provenance["engine"], flow["goodput_mbps"], expected_mbps)


def test_a_source_that_does_not_compile_fails_its_run_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.bpf.c"
    shutil.copy(EXAMPLES / "cc" / "reno_beta07.bpf.c", broken)
    broken.write_text(broken.read_text().replace("tcp_reno_cong_avoid(sk, ack, acked);", "tcp_reno_cong_avoid(sk, ack, acked)"))
    spec = tmp_path / "broken.toml"
    spec.write_text('engine = "kernel"\nduration_s = 2\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n[[flows]]\ncc = "broken.bpf.c"\n')
    namespaces_before = kernel_netns.list_cclab_namespaces()
    done = run_cli("run", spec, "--out", tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: compiling broken.bpf.c failed")
    assert not (tmp_path / "out").exists()
    assert kernel_netns.list_cclab_namespaces() == namespaces_before and registered_cclab() == []


def test_a_source_the_verifier_rejects_fails_with_its_last_words_and_leaves_nothing(tmp_path: Path) -> None:
    # tests/data/cc/crashes.bpf.c writes through a NULL pointer: clang builds it, the verifier
    # refuses it at load (the simulator, which has no verifier, fails the run when it crashes).
    crashes = Path(__file__).parents[1] / "data" / "cc" / "crashes.bpf.c"
    spec = tmp_path / "crashes.toml"
    spec.write_text(f'engine = "kernel"\nduration_s = 2\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n[[flows]]\ncc = "{crashes}"\n')
    namespaces_before = kernel_netns.list_cclab_namespaces()
    done = run_cli("run", spec, "--out", tmp_path / "out")
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: registering cclab_u") and "the verifier rejected crash_cong_avoid at crashes.bpf.c:" in last, last
    assert "invalid mem access" in last
    assert not (tmp_path / "out").exists()
    assert kernel_netns.list_cclab_namespaces() == namespaces_before and registered_cclab() == []

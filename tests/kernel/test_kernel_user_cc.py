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
from kernelcase import requires_kernel_engine, run_spec_valid

pytestmark = [
    requires_kernel_engine,
    pytest.mark.skipif(bpf_cc.toolchain_problem() is not None, reason=f"no BPF toolchain: {bpf_cc.toolchain_problem()}"),
]

OLD_STYLE = Path(__file__).parent / "data" / "old_style" / "halving.bpf.c"
#: 20 Mbit/s of frames carries 20 x 1448/1514 Mbit/s of payload.
PAYLOAD_MBPS = 20 * 1448 / 1514


def spec_for(cc: str) -> dict:
    return {"duration_s": 3, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20}, "flows": [{"cc": cc}]}


def registered_cclab() -> list[str]:
    return [e["name"] for e in bpf_cc.list_registered() if bpf_cc.is_bpf_name(e.get("name", ""))]


def test_a_users_source_runs_under_its_hash_and_nothing_stays_registered() -> None:
    source = EXAMPLES / "cc" / "reno_beta07.bpf.c"
    result = run_spec_valid(spec_for(str(source)))
    flow = result.flows.iloc[0]
    assert flow["cc"] == "reno_beta07.bpf.c:reno_beta07"
    assert 0.8 * PAYLOAD_MBPS < flow["goodput_mbps"] <= 1.02 * PAYLOAD_MBPS
    detail = result.provenance["cc_implementation_detail"][flow["cc"]]
    assert result.provenance["cc_implementation"] == {flow["cc"]: "bpf-source"}
    assert detail["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()  # no header beside it
    assert detail["kernel_cc"].startswith("cclab_u") and len(detail["kernel_cc"]) <= 15
    assert list(result.provenance["bpf_congestion_controls"]) == [detail["kernel_cc"]]
    assert registered_cclab() == []


def test_the_older_style_with_its_headers_beside_the_file_builds_and_the_chosen_map_runs() -> None:
    result = cclab.run(spec_for(f"{OLD_STYLE}:halving"), "kernel")
    assert result.flows.iloc[0]["cc"] == "halving.bpf.c:halving"
    # Both maps of the file are registered under cclab's names; the flow selects the first.
    registered = result.provenance["bpf_congestion_controls"]
    assert len(registered) == 1 and next(iter(registered)).endswith("0")
    assert result.flows.iloc[0]["bytes_delivered"] > 0
    assert registered_cclab() == []


def test_a_source_that_does_not_compile_fails_its_run_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    broken = tmp_path / "broken.bpf.c"
    shutil.copy(EXAMPLES / "cc" / "reno_beta07.bpf.c", broken)
    broken.write_text(broken.read_text().replace("tcp_reno_cong_avoid(sk, ack, acked);", "tcp_reno_cong_avoid(sk, ack, acked)"))
    spec = tmp_path / "broken.toml"
    spec.write_text('engine = "kernel"\nduration_s = 2\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n[[flows]]\ncc = "broken.bpf.c"\n')
    namespaces_before = kernel_netns.list_cclab_namespaces()
    done = run_cli("run", spec, "--out", tmp_path / "out")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("error: compiling broken.bpf.c failed")
    assert not (tmp_path / "out").exists()
    assert kernel_netns.list_cclab_namespaces() == namespaces_before and registered_cclab() == []

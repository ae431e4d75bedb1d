"""The senders' egress qdisc on the real kernel (`[host] sender_qdisc`): the kernel's own qdisc on
each sender's interface (under the access link's tbf when there is one), in provenance; fq on a
kernel without sch_fq is refused in one line before anything is set up."""

from __future__ import annotations

import pytest

from cclab.engines.kernel import aqm
from conftest import run_cli
from kernelcase import kernel_run_spec, requires_kernel_engine

pytestmark = requires_kernel_engine


def test_pfifo_fast_goes_under_the_access_links_tbf_on_each_sender() -> None:
    spec = {"duration_s": 2, "bottleneck": {"rate_mbps": 50, "rtt_ms": 20}, "flows": [{"cc": "cubic"}],
            "host": {"sender_qdisc": "pfifo_fast", "access_rate_mbps": 1000}}  # fmt: skip
    result = kernel_run_spec(spec)
    qdiscs = result.provenance["sender_qdiscs"]
    assert qdiscs[0].startswith("qdisc tbf 1: root") and "rate 1Gbit" in qdiscs[0]
    assert qdiscs[1].startswith("qdisc pfifo_fast") and "parent 1:" in qdiscs[1]
    assert result.provenance["host_settings"]["sender_qdisc"] == "pfifo_fast"
    assert result.flows.iloc[0].goodput_mbps > 0


@pytest.mark.skipif(aqm.qdisc_probe("fq").available, reason="this kernel has sch_fq")
def test_fq_on_a_kernel_without_it_is_one_line_naming_the_field_and_writes_nothing(tmp_path) -> None:
    spec = tmp_path / "fq.toml"
    spec.write_text('duration_s = 2\n[bottleneck]\nrate_mbps = 50\nrtt_ms = 20\n[[flows]]\ncc = "cubic"\n[host]\nsender_qdisc = "fq"\n')
    done = run_cli("run", spec, "--engine", "kernel", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.startswith("error: host.sender_qdisc: this kernel has no sch_fq") and done.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()

"""bpf_cc.py without running traffic: which CC a flow gets, the build cache, refusals."""

from __future__ import annotations

import os

import pytest

from cclab.engines.kernel import bpf_cc, user_cc
from kernelcase import make_config

HZ_250_NO_TUNNELS = {"CONFIG_HZ": "250", "CONFIG_X86_L1_CACHE_SHIFT": "6"}
#: native_versions() of a mainline kernel: its `bbr` is BBRv1.
MAINLINE = {"bbr": "bbr is Linux's BBRv1"}


def test_bbr_at_the_linux_gain_keeps_the_kernels_own_bbr(monkeypatch):
    monkeypatch.delenv(bpf_cc.FORCE_PORT_ENV, raising=False)
    assert bpf_cc.kernel_cc_name("bbr", 1.25, MAINLINE) == "bbr"
    assert bpf_cc.kernel_cc_name("bbr", None, MAINLINE) == "bbr"
    assert bpf_cc.kernel_cc_name("cubic", None) == "cubic"


def test_bbr_at_other_gains_gets_a_cclab_name_that_fits_the_kernels_16_bytes(monkeypatch):
    monkeypatch.delenv(bpf_cc.FORCE_PORT_ENV, raising=False)
    assert bpf_cc.kernel_cc_name("bbr", 1.5, MAINLINE) == "cclab_bbr1500"
    assert bpf_cc.kernel_cc_name("bbr", 1.1, MAINLINE) == "cclab_bbr1100"
    longest = bpf_cc.kernel_cc_name("bbr", bpf_cc.MAX_GAIN_PERMILLE / 1000, MAINLINE)
    assert len(longest) < 16  # TCP_CA_NAME_MAX counts the NUL


def test_forcing_the_port_puts_bbr_at_1_25_on_the_bpf_build(monkeypatch):
    monkeypatch.setenv(bpf_cc.FORCE_PORT_ENV, "1")
    assert bpf_cc.kernel_cc_name("bbr", 1.25, MAINLINE) == "cclab_bbr1250"
    assert bpf_cc.kernel_cc_name("cubic", None) == "cubic"


def test_gains_finer_than_a_thousandth_or_beyond_the_10_bit_field_are_refused():
    with pytest.raises(ValueError, match="three decimals"):
        bpf_cc.permille_of(1.2345)
    with pytest.raises(ValueError, match="outside"):
        bpf_cc.permille_of(4.5)


def test_a_config_needs_each_distinct_bpf_cc_once(monkeypatch):
    monkeypatch.delenv(bpf_cc.FORCE_PORT_ENV, raising=False)
    config = make_config([{"cc": "bbr", "probe_bw_gain": 1.5}, {"cc": "bbr", "probe_bw_gain": 1.5},
                          {"cc": "bbr", "probe_bw_gain": 1.25}, {"cc": "cubic", "probe_bw_gain": None}])  # fmt: skip
    assert user_cc.bpf_names(config, MAINLINE) == ["cclab_bbr1500"]


def test_max_tcp_header_follows_the_kernel_config():
    assert bpf_cc.kernel_defines(HZ_250_NO_TUNNELS) == {"CCLAB_HZ": 250, "CCLAB_MAX_TCP_HEADER": 192}
    wlan_gre = {**HZ_250_NO_TUNNELS, "CONFIG_WLAN": "y", "CONFIG_NET_IPGRE": "m"}
    # L1_CACHE_ALIGN(128 + 96 + 48) = 320
    assert bpf_cc.kernel_defines(wlan_gre)["CCLAB_MAX_TCP_HEADER"] == 320


def test_the_cache_key_changes_with_source_gain_kernel_and_btf():
    base = (b"src", 1500, "6.18", "btf1", {"CCLAB_HZ": 250})
    key = bpf_cc.object_key(*base)
    assert bpf_cc.object_key(*base) == key
    for i, other in enumerate((b"src2", 1100, "6.19", "btf2", {"CCLAB_HZ": 1000})):
        changed = list(base)
        changed[i] = other
        assert bpf_cc.object_key(*changed) != key


def test_a_missing_compiler_or_bpftool_is_named(monkeypatch):
    monkeypatch.setattr(bpf_cc, "find_clang", lambda: None)
    assert "clang" in bpf_cc.toolchain_problem()
    monkeypatch.setattr(bpf_cc, "find_clang", lambda: "/usr/bin/clang")
    monkeypatch.setattr(bpf_cc, "find_bpftool", lambda: None)
    assert "bpftool" in bpf_cc.toolchain_problem()


@pytest.mark.skipif(bpf_cc.toolchain_problem() is not None, reason=f"cannot build BPF: {bpf_cc.toolchain_problem()}")
def test_a_second_build_of_the_same_gain_comes_from_the_cache(tmp_path, monkeypatch):
    calls: list[list[str]] = []
    real_run = bpf_cc._run

    def counting_run(args, what):
        calls.append(args)
        return real_run(args, what)

    monkeypatch.setattr(bpf_cc, "_run", counting_run)
    first = bpf_cc.build("cclab_bbr1500", {"CCLAB_HZ": 250, "CCLAB_MAX_TCP_HEADER": 192}, cache=tmp_path)
    compiles = [a for a in calls if "-target" in a]
    assert len(compiles) == 1 and first.exists() and first.name.startswith("cclab_bbr1500-")
    mtime = first.stat().st_mtime_ns
    second = bpf_cc.build("cclab_bbr1500", {"CCLAB_HZ": 250, "CCLAB_MAX_TCP_HEADER": 192}, cache=tmp_path)
    assert second == first and second.stat().st_mtime_ns == mtime
    assert len([a for a in calls if "-target" in a]) == 1  # no second compile
    other = bpf_cc.build("cclab_bbr1100", {"CCLAB_HZ": 250, "CCLAB_MAX_TCP_HEADER": 192}, cache=tmp_path)
    assert other != first and len([a for a in calls if "-target" in a]) == 2
    assert len([p for p in os.listdir(tmp_path) if p.startswith("btf-")]) == 1  # one vmlinux.h for both


def test_a_change_in_a_header_beside_the_source_changes_the_cache_key(tmp_path):
    (tmp_path / "port.bpf.c").write_text('#include "port/state.h"\n')
    (tmp_path / "port").mkdir()
    header = tmp_path / "port" / "state.h"
    header.write_text("#define GAIN 5\n")
    before = bpf_cc.source_bytes(tmp_path / "port.bpf.c")
    header.write_text("#define GAIN 6\n")
    assert bpf_cc.source_bytes(tmp_path / "port.bpf.c") != before


def test_the_verifiers_last_words_and_the_source_line_make_the_error_line() -> None:
    from cclab.engines.kernel.bpf_cc import verifier_words

    log = """libbpf: prog 'crash_cong_avoid': BPF program load failed: Permission denied
libbpf: prog 'crash_cong_avoid': -- BEGIN PROG LOAD LOG --
Global function crash_cong_avoid() doesn't return scalar. Only those are supported.
0: R1=ctx() R10=fp0
; void BPF_PROG(crash_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) @ cclab_uf5ef450-e8d30445b341a8ec2a95-crashes.bpf.c:17
0: (79) r1 = *(u64 *)(r1 +16)         ; R1=scalar()
; *nowhere = acked; @ cclab_uf5ef450-e8d30445b341a8ec2a95-crashes.bpf.c:21
2: (63) *(u32 *)(r2 +0) = r1
R2 invalid mem access 'scalar'
processed 3 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0
-- END PROG LOAD LOG --
libbpf: prog 'crash_cong_avoid': failed to load: -13
"""
    assert verifier_words(log) == "the verifier rejected crash_cong_avoid at crashes.bpf.c:21 (*nowhere = acked;): R2 invalid mem access 'scalar'"
    assert verifier_words("libbpf: failed to open object: No such file") is None

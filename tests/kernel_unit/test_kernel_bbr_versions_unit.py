"""Which implementation runs cc "bbr"/"bbr2"/"bbr3" on the kernel engine (bpf_cc.py), from
fake /sys/module trees and symbol sets: no root, no traffic."""

from __future__ import annotations

import hashlib
import importlib

import pytest

from cclab.engines.kernel import bpf_cc, user_cc
from cclab.engines.kernel.errors import KernelEngineError
from kernelcase import make_config

# The module, not the function the package re-exports under the same name.
preflight = importlib.import_module("cclab.engines.kernel.preflight")

NO_SYMBOLS: frozenset[str] = frozenset()


def no_module(_name: str) -> str:
    return ""


def versions(available: list[str], tmp_path, *, version: str | None = None, symbols=NO_SYMBOLS, modinfo=no_module):
    if version is not None:
        (tmp_path / "tcp_bbr").mkdir()
        (tmp_path / "tcp_bbr" / "version").write_text(version + "\n")
    return bpf_cc.native_versions(available, sys_module=tmp_path, symbols=symbols, module_version=modinfo, module_exists=lambda _module: False)


def test_a_mainline_kernels_bbr_is_v1_and_bbr3_runs_the_bpf_port(tmp_path, monkeypatch):
    monkeypatch.delenv(bpf_cc.FORCE_PORT_ENV, raising=False)
    native = versions(["reno", "bbr", "cubic"], tmp_path)
    assert set(native) == {"bbr"}
    assert bpf_cc.kernel_cc_name("bbr", 1.25, native) == "bbr"
    assert bpf_cc.kernel_cc_name("bbr3", None, native) == "cclab_bbr3"
    assert bpf_cc.implementation("cclab_bbr3") == "bpf-port"
    assert bpf_cc.source_of("cclab_bbr3")[0].name == "bbr3.bpf.c"


def test_a_v3_kernel_is_told_by_its_module_version_and_then_runs_bbr1_on_the_port(tmp_path, monkeypatch):
    monkeypatch.delenv(bpf_cc.FORCE_PORT_ENV, raising=False)
    native = versions(["reno", "bbr", "cubic"], tmp_path, version="3")
    assert set(native) == {"bbr3"} and "version = 3" in native["bbr3"]
    assert bpf_cc.kernel_cc_name("bbr3", None, native) == "bbr"
    assert bpf_cc.implementation("bbr") == "native"
    # The kernel's `bbr` is v3 there, so BBRv1 at Linux's gain needs the v1 port.
    assert bpf_cc.kernel_cc_name("bbr", 1.25, native) == "cclab_bbr1250"


def test_a_built_in_v3_without_a_version_file_is_told_by_its_kfunc_symbol(tmp_path):
    native = versions(["bbr", "cubic"], tmp_path, symbols=frozenset({bpf_cc.V3_SYMBOL}))
    assert set(native) == {"bbr3"}
    assert bpf_cc.kernel_cc_name("bbr3", None, native) == "bbr"


def test_an_unloaded_v3_module_is_told_by_modinfo(tmp_path):
    native = versions(["cubic"], tmp_path, modinfo=lambda m: "3" if m == "tcp_bbr" else "")
    assert set(native) == {"bbr3"}


def test_another_version_string_is_not_taken_for_v3(tmp_path):
    assert set(versions(["bbr"], tmp_path, version="1.0")) == {"bbr"}


def test_bbr2_is_native_only_where_google_v2alpha_registered_it(tmp_path):
    assert "bbr2" not in versions(["bbr", "bbr2"], tmp_path)  # a `bbr2` of unknown origin
    native = versions(["bbr", "bbr2"], tmp_path, symbols=frozenset({bpf_cc.V2_SYMBOL}))
    assert "bbr2" in native and bpf_cc.kernel_cc_name("bbr2", None, native) == "bbr2"


def test_a_mainline_kernel_runs_bbr2_on_the_v2alpha_build_of_the_bbr3_source(tmp_path):
    native = versions(["reno", "bbr", "cubic"], tmp_path)
    assert bpf_cc.kernel_cc_name("bbr2", None, native) == "cclab_bbr2"
    assert bpf_cc.implementation("cclab_bbr2") == "bpf-port"
    source, defines = bpf_cc.source_of("cclab_bbr2")
    assert source == bpf_cc.source_of("cclab_bbr3")[0] and source.name == "bbr3.bpf.c"
    assert defines == {"CCLAB_BBR_V2ALPHA": 1} and bpf_cc.source_of("cclab_bbr3")[1] == {}


def test_the_v2_and_v3_ports_are_compiled_and_cached_apart(tmp_path, monkeypatch):
    btf = tmp_path / "vmlinux.btf"
    btf.write_bytes(b"bpf_struct_ops_tcp_congestion_ops")
    monkeypatch.setattr(bpf_cc, "BTF_PATH", btf)
    cache = tmp_path / "cache"
    digest = hashlib.sha256(btf.read_bytes()).hexdigest()[:16]
    (cache / f"btf-{digest}").mkdir(parents=True)
    (cache / f"btf-{digest}" / "vmlinux.h").write_text("")
    compiled: dict[str, list[str]] = {}

    def fake_clang(args, what):
        out = args[args.index("-o") + 1]
        compiled[what] = args
        open(out, "wb").close()
        return ""

    monkeypatch.setattr(bpf_cc, "_run", fake_clang)
    kernel = {"CCLAB_HZ": 250, "CCLAB_MAX_TCP_HEADER": 192}
    v2, v3 = bpf_cc.build("cclab_bbr2", kernel, cache), bpf_cc.build("cclab_bbr3", kernel, cache)
    assert v2 != v3 and v2.name.startswith("cclab_bbr2-") and v3.name.startswith("cclab_bbr3-")
    assert "-DCCLAB_BBR_V2ALPHA=1" in compiled["compiling cclab_bbr2"]
    assert "-DCCLAB_CA_NAME=cclab_bbr2" in compiled["compiling cclab_bbr2"]
    assert not any("V2ALPHA" in a for a in compiled["compiling cclab_bbr3"])
    # The same source bytes: only the variant and its define tell the keys apart.
    source = bpf_cc.source_bytes(bpf_cc.source_of("cclab_bbr2")[0])
    keys = {name: bpf_cc.object_key(source, name, "6.18", digest, {**bpf_cc.source_of(name)[1], **kernel})
            for name in ("cclab_bbr2", "cclab_bbr3")}  # fmt: skip
    assert keys["cclab_bbr2"] != keys["cclab_bbr3"]
    assert bpf_cc.object_key(source, "cclab_bbr3", "6.18", digest, {"CCLAB_BBR_V2ALPHA": 1, **kernel}) != keys["cclab_bbr3"]
    # A second build of either comes from the cache.
    assert bpf_cc.build("cclab_bbr2", kernel, cache) == v2 and len(compiled) == 2


def test_each_port_reads_its_own_state_counts(monkeypatch):
    asked = []

    def fake_read(map_name, program):
        asked.append((map_name, program))
        return list(range(len(bpf_cc.STATS_NAMES)))

    monkeypatch.setattr(bpf_cc, "read_stats_map", fake_read)
    ccs = bpf_cc.RunCcs("test", registered={"cclab_bbr2": 5, "cclab_bbr3": 6, "cclab_bbr1500": 7})
    counts = ccs.read_state_counts()
    assert set(counts) == {"cclab_bbr2", "cclab_bbr3"} and counts["cclab_bbr2"]["probe_bw_up"] == 5
    assert asked == [("bbr2_stats", "bbr2_main"), ("bbr3_stats", "bbr3_main")]


def test_a_config_with_v1_at_another_gain_and_v3_needs_two_bpf_ccs(tmp_path):
    native = versions(["bbr"], tmp_path)
    config = make_config([{"cc": "bbr3", "probe_bw_gain": None}, {"cc": "bbr", "probe_bw_gain": 1.5},
                          {"cc": "bbr3", "probe_bw_gain": None}, {"cc": "cubic", "probe_bw_gain": None}])  # fmt: skip
    assert user_cc.bpf_names(config, native) == ["cclab_bbr3", "cclab_bbr1500"]
    both = make_config([{"cc": "bbr2", "probe_bw_gain": None}, {"cc": "bbr3", "probe_bw_gain": None}])
    assert user_cc.bpf_names(both, native) == ["cclab_bbr2", "cclab_bbr3"]


def test_a_cclab_name_of_no_known_source_is_refused():
    with pytest.raises(KernelEngineError, match="not a cclab BPF"):
        bpf_cc.source_of("cclab_bbr77")


def test_the_stats_dump_of_bpftool_is_read_in_key_order(monkeypatch):
    outputs = {
        "prog": '[{"id": 7, "name": "bbr3_main", "map_ids": [3, 4]}, {"id": 8, "name": "other", "map_ids": [9]}]',
        "map show": '[{"id": 3, "name": "bbr3_state"}, {"id": 4, "name": "bbr3_stats"}, {"id": 9, "name": "bbr3_stats"}]',
        "dump": '[{"key": 1, "value": 20}, {"key": 0, "value": 10}]',
    }

    def fake_run(args, what):
        if "dump" in args:
            assert args[-1] == "4"  # the map of bbr3_main, not another program's
            return outputs["dump"]
        return outputs["prog"] if "prog" in args else outputs["map show"]

    monkeypatch.setattr(bpf_cc, "_run", fake_run)
    assert bpf_cc.read_stats_map("bbr3_stats", "bbr3_main") == [10, 20]


def _fail_before_any_namespace(monkeypatch: pytest.MonkeyPatch, config: dict) -> str:
    """Runs the preflight with every host check passing except what the test fakes."""
    monkeypatch.setattr(preflight.os, "geteuid", lambda: 0)
    monkeypatch.setattr(preflight.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(preflight, "kernel_has", lambda *_: True)
    monkeypatch.setattr(preflight, "find_binary", lambda: "/bin/true")
    monkeypatch.setattr(preflight.netem, "choose", lambda _c: type("C", (), {"mechanism": preflight.netem.DELAY_LINE})())
    with pytest.raises(KernelEngineError) as error:
        preflight.preflight(config)
    assert error.value.exit_code == 2  # refused, not failed while running
    return error.value.line


def test_bbr3_without_a_toolchain_is_refused_in_one_line_by_the_preflight(monkeypatch):
    monkeypatch.setattr(bpf_cc, "native_versions", lambda available: {"bbr": "v1"})
    monkeypatch.setattr(bpf_cc, "toolchain_problem", lambda: "clang is missing (apt-get install clang)")
    line = _fail_before_any_namespace(monkeypatch, make_config([{"cc": "bbr3", "probe_bw_gain": None}]))
    assert "cc bbr3" in line and "cclab_bbr3" in line and "clang is missing" in line and "\n" not in line


def test_bbr2_is_refused_only_when_its_port_cannot_be_built(monkeypatch):
    monkeypatch.setattr(bpf_cc, "native_versions", lambda available: {"bbr": "v1"})
    monkeypatch.setattr(bpf_cc, "toolchain_problem", lambda: "bpftool is missing (apt-get install bpftool)")
    line = _fail_before_any_namespace(monkeypatch, make_config([{"cc": "bbr2", "probe_bw_gain": None}]))
    assert "cc bbr2" in line and "cclab_bbr2" in line and "bpftool is missing" in line and "\n" not in line


def test_a_native_v3_flows_mode_comes_from_the_phase_in_tcp_bbr_info():
    import struct

    from cclab.engines.kernel import probes

    v1 = struct.pack("=IIIII", 1000, 0, 40_000, 256 * 5 // 4, 512)
    assert "bbr_phase" not in probes.parse_bbr_info(v1)
    # google/bbr v3's tcp_bbr_info: ..., bbr_mode u8 (36), bbr_phase u8 (37), unused1, bbr_version u8 (39), ...
    v3 = v1 + struct.pack("=IIII", 0, 0, 0, 0) + bytes([2, 6, 0, 3]) + struct.pack("=III", 100, 200, 3)
    fields = probes.parse_bbr_info(v3)
    assert fields["bbr_phase"] == 6 and probes.BBR_PHASE_NAMES[6] == "probe_bw_cruise"
    s = probes.TcpSample(
        cc="bbr", ca_state=0, cwnd_pkts=100, ssthresh_pkts=0, srtt_us=0, min_rtt_us=0, unacked_pkts=0, lost_pkts=0,
        retrans_pkts_now=0, total_retrans=0, pacing_rate_Bps=0, delivery_rate_Bps=0, bytes_acked=0, bytes_sent=0,
        bytes_retrans=0, data_segs_out=0, total_rto=None, **fields,
    )  # fmt: skip
    assert s.mode() == "probe_bw_cruise"  # v1's gain rule would say probe_bw


def test_provenance_says_which_implementation_ran_each_bbr_version(monkeypatch):
    from cclab.engines.kernel.engine import cc_provenance

    monkeypatch.delenv(bpf_cc.FORCE_PORT_ENV, raising=False)
    flows = make_config([{"cc": "bbr3", "probe_bw_gain": None}, {"cc": "bbr", "probe_bw_gain": 1.25},
                         {"cc": "cubic", "probe_bw_gain": None}])  # fmt: skip
    monkeypatch.setattr(bpf_cc, "host_native_versions", lambda: {"bbr": "bbr is Linux's BBRv1"})
    p = cc_provenance(flows)
    assert p["cc_implementation"] == {"bbr3": "bpf-port"}  # v1 on a mainline kernel is not listed
    assert p["cc_implementation_detail"]["bbr3"]["kernel_cc"] == "cclab_bbr3"
    v3_kernel = {"bbr3": "bbr is google/bbr v3 (/sys/module/tcp_bbr/version = 3)"}
    monkeypatch.setattr(bpf_cc, "host_native_versions", lambda: v3_kernel)
    p = cc_provenance(flows)
    assert p["cc_implementation"] == {"bbr3": "native", "bbr": "bpf-port"}
    assert p["cc_implementation_detail"]["bbr"]["kernel_cc"] == "cclab_bbr1250"
    assert cc_provenance(make_config([{"cc": "cubic", "probe_bw_gain": None}])) == {}
    monkeypatch.setattr(bpf_cc, "host_native_versions", lambda: {"bbr": "bbr is Linux's BBRv1"})
    p = cc_provenance(make_config([{"cc": "bbr2", "probe_bw_gain": None}]))
    assert p["cc_implementation"] == {"bbr2": "bpf-port"}
    assert p["cc_implementation_detail"]["bbr2"] == {"kernel_cc": "cclab_bbr2", "why": "not in this kernel"}

"""A flow's congestion control from a C source (issue 31): how the spec finds the file, picks
a struct_ops map, hashes it into the run key, and refuses what it cannot use in one line; the
copy the kernel engine compiles renames every map to cclab's name."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from cclab.engines.kernel import user_cc
from cclab.errors import SpecError
from cclab.results import RunResult
from cclab.spec import Scenario
from cclab.spec.bpf_source import parse_maps
from cclab.sweep import Sweep, expand, run_key
from conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.sim

SOURCE = EXAMPLES / "cc" / "reno_beta07.bpf.c"
TWO_MAPS = Path(__file__).parent / "kernel" / "data" / "old_style" / "halving.bpf.c"


def spec(cc: str) -> dict:
    return {"duration_s": 2, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20}, "flows": [{"cc": cc}]}


def resolved_flow(cc: str) -> dict:
    return Scenario.from_dict(spec(cc)).resolve()["flows"][0]


def test_a_source_resolves_to_its_map_and_the_hash_of_its_bytes() -> None:
    flow = resolved_flow(str(SOURCE))
    assert flow["cc"] == "reno_beta07.bpf.c:reno_beta07"
    source = flow["bpf_source"]
    assert (source["struct_ops"], source["name"], source["index"], source["maps"]) == ("reno_beta07", "reno_beta07", 0, 1)
    assert len(source["sha256"]) == 64 and source["path"] == str(SOURCE)
    assert flow["ecn"] is False  # no TCP_CONG_NEEDS_ECN in its flags


def test_the_run_key_follows_the_sources_content_not_its_folder(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "cc.bpf.c", tmp_path / "b" / "cc.bpf.c"
    for path in (first, second):
        path.parent.mkdir()
        shutil.copy(SOURCE, path)
    key = lambda path: run_key(Scenario.from_dict(spec(str(path))).resolve(), "sim")  # noqa: E731
    assert key(first) == key(second)
    # A header beside the file is part of what it builds from.
    (first.parent / "extra.h").write_text("#define EXTRA 1\n")
    assert key(first) != key(second)
    (first.parent / "extra.h").unlink()
    second.write_text(second.read_text().replace("#define BETA 717", "#define BETA 512"))
    assert key(first) != key(second)


def test_a_sources_simulator_run_key_follows_the_shim_it_runs_with(monkeypatch) -> None:
    # A change to how the simulator runs sources (crates/cclab-cc/shim) must not reuse a run
    # stored before it; the kernel engine's key does not depend on the shim.
    from cclab.engines import native_cc

    config = Scenario.from_dict(spec(str(SOURCE))).resolve()
    before = (run_key(config, "sim"), run_key(config, "kernel"))
    monkeypatch.setattr(native_cc, "shim_digest", lambda: "another shim")
    assert run_key(config, "sim") != before[0] and run_key(config, "kernel") == before[1]


def test_a_file_with_several_maps_needs_one_picked_by_variable_or_name() -> None:
    with pytest.raises(SpecError, match=r'^flows\[0\]\.cc: halving\.bpf\.c defines 2 struct_ops maps; pick one as "halving\.bpf\.c:NAME" \(halving, halving_spare\)$'):
        resolved_flow(str(TWO_MAPS))
    assert resolved_flow(f"{TWO_MAPS}:halving_spare")["bpf_source"]["index"] == 1
    with pytest.raises(SpecError, match=r"^flows\[0\]\.cc: halving\.bpf\.c has no struct_ops map 'cubic'"):
        resolved_flow(f"{TWO_MAPS}:cubic")


def test_a_map_flagged_needs_ecn_negotiates_ecn_whatever_the_flow_says(tmp_path: Path) -> None:
    flagged = tmp_path / "ecn.bpf.c"
    flagged.write_text(SOURCE.read_text().replace('.name = "reno_beta07",', '.flags = TCP_CONG_NEEDS_ECN,\n\t.name = "reno_beta07",'))
    assert parse_maps(flagged.read_text())[0].needs_ecn
    data = spec(str(flagged))
    data["flows"][0]["ecn"] = False
    assert Scenario.from_dict(data).resolve()["flows"][0]["ecn"] is True


def test_a_sweep_reads_relative_sources_beside_its_file_in_the_base_and_in_an_axis(tmp_path: Path) -> None:
    shutil.copy(SOURCE, tmp_path / "mine.bpf.c")
    sweep_file = tmp_path / "grid.toml"
    sweep_file.write_text('[base]\nduration_s = 2\n[base.bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n'
                          '[[base.flows]]\ncc = "mine.bpf.c"\n[[base.flows]]\ncc = "cubic"\n[axes]\n"flows.1.cc" = ["cubic", "mine.bpf.c"]\n')
    runs = expand(Sweep.from_toml(sweep_file))
    paths = [[f["bpf_source"]["path"] for f in run.scenario.resolve()["flows"] if "bpf_source" in f] for run in runs]
    assert sorted(map(len, paths)) == [1, 2] and {p for ps in paths for p in ps} == {str(tmp_path / "mine.bpf.c")}


def test_a_relative_source_is_read_beside_the_spec_file_and_check_prints_its_hash(tmp_path: Path) -> None:
    (tmp_path / "cc").mkdir()
    shutil.copy(SOURCE, tmp_path / "cc" / "mine.bpf.c")
    spec_file = tmp_path / "mine.toml"
    spec_file.write_text('duration_s = 2\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n[[flows]]\ncc = "cc/mine.bpf.c"\n')
    done = run_cli("check", spec_file, cwd=Path("/"))
    assert done.returncode == 0, done.stderr
    flow = json.loads(done.stdout)["flows"][0]
    assert flow["cc"] == "mine.bpf.c:reno_beta07" and flow["bpf_source"]["path"] == str(tmp_path / "cc" / "mine.bpf.c")


@pytest.mark.parametrize(
    ("cc", "message"),
    [
        ("nowhere.bpf.c", "flows[0].cc: no such file: "),
        ("vegas", 'flows[0].cc: must be one of \'reno\', \'cubic\', \'dctcp\', \'prague\', \'bbr\', \'bbr1\', \'bbr2\', \'bbr3\' or a BPF C source "FILE.c[:NAME]" (got "vegas")'),
    ],
    ids=["missing_file", "neither_a_cc_nor_a_source"],
)
def test_a_bad_cc_is_one_line_with_exit_2_and_writes_nothing(tmp_path: Path, cc: str, message: str) -> None:
    spec_file = tmp_path / "bad.toml"
    spec_file.write_text(f'duration_s = 2\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n[[flows]]\ncc = "{cc}"\n')
    done = run_cli("run", spec_file, "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: " + message)
    assert not (tmp_path / "out").exists()


def test_the_simulator_runs_a_source_from_the_cli_and_records_how(tmp_path: Path) -> None:
    spec_file = tmp_path / "mine.toml"
    spec_file.write_text(f'duration_s = 2\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n[[flows]]\ncc = "{SOURCE}"\n')
    done = run_cli("run", spec_file, "--engine", "sim", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    result = RunResult.read(tmp_path / "out")
    assert list(result.flows.cc) == ["reno_beta07.bpf.c:reno_beta07"]
    assert result.flows.iloc[0]["bytes_delivered"] > 0
    detail = result.provenance["cc_implementation_detail"]["reno_beta07.bpf.c:reno_beta07"]
    assert detail["sha256"] == hashlib.sha256(SOURCE.read_bytes()).hexdigest()  # no header beside it


def test_the_compiled_copy_names_every_map_for_cclab_and_registers_it_as_a_map() -> None:
    text = TWO_MAPS.read_text().replace('SEC(".struct_ops")', 'SEC(".struct_ops.link")', 1)
    out = user_cc.patched(text, "abcdef0123")
    maps = parse_maps(out)
    assert [(m.variable, m.name) for m in maps] == [("cclab_uabcdef00", "cclab_uabcdef00"), ("cclab_uabcdef01", "cclab_uabcdef01")]
    assert ".struct_ops.link" not in out and all(len(m.name) <= 15 for m in maps)
    assert user_cc.kernel_name({"sha256": "abcdef0123", "index": 1}) == "cclab_uabcdef01"

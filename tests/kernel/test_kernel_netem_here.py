"""Netem detection and the mechanism choice on this machine, as root.

The probe must run in a scratch network namespace that disappears with it (however it
ends), never in the root namespace, and must agree with the kernel's own config. Without
netem, `auto` picks the delay line and an explicit netem request stops in preflight with
one line (and a non-zero exit from the CLI).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cclab.engines.kernel import KernelEngineError, netem, preflight
from cclab.engines.kernel import netns as kernel_netns
from cclab.engines.kernel.preflight import accecn_problem
from kernelcase import make_config

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="probing netem needs root (network namespaces)")


def _root_lo_qdiscs() -> str:
    return subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True, check=True).stdout


def _netns_of_live_processes() -> set[str]:
    links = set()
    for ns_link in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            links.add(os.readlink(ns_link))
        except OSError:  # the process exited while we looked
            continue
    return links


def _kernel_says_netem() -> bool | None:
    value = netem._kernel_config_value()
    return None if value is None else value in ("y", "m")


@pytest.mark.parametrize("ending", ["exit 0", "exit 3", "kill -9 $$"])
def test_the_scratch_namespace_is_new_and_gone_once_its_command_ends_however_it_ends(ending: str) -> None:
    out = netem.run_in_scratch_netns(["sh", "-c", f"readlink /proc/self/ns/net; {ending}"])
    scratch = out.stdout.strip()
    assert re.fullmatch(r"net:\[\d+\]", scratch), out
    assert scratch != os.readlink("/proc/self/ns/net")  # not the root namespace
    assert scratch not in _netns_of_live_processes()  # nothing holds it: the kernel freed it
    assert not [n for n in kernel_netns.list_cclab_namespaces() if "probe" in n]  # never named


def test_netem_probe_agrees_with_the_kernel_config_and_leaves_the_root_namespace_alone() -> None:
    lo_before = _root_lo_qdiscs()
    result = netem.probe_netem_now()
    assert _root_lo_qdiscs() == lo_before
    expected = _kernel_says_netem()
    if expected is None:
        pytest.skip("this kernel does not expose its config; nothing to compare the probe with")
    assert result.available is expected, result


def test_netem_probe_reports_false_on_this_kernel() -> None:
    if _kernel_says_netem() is not False:
        pytest.skip("this kernel may have sch_netem")
    result = netem.probe_netem_now()
    assert result.available is False
    assert result.kernel_config == "not set"
    assert "qdisc kind is unknown" in result.detail  # tc's own words


def test_a_kernel_that_accepts_the_probe_qdisc_is_reported_as_having_netem(monkeypatch: pytest.MonkeyPatch) -> None:
    # tbf exists on every kernel this engine runs on: with it in netem's place the probe
    # must say yes, so a "no" above comes from the kernel, not from a broken probe.
    monkeypatch.setattr(netem, "PROBE_ARGS", ("tc", "qdisc", "add", "dev", "lo", "root", "tbf",
                                              "rate", "1mbit", "burst", "1600", "limit", "3000"))  # fmt: skip
    assert netem.probe_netem_now().available is True


needs_no_netem = pytest.mark.skipif(
    _kernel_says_netem() is not False, reason="these check the fallback on a kernel without sch_netem"
)


@needs_no_netem
def test_auto_picks_the_delay_line_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(netem.DELAY_ENV, raising=False)
    choice = netem.choose(make_config())
    assert (choice.mechanism, choice.requested) == ("delayline", "auto")
    assert choice.probe is not None and choice.probe.available is False


@needs_no_netem
@pytest.mark.parametrize("how", ["environment", "config"])
def test_preflight_refuses_explicit_netem_here_in_one_line(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    config = make_config()
    if how == "environment":
        monkeypatch.setenv(netem.DELAY_ENV, "netem")
    else:
        config["delay_mechanism"] = "netem"
    before = kernel_netns.list_cclab_namespaces()
    with pytest.raises(KernelEngineError, match="no sch_netem") as info:
        preflight(config)
    assert "\n" not in info.value.line
    assert kernel_netns.list_cclab_namespaces() == before


@needs_no_netem
def test_cli_exits_non_zero_with_one_error_line_when_netem_is_asked_for_here(tmp_path: Path) -> None:
    env = {**os.environ, netem.DELAY_ENV: "netem", "PYTHONPATH": f"{REPO / 'python'}:{REPO}"}
    spec = REPO / "examples" / "cubic_100mbit_20ms_1bdp.toml"
    cli = [sys.executable, "-c", "from cclab.cli import app; app()"]
    out = subprocess.run(
        [*cli, "run", str(spec), "--engine", "kernel", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr
    assert "CCLAB_DELAY=netem" in errors[0] and "sch_netem" in errors[0]
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(accecn_problem() is None, reason="this kernel has Accurate ECN: the refusal cannot happen here")
def test_accurate_ecn_on_a_kernel_without_it_is_one_line_naming_the_field_and_writes_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "accecn.toml"
    spec.write_text('duration_s = 2\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 20\n[[flows]]\ncc = "cubic"\necn = "accecn"\n', encoding="utf-8")
    cli = [sys.executable, "-c", "from cclab.cli import app; app()"]
    out = subprocess.run([*cli, "run", str(spec), "--engine", "kernel", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": f"{REPO / 'python'}:{REPO}"}, timeout=120)  # fmt: skip
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith('error: flows[0].ecn: "accecn" needs Accurate ECN'), out.stderr
    assert not (tmp_path / "o").exists()
    assert kernel_netns.list_cclab_namespaces() == []

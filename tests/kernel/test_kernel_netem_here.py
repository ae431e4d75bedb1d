"""Netem detection and the mechanism choice on this machine, as root.

The probe must run in a scratch namespace it deletes (also on failure) and must agree with
the kernel's own config; without netem, `auto` picks the delay line and an explicit netem
request stops in preflight with one line (and a non-zero exit from the CLI).
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
from kernelcase import make_config

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="probing netem needs root (network namespaces)")


def _root_lo_qdiscs() -> str:
    return subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the namespaces the code under test creates."""
    names: list[str] = []
    original = kernel_netns.RunNamespaces.create

    def recording_create(self: kernel_netns.RunNamespaces, role: str) -> str:
        names.append(original(self, role))
        return names[-1]

    monkeypatch.setattr(kernel_netns.RunNamespaces, "create", recording_create)
    return names


def _kernel_says_netem() -> bool | None:
    value = netem._kernel_config_value()
    return None if value is None else value in ("y", "m")


def test_netem_probe_agrees_with_the_kernel_config_and_leaves_no_namespace(created: list[str]) -> None:
    expected = _kernel_says_netem()
    lo_before = _root_lo_qdiscs()
    result = netem.probe_netem_now()
    assert len(created) == 1
    assert re.fullmatch(r"cclab-[0-9a-f]{8}-netemprobe", created[0])
    assert created[0] not in kernel_netns.list_cclab_namespaces()
    run_id = created[0].split("-")[1]
    assert not (kernel_netns.RUN_DIR / f"{run_id}.json").exists()
    assert _root_lo_qdiscs() == lo_before  # the root namespace was never touched
    if expected is None:
        pytest.skip("this kernel does not expose its config; nothing to compare the probe with")
    assert result.available is expected, result


def test_netem_probe_reports_false_on_this_kernel(created: list[str]) -> None:
    if _kernel_says_netem() is not False:
        pytest.skip("this kernel may have sch_netem")
    result = netem.probe_netem_now()
    assert result.available is False
    assert result.kernel_config == "not set"
    assert "qdisc kind is unknown" in result.detail  # tc's own words
    assert created and created[0] not in kernel_netns.list_cclab_namespaces()


def test_the_probe_namespace_is_deleted_when_tc_fails_to_run(
    monkeypatch: pytest.MonkeyPatch, created: list[str]
) -> None:
    real_run = subprocess.run

    def broken_tc(args: list[str], *a: object, **kw: object) -> subprocess.CompletedProcess:
        if "tc" in args:
            raise OSError("injected: tc could not be executed")
        return real_run(args, *a, **kw)

    monkeypatch.setattr(netem.subprocess, "run", broken_tc)
    with pytest.raises(OSError, match="injected"):
        netem.probe_netem_now()
    monkeypatch.undo()
    assert len(created) == 1
    assert created[0] not in kernel_netns.list_cclab_namespaces()


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

"""The sysctls the kernel engine writes into its host namespaces from a config's `[host]`
table (topology.host_sysctls), without running anything."""

from __future__ import annotations

from cclab.engines.kernel.topology import host_sysctls
from cclab.spec import load


def sysctls_of(host: dict | None) -> dict[str, str]:
    spec = {"duration_s": 1, "bottleneck": {"rate_mbps": 10, "rtt_ms": 20}, "flows": [{"cc": "cubic"}]}
    return host_sysctls(load(spec if host is None else {**spec, "host": host}).resolve().get("host"))


def test_an_untouched_host_keeps_rack_and_a_receive_buffer_that_never_limits() -> None:
    sysctls = sysctls_of(None)
    assert sysctls["net.ipv4.tcp_rmem"] == "4096 131072 536870912"
    assert sysctls["net.ipv4.tcp_recovery"] == "1"
    assert sysctls["net.ipv4.tcp_congestion_control"] == "reno"


def test_host_settings_become_the_namespaces_sysctls() -> None:
    sysctls = sysctls_of({"tcp_rmem_max": "6MiB", "loss_recovery": "classic"})
    assert sysctls["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    assert sysctls["net.ipv4.tcp_recovery"] == "0"
    assert sysctls["net.ipv4.tcp_wmem"] == sysctls_of(None)["net.ipv4.tcp_wmem"]

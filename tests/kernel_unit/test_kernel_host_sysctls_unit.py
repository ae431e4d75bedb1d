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
    assert sysctls["net.ipv4.tcp_wmem"] == "4096 16384 536870912"
    assert sysctls["net.ipv4.tcp_recovery"] == "1"
    assert sysctls["net.ipv4.tcp_congestion_control"] == "reno"


def test_host_settings_become_the_namespaces_sysctls() -> None:
    sysctls = sysctls_of({"tcp_rmem_max": "6MiB", "loss_recovery": "classic"})
    assert sysctls["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    assert sysctls["net.ipv4.tcp_recovery"] == "0"
    assert sysctls["net.ipv4.tcp_wmem"] == sysctls_of(None)["net.ipv4.tcp_wmem"]


def test_a_send_buffer_cap_becomes_tcp_wmem_and_leaves_tcp_rmem() -> None:
    sysctls = sysctls_of({"tcp_wmem_max": "4MiB"})
    assert sysctls["net.ipv4.tcp_wmem"] == "4096 16384 4194304"
    assert sysctls["net.ipv4.tcp_rmem"] == sysctls_of(None)["net.ipv4.tcp_rmem"]


def test_a_socket_buffer_past_the_hosts_core_maximum_is_one_line_naming_the_flow_field() -> None:
    from pathlib import Path

    import pytest

    from cclab.engines.kernel.errors import KernelEngineError
    from cclab.engines.kernel.preflight import check_socket_buffers

    limit = int(Path("/proc/sys/net/core/wmem_max").read_text())
    with pytest.raises(KernelEngineError, match=rf"^flows\[0\]\.sndbuf: {limit + 1} bytes is more than this host's net\.core\.wmem_max"):
        check_socket_buffers({"flow_id": 0, "sndbuf_bytes": limit + 1, "rcvbuf_bytes": limit + 1, "size_bytes": None})
    # iperf3 -w sets both of a bulk flow's buffers; receiver.py serves a finite flow with its own.
    for sndbuf, rcvbuf in ((65536, None), (None, 65536), (65536, 131072)):
        with pytest.raises(KernelEngineError, match=r"^flows\[2\]\.rcvbuf: a bulk flow's buffers are both set by iperf3 -w"):
            check_socket_buffers({"flow_id": 2, "sndbuf_bytes": sndbuf, "rcvbuf_bytes": rcvbuf, "size_bytes": None})
    check_socket_buffers({"flow_id": 1, "sndbuf_bytes": 65536, "rcvbuf_bytes": 65536, "size_bytes": None})
    check_socket_buffers({"flow_id": 1, "sndbuf_bytes": 65536, "rcvbuf_bytes": None, "size_bytes": 10**6})
    check_socket_buffers({"flow_id": 1, "sndbuf_bytes": None, "rcvbuf_bytes": 65536, "size_bytes": 10**6})

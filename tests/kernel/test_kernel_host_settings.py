"""`[host]` settings on the real kernel: `tcp_rmem_max` becomes the namespaces' tcp_rmem
maximum and holds a flow to the window that buffer allows, as in the simulator;
`loss_recovery = "classic"` turns RACK off (net.ipv4.tcp_recovery = 0)."""

from __future__ import annotations

import cclab
from cclab.spec.host import DEFAULT_TCP_WMEM_MAX_BYTES
from kernelcase import assert_sound, kernel_run_spec, requires_kernel_engine

pytestmark = requires_kernel_engine

#: The memory a full segment costs the receiver (measured on this kernel, the simulator's
#: KERNEL_SEGMENT_TRUESIZE_BYTES): a buffer of B bytes advertises at most B x 1448 / 2288.
PAYLOAD_PER_MEMORY = 1448 / 2288


def test_a_capped_receive_buffer_holds_cubic_to_its_window_as_in_the_simulator() -> None:
    # 100 Mbit/s, 100 ms (a BDP of 1.25 MB), 4 s measured after 2 s; tcp_rmem's max 512 KiB.
    spec = {"duration_s": 6, "bottleneck": {"rate_mbps": 100, "rtt_ms": 100}, "flows": [{"cc": "cubic"}],
            "output": {"warmup_s": 2}, "host": {"tcp_rmem_max": "512KiB"}}  # fmt: skip
    kernel, sim = kernel_run_spec(spec), cclab.run(spec, "sim")
    assert kernel.provenance["sender_sysctls"]["net.ipv4.tcp_rmem"].split() == ["4096", "131072", str(512 * 1024)]
    assert kernel.provenance["host_settings"] == {"tcp_rmem_max_bytes": 512 * 1024, "tcp_wmem_max_bytes": DEFAULT_TCP_WMEM_MAX_BYTES, "access_rate_bps": None, "sender_qdisc": "none", "loss_recovery": "rack", "mtu_bytes": 1500}
    assert_sound(kernel.validity)
    window_mbps = 512 * 1024 * PAYLOAD_PER_MEMORY * 8 / 0.100 / 1e6  # 26.5 Mbit/s of a 95.6 ceiling
    goodput = kernel.flows.iloc[0].goodput_mbps
    # The kernel measures its payload-to-memory ratio per connection (162/256 on the traces
    # behind the simulator's figure); a run here gave 27.1 Mbit/s, 2% above this window.
    assert 0.85 * window_mbps < goodput <= 1.05 * window_mbps, goodput
    assert abs(goodput - sim.flows.iloc[0].goodput_mbps) < 0.05 * goodput


def test_classic_loss_recovery_turns_rack_off_in_the_namespaces_and_the_run_stays_sound() -> None:
    spec = {"duration_s": 3, "bottleneck": {"rate_mbps": 50, "rtt_ms": 40, "loss": 0.01}, "flows": [{"cc": "cubic"}],
            "host": {"loss_recovery": "classic"}}  # fmt: skip
    kernel = kernel_run_spec(spec)
    assert kernel.provenance["sender_sysctls"]["net.ipv4.tcp_recovery"] == "0"
    assert kernel.provenance["host_settings"]["loss_recovery"] == "classic"
    assert_sound(kernel.validity)  # every random drop retransmitted, nothing lost elsewhere
    assert kernel.flows.iloc[0].random_loss_segments > 0

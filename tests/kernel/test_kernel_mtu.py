"""`[host] mtu` on the real kernel: every veth takes the MTU, so jumbo frames carry a gigabit
flow past what 1500-byte frames could (1448 / 1514 of the rate), and the receive buffer charges
a jumbo segment what the simulator charges it."""

from __future__ import annotations

import cclab
from kernelcase import assert_sound, kernel_run_spec, requires_kernel_engine

pytestmark = requires_kernel_engine


def test_jumbo_frames_carry_more_than_a_1500_byte_mtu_could_at_a_gigabit() -> None:
    spec = {"duration_s": 5, "bottleneck": {"rate_mbps": 1000, "rtt_ms": 20}, "flows": [{"cc": "cubic"}],
            "output": {"warmup_s": 1}, "host": {"mtu": 9000}}  # fmt: skip
    kernel = kernel_run_spec(spec)
    assert kernel.provenance["topology"]["mtu_bytes"] == 9000
    assert set(kernel.provenance["topology"]["device_mtu_bytes"].values()) == {9000}  # as the kernel reports them
    assert kernel.provenance["host_settings"]["mtu_bytes"] == 9000
    assert_sound(kernel.validity)
    assert kernel.bottleneck["utilization"] >= 0.95
    goodput = kernel.flows.iloc[0].goodput_mbps
    # 1500-byte frames carry at most 1000 x 1448 / 1514 = 956 Mbit/s; jumbo ones 992.7. The
    # window's ends are interpolated between TCP_INFO samples, so the measured goodput may pass
    # the ceiling by a hair (992.78 once, 0.01%): half a percent of room.
    assert 1000 * 1448 / 1514 < goodput <= 1.005 * 1000 * 8948 / 9014, goodput


def test_a_capped_receive_buffer_holds_a_jumbo_flow_to_the_same_window_as_in_the_simulator() -> None:
    # 512 KiB of tcp_rmem at 100 Mbit/s x 100 ms: 512 KiB x 8948 / (8948 + 840) per RTT, 38.3 Mbit/s.
    spec = {"duration_s": 6, "bottleneck": {"rate_mbps": 100, "rtt_ms": 100}, "flows": [{"cc": "cubic"}],
            "output": {"warmup_s": 2}, "host": {"tcp_rmem_max": "512KiB", "mtu": 9000}}  # fmt: skip
    kernel, sim = kernel_run_spec(spec), cclab.run(spec, "sim")
    assert_sound(kernel.validity)
    goodput = kernel.flows.iloc[0].goodput_mbps
    window_mbps = 512 * 1024 * 8948 / (8948 + 840) * 8 / 0.100 / 1e6
    assert 0.9 * window_mbps < goodput <= 1.05 * window_mbps, goodput
    assert abs(goodput - sim.flows.iloc[0].goodput_mbps) < 0.05 * goodput

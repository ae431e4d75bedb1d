"""A scenario's `[noise]`: the simulator's model of the kernel engine's host timing, named.

Beside the ACK jitter (`jitter_us`) and the bottleneck's dequeue stalls (`stall_per_packet`),
three mechanisms of the host the kernel engine runs on (crates/cclab-sim/src/config.rs
`NoiseConfig`). Each, unset, runs exactly when the ACK jitter does, as before they were named,
and is left out of the resolved config, so a spec that sets none keeps its run key. The kernel
engine has its own host and ignores them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: How the simulator names each in provenance (the file of each mechanism).
NOISE_MODELS = {
    "ts_clock_phase": "a seeded phase of the timestamp option's millisecond clock (crates/cclab-sim/src/tcp/rtt.rs TsClock)",
    "idle_reader_wake": "the receiving application's seeded wake after 5 ms without data (crates/cclab-sim/src/tcp/receiver.rs)",
    "idle_machine_wake": "an idle machine's wake-up: 167 us for an ACK after 5 ms without a packet (crates/cclab-sim/src/wake.rs)",
}


class Noise(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    ts_clock_phase: bool | None = Field(default=None, description="the timestamp clock ticks at a seeded phase (default: with the ACK jitter)")
    idle_reader_wake: bool | None = Field(default=None, description="the reader wakes late after 5 ms without data (default: with the ACK jitter)")
    idle_machine_wake: bool | None = Field(default=None, description="an idle machine wakes 167 us late for an ACK (default: with the ACK jitter)")

    def resolve(self) -> dict[str, bool]:
        """The settings given, for the resolved config's `noise`."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


def effective(noise: dict[str, bool] | None, jitter_ns: int) -> dict[str, bool]:
    """Which mechanisms a resolved config runs (config.rs `NoiseConfig::resolve`)."""
    return {name: (noise or {}).get(name, jitter_ns > 0) for name in NOISE_MODELS}

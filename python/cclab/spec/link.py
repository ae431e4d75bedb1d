"""Links that change during a run: `[[bottleneck.schedule]]` entries and Mahimahi traces.

A schedule entry changes the bottleneck's rate, base RTT or random loss at `at_s` (what
`tc qdisc change` and the delay line do on the kernel engine). A trace replaces the rate
altogether: Mahimahi's format (Netravali et al., USENIX ATC 2015), one integer millisecond
per line, each a delivery opportunity for one 1500-byte packet; lines may repeat (several
opportunities in one millisecond); the trace repeats with its last timestamp as its period.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cclab.spec.fields import FieldError

#: One opportunity carries a 1500-byte IP packet (crates/cclab-sim/src/trace.rs).
OPPORTUNITY_BYTES = 1500


class LinkChange(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    at_s: float = Field(ge=0)
    rate_mbps: float | None = Field(default=None, gt=0)
    rtt_ms: float | None = Field(default=None, gt=0)
    loss: float | None = Field(default=None, ge=0, lt=1)

    @model_validator(mode="after")
    def _changes_something(self) -> Self:
        if self.rate_mbps is None and self.rtt_ms is None and self.loss is None:
            raise ValueError("must change at least one of rate_mbps, rtt_ms, loss")
        return self


def read_trace_ms(path: Path) -> list[int]:
    """A Mahimahi trace's delivery opportunities in ms; any problem is a FieldError on `trace`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FieldError(("trace",), f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise FieldError(("trace",), f"cannot read {path}: {error}") from None
    times: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if not line.isdigit():
            raise FieldError(("trace",), f"{path}:{number}: expected a whole number of milliseconds (got {line!r})")
        ms = int(line)
        if times and ms < times[-1]:
            raise FieldError(("trace",), f"{path}:{number}: timestamps must not decrease ({ms} after {times[-1]})")
        times.append(ms)
    if not times or times[-1] == 0:
        raise FieldError(("trace",), f"{path}: needs at least one opportunity after 0 ms (the last timestamp is the period)")
    return times


def mean_rate_bps(times_ms: list[int]) -> int:
    """The rate a constant link would need to carry what the trace carries (as the simulator counts it)."""
    return len(times_ms) * OPPORTUNITY_BYTES * 8 * 1000 // times_ms[-1]


def write_trace(path: Path, times_ms: list[int]) -> None:
    """Writes delivery opportunities in Mahimahi's format (one millisecond per line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{ms}\n" for ms in times_ms), encoding="utf-8")


def constant_rate_trace_ms(phases: list[tuple[float, float]]) -> list[int]:
    """Opportunities for a link at `rate_mbps` for `seconds`, phase after phase: as many
    per millisecond as the rate carries by then (rounded down), so the mean is exact."""
    times: list[int] = []
    start_ms, carried = 0, 0
    for rate_mbps, seconds in phases:
        per_ms = rate_mbps * 1e6 / (OPPORTUNITY_BYTES * 8 * 1000)
        for ms in range(1, round(seconds * 1000) + 1):
            due = int(per_ms * ms + 1e-9)
            times += [start_ms + ms] * (due - carried)
            carried = due
        start_ms += round(seconds * 1000)
        carried = 0
    if not times or times[-1] != start_ms:
        times.append(start_ms)  # the period is the trace's length
    return times

"""Parsing of the quantities written in scenario files and on the command line.

Conventions (docs/ARCHITECTURE.md):
- sizes: B; KB, MB, GB decimal (10^3, 10^6, 10^9 bytes); KiB, MiB, GiB binary;
  `pkt` counts whole frames; `bdp` is a multiple of rate x base RTT;
- rates: bit, kbit, mbit, gbit and bps, kbps, mbps, gbps, all in bits per second.
  Unlike tc, where "mbps" means megabytes per second, cclab reads "mbps" as megabits,
  matching the `rate_mbps` field of the spec;
- in sizes the byte "B" must be upper case ("10Mb" is more often meant as megabits);
  the prefixes and `pkt`, `bdp` may be written in any case;
- durations: ns, us, ms, s.

Every parser raises ValueError with a message that says what was expected; spec.py
prefixes the field name.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Literal

#: A host's MTU unless `[host] mtu` sets it (Ethernet's). Every frame and segment size follows
#: from the MTU (mss_bytes, frame_bytes); crates/cclab-sim/src/lib.rs has the same.
DEFAULT_MTU_BYTES = 1500
#: Headers inside the MTU on a full segment: 20 B IP + 20 B TCP + 12 B timestamps option.
TCP_IP_HEADER_BYTES = 52
#: The Ethernet header, outside the MTU; tc tbf and bfifo count it.
ETHERNET_HEADER_BYTES = 14


def mss_bytes(mtu_bytes: int) -> int:
    """Payload of a full-sized segment at this MTU (with timestamps)."""
    return mtu_bytes - TCP_IP_HEADER_BYTES


def frame_bytes(mtu_bytes: int) -> int:
    """A full-sized segment on the wire at this MTU, as tc tbf and bfifo count it (and the
    device's `psched_mtu`)."""
    return mtu_bytes + ETHERNET_HEADER_BYTES


def frame_bytes_of(config: dict) -> int:
    """A full-sized frame of a resolved engine config's hosts (`host.mtu_bytes`, spec/host.py)."""
    return frame_bytes(int((config.get("host") or {}).get("mtu_bytes", DEFAULT_MTU_BYTES)))


#: At the default MTU: 1448 B payload, 1514 B frames.
MSS_BYTES = mss_bytes(DEFAULT_MTU_BYTES)
FRAME_BYTES = frame_bytes(DEFAULT_MTU_BYTES)

_SIZE_UNITS_BYTES: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}
_RATE_UNITS_BPS: dict[str, int] = {
    "bit": 1,
    "kbit": 10**3,
    "mbit": 10**6,
    "gbit": 10**9,
    "bps": 1,
    "kbps": 10**3,
    "mbps": 10**6,
    "gbps": 10**9,
}
_DURATION_UNITS_NS: dict[str, int] = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}

_NUMBER_AND_UNIT = re.compile(
    r"^\s*(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[A-Za-z]+)\s*$"
)

SizeUnit = Literal["bytes", "packets", "bdp"]


@dataclass(frozen=True)
class Size:
    """A parsed size: `amount` of `unit`, before it is tied to a link."""

    amount: float
    unit: SizeUnit

    def bytes_for(self, rate_bps: int, rtt_ns: int, frame_bytes: int = FRAME_BYTES) -> int:
        """Bytes on a link of this rate and base RTT (packets count whole frames of `frame_bytes`)."""
        if self.unit == "bytes":
            return round(self.amount)
        if self.unit == "packets":
            return round(self.amount) * frame_bytes
        return round(self.amount * bdp_bytes(rate_bps, rtt_ns))


def bdp_bytes(rate_bps: int, rtt_ns: int) -> float:
    """Bandwidth-delay product in bytes: rate x base RTT."""
    return rate_bps * rtt_ns / 8e9


def _quote(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _split(text: object, what: str, example: str) -> tuple[float, str]:
    if not isinstance(text, str):
        raise ValueError(f"must be a string with a unit, e.g. {_quote(example)} (got {_quote(text)})")
    match = _NUMBER_AND_UNIT.match(text)
    if match is None:
        raise ValueError(f"not a {what}; write a number and a unit, e.g. {_quote(example)} (got {_quote(text)})")
    number = float(match["number"])
    if not math.isfinite(number):
        raise ValueError(f"not a finite {what} (got {_quote(text)})")
    if number < 0:
        raise ValueError(f"must not be negative (got {_quote(text)})")
    return number, match["unit"]


def parse_size(text: object, *, allow: frozenset[SizeUnit] = frozenset({"bytes", "packets", "bdp"})) -> Size:
    """Parse "200000B", "100KB", "64KiB", "250pkt", "0.3bdp" (units case-insensitive).

    `allow` restricts which kinds of unit are meaningful where the size is used.
    """
    number, unit = _split(text, "size", "100KB")
    key = unit.lower()
    if key in _SIZE_UNITS_BYTES and unit.endswith("b"):
        raise ValueError(f"a lowercase b means bits; sizes are in bytes, write B (got {_quote(text)})")
    if key in _SIZE_UNITS_BYTES:
        size = Size(number * _SIZE_UNITS_BYTES[key], "bytes")
    elif key in ("pkt", "pkts"):
        if not number.is_integer():
            raise ValueError(f"must be a whole number of packets (got {_quote(text)})")
        size = Size(number, "packets")
    elif key == "bdp":
        size = Size(number, "bdp")
    else:
        units = ", ".join(["B", "KB", "MB", "GB", "KiB", "MiB", "GiB", "pkt", "bdp"])
        raise ValueError(f"unknown size unit {_quote(unit)}; use one of {units} (got {_quote(text)})")
    if size.unit not in allow:
        allowed = " or ".join(sorted(allow))
        raise ValueError(f"must be given in {allowed} here (got {_quote(text)})")
    return size


def parse_bytes(text: object) -> int:
    """Parse a size that must be plain bytes ("4MB", "64KiB") into whole bytes."""
    return round(parse_size(text, allow=frozenset({"bytes"})).amount)


def parse_rate_bps(text: object) -> int:
    """Parse "500mbit", "1gbit", "100mbps" into bits per second."""
    number, unit = _split(text, "rate", "100mbit")
    key = unit.lower()
    if key not in _RATE_UNITS_BPS:
        raise ValueError(f"unknown rate unit {_quote(unit)}; use bit, kbit, mbit, gbit or bps, kbps, mbps, gbps (got {_quote(text)})")
    return round(number * _RATE_UNITS_BPS[key])


def parse_duration_ns(text: object) -> int:
    """Parse "200ms", "25ms", "1s", "500us" into nanoseconds."""
    number, unit = _split(text, "duration", "25ms")
    key = unit.lower()
    if key not in _DURATION_UNITS_NS:
        raise ValueError(f"unknown duration unit {_quote(unit)}; use ns, us, ms or s (got {_quote(text)})")
    return round(number * _DURATION_UNITS_NS[key])

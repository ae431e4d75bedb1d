"""The bottleneck's queue discipline: `[bottleneck] aqm` and `[bottleneck.aqm_params]`.

Every parameter a user leaves out takes Linux tc's own default (iproute2 and the kernel's
net/sched/sch_*.c), and `resolve_aqm` writes them all out explicitly, so an engine never
has defaults of its own. The scenario's `buffer` stays the hard limit of the queue.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cclab.spec.fields import FieldError
from cclab.units import parse_bytes

AqmName = Literal["fifo", "red", "codel", "fq_codel", "pie", "cake"]
AQM_NAMES: tuple[str, ...] = ("fifo", "red", "codel", "fq_codel", "pie", "cake")
CakeFlowMode = Literal["flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost", "dual-dsthost", "triple-isolate"]

# tc's defaults, with where each comes from.
# CoDel: include/net/codel.h codel_params_init (target 5 ms, interval 100 ms), sch_codel.c
# codel_init (limit 1000 packets, ecn off).
CODEL_TARGET_MS = 5.0
CODEL_INTERVAL_MS = 100.0
CODEL_LIMIT_PACKETS = 1000
# fq_codel: sch_fq_codel.c fq_codel_init: limit 10240 packets, 1024 flows, quantum = the
# device MTU + hard header (1514 on Ethernet), ecn on, memory_limit 32 MiB, drop_batch 64.
FQ_CODEL_LIMIT_PACKETS = 10240
FQ_CODEL_FLOWS = 1024
FQ_CODEL_QUANTUM_BYTES = 1514
FQ_CODEL_MEMORY_LIMIT_BYTES = 32 << 20
FQ_CODEL_DROP_BATCH = 64
# PIE: sch_pie.c pie_init / include/net/pie.h pie_params_init: target 15 ms, tupdate 15 ms,
# limit 1000 packets, alpha 2, beta 20 (in units of 1/8 and 1/8 s^-1 as tc writes them), ecn off.
PIE_TARGET_MS = 15.0
PIE_TUPDATE_MS = 15.0
PIE_LIMIT_PACKETS = 1000
PIE_ALPHA = 2
PIE_BETA = 20
# RED: iproute2 tc/q_red.c (Sally Floyd's recommendations): avpkt 1000, probability 0.02,
# max = limit / 4, min = max / 3, burst = (2 min + max) / (3 avpkt).
RED_AVPKT_BYTES = 1000
RED_PROBABILITY = 0.02
# CAKE: sch_cake.c cake_init: rtt 100 ms (interval), target = rtt / 20 (5 ms),
# triple-isolate; CAKE marks every ECT packet it would drop.
CAKE_RTT_MS = 100.0
CAKE_FLOW_MODE: CakeFlowMode = "triple-isolate"

# Which parameters each queue discipline takes.
_APPLIES: dict[str, tuple[str, ...]] = {
    "target_ms": ("codel", "fq_codel", "pie"),
    "interval_ms": ("codel", "fq_codel"),
    "limit": ("codel", "fq_codel", "pie"),
    "ecn": ("codel", "fq_codel", "pie", "red"),
    "ce_threshold_ms": ("codel", "fq_codel"),
    "flows": ("fq_codel",),
    "quantum": ("fq_codel",),
    "memory_limit": ("fq_codel", "cake"),
    "drop_batch": ("fq_codel",),
    "tupdate_ms": ("pie",),
    "alpha": ("pie",),
    "beta": ("pie",),
    "bytemode": ("pie",),
    "dq_rate_estimator": ("pie",),
    "min": ("red",),
    "max": ("red",),
    "avpkt": ("red",),
    "burst": ("red",),
    "probability": ("red",),
    "harddrop": ("red",),
    "adaptive": ("red",),
    "rtt_ms": ("cake",),
    "flow_mode": ("cake",),
}


class AqmParamError(FieldError):
    """A bad `aqm_params` field, reported as `bottleneck.aqm_params.<field>`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(("aqm_params", field), message)


class AqmParams(BaseModel):
    """`[bottleneck.aqm_params]`: each key applies to the queue disciplines listed in `_APPLIES`."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    target_ms: float | None = Field(default=None, gt=0)
    interval_ms: float | None = Field(default=None, gt=0)
    limit: int | None = Field(default=None, ge=1, description="packets")
    ecn: bool | None = None
    ce_threshold_ms: float | None = Field(default=None, gt=0)
    flows: int | None = Field(default=None, ge=1, le=65536)
    # fq_codel_change: q->quantum = max(256U, quantum).
    quantum: int | None = Field(default=None, ge=256, description="bytes")
    memory_limit: str | None = None
    drop_batch: int | None = Field(default=None, ge=1)
    tupdate_ms: float | None = Field(default=None, gt=0)
    # pie_change: alpha and beta are at most 32.
    alpha: int | None = Field(default=None, ge=0, le=32)
    beta: int | None = Field(default=None, ge=0, le=32)
    bytemode: bool | None = None
    dq_rate_estimator: bool | None = None
    min: str | None = None
    max: str | None = None
    avpkt: str | None = None
    burst: int | None = Field(default=None, ge=1, description="packets")
    probability: float | None = Field(default=None, gt=0, le=1)
    harddrop: bool | None = None
    adaptive: bool | None = None
    rtt_ms: float | None = Field(default=None, gt=0)
    flow_mode: CakeFlowMode | None = None

    @model_validator(mode="after")
    def _sizes_parse(self) -> Self:
        for name in ("memory_limit", "min", "max", "avpkt"):
            text = getattr(self, name)
            if text is not None:
                try:
                    value = parse_bytes(text)
                except ValueError as error:
                    raise FieldError((name,), str(error)) from None
                if value <= 0:
                    raise FieldError((name,), f"must be > 0 bytes (got {text!r})")
        return self

    def given(self) -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) is not None]


def check_params_apply(aqm: str, params: AqmParams | None) -> None:
    """Raises AqmParamError for a parameter the chosen queue discipline does not take."""
    if params is None:
        return
    for name in params.given():
        takers = _APPLIES[name]
        if aqm not in takers:
            raise AqmParamError(name, f'does not apply to aqm = "{aqm}" (it applies to {", ".join(takers)})')


def _ns(ms: float) -> int:
    return round(ms * 1e6)


def resolve_aqm(aqm: str, params: AqmParams | None, *, buffer_bytes: int, rate_bps: int) -> dict[str, Any]:
    """`bottleneck.aqm` of the resolved config: the kind and every parameter, tc's defaults filled in.

    `buffer_bytes` is the scenario's hard limit in bytes (RED's tc `limit`)."""
    p = params or AqmParams()

    def pick(name: str, default: Any) -> Any:
        value = getattr(p, name)
        return default if value is None else value

    if aqm == "fifo":
        return {"kind": "fifo"}
    if aqm == "codel":
        return {
            "kind": "codel",
            "target_ns": _ns(pick("target_ms", CODEL_TARGET_MS)),
            "interval_ns": _ns(pick("interval_ms", CODEL_INTERVAL_MS)),
            "limit_packets": pick("limit", CODEL_LIMIT_PACKETS),
            "ecn": pick("ecn", False),
            "ce_threshold_ns": None if p.ce_threshold_ms is None else _ns(p.ce_threshold_ms),
        }
    if aqm == "fq_codel":
        return {
            "kind": "fq_codel",
            "target_ns": _ns(pick("target_ms", CODEL_TARGET_MS)),
            "interval_ns": _ns(pick("interval_ms", CODEL_INTERVAL_MS)),
            "limit_packets": pick("limit", FQ_CODEL_LIMIT_PACKETS),
            "flows": pick("flows", FQ_CODEL_FLOWS),
            "quantum_bytes": pick("quantum", FQ_CODEL_QUANTUM_BYTES),
            "ecn": pick("ecn", True),
            "ce_threshold_ns": None if p.ce_threshold_ms is None else _ns(p.ce_threshold_ms),
            "memory_limit_bytes": parse_bytes(p.memory_limit) if p.memory_limit else FQ_CODEL_MEMORY_LIMIT_BYTES,
            "drop_batch": pick("drop_batch", FQ_CODEL_DROP_BATCH),
        }
    if aqm == "pie":
        return {
            "kind": "pie",
            "target_ns": _ns(pick("target_ms", PIE_TARGET_MS)),
            "tupdate_ns": _ns(pick("tupdate_ms", PIE_TUPDATE_MS)),
            "limit_packets": pick("limit", PIE_LIMIT_PACKETS),
            "alpha": pick("alpha", PIE_ALPHA),
            "beta": pick("beta", PIE_BETA),
            "ecn": pick("ecn", False),
            "bytemode": pick("bytemode", False),
            "dq_rate_estimator": pick("dq_rate_estimator", False),
        }
    if aqm == "red":
        return _resolve_red(p, buffer_bytes=buffer_bytes, rate_bps=rate_bps)
    if aqm == "cake":
        rtt_ms = pick("rtt_ms", CAKE_RTT_MS)
        return {
            "kind": "cake",
            "rtt_ns": _ns(rtt_ms),
            # cake_set_rtt / cake_init: target = rtt / 20 (5 ms at the default 100 ms).
            "target_ns": max(_ns(rtt_ms) // 20, 1),
            "flow_mode": pick("flow_mode", CAKE_FLOW_MODE),
            "memory_limit_bytes": parse_bytes(p.memory_limit) if p.memory_limit else None,
            "ecn": True,
        }
    raise AssertionError(f"unknown aqm {aqm!r}")  # the Literal type stops this earlier


def _resolve_red(p: AqmParams, *, buffer_bytes: int, rate_bps: int) -> dict[str, Any]:
    avpkt = parse_bytes(p.avpkt) if p.avpkt else RED_AVPKT_BYTES
    max_bytes = parse_bytes(p.max) if p.max else None
    min_bytes = parse_bytes(p.min) if p.min else None
    # iproute2 q_red.c: max defaults to three times min if min is given, else limit / 4.
    if max_bytes is None:
        max_bytes = min_bytes * 3 if min_bytes is not None else buffer_bytes // 4
    if min_bytes is None:
        min_bytes = max_bytes // 3
    if not 0 < min_bytes < max_bytes:
        raise AqmParamError("min", f"must be below max ({max_bytes} B) and > 0 (got {min_bytes} B)")
    if max_bytes > buffer_bytes:
        raise AqmParamError("max", f"must not exceed the buffer ({buffer_bytes} B) (got {max_bytes} B)")
    burst = p.burst if p.burst is not None else max((2 * min_bytes + max_bytes) // (3 * avpkt), 1)
    return {
        "kind": "red",
        "limit_bytes": buffer_bytes,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "avpkt_bytes": avpkt,
        "burst_packets": burst,
        "probability": p.probability if p.probability is not None else RED_PROBABILITY,
        "ecn": bool(p.ecn),
        "harddrop": bool(p.harddrop),
        "adaptive": bool(p.adaptive),
        "bandwidth_bps": rate_bps,
    }

"""The bottleneck's queue discipline: `[bottleneck] aqm` and `[bottleneck.aqm_params]`.

Every parameter a user leaves out takes Linux tc's own default (iproute2 and the kernel's
net/sched/sch_*.c), and `resolve_aqm` writes them all out explicitly, so an engine never
has defaults of its own. The scenario's `buffer` stays the hard limit of the queue.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cclab.spec.fields import FieldError
from cclab.units import FRAME_BYTES, parse_bytes

AqmName = Literal["fifo", "red", "codel", "fq_codel", "pie", "cake", "dualpi2"]
AQM_NAMES: tuple[str, ...] = ("fifo", "red", "codel", "fq_codel", "pie", "cake", "dualpi2")
DualPi2EcnMask = Literal["l4s_ect", "any_ect"]
CakeFlowMode = Literal["flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost", "dual-dsthost", "triple-isolate"]

# tc's defaults, with where each comes from.
# CoDel: include/net/codel.h codel_params_init (target 5 ms, interval 100 ms), sch_codel.c
# codel_init (limit 1000 packets, ecn off).
CODEL_TARGET_MS = 5.0
CODEL_INTERVAL_MS = 100.0
CODEL_LIMIT_PACKETS = 1000
# fq_codel: sch_fq_codel.c fq_codel_init: limit 10240 packets, 1024 flows, quantum =
# psched_mtu(dev), the device MTU + hard header (resolve_aqm's psched_mtu_bytes), ecn on,
# memory_limit 32 MiB, drop_batch 64.
FQ_CODEL_LIMIT_PACKETS = 10240
FQ_CODEL_FLOWS = 1024
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
# DualPI2 (RFC 9332): sch_dualpi2.c dualpi2_reset_default: limit 10000 packets, memlimit
# limit x 2 x psched_mtu(dev), target 15 ms, tupdate 16 ms, alpha 41 and beta 819 in Hz x 256
# (0.16 and 3.2 Hz), step 1 ms, min_qlen_step 0, coupling 2, drop on overload, AQM at dequeue,
# classic protection 10%, ECT(1) and CE to the L4S queue. Given in Hz, tc truncates x 256.
DUALPI2_LIMIT_PACKETS = 10000
DUALPI2_TARGET_MS = 15.0
DUALPI2_TUPDATE_MS = 16.0
DUALPI2_ALPHA_HZ_X256 = 41
DUALPI2_BETA_HZ_X256 = 819
DUALPI2_STEP_THRESH_MS = 1.0
DUALPI2_COUPLING_FACTOR = 2
DUALPI2_CLASSIC_PROTECTION_PERCENT = 10
# dualpi2_policy: alpha and beta (Hz x 256) in [1, 2^31 - 1].
DUALPI2_MAX_HZ_X256 = (1 << 31) - 1
# tc's ecn_mask values (TC_DUALPI2_ECN_MASK_*): ECT(1) bit alone, or both ECT bits.
DUALPI2_ECN_MASKS = {"l4s_ect": 1, "any_ect": 3}

# Which parameters each queue discipline takes.
_APPLIES: dict[str, tuple[str, ...]] = {
    "target_ms": ("codel", "fq_codel", "pie", "dualpi2"),
    "interval_ms": ("codel", "fq_codel"),
    "limit": ("codel", "fq_codel", "pie", "dualpi2"),
    "ecn": ("codel", "fq_codel", "pie", "red"),
    "ce_threshold_ms": ("codel", "fq_codel"),
    "flows": ("fq_codel",),
    "quantum": ("fq_codel",),
    "memory_limit": ("fq_codel", "cake", "dualpi2"),
    "drop_batch": ("fq_codel",),
    "tupdate_ms": ("pie", "dualpi2"),
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
    "alpha_hz": ("dualpi2",),
    "beta_hz": ("dualpi2",),
    "step_thresh_ms": ("dualpi2",),
    "step_thresh_packets": ("dualpi2",),
    "min_qlen_step": ("dualpi2",),
    "coupling_factor": ("dualpi2",),
    "drop_overload": ("dualpi2",),
    "drop_early": ("dualpi2",),
    "classic_protection_percent": ("dualpi2",),
    "ecn_mask": ("dualpi2",),
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
    # DualPI2's gains in Hz (tc's `alpha`, `beta`), sent as Hz x 256 truncated, as tc does.
    alpha_hz: float | None = Field(default=None, gt=0, le=DUALPI2_MAX_HZ_X256 / 256)
    beta_hz: float | None = Field(default=None, gt=0, le=DUALPI2_MAX_HZ_X256 / 256)
    step_thresh_ms: float | None = Field(default=None, gt=0)
    step_thresh_packets: int | None = Field(default=None, ge=1)
    min_qlen_step: int | None = Field(default=None, ge=0)
    coupling_factor: int | None = Field(default=None, ge=1, le=255)
    drop_overload: bool | None = None
    drop_early: bool | None = None
    classic_protection_percent: int | None = Field(default=None, ge=0, le=100)
    ecn_mask: DualPi2EcnMask | None = None

    @model_validator(mode="after")
    def _one_step_threshold(self) -> Self:
        # dualpi2_change: "multiple step thresh attributes" is -EINVAL.
        if self.step_thresh_ms is not None and self.step_thresh_packets is not None:
            raise FieldError(("step_thresh_packets",), "give the step threshold as step_thresh_ms or step_thresh_packets, not both")
        for name in ("alpha_hz", "beta_hz"):
            value = getattr(self, name)
            if value is not None and int(value * 256) < 1:
                raise FieldError((name,), f"must be at least 1/256 Hz, tc's resolution (got {value:g})")
        return self

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


def resolve_aqm(
    aqm: str, params: AqmParams | None, *, buffer_bytes: int, rate_bps: int, psched_mtu_bytes: int = FRAME_BYTES
) -> dict[str, Any]:
    """`bottleneck.aqm` of the resolved config: the kind and every parameter, tc's defaults filled in.

    `buffer_bytes` is the scenario's hard limit in bytes (RED's tc `limit`); `psched_mtu_bytes`
    the bottleneck device's MTU with its Ethernet header (fq_codel's quantum, DualPI2's memory)."""
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
            "quantum_bytes": pick("quantum", psched_mtu_bytes),
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
    if aqm == "dualpi2":
        return _resolve_dualpi2(p, psched_mtu_bytes)
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


def _resolve_dualpi2(p: AqmParams, psched_mtu_bytes: int) -> dict[str, Any]:
    limit = p.limit if p.limit is not None else DUALPI2_LIMIT_PACKETS
    step_packets = p.step_thresh_packets
    return {
        "kind": "dualpi2",
        "limit_packets": limit,
        # dualpi2_change: setting the limit recomputes the memory limit from it.
        "memory_limit_bytes": parse_bytes(p.memory_limit) if p.memory_limit else limit * 2 * psched_mtu_bytes,
        "target_ns": _ns(p.target_ms if p.target_ms is not None else DUALPI2_TARGET_MS),
        "tupdate_ns": _ns(p.tupdate_ms if p.tupdate_ms is not None else DUALPI2_TUPDATE_MS),
        "alpha": int(p.alpha_hz * 256) if p.alpha_hz is not None else DUALPI2_ALPHA_HZ_X256,
        "beta": int(p.beta_hz * 256) if p.beta_hz is not None else DUALPI2_BETA_HZ_X256,
        "step_thresh_ns": None if step_packets is not None else _ns(p.step_thresh_ms or DUALPI2_STEP_THRESH_MS),
        "step_thresh_packets": step_packets,
        "min_qlen_step": p.min_qlen_step or 0,
        "coupling_factor": p.coupling_factor if p.coupling_factor is not None else DUALPI2_COUPLING_FACTOR,
        "drop_overload": p.drop_overload if p.drop_overload is not None else True,
        "drop_early": bool(p.drop_early),
        "c_protection_percent": (
            p.classic_protection_percent if p.classic_protection_percent is not None else DUALPI2_CLASSIC_PROTECTION_PERCENT
        ),
        "ecn_mask": DUALPI2_ECN_MASKS[p.ecn_mask or "l4s_ect"],
    }


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

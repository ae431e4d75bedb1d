"""The scenario spec: a TOML file validated by pydantic, resolved into an engine config.

A spec names a dumbbell (one bottleneck) and the flows across it; `Scenario.resolve()`
turns it into the plain-integer config of docs/ARCHITECTURE.md that every engine
consumes. Any invalid input becomes one `SpecError` line naming the field.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from cclab.errors import SpecError
from cclab.spec.aqm import AqmName, AqmParams, check_params_apply, resolve_aqm
from cclab.spec.bpf_source import BpfSource, is_source as is_bpf_source
from cclab.spec.bpf_source import load as load_bpf_source
from cclab.spec.fields import FieldError
from cclab.spec.host import AUTOTUNE, Host, SocketBuffer, socket_buffer_bytes
from cclab.spec.link import LinkChange, mean_rate_bps, read_trace_ms
from cclab.spec.noise import Noise
from cclab.units import parse_bytes, parse_size

# BBRv1's gain in the first phase of its PROBE_BW cycle: Linux tcp_bbr.c, bbr_pacing_gain[0]
# = BBR_UNIT * 5 / 4.
BBR_DEFAULT_PROBE_BW_GAIN = 1.25
# A guard against a typo that would build millions of flows, not a simulator limit.
MAX_FLOWS_PER_ENTRY = 10_000

# Past physical sense, refused always (a run's cost is judged apart, in engines/budget.py):
# - 1 Tbit/s: above the fastest Ethernet there is (800GBASE), and where a full frame's
#   serialization (12 ns) still spans a dozen ticks of the engines' 1 ns clock; much
#   faster and frames would leave in zero time.
MAX_RATE_MBPS = 1_000_000
# - 1 us: one NIC-to-NIC hop across a switch already takes more; below it the "path" is
#   shorter than a frame's own serialization at any rate cclab accepts under 12 Gbit/s.
MIN_RTT_MS = 0.001
# - 60 s: half of Linux's TCP_RTO_MAX (120 s, include/net/tcp.h); a longer path would time
#   out every segment before its ACK could return, and the handshake before its SYN-ACK.
MAX_RTT_MS = 60_000

# The simulator's default timing noise: each ACK is late by an exponential draw of this mean
# (crates/cclab-sim/src/jitter.rs), the two kinds measured on the kernel engine here, which
# both fall between an ACK's due time and the data it clocks:
# - the delay line's lateness, 7.6 us: the median run's mean over the 39 kernel runs of
#   `cclab validate --set rtt` (each run's mean 1.2-19.6 us, p50 6.0 us, p99 40 us;
#   bench/kernel_jitter.py measures it again);
# - the sender host's turnaround over its minimum, 23.1 us: from an ACK leaving the router to
#   the data it clocks arriving back, in router captures of CUBIC (bench/router_capture.py;
#   median 19.9, p99 81.8 us over a 16-18 us minimum; docs/FIDELITY.md).
# With it on, every ACK also pays the kernel path's fixed 40 us over the configured RTT
# (jitter.rs KERNEL_PATH_FLOOR_NS), so no RTT sample undercuts it but the timestamp option's
# whole milliseconds, as on the kernel.
KERNEL_ACK_JITTER_US = 30.7  # 7.6 + 23.1
# The simulator's default stalls of the bottleneck's dequeue (crates/cclab-sim/src/stall.rs):
# in router captures of the kernel engine here (bench/router_capture.py, one CUBIC flow at 100
# and 300 Mbit/s), 1.44e-4 of the departures left a backlogged queue more than 200 us later
# than the one before plus its transmit time; the stall's length is Pareto-tailed, up to 6 ms.
KERNEL_STALL_PER_PACKET = 1.44e-4
# A host's timing noise, not a path's delay: past a second it would be neither.
MAX_JITTER_US = 1_000_000

# "bbr" is BBRv1 (Linux's tcp_bbr.c); "bbr1" names it explicitly and resolves to "bbr".
# "bbr2" is google/bbr's v2alpha, "bbr3" its v3 (draft-ietf-ccwg-bbr). "dctcp" is Linux's
# tcp_dctcp.c (RFC 8257) and "prague" L4STeam's tcp_prague.c (L4S, ECT(1) with Accurate ECN):
# both negotiate ECN whatever the flow's `ecn` says.
CongestionControl = Literal["reno", "cubic", "dctcp", "prague", "bbr", "bbr1", "bbr2", "bbr3"]
CC_NAMES: tuple[str, ...] = CongestionControl.__args__
CC_ALIASES = {"bbr1": "bbr"}
# Congestion controls with Linux's TCP_CONG_NEEDS_ECN flag.
NEEDS_ECN = ("dctcp", "prague")
NEEDS_ACCECN = ("prague",)
EngineName = Literal["sim", "kernel"]


def _ns(value: float, ns_per_unit: float) -> int:
    return round(value * ns_per_unit)


def _check_size(text: str) -> str:
    parse_size(text)
    return text


def _check_bytes(text: str) -> str:
    if parse_bytes(text) <= 0:
        raise ValueError(f"must be > 0 bytes (got {_show(text)})")
    return text


def _check_ecn(value: Any) -> Any:
    if isinstance(value, bool) or value == "accecn":
        return value
    raise ValueError(f'must be true, false or "accecn" (got {_show(value)})')


#: `flows[].ecn`: RFC 3168 ECN (true), none (false), or Accurate ECN ("accecn").
EcnMode = Annotated[bool | Literal["accecn"], BeforeValidator(_check_ecn)]
SizeText = Annotated[str, AfterValidator(_check_size)]
BytesText = Annotated[str, AfterValidator(_check_bytes)]


class _Strict(BaseModel):
    # strict: a string where a number belongs is an error, not a silent conversion;
    # no inf/nan, which TOML can spell.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class Bottleneck(_Strict):
    # Required unless a trace gives the rate (its mean then counts as the rate, e.g. for "1bdp").
    rate_mbps: float | None = Field(default=None, gt=0)
    rtt_ms: float = Field(gt=0, description="base round-trip propagation delay")
    buffer: SizeText = "1bdp"
    loss: float = Field(default=0.0, ge=0, lt=1, description="random loss probability on the data path")
    aqm: AqmName = "fifo"
    aqm_params: AqmParams | None = None
    schedule: list[LinkChange] = Field(default_factory=list, description="changes of the link during the run")
    trace: str | None = Field(default=None, description="a Mahimahi delivery trace replacing the rate")
    _trace_ms: list[int] | None = PrivateAttr(default=None)

    @property
    def rate_bps(self) -> int:
        if self._trace_ms is not None:
            return mean_rate_bps(self._trace_ms)
        return round(self.rate_mbps * 1e6)

    @property
    def trace_ms(self) -> list[int] | None:
        """The trace's delivery opportunities in ms (None without a trace)."""
        return self._trace_ms

    @model_validator(mode="after")
    def _rate_or_trace(self) -> Self:
        if self.trace is not None:
            if self.rate_mbps is not None:
                raise FieldError(("rate_mbps",), "a trace sets the rate; leave rate_mbps out")
            self._trace_ms = read_trace_ms(Path(self.trace))
        elif self.rate_mbps is None:
            raise FieldError(("rate_mbps",), "required key is missing (or give a trace)")
        previous = 0.0
        for index, change in enumerate(self.schedule):
            if change.at_s < previous:
                raise FieldError(("schedule", index, "at_s"), f"changes must be in time order (got {change.at_s:g} after {previous:g})")
            previous = change.at_s
            if change.rate_mbps is not None and self.trace is not None:
                raise FieldError(("schedule", index, "rate_mbps"), "a trace sets the rate; a schedule may change only rtt_ms and loss")
            if change.rate_mbps is not None and change.rate_mbps > MAX_RATE_MBPS:
                raise FieldError(("schedule", index, "rate_mbps"), f"must be <= {MAX_RATE_MBPS:g} (got {change.rate_mbps!r})")
            if change.rtt_ms is not None and not MIN_RTT_MS <= change.rtt_ms <= MAX_RTT_MS:
                raise FieldError(("schedule", index, "rtt_ms"), f"must be in [{MIN_RTT_MS:g}, {MAX_RTT_MS:g}] (got {change.rtt_ms!r})")
        return self

    @property
    def rtt_ns(self) -> int:
        return round(self.rtt_ms * 1e6)

    @model_validator(mode="after")
    def _rate_and_rtt_in_range(self) -> Self:
        # Engines count in whole bits per second and nanoseconds.
        if self.rate_bps < 1:
            raise FieldError(("rate_mbps",), f"must be at least 1 bit/s (got {self.rate_mbps!r})")
        if self.rate_bps > MAX_RATE_MBPS * 1e6:
            raise FieldError(("rate_mbps",), f"must be <= {MAX_RATE_MBPS:g} (1 Tbit/s, past any real link) (got {self.rate_mbps!r})")
        if self.rtt_ms < MIN_RTT_MS:
            raise FieldError(("rtt_ms",), f"must be at least {MIN_RTT_MS:g} (1 us, one switch hop) (got {self.rtt_ms!r})")
        if self.rtt_ms > MAX_RTT_MS:
            raise FieldError(("rtt_ms",), f"must be <= {MAX_RTT_MS:g} (60 s, half of TCP's longest timeout) (got {self.rtt_ms!r})")
        check_params_apply(self.aqm, self.aqm_params)
        return self

    def check_fits(self, frame_bytes: int) -> None:
        """Raises FieldError unless the buffer holds a frame of the hosts' MTU and the AQM's
        parameters agree with each other and with the buffer (RED's min < max <= buffer)."""
        limit_bytes = self.buffer_bytes(frame_bytes)
        if limit_bytes < frame_bytes:
            raise FieldError(("buffer",), f"must hold at least one packet ({frame_bytes} B) (got {_show(self.buffer)} = {limit_bytes} B)")
        self.resolve_aqm(frame_bytes)

    def buffer_bytes(self, frame_bytes: int) -> int:
        """The buffer in bytes (a packet-counted buffer as whole frames of `frame_bytes`)."""
        return parse_size(self.buffer).bytes_for(self.rate_bps, self.rtt_ns, frame_bytes)

    def resolve_aqm(self, frame_bytes: int) -> dict[str, Any]:
        """The config's `aqm` for a bottleneck device whose frames are `frame_bytes` (its psched_mtu)."""
        return resolve_aqm(self.aqm, self.aqm_params, buffer_bytes=self.buffer_bytes(frame_bytes), rate_bps=self.rate_bps, psched_mtu_bytes=frame_bytes)


class Flow(_Strict):
    # A built-in CC, or a BPF struct_ops source "FILE.c[:NAME]" (spec/bpf_source.py).
    cc: str
    probe_bw_gain: float | None = Field(default=None, description="BBR only; default 1.25")
    count: int = Field(default=1, ge=1, le=MAX_FLOWS_PER_ENTRY)
    start_s: float = Field(default=0.0, ge=0)
    size: BytesText | None = Field(default=None, description="finite flow; otherwise runs for duration_s")
    extra_rtt_ms: float = Field(default=0.0, ge=0)
    rwnd: BytesText | None = Field(default=None, description="receive window (at least one segment); default unlimited")
    sndbuf: SocketBuffer = Field(
        default=AUTOTUNE,
        description='the sender\'s SO_SNDBUF as iperf3 -w sets it (Linux doubles it and stops autotuning), or "autotune"',
    )
    rcvbuf: SocketBuffer = Field(
        default=AUTOTUNE,
        description='the receiver\'s SO_RCVBUF as iperf3 -w sets it (Linux doubles it and stops autotuning), or "autotune"',
    )
    ecn: EcnMode = Field(
        default=False,
        description='the sender negotiates ECN: true for RFC 3168 (net.ipv4.tcp_ecn = 1), "accecn" for Accurate ECN (RFC 9768, tcp_ecn = 3)',
    )

    _bpf_source: BpfSource | None = PrivateAttr(default=None)

    @property
    def cc_name(self) -> str:
        """The CC's canonical name ("bbr1" is "bbr"; a source's is "FILE.bpf.c:MAP")."""
        if self._bpf_source is not None:
            return self._bpf_source.label
        return CC_ALIASES.get(self.cc, self.cc)

    @property
    def bpf_source(self) -> BpfSource | None:
        """The C source the CC is built from, if it names one."""
        return self._bpf_source

    @property
    def needs_ecn(self) -> bool:
        """TCP_CONG_NEEDS_ECN: the CC negotiates ECN whatever `ecn` says."""
        return self.cc_name in NEEDS_ECN or (self._bpf_source is not None and self._bpf_source.map.needs_ecn)

    @field_validator("cc")
    @classmethod
    def _built_in_or_source(cls, cc: str) -> str:
        if cc in CC_NAMES or is_bpf_source(cc):
            return cc
        names = ", ".join(repr(name) for name in CC_NAMES)
        raise ValueError(f'must be one of {names} or a BPF C source "FILE.c[:NAME]" (got {_show(cc)})')

    @model_validator(mode="after")
    def _load_source(self) -> Self:
        # A relative path is relative to the working directory here; from_toml makes it
        # relative to the spec file first.
        if is_bpf_source(self.cc):
            try:
                self._bpf_source = load_bpf_source(self.cc, Path.cwd())
            except ValueError as error:
                raise FieldError(("cc",), str(error)) from None
        return self

    @field_validator("probe_bw_gain")
    @classmethod
    def _gain_only_for_bbr(cls, gain: float | None, info: ValidationInfo) -> float | None:
        if gain is None:
            return gain
        cc = info.data.get("cc")
        if cc is not None and CC_ALIASES.get(cc, cc) != "bbr":
            raise ValueError(f'only applies to cc = "bbr" (BBRv1) (this flow has cc = {_show(cc)})')
        if gain <= 1:
            raise ValueError(f"must be > 1 (got {_show(gain)})")
        return gain


class Output(_Strict):
    flow_sample_interval_ms: float = Field(default=100.0, gt=0)
    queue_sample_interval_ms: float = Field(default=1.0, gt=0)
    # Metrics are computed over [warmup_s, end]: start-up transients (slow start, BBR's
    # STARTUP, deep buffers filling) otherwise weigh on every average.
    warmup_s: float = Field(default=0.0, ge=0, description="metrics cover [warmup_s, end]")

    @model_validator(mode="after")
    def _whole_nanoseconds(self) -> Self:
        # A 0 ns sampling interval would sample forever at one instant.
        for name in ("flow_sample_interval_ms", "queue_sample_interval_ms"):
            if _ns(getattr(self, name), 1e6) < 1:
                raise FieldError((name,), f"must be at least 1 ns (got {getattr(self, name)!r})")
        return self


def read_toml(path: Path, *, what: str | None = None) -> dict[str, Any]:
    """A TOML file as a dict; any problem is one SpecError line naming the file (and `what` it is)."""
    where = f"{what}: {path}" if what else f"{path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise SpecError(f"{where}: is a directory, not a TOML file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{where}: cannot read: {error}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: TOML syntax error: {error}") from None


class Scenario(_Strict):
    duration_s: float = Field(gt=0)
    seed: int = Field(default=1, ge=0, lt=2**64)
    # The simulator's seeded timing noise, two kinds: the mean ACK lateness, and the share of
    # waiting packets whose dequeue at the bottleneck stalls. Both 0 replay the noiseless
    # model. The kernel has its own and ignores them.
    jitter_us: float = Field(default=KERNEL_ACK_JITTER_US, ge=0, le=MAX_JITTER_US)
    stall_per_packet: float = Field(default=KERNEL_STALL_PER_PACKET, ge=0, le=1)
    # The host's other timing mechanisms, one switch each (spec/noise.py).
    noise: Noise = Noise()
    engine: EngineName = "sim"
    bottleneck: Bottleneck
    flows: list[Flow] = Field(min_length=1)
    output: Output = Output()
    host: Host = Host()

    @model_validator(mode="after")
    def _flows_start_within_run(self) -> Self:
        if _ns(self.duration_s, 1e9) < 1:
            raise FieldError(("duration_s",), f"must be at least 1 ns (got {self.duration_s!r})")
        for index, change in enumerate(self.bottleneck.schedule):
            if change.at_s >= self.duration_s:
                raise FieldError(("bottleneck", "schedule", index, "at_s"), f"must be < duration_s ({self.duration_s:g}) (got {change.at_s:g})")
        for index, flow in enumerate(self.flows):
            if self.bottleneck.rtt_ms + flow.extra_rtt_ms > MAX_RTT_MS:
                raise FieldError(
                    ("flows", index, "extra_rtt_ms"),
                    f"the flow's RTT must be <= {MAX_RTT_MS:g} ms (60 s, half of TCP's longest timeout) (got {self.bottleneck.rtt_ms:g} + {flow.extra_rtt_ms:g})",
                )
            if flow.start_s >= self.duration_s:
                raise FieldError(
                    ("flows", index, "start_s"),
                    f"must be < duration_s ({self.duration_s:g}) (got {flow.start_s:g})",
                )
        if self.output.warmup_s >= self.duration_s:
            raise FieldError(
                ("output", "warmup_s"),
                f"must be < duration_s ({self.duration_s:g}) (got {self.output.warmup_s:g})",
            )
        frame_bytes = self.host.frame_bytes
        try:
            self.bottleneck.check_fits(frame_bytes)
        except FieldError as error:
            raise FieldError(("bottleneck", *error.loc), str(error)) from None
        for index, flow in enumerate(self.flows):
            if flow.rwnd is not None and parse_bytes(flow.rwnd) < self.host.mss_bytes:
                raise FieldError(("flows", index, "rwnd"), f"must hold at least one segment ({self.host.mss_bytes} B) (got {_show(flow.rwnd)})")
        access_bps = self.host.access_rate_bps
        top_bps = max([self.bottleneck.rate_bps, *(round(c.rate_mbps * 1e6) for c in self.bottleneck.schedule if c.rate_mbps is not None)])
        if access_bps is not None and access_bps < top_bps:
            raise FieldError(
                ("host", "access_rate_mbps"),
                f"must be at least the bottleneck's rate, {top_bps / 1e6:g} Mbit/s (got {self.host.access_rate_mbps:g}): "
                "the access link feeds the bottleneck and has no queue of its own",
            )
        return self

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise SpecError(_one_line(error)) from None

    @classmethod
    def from_toml(cls, path: str | PathLike[str]) -> Scenario:
        """A scenario from a TOML file; a relative `bottleneck.trace` or C source is read beside the file."""
        data = read_toml(Path(path))
        return cls.from_dict(paths_beside(data, Path(path).parent))

    def resolve(self) -> dict[str, Any]:
        """The engine config of docs/ARCHITECTURE.md: plain integers, units in every key."""
        link = self.bottleneck
        size = parse_size(link.buffer)
        flows = []
        for entry in self.flows:
            for _ in range(entry.count):
                gain = (entry.probe_bw_gain or BBR_DEFAULT_PROBE_BW_GAIN) if entry.cc_name == "bbr" else None
                flow = {
                        "flow_id": len(flows),
                        "cc": entry.cc_name,
                        "probe_bw_gain": gain,
                        "start_ns": _ns(entry.start_s, 1e9),
                        "size_bytes": parse_bytes(entry.size) if entry.size else None,
                        "extra_rtt_ns": _ns(entry.extra_rtt_ms, 1e6),
                        "rwnd_bytes": parse_bytes(entry.rwnd) if entry.rwnd else None,
                        # A CC that needs ECN (TCP_CONG_NEEDS_ECN) negotiates it whatever tcp_ecn says.
                        "ecn": bool(entry.ecn) or entry.needs_ecn,
                }
                if entry.bpf_source is not None:
                    flow["bpf_source"] = entry.bpf_source.resolved()
                # Only when set, so that an autotuned flow's config (and its run key) is unchanged.
                for side in ("sndbuf", "rcvbuf"):
                    requested = socket_buffer_bytes(getattr(entry, side))
                    if requested is not None:
                        flow[f"{side}_bytes"] = requested
                # Accurate ECN, asked for or needed (Prague: TCP_CONG_NEEDS_ACCECN); only when
                # used, so that other flows' configs (and their run keys) are unchanged.
                if entry.ecn == "accecn" or entry.cc_name in NEEDS_ACCECN:
                    flow["accecn"] = True
                flows.append(flow)
        bottleneck: dict[str, Any] = {
            "rate_bps": link.rate_bps,
            "rtt_ns": link.rtt_ns,
            "queue_limit_bytes": None if size.unit == "packets" else link.buffer_bytes(self.host.frame_bytes),
            "queue_limit_packets": round(size.amount) if size.unit == "packets" else None,
            "loss_probability": link.loss,
            "aqm": link.resolve_aqm(self.host.frame_bytes),
        }
        # Only when used, so that a fixed link's config (and its sweep run key) is unchanged.
        if link.schedule:
            bottleneck["schedule"] = [
                {
                    "at_ns": _ns(change.at_s, 1e9),
                    "rate_bps": None if change.rate_mbps is None else round(change.rate_mbps * 1e6),
                    "rtt_ns": None if change.rtt_ms is None else _ns(change.rtt_ms, 1e6),
                    "loss_probability": change.loss,
                }
                for change in link.schedule
            ]
        if link.trace_ms is not None:
            bottleneck["trace_ms"] = list(link.trace_ms)
        return {
            "seed": self.seed,
            "duration_ns": _ns(self.duration_s, 1e9),
            "bottleneck": bottleneck,
            "flows": flows,
            "flow_sample_interval_ns": _ns(self.output.flow_sample_interval_ms, 1e6),
            "queue_sample_interval_ns": _ns(self.output.queue_sample_interval_ms, 1e6),
            # Only with a warm-up: a run without one keeps the config, and so the run key
            # (sweep.run_key), it had before warm-ups existed; engines default it to 0.
            **({"warmup_ns": _ns(self.output.warmup_s, 1e9)} if self.output.warmup_s > 0 else {}),
            "jitter_ns": round(self.jitter_us * 1e3),
            "stall_per_packet": self.stall_per_packet,
            # Only the switches given: an untouched [noise] keeps the run key.
            **({"noise": noise} if (noise := self.noise.resolve()) else {}),
            # Only the settings given (spec/host.py): an untouched host keeps its run key.
            **({"host": host} if (host := self.host.resolve()) else {}),
        }


# ---- turning a pydantic ValidationError into one line -------------------------------------

_TYPE_NAMES = {
    "float_type": "a number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "string_type": "a string",
    "bool_type": "true or false",
    "model_type": "a table",
    "model_attributes_type": "a table",
    "dict_type": "a table",
    "list_type": "an array of tables ([[...]])",
    "finite_number": "a finite number",
}
_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}


def _show(value: object) -> str:
    """A value as it would be written in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value, default=str)


def _path(loc: tuple[str | int, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "spec"


def _known_keys() -> list[str]:
    models: list[type[BaseModel]] = [Scenario, Bottleneck, Flow, Output, AqmParams, LinkChange, Host]
    return sorted({name for model in models for name in model.model_fields})


def _one_line(error: ValidationError) -> str:
    details = error.errors()
    # A typo'd key also leaves its intended key missing: the typo is the useful report.
    detail = next((d for d in details if d["type"] == "extra_forbidden"), details[0])
    loc = tuple(detail["loc"])
    kind = detail["type"]
    ctx = detail.get("ctx", {})
    value = detail.get("input")
    if kind == "value_error":
        cause = ctx.get("error")
        if isinstance(cause, FieldError):
            loc += cause.loc
        message = str(cause)
    elif kind == "extra_forbidden":
        guess = difflib.get_close_matches(str(loc[-1]), _known_keys(), n=1)
        message = "unknown key" + (f" (did you mean {guess[0]!r}?)" if guess else "")
    elif kind in ("too_short", "missing") and loc == ("flows",):
        message = "at least one [[flows]] table is required"
    elif kind == "missing":
        message = "required key is missing"
    elif kind in _BOUNDS:
        bound = next(iter(ctx.values()))
        message = f"must be {_BOUNDS[kind]} {bound:g} (got {_show(value)})"
    elif kind == "literal_error":
        message = f"must be one of {ctx['expected']} (got {_show(value)})"
    elif kind in _TYPE_NAMES:
        message = f"must be {_TYPE_NAMES[kind]} (got {_show(value)})"
    else:
        message = detail["msg"]
    return f"{_path(loc)}: {message}"


def paths_beside(data: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """`data` with its relative file paths (a trace, a flow's C source) made relative to
    `base_dir`, the folder of the file they were written in."""
    link = data.get("bottleneck")
    if isinstance(link, dict) and isinstance(link.get("trace"), str) and not Path(link["trace"]).is_absolute():
        link["trace"] = str(base_dir / link["trace"])
    flows = data.get("flows")
    for flow in flows if isinstance(flows, list) else []:
        if isinstance(flow, dict) and isinstance(flow.get("cc"), str) and is_bpf_source(flow["cc"]) and not Path(flow["cc"]).is_absolute():
            flow["cc"] = str(base_dir / flow["cc"])
    return data


def load(spec: Scenario | Mapping[str, Any] | str | PathLike[str]) -> Scenario:
    """A validated scenario from a Scenario, a dict shaped like the TOML, or a TOML path."""
    if isinstance(spec, Scenario):
        return spec
    if isinstance(spec, Mapping):
        return Scenario.from_dict(dict(spec))
    return Scenario.from_toml(spec)

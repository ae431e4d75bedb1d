"""`[host]`: settings of the sending and receiving hosts that change results (Datta & Fund's
replication of Cao et al. lists them) with the kernel engine's own namespaces as defaults.

Each is resolved into the engine config only when set, so a spec without it keeps the config,
and the run key, it had before the setting existed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from cclab.units import DEFAULT_MTU_BYTES, frame_bytes, mss_bytes, parse_bytes

#: `net.ipv4.tcp_rmem[1]` in the kernel engine's namespaces (engines/kernel/topology.py sets it
#: from here; crates/cclab-sim/src/tcp/receive_window.rs has the same): the buffer a socket
#: starts with, which autotuning never shrinks.
TCP_RMEM_DEFAULT_BYTES = 131_072
#: `tcp_rmem` is a vector of ints (Documentation/networking/ip-sysctl.rst).
SYSCTL_INT_MAX = 2**31 - 1
#: cclab's default: high enough that a receive buffer never limits a flow (the seeds set
#: 2^31-1; crates/cclab-sim/src/tcp/receive_window.rs `TCP_RMEM_MAX_BYTES` is the same).
DEFAULT_TCP_RMEM_MAX_BYTES = 512 * 1024 * 1024
#: `net.ipv4.tcp_wmem[1]`: the send buffer a socket starts with (Linux's default, which the kernel
#: engine keeps); the most autotuning grows it to may not be less.
TCP_WMEM_DEFAULT_BYTES = 16_384
#: cclab's default for `tcp_wmem[2]`, as for tcp_rmem: a send buffer never limits a flow.
DEFAULT_TCP_WMEM_MAX_BYTES = 512 * 1024 * 1024
DEFAULT_LOSS_RECOVERY = "rack"
#: The senders' egress qdisc: none (a veth's noqueue; TCP paces only the CCs that ask for it).
DEFAULT_SENDER_QDISC = "none"
#: `[host] mtu`: IPv4's minimum datagram every host accepts (RFC 791) to jumbo frames
#: (crates/cclab-sim/src/lib.rs MTU_RANGE_BYTES).
MIN_MTU_BYTES, MAX_MTU_BYTES = 576, 9000


def _check_tcp_rmem_max(text: str) -> str:
    value = parse_bytes(text)
    if not TCP_RMEM_DEFAULT_BYTES <= value <= SYSCTL_INT_MAX:
        raise ValueError(f"must be between tcp_rmem's default, 128KiB, and {SYSCTL_INT_MAX} bytes (got {text!r})")
    return text


def _check_tcp_wmem_max(text: str) -> str:
    value = parse_bytes(text)
    if not TCP_WMEM_DEFAULT_BYTES <= value <= SYSCTL_INT_MAX:
        raise ValueError(f"must be between tcp_wmem's default, 16KiB, and {SYSCTL_INT_MAX} bytes (got {text!r})")
    return text


#: A flow's `sndbuf`/`rcvbuf` when the kernel sizes the buffer itself (iperf3 without -w).
AUTOTUNE = "autotune"
#: setsockopt(SO_SNDBUF/SO_RCVBUF) takes an int and doubles it (net/core/sock.c clamps the value
#: to INT_MAX / 2 first).
MAX_SOCKET_BUFFER_BYTES = SYSCTL_INT_MAX // 2


def _check_socket_buffer(text: str) -> str:
    if text == AUTOTUNE:
        return text
    try:
        value = parse_bytes(text)
    except ValueError as error:
        raise ValueError(f'must be "{AUTOTUNE}" or a size in bytes: {error}') from None
    if not 1 <= value <= MAX_SOCKET_BUFFER_BYTES:
        raise ValueError(f'must be "{AUTOTUNE}" or between 1 and {MAX_SOCKET_BUFFER_BYTES} bytes (got {text!r})')
    return text


#: `flows[].sndbuf` / `rcvbuf`: iperf3's -w, the value given to setsockopt (which Linux doubles
#: and then stops autotuning), or "autotune".
SocketBuffer = Annotated[str, AfterValidator(_check_socket_buffer)]


def socket_buffer_bytes(text: str | None) -> int | None:
    """The setsockopt value of a flow's `sndbuf`/`rcvbuf`; None where the kernel autotunes."""
    return None if text is None or text == AUTOTUNE else parse_bytes(text)


class Host(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)

    tcp_rmem_max: Annotated[str, AfterValidator(_check_tcp_rmem_max)] | None = Field(
        default=None,
        description="net.ipv4.tcp_rmem's maximum: the most receive-buffer autotuning grows a socket to "
        "(default 512MiB, never limiting; Linux's stock value is 6MiB)",
    )

    tcp_wmem_max: Annotated[str, AfterValidator(_check_tcp_wmem_max)] | None = Field(
        default=None,
        description="net.ipv4.tcp_wmem's maximum: the most send-buffer autotuning grows a socket to "
        "(default 512MiB, never limiting; Linux's stock value is 4MiB)",
    )

    access_rate_mbps: float | None = Field(
        default=None,
        gt=0,
        description="the senders' NIC and access link (Mbit/s), which sends each packet at this rate to the "
        "bottleneck; default: the simulator's 10 Gbit/s (or 10x the bottleneck), the kernel engine's veth",
    )

    sender_qdisc: Literal["none", "fq", "pfifo_fast"] = Field(
        default="none",
        description='the senders\' egress qdisc: "none" (TCP paces only CCs that ask, as BBR), "fq" (paces every '
        'flow at its pacing rate, as BBR\'s FAQ recommends) or "pfifo_fast" (a FIFO of 1000 packets)',
    )

    mtu: int = Field(
        default=DEFAULT_MTU_BYTES,
        ge=MIN_MTU_BYTES,
        le=MAX_MTU_BYTES,
        description="every device's MTU in bytes (IP packet; 1500 is Ethernet's, 9000 jumbo frames): segments of "
        "mtu - 52 bytes, frames of mtu + 14 on the wire, `pkt` buffers counted in such frames",
    )

    loss_recovery: Literal["rack", "classic"] = Field(
        default="rack",
        description='net.ipv4.tcp_recovery: "rack" (RACK-TLP, 1, Linux\'s default) or "classic" (0: the duplicate-ACK '
        "scoreboard marks losses; TLP still probes, but a probe's SACK alone no longer repairs a tail loss)",
    )

    def resolve(self) -> dict[str, Any]:
        """The engine config's `host` table: the settings that differ from the default, in bytes."""
        resolved: dict[str, Any] = {}
        if self.tcp_rmem_max is not None and parse_bytes(self.tcp_rmem_max) != DEFAULT_TCP_RMEM_MAX_BYTES:
            resolved["tcp_rmem_max_bytes"] = parse_bytes(self.tcp_rmem_max)
        if self.tcp_wmem_max is not None and parse_bytes(self.tcp_wmem_max) != DEFAULT_TCP_WMEM_MAX_BYTES:
            resolved["tcp_wmem_max_bytes"] = parse_bytes(self.tcp_wmem_max)
        if self.access_rate_mbps is not None:
            resolved["access_rate_bps"] = self.access_rate_bps
        if self.sender_qdisc != DEFAULT_SENDER_QDISC:
            resolved["sender_qdisc"] = self.sender_qdisc
        if self.loss_recovery != DEFAULT_LOSS_RECOVERY:
            resolved["loss_recovery"] = self.loss_recovery
        if self.mtu != DEFAULT_MTU_BYTES:
            resolved["mtu_bytes"] = self.mtu
        return resolved

    @property
    def mss_bytes(self) -> int:
        return mss_bytes(self.mtu)

    @property
    def frame_bytes(self) -> int:
        return frame_bytes(self.mtu)

    @property
    def access_rate_bps(self) -> int | None:
        return None if self.access_rate_mbps is None else round(self.access_rate_mbps * 1e6)


def effective(host: dict[str, Any] | None) -> dict[str, Any]:
    """Every host setting an engine applies, from a config's `host` table (defaults filled)."""
    host = host or {}
    return {
        "tcp_rmem_max_bytes": int(host.get("tcp_rmem_max_bytes", DEFAULT_TCP_RMEM_MAX_BYTES)),
        "tcp_wmem_max_bytes": int(host.get("tcp_wmem_max_bytes", DEFAULT_TCP_WMEM_MAX_BYTES)),
        "access_rate_bps": host.get("access_rate_bps"),
        "sender_qdisc": str(host.get("sender_qdisc", DEFAULT_SENDER_QDISC)),
        "loss_recovery": str(host.get("loss_recovery", DEFAULT_LOSS_RECOVERY)),
        "mtu_bytes": int(host.get("mtu_bytes", DEFAULT_MTU_BYTES)),
    }

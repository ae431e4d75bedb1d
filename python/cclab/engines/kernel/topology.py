"""The dumbbell, built over netlink: one sender namespace per flow, a router, one receiver.

    s0 (eth0 10.200.1.2) ──veth── r:s0 (10.200.1.1) ┐
    s1 (eth0 10.200.2.2) ──veth── r:s1 (10.200.2.1) ┼─ r:rx (10.200.0.1) ──veth── rx (eth0 10.200.0.2)
    ...                                              ┘        tbf here

One namespace per flow gives every flow its own path delay (its own netem on r:s<i>, or its
own NFQUEUE queue on the router's ACK path), its own TCP_INFO sampler and its own per-namespace TCP counters.
Addresses are private and exist only on these veths.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cclab.engines.kernel.netns import RunNamespaces, iproute_in, ns_run
from cclab.spec.host import TCP_RMEM_DEFAULT_BYTES, TCP_WMEM_DEFAULT_BYTES, effective
from cclab.units import DEFAULT_MTU_BYTES, frame_bytes

#: Receiver side subnet 10.200.0.0/24; flow i's sender subnet is 10.200.(i+1).0/24.
SUBNET_PREFIX = "10.200"
MAX_FLOWS = 254
ROUTER_BOTTLENECK_IFNAME = "rx"
HOST_IFNAME = "eth0"
#: net.ipv4.tcp_recovery for each `[host] loss_recovery` (Documentation/networking/ip-sysctl.rst:
#: bit 0x1 turns RACK loss detection on, Linux's default since 4.18).
TCP_RECOVERY_SYSCTL = {"rack": "1", "classic": "0"}
#: The sysctls every host namespace gets besides those of `[host]` (host_sysctls).
HOST_SYSCTLS = {
    # A cached ssthresh/RTT from an earlier connection must not shape the next run.
    "net.ipv4.tcp_no_metrics_save": "1",
    # iperf3 sets -C only after connect(), so a socket first runs the namespace's
    # default CC. A child namespace inherits root's default; if that is BBR, bbr_init
    # sets sk_pacing_status = SK_PACING_NEEDED, which survives the switch, and "CUBIC"
    # then runs internally paced (measured: 272 vs 40 Mbit/s at 500M/200ms/100KB).
    # Reno is always allowed as a default and never asks for pacing.
    "net.ipv4.tcp_congestion_control": "reno",
}


def sender_ip(flow_index: int) -> str:
    return f"{SUBNET_PREFIX}.{flow_index + 1}.2"


def sender_gw(flow_index: int) -> str:
    return f"{SUBNET_PREFIX}.{flow_index + 1}.1"


RECEIVER_IP = f"{SUBNET_PREFIX}.0.2"
RECEIVER_GW = f"{SUBNET_PREFIX}.0.1"


@dataclass
class Topology:
    router: str
    receiver: str
    senders: list[str]
    bottleneck_ifindex: int = 0
    sender_ifnames: list[str] = field(default_factory=list)
    #: Every veth's MTU (`[host] mtu`).
    mtu_bytes: int = DEFAULT_MTU_BYTES

    @property
    def frame_bytes(self) -> int:
        """A full-sized frame as tbf counts it: the MTU + the Ethernet header."""
        return frame_bytes(self.mtu_bytes)


def _host_side(ns: str, address: str, gateway: str, mtu_bytes: int) -> None:
    with iproute_in(ns) as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=lo, state="up")
        idx = ipr.link_lookup(ifname=HOST_IFNAME)[0]
        ipr.addr("add", index=idx, address=address, prefixlen=24)
        ipr.link("set", index=idx, state="up", mtu=mtu_bytes)
        ipr.route("add", dst="0.0.0.0/0", gateway=gateway)


def build(namespaces: RunNamespaces, n_flows: int, mtu_bytes: int = DEFAULT_MTU_BYTES) -> Topology:
    if n_flows > MAX_FLOWS:
        raise ValueError(f"at most {MAX_FLOWS} flows")
    router = namespaces.create("r")
    receiver = namespaces.create("rx")
    senders = [namespaces.create(f"s{i}") for i in range(n_flows)]
    topo = Topology(router=router, receiver=receiver, senders=senders, mtu_bytes=mtu_bytes)
    with iproute_in(router) as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        ipr.link("set", index=lo, state="up")
        links = [(ROUTER_BOTTLENECK_IFNAME, receiver, RECEIVER_GW)]
        links += [(f"s{i}", ns, sender_gw(i)) for i, ns in enumerate(senders)]
        for ifname, peer_ns, address in links:
            ipr.link("add", ifname=ifname, kind="veth", peer={"ifname": HOST_IFNAME, "net_ns_fd": peer_ns})
            idx = ipr.link_lookup(ifname=ifname)[0]
            ipr.addr("add", index=idx, address=address, prefixlen=24)
            ipr.link("set", index=idx, state="up", mtu=mtu_bytes)
        topo.bottleneck_ifindex = ipr.link_lookup(ifname=ROUTER_BOTTLENECK_IFNAME)[0]
    topo.sender_ifnames = [f"s{i}" for i in range(n_flows)]
    _host_side(receiver, RECEIVER_IP, RECEIVER_GW, mtu_bytes)
    for i, ns in enumerate(senders):
        _host_side(ns, sender_ip(i), sender_gw(i), mtu_bytes)
    return topo


def host_sysctls(host: dict | None = None) -> dict[str, str]:
    """HOST_SYSCTLS with the config's `host` settings (spec/host.py) applied."""
    settings = effective(host)
    return {
        **HOST_SYSCTLS,
        "net.ipv4.tcp_rmem": f"4096 {TCP_RMEM_DEFAULT_BYTES} {settings['tcp_rmem_max_bytes']}",
        "net.ipv4.tcp_wmem": f"4096 {TCP_WMEM_DEFAULT_BYTES} {settings['tcp_wmem_max_bytes']}",
        "net.ipv4.tcp_recovery": TCP_RECOVERY_SYSCTL[settings["loss_recovery"]],
    }


def configure_hosts(topo: Topology, *, steer: bool = True, host: dict | None = None) -> None:
    """Per-namespace sysctls (with the config's `host` settings), offloads off where packets
    must be MTU-sized, and (`steer`, for the delay line) RPS steering of receive work off the
    delay line's CPU."""
    ns_run(topo.router, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    # The CC is chosen per socket (iperf3 -C): a child namespace may not set a default CC
    # outside tcp_allowed_congestion_control (EPERM), but root may pick any per socket;
    # the default is pinned to reno (see HOST_SYSCTLS).
    for ns in [topo.receiver, *topo.senders]:
        ns_run(ns, "sysctl", "-q", "-w", *[f"{k}={v}" for k, v in host_sysctls(host).items()])
    # TSO/GSO off on the senders so tbf and the loss rule act on MTU-sized packets
    # (with GSO on, one random drop removes a whole super-packet); GRO off on the router.
    for ns in topo.senders:
        ns_run(ns, "ethtool", "-K", HOST_IFNAME, "tso", "off", "gso", "off", "gro", "off")

    for ifname in [ROUTER_BOTTLENECK_IFNAME, *topo.sender_ifnames]:
        ns_run(topo.router, "ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off")
    if steer:
        steer_receive_work(topo)


#: net.ipv4.tcp_ecn (Documentation/networking/ip-sysctl.rst): 1 requests ECN on outgoing
#: connections (and accepts it), 0 never uses it, 2 (the kernel default) accepts it only
#: when the peer asks. Per namespace, and each flow has its own sender namespace, so each
#: flow gets its own setting; the receiver accepts whatever a sender asks for.
TCP_ECN_REQUEST, TCP_ECN_OFF, TCP_ECN_ACCEPT = "1", "0", "2"
#: Accurate ECN (RFC 9768): request it, and accept it or classic ECN (kernels with AccECN).
TCP_ECN_ACCURATE = "3"


def configure_ecn(topo: Topology, ecn_of_flow: list[bool], accecn_of_flow: list[bool] | None = None) -> None:
    """ECN per flow: the sender's namespace requests Accurate ECN (tcp_ecn = 3), RFC 3168 ECN
    (1), or never uses it (0); the receiver accepts what is asked (2, or 3 beside AccECN)."""
    accecn_of_flow = accecn_of_flow or [False] * len(ecn_of_flow)
    receiver = TCP_ECN_ACCURATE if any(accecn_of_flow) else TCP_ECN_ACCEPT
    ns_run(topo.receiver, "sysctl", "-q", "-w", f"net.ipv4.tcp_ecn={receiver}")
    for ns, ecn, accecn in zip(topo.senders, ecn_of_flow, accecn_of_flow, strict=True):
        mode = TCP_ECN_ACCURATE if accecn else TCP_ECN_REQUEST if ecn else TCP_ECN_OFF
        ns_run(ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_ecn={mode}")


def rps_mask() -> str | None:
    """CPU mask for veth receive work: every CPU but CPU0, which the delay line owns."""
    n_cpus = os.cpu_count() or 1
    if n_cpus < 2:
        return None
    return format(((1 << n_cpus) - 1) & ~1, "x")


def steer_receive_work(topo: Topology) -> None:
    """RPS: a released ACK runs the whole downstream chain inside the verdict call; moving
    veth receive processing off CPU0 keeps those calls short (docs/KERNEL_TESTBED.md)."""
    mask = rps_mask()
    if mask is None:
        return
    targets = [(topo.router, name) for name in [ROUTER_BOTTLENECK_IFNAME, *topo.sender_ifnames]]
    targets += [(ns, HOST_IFNAME) for ns in [topo.receiver, *topo.senders]]
    for ns, ifname in targets:
        ns_run(ns, "tee", f"/sys/class/net/{ifname}/queues/rx-0/rps_cpus", input_text=mask)


def device_mtu_bytes(ns: str, ifname: str = HOST_IFNAME) -> int | None:
    """The MTU the kernel has on a device (what the run used, not what was asked)."""
    text = ns_run(ns, "cat", f"/sys/class/net/{ifname}/mtu", check=False).strip()
    return int(text) if text.isdigit() else None


def offload_state(ns: str, ifname: str = HOST_IFNAME) -> dict[str, str]:
    text = ns_run(ns, "ethtool", "-k", ifname, check=False)
    wanted = {
        "tcp-segmentation-offload": "tso",
        "generic-segmentation-offload": "gso",
        "generic-receive-offload": "gro",
    }
    state = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in wanted:
            state[wanted[key.strip()]] = value.split()[0] if value.split() else ""
    return state

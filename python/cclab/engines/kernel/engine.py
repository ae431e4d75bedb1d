"""`run()`: one resolved config on real Linux TCP in network namespaces.

Order: preflight (which picks the delay mechanism and where the AQM runs, aqm.py), the host-wide run lock (runlock.py:
one kernel run at a time, held until teardown is done), stale cleanup (namespaces and
BPF congestion controls), building and registering BBR at other gains (bpf_cc.py), namespaces and veths,
host settings (and tcp_ecn per sender), tbf (with the kernel's AQM qdisc as its child, or
as a fast pass-through when cclab's userspace bottleneck in the delay line process shapes and
queues), counters and loss rules, delay (netem on the router's interfaces towards
the senders, or the NFQUEUE delay line), idle-RTT ping, iperf3 servers (unbounded flows) and
the finite-flow receiver with its SYN clock (finite.py), samplers, clients at their start
times, wait (finite flows still going at the end of the run are stopped there), counters,
teardown. Teardown runs on success, failure, exception,
SIGINT and SIGTERM (handlers raise into the `finally`), and from atexit as a last resort;
it unregisters the run's BPF congestion controls after the namespaces (and their sockets) are gone.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cclab.engines.kernel import aqm, assemble, bpf_cc, finite, link_changes, netem, probes, shaping, topology, traffic, user_cc
from cclab.engines.kernel.delayline import DelayLine, bottleneck_args, queues_for
from cclab.engines.kernel.errors import KernelEngineError
from cclab.engines.kernel.netns import RunNamespaces, cleanup_stale, new_run_id, ns_run
from cclab.engines.kernel.kconfig import kernel_config
from cclab.engines.kernel.preflight import preflight
from cclab.engines.kernel.provenance import provenance
from cclab.engines.kernel.runlock import exclusive_run
from cclab.spec.host import effective

#: The queue probe never polls faster than this (a dump costs ~50-100 µs of Python).
MIN_QUEUE_INTERVAL_S = 0.001
IDLE_PINGS = 5


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a run; raised so that teardown runs."""


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise Interrupted(f"signal {signum}")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


# iperf3 connects its control socket and exchanges parameters (cookie, JSON, stream
# creation) before it connects the data socket: measured on this engine, the data SYN
# leaves about IPERF3_CONTROL_RTTS path RTTs plus IPERF3_LAUNCH_S after the client is
# launched (see tests/kernel/test_kernel_flow_start.py). Then its first data byte waits
# IPERF3_DATA_START_RTTS more (the SYN's round trip, the data socket's cookie and the
# server's start message), where the simulator's waits one (the handshake).
IPERF3_CONTROL_RTTS = 3.0
IPERF3_DATA_START_RTTS = 2.0
IPERF3_LAUNCH_S = 0.005


def launch_lead_s(path_rtt_ns: int, *, finite: bool) -> float:
    """How long before a flow's start time its iperf3 client is launched: so that a bulk
    flow's first data byte leaves one path RTT after its start, as in the simulator (its
    SYN one RTT before the start), and a finite flow's SYN leaves at its start, since its
    completion time counts from the SYN."""
    rtts = IPERF3_CONTROL_RTTS + (0.0 if finite else IPERF3_DATA_START_RTTS - 1.0)
    return rtts * path_rtt_ns / 1e9 + IPERF3_LAUNCH_S


def _idle_rtt_ms(sender_ns: str, count: int) -> float | None:
    out = ns_run(sender_ns, "ping", "-n", "-q", "-c", str(count), "-i", "0.05", topology.RECEIVER_IP, check=False)
    m = re.search(r"= ([\d.]+)/([\d.]+)/", out)
    return float(m.group(1)) if m else None


class _Started:
    """What a run started that teardown must stop even if the run raises midway."""

    def __init__(self) -> None:
        self.procs: list = []
        self.delay_line: DelayLine | None = None
        self.sampler = None
        self.receiver: finite.Receiver | None = None
        self.start_clock: finite.StartClock | None = None
        self.link_changer: link_changes.LinkChanger | None = None

    def stop_all(self) -> None:
        if self.link_changer is not None:
            self.link_changer.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self.start_clock is not None:
            self.start_clock.stop()
        if self.receiver is not None:
            self.receiver.stop()
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(Exception):
                p.wait(timeout=5)
        if self.delay_line is not None:
            self.delay_line.stop()


def _run_tasks(started: _Started) -> dict[int, str]:
    """The run's tasks started so far (senders register as they start), and ksoftirqd."""
    tasks = {p.pid: "iperf3 receiver" for p in started.procs}
    if started.delay_line is not None:
        tasks[started.delay_line.proc.pid] = "delay line"
    if started.receiver is not None:
        tasks[started.receiver.proc.pid] = "finite-flow receiver"
    return {**tasks, **probes.ksoftirqd_pids()}


def run(config: dict, *, progress: Callable[[dict], None] | None = None) -> dict:
    """Runs `config` (docs/ARCHITECTURE.md) and returns the result dict, with `validity`
    and `provenance`. Raises KernelEngineError if it cannot run here."""
    preflight(config)
    with exclusive_run():
        return _run_locked(config, progress)


def _run_locked(config: dict, progress: Callable[[dict], None] | None) -> dict:
    choice = netem.choose(config)  # the probe result is cached: no second scratch namespace
    aqm_choice = aqm.choose(config)  # likewise cached per qdisc kind
    cleanup_stale()
    bpf_cc.cleanup_stale()
    namespaces = RunNamespaces(new_run_id())
    ccs = bpf_cc.RunCcs(namespaces.run_id)
    atexit.register(namespaces.destroy)
    atexit.register(ccs.unregister_all)
    workdir = Path(tempfile.mkdtemp(prefix=f"cclab-{namespaces.run_id}-"))
    started = _Started()
    try:
        with _signals_raise():
            try:
                needed = user_cc.bpf_names(config)
                if needed:
                    defines = {} if all(user_cc.is_user_name(n) for n in needed) else bpf_cc.kernel_defines(kernel_config())
                    ccs.register(needed, defines, user_cc.prebuilt(config))
                result = _run(config, choice, aqm_choice, namespaces, workdir, started, progress)
                if ccs.objects:
                    result["provenance"]["bpf_congestion_controls"] = ccs.describe()
                    if counts := ccs.read_state_counts():
                        result["provenance"]["bpf_cc_state_acks"] = counts
                result["provenance"].update(cc_provenance(config))
                return result
            finally:
                started.stop_all()
                namespaces.destroy()  # no socket uses a BPF CC after this
                ccs.unregister_all()
    finally:
        namespaces.destroy()
        ccs.unregister_all()
        atexit.unregister(namespaces.destroy)
        atexit.unregister(ccs.unregister_all)
        shutil.rmtree(workdir, ignore_errors=True)


def _run(  # noqa: PLR0915
    config: dict,
    choice: netem.DelayChoice,
    aqm_choice: aqm.AqmChoice,
    namespaces: RunNamespaces,
    workdir: Path,
    started: _Started,
    progress,  # noqa: ANN001
) -> dict:
    from cclab.engines.kernel.sampler import Sampler

    wall0 = time.monotonic()
    b = config["bottleneck"]
    flows = config["flows"]
    rate_bps, rtt_ns = int(b["rate_bps"]), int(b["rtt_ns"])
    duration_ns = int(config["duration_ns"])
    loss_p = float(b.get("loss_probability") or 0.0)

    def report(phase: str, **extra: object) -> None:
        if progress is not None:
            progress({"phase": phase, **extra})

    report("setup", delay_mechanism=choice.mechanism, aqm_implementation=aqm_choice.implementation)
    use_netem = choice.mechanism == netem.NETEM
    userspace = aqm_choice.userspace
    ecn_of_flow = [bool(f.get("ecn")) for f in flows]
    host = effective(config.get("host"))
    topo = topology.build(namespaces, len(flows), host["mtu_bytes"])
    # The delay line and the userspace bottleneck both own CPU0: steer receive work off it.
    topology.configure_hosts(topo, steer=not use_netem or userspace, host=config.get("host"))
    topology.configure_ecn(topo, ecn_of_flow, [bool(f.get("accecn")) for f in flows])
    if host["access_rate_bps"] is not None:
        shaping.install_access_links(topo, host["access_rate_bps"])
    if host["sender_qdisc"] != "none":
        shaping.install_sender_qdiscs(topo, host["sender_qdisc"], under_access_link=host["access_rate_bps"] is not None)
    limit_bytes = shaping.queue_limit_bytes(b, topo.frame_bytes)
    tbf_rate_bps = rate_bps * aqm.PASSTHROUGH_RATE_FACTOR if userspace else rate_bps
    shaping.install_tbf(topo, tbf_rate_bps, limit_bytes)
    aqm_cfg = aqm.aqm_of(config)
    kernel_aqm_args, hard_limit = None, None
    if not userspace and aqm_cfg["kind"] != aqm.FIFO:
        kernel_aqm_args, hard_limit = aqm.kernel_qdisc_args(topology.ROUTER_BOTTLENECK_IFNAME, aqm_cfg, b, rate_bps, topo.frame_bytes)
        try:
            ns_run(topo.router, *kernel_aqm_args)
        except RuntimeError as error:
            raise KernelEngineError(f"the {aqm_cfg['kind']} qdisc could not be added under tbf: {error}") from error
    elif userspace:
        hard_limit = "the scenario's buffer, as a tail drop before the qdisc's enqueue (frames = IP length + 14)"
    ports = traffic.ports_for(len(flows))
    shaping.install_counters_and_loss(topo, ports, loss_p, count_ce=any(ecn_of_flow), loss_rules=link_changes.schedules_loss(config))
    delays = [rtt_ns + int(f.get("extra_rtt_ns") or 0) for f in flows]
    netem_qdiscs: list[netem.NetemQdisc] = []
    delay_of_queue: dict[int, int] = {}
    queue_of_flow: list[int] = []
    extra_args = bottleneck_args(aqm.USERSPACE_QUEUE, config, shaping.tbf_burst_bytes(rate_bps, topo.frame_bytes)) if userspace else []
    if link_changes.has_changes(config):
        extra_args += ["--schedule-file", str(workdir / "schedule.json")]
    if use_netem:
        netem_qdiscs = netem.install(topo.router, topo.sender_ifnames, delays, rate_bps)
        if userspace:
            started.delay_line = DelayLine(topo.router, {}, workdir, extra_args)
    else:
        queue_of_flow, delay_of_queue = queues_for(delays)
        started.delay_line = DelayLine(topo.router, delay_of_queue, workdir, extra_args)
        shaping.install_delay_rules(topo, queue_of_flow)
    if userspace:
        shaping.install_bottleneck_rules(topo, aqm.USERSPACE_QUEUE)

    idle_rtt = {f["flow_id"]: _idle_rtt_ms(topo.senders[i], IDLE_PINGS) for i, f in enumerate(flows)}

    plans = [
        traffic.FlowPlan(
            flow_id=f["flow_id"], index=i, cc=f["cc"], kernel_cc=user_cc.kernel_cc_of(f),
            start_s=f["start_ns"] / 1e9, sender_ns=topo.senders[i],
            ports=ports[i], seconds=None if f.get("size_bytes") else traffic.plan_seconds(duration_ns, f["start_ns"]),
            size_bytes=f.get("size_bytes"), sndbuf_bytes=f.get("sndbuf_bytes"), rcvbuf_bytes=f.get("rcvbuf_bytes"),
        )  # fmt: skip
        for i, f in enumerate(flows)
    ]
    started.procs += traffic.start_servers(topo.receiver, plans, workdir)
    finite_plans = [p for p in plans if p.size_bytes is not None]
    if finite_plans:
        started.receiver = finite.Receiver(topo.receiver, finite_plans, workdir)
    # Every flow's data SYN and first data segment are stamped: finite flows count their FCT
    # from the SYN, and both go into provenance (`cclab validate` pairs starts on the data).
    started.start_clock = finite.StartClock(plans)
    traffic.wait_listening(topo.receiver, plans)

    flow_probes = {p.flow_id: probes.TcpInfoProbe(p.sender_ns, p.ports.client) for p in plans}
    child_kind = aqm_cfg["kind"] if kernel_aqm_args else None
    tbf_probe = probes.TbfProbe(topo.router, topo.bottleneck_ifindex, child_kind)
    tbf_first = tbf_probe.sample()
    softnet0, steal0 = probes.softnet_dropped_per_cpu(), probes.cpu_steal_per_cpu()
    started.sampler = sampler = Sampler(
        flow_probes,
        tbf_probe,
        flow_interval_s=config.get("flow_sample_interval_ns", 100_000_000) / 1e9,
        queue_interval_s=max(MIN_QUEUE_INTERVAL_S, config.get("queue_sample_interval_ns", 1_000_000) / 1e9),
    )

    report("running", total_s=duration_ns / 1e9)
    # Each client is launched early by its control phase (launch_lead_s), so that its data
    # starts when the simulator's would; t0 (the run's time zero) lies that far after the
    # first launch.
    lead_s = {p.flow_id: launch_lead_s(delay_ns, finite=p.size_bytes is not None) for p, delay_ns in zip(plans, delays, strict=True)}
    t0 = time.monotonic() + max(lead_s[p.flow_id] - p.start_s for p in plans) if plans else time.monotonic()
    sampler.cpu_wait.watch_all(_run_tasks(started))
    sampler.start(t0)
    # The userspace bottleneck stamps its series with CLOCK_REALTIME.
    t0_realtime = time.time() - (time.monotonic() - t0)
    if link_changes.has_changes(config):
        started.link_changer = link_changes.LinkChanger(
            config, topo, ports, userspace, started.delay_line, queue_of_flow, netem_qdiscs, workdir
        )
        started.link_changer.start(t0)
    if started.receiver is not None:
        started.receiver.set_run_end(t0 + duration_ns / 1e9)
    clients: dict[int, object] = {}
    pending = sorted(plans, key=lambda p: p.start_s - lead_s[p.flow_id])
    deadline = traffic.client_deadline_s(plans, duration_ns, max(delays) / 1e9)
    # A finite flow still going at the end of the run is stopped there, as the simulator
    # stops it: not completed, with the bytes that arrived until then.
    cut_at_end: set[int] = set()
    last_report = 0.0
    # The per-flow packet counters at the end of the warm-up start the measured window.
    warmup_s = config.get("warmup_ns", 0) / 1e9
    at_warmup: tuple[dict, dict] | None = None
    while pending or any(c.poll() is None for c in clients.values()):
        now = time.monotonic() - t0
        while pending and pending[0].start_s - lead_s[pending[0].flow_id] <= now:
            p = pending.pop(0)
            clients[p.flow_id] = traffic.start_client(p, workdir)
            started.procs.append(clients[p.flow_id])
            sampler.cpu_wait.watch(clients[p.flow_id].pid, "iperf3 sender")
        if now > duration_ns / 1e9:
            for p in finite_plans:
                c = clients.get(p.flow_id)
                if c is not None and c.poll() is None:
                    finite.stop_at_run_end(p, c)
                    cut_at_end.add(p.flow_id)
        if at_warmup is None and 0 < warmup_s <= now:
            at_warmup = (shaping.read_counters(topo.router), shaping.read_counters(topo.receiver))
        if now > deadline:
            break
        if started.delay_line is not None and not started.delay_line.alive():
            break
        if now - last_report >= 1.0:
            report("running", elapsed_s=round(now, 1), total_s=duration_ns / 1e9)
            last_report = now
        time.sleep(0.01)
    timed_out = any(c.poll() is None for c in clients.values())
    for c in clients.values():
        if c.poll() is None:
            c.kill()
    sampler.stop()
    started.sampler = None
    changer, started.link_changer = started.link_changer, None
    if changer is not None:
        changer.stop()
    syn_s: dict[int, float] = {}
    data_s: dict[int, float] = {}
    received: dict[int, dict] = {}
    receiver_cpu_s = None
    if started.start_clock is not None:
        syn_stamps, data_stamps = started.start_clock.stop()
        syn_s = {fid: t - t0 for fid, t in syn_stamps.items()}
        data_s = {fid: t - t0 for fid, t in data_stamps.items()}
        started.start_clock = None
    if started.receiver is not None:
        received = _relative_to(started.receiver.stop(), t0)
        receiver_cpu_s = started.receiver.cpu_s
        if not received:
            raise KernelEngineError(f"the finite-flow receiver wrote no report: {started.receiver.log_tail()}")
        started.receiver = None
    if cut_at_end and userspace:
        aqm.wait_userspace_queue_empty(topo.router, finite.QUEUE_DRAIN_TIMEOUT_S)
    if cut_at_end:
        drain_probe = probes.TbfProbe(topo.router, topo.bottleneck_ifindex)
        try:
            finite.wait_queue_empty(drain_probe)
        finally:
            drain_probe.close()
    # iperf3 takes its retransmit count when the client has written the last byte, before
    # the tail is delivered; the sender namespace's counter covers the whole connection.
    sender_retrans = {p.flow_id: probes.tcp_retrans_segs(p.sender_ns) for p in finite_plans}
    tbf_last = tbf_probe_final(topo)
    softnet_per_cpu = [after - before for before, after in zip(softnet0, probes.softnet_dropped_per_cpu(), strict=False)]
    steal_per_cpu = [(s1 - s0) / max(1, t1 - t0) for (s0, t0), (s1, t1) in zip(steal0, probes.cpu_steal_per_cpu(), strict=False)]
    softnet_growth = sum(softnet_per_cpu)
    died = started.delay_line is not None and not started.delay_line.alive()
    delay_report = started.delay_line.stop() if started.delay_line is not None else None
    started.delay_line = None
    netem_stats = netem.read_stats(topo.router, netem_qdiscs)
    aqm_counters = None
    if kernel_aqm_args:
        tc_json = ns_run(topo.router, "tc", "-s", "-j", "qdisc", "show", "dev", topology.ROUTER_BOTTLENECK_IFNAME)
        aqm_counters = aqm.counters_from_tc_json(tc_json, aqm_cfg["kind"])
    router_counters = shaping.read_counters(topo.router)
    receiver_counters = shaping.read_counters(topo.receiver)
    client_reports = {p.flow_id: traffic.read_client(workdir / f"client{p.index}.json") for p in plans}
    if timed_out:
        for p in plans:
            if not client_reports[p.flow_id].ok and p.flow_id not in cut_at_end:
                client_reports[p.flow_id].error = f"did not finish within {deadline:.0f} s"

    report("assembling")
    m = assemble.Measured(
        plans=plans, clients=client_reports, router_counters=router_counters, receiver_counters=receiver_counters,
        sampler=sampler, tbf_first=tbf_first, tbf_last=tbf_last, delay_report=delay_report,
        delay_line_died=died, softnet_growth=softnet_growth, softnet_growth_per_cpu=softnet_per_cpu,
        steal_fraction_per_cpu=steal_per_cpu, rate_bps=rate_bps, rtt_ns=rtt_ns,
        duration_s=duration_ns / 1e9, wall_s=time.monotonic() - wall0,
        queue_limit_bytes=b.get("queue_limit_bytes"), queue_limit_packets=b.get("queue_limit_packets"), frame_bytes=topo.frame_bytes,
        delay_mechanism=choice.mechanism, netem_qdiscs=netem_qdiscs, netem_stats=netem_stats,
        syn_s=syn_s, received=received, cut_at_end=cut_at_end, sender_retrans=sender_retrans,
        receiver_cpu_s=receiver_cpu_s, aqm_kind=aqm_cfg["kind"], aqm_userspace=userspace,
        aqm_counters=aqm_counters, t0_realtime=t0_realtime, ecn_of_flow=ecn_of_flow, link=b,
        warmup_s=warmup_s, router_at_warmup=at_warmup and at_warmup[0], receiver_at_warmup=at_warmup and at_warmup[1],
    )  # fmt: skip
    flow_results = [assemble.flow_result(m, p) for p in plans]
    qs = assemble.queue_series(m)
    bn = assemble.bottleneck(m, flow_results, qs)
    # Validity checks the whole run (retransmissions against drops); results report the window.
    run_validity = assemble.validity(m, flow_results, bn, qs)
    link_report = changer.report(delay_report) if changer is not None else None
    if link_report is not None:
        reasons = run_validity["reasons"] + link_changes.lateness_reasons(link_report)
        run_validity = {**run_validity, "valid": not reasons, "reasons": reasons}
    flow_results, bn = assemble.windowed(m, flow_results, bn, qs)
    events = {"time_s": [], "flow_id": [], "kind": [], "detail": []}
    for f in flow_results:
        for t, kind in ((f["start_s"], "flow_start"), (f["end_s"], "flow_end")):
            events["time_s"].append(t)
            events["flow_id"].append(f["flow_id"])
            events["kind"].append(kind)
            events["detail"].append("")
    result = {
        "flows": flow_results,
        "bottleneck": bn,
        "flow_series": assemble.flow_series(m),
        "queue_series": qs,
        "events": events,
        "stats": {"events_processed": 0, "data_packets": m.tbf_last.packets - m.tbf_first.packets,
                  "sim_wall_s": m.wall_s},
        "validity": run_validity,
        "provenance": {
            **provenance(config, topo, m, idle_rtt, delay_report, limit_bytes, delay_of_queue, choice),
            "aqm": aqm.describe(aqm_choice, aqm_cfg, kernel_args=kernel_aqm_args, hard_limit=hard_limit,
                                counters=aqm_counters),
            **({"link_changes": link_report} if link_report is not None else {}),
            "flow_starts": [
                {"flow_id": p.flow_id, "planned_s": p.start_s, "launch_lead_s": round(lead_s[p.flow_id], 6),
                 "data_syn_s": None if p.flow_id not in syn_s else round(syn_s[p.flow_id], 6),
                 "first_data_s": None if p.flow_id not in data_s else round(data_s[p.flow_id], 6)}
                for p in plans
            ],
        },
    }  # fmt: skip
    report("done")
    return result


def cc_provenance(config: dict) -> dict:
    """Which implementation ran each BBRv2/v3 flow ("native" or "bpf-port", CONTRACT.md),
    the kernel CC it selected, and how a native version was told apart from BBRv1."""
    native = bpf_cc.host_native_versions()
    impl, detail = {}, {}
    for f in config["flows"]:
        if "bpf_source" in f:
            impl[f["cc"]] = "bpf-source"
            detail[f["cc"]] = {"kernel_cc": user_cc.kernel_name(f["bpf_source"]), "why": f"built from {f['bpf_source']['path']}",
                               "sha256": f["bpf_source"]["sha256"]}  # fmt: skip
        elif f["cc"] in bpf_cc.NATIVE_NAMES or (f["cc"] == "bbr" and "bbr3" in native):
            kernel_cc = bpf_cc.kernel_cc_name(f["cc"], f.get("probe_bw_gain"))
            impl[f["cc"]] = bpf_cc.implementation(kernel_cc)
            how = native.get(f["cc"]) if impl[f["cc"]] == "native" else "not in this kernel"
            if f["cc"] == "bbr":
                how = native["bbr3"]  # BBRv1 on a v3 kernel: its `bbr` is v3
            detail[f["cc"]] = {"kernel_cc": kernel_cc, "why": how}
    return {"cc_implementation": impl, "cc_implementation_detail": detail} if impl else {}


def _relative_to(records: dict[int, dict], t0: float) -> dict[int, dict]:
    """The receiver's monotonic times as seconds since the run's t0."""
    keys = ("accept_s", "last_byte_s", "last_byte_read_s", "latest_s")
    return {fid: {**r, **{k: r[k] - t0 for k in keys if r.get(k) is not None}} for fid, r in records.items()}


def tbf_probe_final(topo: topology.Topology) -> probes.QdiscStats:
    probe = probes.TbfProbe(topo.router, topo.bottleneck_ifindex)
    try:
        stats = probe.sample()
    finally:
        probe.close()
    if stats is None:
        raise KernelEngineError("the bottleneck tbf disappeared during the run")
    return stats

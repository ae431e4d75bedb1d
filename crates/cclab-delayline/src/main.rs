//! cclab-delayline: adds a fixed delay to the packets of one or more NFQUEUE queues.
//!
//! cclab's kernel engine uses it where sch_netem is missing: an iptables rule in the router
//! namespace sends the ACK direction to a queue (without --queue-bypass, so packets are
//! dropped rather than passed undelayed if this program is gone), and this program holds
//! each packet's verdict until its kernel receive time plus the queue's delay. Packets of a
//! queue leave in FIFO order with one batch verdict per release, so the line cannot reorder.
//!
//! With `--bottleneck`, the same process also runs the userspace bottleneck (bottleneck.rs)
//! on one more queue: the router's data direction, shaped by a token bucket and queued by a
//! cclab-aqm queue discipline. One process, one event loop on the delay line's CPU: both
//! sleep until the next due release, and releasing data and ACKs from one thread keeps
//! their verdicts in time order.
//!
//! Usage: cclab-delayline [--queue NUM:DELAY_NS ...] [--cpu N] [--maxlen PKTS]
//!        [--wake-offset-ns N] [--ready-file PATH] [--report PATH]
//!        [--bottleneck NUM --rate-bps N --burst-bytes N (--limit-bytes N | --limit-packets N)
//!         --aqm-json JSON [--seed N] [--series-interval-ns N]]
//!        [--schedule-file PATH]   (read on SIGUSR1: link changes at absolute times and a
//!                                  trace to replay, link.rs)
//!        cclab-delayline --check-aqm JSON   (exit 0 if this build has that AQM, else 2)
//! On SIGINT/SIGTERM it writes its counters as JSON to --report (or stdout) and exits.

mod bottleneck;
mod ipv4;
mod link;
mod nfq;
mod report;
mod rt;
mod shaper;

use bottleneck::{Bottleneck, BottleneckConfig, Verdict};
use cclab_aqm::{AqmConfig, QueueLimit};

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// Kernel-side queue length: 1 Gbit/s x 200 ms held 15-21 k ACKs on this kind of machine
/// (docs/KERNEL_TESTBED.md); the default of 1024 would drop them.
const DEFAULT_QUEUE_MAXLEN_PKTS: u32 = 400_000;
/// Netlink receive buffer, forced past rmem_max (4 MB and read-only in child namespaces).
const NETLINK_RCVBUF_BYTES: i32 = 64 << 20;
/// Below this remaining time, spin on the clock instead of sleeping once more.
const SPIN_BELOW_NS: i64 = 10_000;
/// SCHED_FIFO priority: above normal tasks, below kernel threads' default RT priorities.
const FIFO_PRIORITY: i32 = 50;
/// Bytes of each bottleneck packet copied to user space: the whole packet, because a CE
/// mark is written back as the packet's new bytes and a shorter payload would trim the skb
/// (nfqnl_mangle). MTU-sized packets only (at most 9000 bytes): the senders' offloads are off.
const BOTTLENECK_COPY_BYTES: u32 = 65_535;
/// Default queue-occupancy sampling interval of the bottleneck (the engine passes its own).
const DEFAULT_SERIES_INTERVAL_NS: i64 = 1_000_000;

struct Held {
    id: u32,
    due_ns: i64,
}

pub struct Line {
    pub queue: u16,
    pub delay_ns: i64,
    fifo: VecDeque<Held>,
    pub packets: u64,
    pub max_held: usize,
}

pub struct Options {
    lines: Vec<(u16, i64)>,
    cpu: Option<usize>,
    maxlen: u32,
    wake_offset_ns: Option<i64>,
    ready_file: Option<String>,
    report: Option<String>,
    bottleneck: Option<u16>,
    rate_bps: Option<u64>,
    burst_bytes: Option<u64>,
    limit: Option<QueueLimit>,
    aqm: Option<AqmConfig>,
    seed: u64,
    series_interval_ns: i64,
    schedule_file: Option<String>,
    /// `psched_mtu(dev)` of the bottleneck's device: its MTU with the Ethernet header.
    psched_mtu_bytes: u32,
}

fn parse_aqm(json: &str) -> Result<AqmConfig, String> {
    serde_json::from_str(json).map_err(|e| format!("bottleneck.aqm: {e}"))
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        lines: vec![],
        cpu: None,
        maxlen: DEFAULT_QUEUE_MAXLEN_PKTS,
        wake_offset_ns: None,
        ready_file: None,
        report: None,
        bottleneck: None,
        rate_bps: None,
        burst_bytes: None,
        limit: None,
        aqm: None,
        seed: 1,
        series_interval_ns: DEFAULT_SERIES_INTERVAL_NS,
        schedule_file: None,
        psched_mtu_bytes: cclab_aqm::PSCHED_MTU_BYTES,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--queue" => {
                let v = val()?;
                let (q, d) = v.split_once(':').ok_or("--queue takes NUM:DELAY_NS")?;
                let q = q.parse().map_err(|_| format!("bad queue number {q}"))?;
                let d = d.parse().map_err(|_| format!("bad delay {d}"))?;
                o.lines.push((q, d));
            }
            "--cpu" => o.cpu = Some(val()?.parse().map_err(|_| "bad --cpu")?),
            "--maxlen" => o.maxlen = val()?.parse().map_err(|_| "bad --maxlen")?,
            "--wake-offset-ns" => {
                o.wake_offset_ns = Some(val()?.parse().map_err(|_| "bad --wake-offset-ns")?)
            }
            "--ready-file" => o.ready_file = Some(val()?),
            "--report" => o.report = Some(val()?),
            "--bottleneck" => o.bottleneck = Some(val()?.parse().map_err(|_| "bad --bottleneck")?),
            "--rate-bps" => o.rate_bps = Some(val()?.parse().map_err(|_| "bad --rate-bps")?),
            "--burst-bytes" => o.burst_bytes = Some(val()?.parse().map_err(|_| "bad --burst-bytes")?),
            "--psched-mtu-bytes" => o.psched_mtu_bytes = val()?.parse().map_err(|_| "bad --psched-mtu-bytes")?,
            "--limit-bytes" => o.limit = Some(QueueLimit::Bytes(val()?.parse().map_err(|_| "bad --limit-bytes")?)),
            "--limit-packets" => {
                o.limit = Some(QueueLimit::Packets(val()?.parse().map_err(|_| "bad --limit-packets")?))
            }
            "--aqm-json" => o.aqm = Some(parse_aqm(&val()?)?),
            "--seed" => o.seed = val()?.parse().map_err(|_| "bad --seed")?,
            "--series-interval-ns" => {
                o.series_interval_ns = val()?.parse().map_err(|_| "bad --series-interval-ns")?
            }
            "--schedule-file" => o.schedule_file = Some(val()?),
            "--check-aqm" => {
                let aqm = parse_aqm(&val()?)?;
                println!("{}", aqm.name());
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    if o.lines.is_empty() && o.bottleneck.is_none() {
        return Err("at least one --queue NUM:DELAY_NS or a --bottleneck is required".into());
    }
    if o.bottleneck.is_some() {
        if o.rate_bps.unwrap_or(0) == 0 || o.burst_bytes.is_none() || o.limit.is_none() || o.aqm.is_none() {
            return Err("--bottleneck needs --rate-bps, --burst-bytes, --limit-bytes or --limit-packets, --aqm-json".into());
        }
        if o.series_interval_ns <= 0 {
            return Err("--series-interval-ns must be positive".into());
        }
    }
    Ok(o)
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cclab-delayline: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(opts) {
        eprintln!("cclab-delayline: {e}");
        std::process::exit(1);
    }
}

fn run(opts: Options) -> std::io::Result<()> {
    rt::install_signal_handlers();
    let mut setup_warnings = vec![];
    if let Some(cpu) = opts.cpu {
        if let Err(e) = rt::pin_to_cpu(cpu) {
            setup_warnings.push(format!("pin to cpu {cpu}: {e}"));
        }
    }
    if let Err(e) = rt::set_timer_slack_1ns() {
        setup_warnings.push(format!("timer slack: {e}"));
    }
    if let Err(e) = rt::set_fifo(FIFO_PRIORITY) {
        setup_warnings.push(format!("SCHED_FIFO: {e}"));
    }
    let _tstamp_fd = rt::enable_rx_timestamps()?;
    let wake_offset_ns = opts.wake_offset_ns.unwrap_or_else(|| rt::calibrate_wake_offset_ns(101));

    let mut sock = nfq::NfQueueSocket::open(NETLINK_RCVBUF_BYTES)?;
    let mut lines: Vec<Line> = Vec::new();
    for &(queue, delay_ns) in &opts.lines {
        sock.bind_queue(queue, opts.maxlen, nfq::CopyMode::Meta)?;
        lines.push(Line { queue, delay_ns, fifo: VecDeque::new(), packets: 0, max_held: 0 });
    }
    let mut bottleneck = match opts.bottleneck {
        Some(queue) => {
            sock.bind_queue(queue, opts.maxlen, nfq::CopyMode::Packet(BOTTLENECK_COPY_BYTES))?;
            let cfg = BottleneckConfig {
                queue,
                rate_bps: opts.rate_bps.unwrap(),
                burst_bytes: opts.burst_bytes.unwrap(),
                limit: opts.limit.unwrap(),
                aqm: opts.aqm.clone().unwrap(),
                seed: opts.seed,
                series_interval_ns: opts.series_interval_ns,
                psched_mtu_bytes: opts.psched_mtu_bytes,
            };
            Some(Bottleneck::new(cfg, rt::realtime_ns()))
        }
        None => None,
    };
    let mut verdicts: Vec<Verdict> = Vec::new();
    let mut batch: Vec<u8> = Vec::with_capacity(1 << 16);
    if let Some(path) = &opts.ready_file {
        std::fs::write(path, format!("{}\n", std::process::id()))?;
    }

    let mut stats = report::Stats::default();
    let mut arrivals = Vec::with_capacity(4096);
    let mut schedule = link::Schedule::default();
    let mut schedule_errors: Vec<String> = Vec::new();
    while !rt::STOP.load(Ordering::Relaxed) {
        if rt::SCHEDULE_READY.swap(false, Ordering::SeqCst) {
            match opts.schedule_file.as_deref().map(link::Schedule::read) {
                Some(Ok(file)) => {
                    if let (Some(trace), Some(b)) = (file.trace, bottleneck.as_mut()) {
                        b.start_trace(cclab_aqm::delivery_trace::DeliveryTrace::new(&trace.times_ms), trace.start_ns);
                    }
                    schedule.set(file.changes);
                }
                Some(Err(e)) => schedule_errors.push(e),
                None => schedule_errors.push("SIGUSR1 without --schedule-file".into()),
            }
        }
        // Link changes due now, before anything is released under the old values.
        for change in schedule.take_due(rt::realtime_ns()) {
            if let (Some(b), Some(rate)) = (bottleneck.as_mut(), change.rate) {
                b.set_rate(rate.rate_bps, rate.burst_bytes, rt::realtime_ns());
            }
            for (queue, delay_ns) in change.delays {
                if let Some(line) = lines.iter_mut().find(|l| l.queue == queue) {
                    // Packets already held keep their release time; a shorter delay cannot
                    // reorder them, since a queue releases only from its head.
                    line.delay_ns = delay_ns;
                }
            }
        }
        // Release everything due, one batch verdict per queue.
        let now = rt::realtime_ns();
        for line in lines.iter_mut() {
            let mut last = None;
            while let Some(h) = line.fifo.front() {
                if h.due_ns > now {
                    break;
                }
                stats.lateness_ns.push(now - h.due_ns);
                last = Some(h.id);
                line.fifo.pop_front();
            }
            if let Some(id) = last {
                let t0 = rt::realtime_ns();
                sock.accept_up_to(line.queue, id)?;
                stats.verdicts += 1;
                stats.verdict_call_max_ns = stats.verdict_call_max_ns.max(rt::realtime_ns() - t0);
            }
        }

        // The bottleneck: everything its token bucket allows now, and when it next can.
        let mut bottleneck_due = None;
        if let Some(b) = bottleneck.as_mut() {
            let now = rt::realtime_ns();
            bottleneck_due = b.service(now, &mut verdicts);
            send_verdicts(&mut sock, b.cfg_queue, &mut verdicts, &mut batch, &mut stats)?;
            b.sample_if_due(now);
        }

        // Sleep until the earliest head is due (less the calibrated wake-up latency),
        // or until new packets arrive.
        let next_due = lines.iter().filter_map(|l| l.fifo.front().map(|h| h.due_ns)).min();
        let next_due = [next_due, bottleneck_due, bottleneck.as_ref().map(|b| b.next_sample_ns()), schedule.next_at_ns()]
            .into_iter()
            .flatten()
            .min();
        let readable = match next_due {
            Some(due) => {
                let remaining = due - rt::realtime_ns();
                if remaining <= 0 {
                    rt::wait_readable(sock.fd(), Some(0))
                } else if remaining < SPIN_BELOW_NS {
                    while rt::realtime_ns() < due {
                        std::hint::spin_loop();
                    }
                    rt::wait_readable(sock.fd(), Some(0))
                } else {
                    rt::wait_readable(sock.fd(), Some((remaining - wake_offset_ns).max(0)))
                }
            }
            None => rt::wait_readable(sock.fd(), None),
        };
        if !readable {
            continue;
        }
        arrivals.clear();
        sock.drain(&mut arrivals)?;
        let read_at = rt::realtime_ns();
        for p in arrivals.drain(..) {
            let arrival = match p.rx_realtime_ns {
                Some(t) => t,
                None => {
                    stats.no_timestamp += 1;
                    read_at
                }
            };
            if let Some(b) = bottleneck.as_mut().filter(|b| b.cfg_queue == p.queue) {
                b.arrive(p, arrival, &mut verdicts);
                continue;
            }
            let Some(line) = lines.iter_mut().find(|l| l.queue == p.queue) else { continue };
            line.fifo.push_back(Held { id: p.id, due_ns: arrival + line.delay_ns });
            line.packets += 1;
            line.max_held = line.max_held.max(line.fifo.len());
        }
        if let Some(b) = bottleneck.as_ref() {
            send_verdicts(&mut sock, b.cfg_queue, &mut verdicts, &mut batch, &mut stats)?;
        }
    }

    let proc_counters = report::read_proc_queue_counters();
    let bottleneck_json = bottleneck.as_ref().map(|b| {
        let mut with_proc = b.report(rt::cpu_time_s());
        if let Some(p) = proc_counters.iter().find(|p| p.queue == b.cfg_queue) {
            with_proc["queue_dropped"] = p.queue_dropped.into();
            with_proc["user_dropped"] = p.user_dropped.into();
        }
        with_proc
    });
    let json = report::to_json(&stats, &lines, &proc_counters, wake_offset_ns, sock.netlink_errors, &setup_warnings);
    // The process's CPU time and the bottleneck's report, added to the delay line's object.
    let mut value: serde_json::Value = serde_json::from_str(&json).expect("the report is valid JSON");
    value["cpu_s"] = rt::cpu_time_s().into();
    value["bottleneck"] = bottleneck_json.unwrap_or(serde_json::Value::Null);
    value["link_changes"] = schedule.applied.iter().map(|&(at, applied)| serde_json::json!([at, applied])).collect();
    value["schedule_errors"] = schedule_errors.into();
    let json = value.to_string();
    match &opts.report {
        Some(path) => std::fs::write(path, json)?,
        None => println!("{json}"),
    }
    Ok(())
}

/// Sends the bottleneck's pending verdicts in one datagram.
fn send_verdicts(
    sock: &mut nfq::NfQueueSocket,
    queue: u16,
    verdicts: &mut Vec<Verdict>,
    batch: &mut Vec<u8>,
    stats: &mut report::Stats,
) -> std::io::Result<()> {
    if verdicts.is_empty() {
        return Ok(());
    }
    for v in verdicts.drain(..) {
        sock.push_verdict(batch, queue, v.id, v.verdict, v.payload.as_deref());
    }
    let t0 = rt::realtime_ns();
    sock.send_verdicts(batch)?;
    stats.verdicts += 1;
    stats.verdict_call_max_ns = stats.verdict_call_max_ns.max(rt::realtime_ns() - t0);
    Ok(())
}

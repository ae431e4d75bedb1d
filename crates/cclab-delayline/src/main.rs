//! cclab-delayline: adds a fixed delay to the packets of one or more NFQUEUE queues.
//!
//! cclab's kernel engine uses it where sch_netem is missing: an iptables rule in the router
//! namespace sends the ACK direction to a queue (without --queue-bypass, so packets are
//! dropped rather than passed undelayed if this program is gone), and this program holds
//! each packet's verdict until its kernel receive time plus the queue's delay. Packets of a
//! queue leave in FIFO order with one batch verdict per release, so the line cannot reorder.
//!
//! Usage: cclab-delayline --queue NUM:DELAY_NS [--queue ...] [--cpu N] [--maxlen PKTS]
//!        [--wake-offset-ns N] [--ready-file PATH] [--report PATH]
//! On SIGINT/SIGTERM it writes its counters as JSON to --report (or stdout) and exits.

mod nfq;
mod report;
mod rt;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

/// Kernel-side queue length: 1 Gbit/s x 200 ms held 15-21 k ACKs on this kind of machine
/// (shared/kernel-testbed-notes.md); the default of 1024 would drop them.
const DEFAULT_QUEUE_MAXLEN_PKTS: u32 = 400_000;
/// Netlink receive buffer, forced past rmem_max (4 MB and read-only in child namespaces).
const NETLINK_RCVBUF_BYTES: i32 = 64 << 20;
/// Below this remaining time, spin on the clock instead of sleeping once more.
const SPIN_BELOW_NS: i64 = 10_000;
/// SCHED_FIFO priority: above normal tasks, below kernel threads' default RT priorities.
const FIFO_PRIORITY: i32 = 50;

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
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        lines: vec![],
        cpu: None,
        maxlen: DEFAULT_QUEUE_MAXLEN_PKTS,
        wake_offset_ns: None,
        ready_file: None,
        report: None,
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
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    if o.lines.is_empty() {
        return Err("at least one --queue NUM:DELAY_NS is required".into());
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
        sock.bind_queue(queue, opts.maxlen)?;
        lines.push(Line { queue, delay_ns, fifo: VecDeque::new(), packets: 0, max_held: 0 });
    }
    if let Some(path) = &opts.ready_file {
        std::fs::write(path, format!("{}\n", std::process::id()))?;
    }

    let mut stats = report::Stats::default();
    let mut arrivals = Vec::with_capacity(4096);
    while !rt::STOP.load(Ordering::Relaxed) {
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

        // Sleep until the earliest head is due (less the calibrated wake-up latency),
        // or until new packets arrive.
        let next_due = lines.iter().filter_map(|l| l.fifo.front().map(|h| h.due_ns)).min();
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
        for p in &arrivals {
            let Some(line) = lines.iter_mut().find(|l| l.queue == p.queue) else { continue };
            let arrival = match p.rx_realtime_ns {
                Some(t) => t,
                None => {
                    stats.no_timestamp += 1;
                    read_at
                }
            };
            line.fifo.push_back(Held { id: p.id, due_ns: arrival + line.delay_ns });
            line.packets += 1;
            line.max_held = line.max_held.max(line.fifo.len());
        }
    }

    let proc_counters = report::read_proc_queue_counters();
    let json = report::to_json(&stats, &lines, &proc_counters, wake_offset_ns, sock.netlink_errors, &setup_warnings);
    match &opts.report {
        Some(path) => std::fs::write(path, json)?,
        None => println!("{json}"),
    }
    Ok(())
}

//! Process setup for punctual release: CPU pinning, SCHED_FIFO, 1 ns timer slack, kernel
//! receive timestamps, clocks and the wake-up offset calibration.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by SIGINT/SIGTERM; the main loop then reports and exits.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// Set by SIGUSR1: the engine wrote the link schedule (link.rs).
pub static SCHEDULE_READY: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGUSR1 {
        SCHEDULE_READY.store(true, Ordering::SeqCst);
    } else {
        STOP.store(true, Ordering::SeqCst);
    }
}

/// Installs SIGINT/SIGTERM/SIGUSR1 handlers without SA_RESTART so ppoll returns EINTR.
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1] {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// CLOCK_REALTIME in ns: the clock of the kernel's skb receive timestamps.
pub fn realtime_ns() -> i64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// SCHED_FIFO so a due release is not queued behind iperf3 or a compiler on this CPU.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: priority };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Timer slack of 1 ns (prctl PR_SET_TIMERSLACK): the default 50 µs would be added to every sleep.
pub fn set_timer_slack_1ns() -> io::Result<()> {
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Any socket with SO_TIMESTAMPNS switches on the kernel's global receive timestamping
/// (net_enable_timestamp), so forwarded skbs carry their arrival time into NFQUEUE.
/// The returned fd must stay open for as long as timestamps are needed.
pub fn enable_rx_timestamps() -> io::Result<i32> {
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let one: i32 = 1;
    let ret = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &one as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Sleeps in ppoll on `fd` for at most `timeout_ns` (None: until readable or a signal).
/// Returns true if the fd became readable.
pub fn wait_readable(fd: i32, timeout_ns: Option<i64>) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ts;
    let tsp = match timeout_ns {
        Some(ns) => {
            let ns = ns.max(0);
            ts = libc::timespec { tv_sec: ns / 1_000_000_000, tv_nsec: ns % 1_000_000_000 };
            &ts as *const libc::timespec
        }
        None => std::ptr::null(),
    };
    let n = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
    n > 0 && (pfd.revents & libc::POLLIN) != 0
}

/// Median overshoot of a 200 µs ppoll sleep on an fd that never becomes readable:
/// the delay line wakes up this much earlier than a packet is due.
pub fn calibrate_wake_offset_ns(samples: usize) -> i64 {
    const PROBE_SLEEP_NS: i64 = 200_000;
    let mut fds = [0i32; 2];
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return 0;
    }
    let mut over: Vec<i64> = (0..samples)
        .map(|_| {
            let t0 = realtime_ns();
            wait_readable(fds[0], Some(PROBE_SLEEP_NS));
            realtime_ns() - t0 - PROBE_SLEEP_NS
        })
        .collect();
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    over.sort_unstable();
    over[over.len() / 2].clamp(0, PROBE_SLEEP_NS)
}

/// CPU time (user + system) this process has used, in seconds (getrusage RUSAGE_SELF).
pub fn cpu_time_s() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

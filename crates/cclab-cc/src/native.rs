//! A user's congestion control from its BPF struct_ops C source, built natively with the
//! shim in `crates/cclab-cc/shim` (python/cclab/engines/native_cc.py runs clang) and loaded
//! here: one more arm of [`crate::AnyCc`]. The kernel engine registers the same source in
//! the kernel (python/cclab/engines/kernel/user_cc.py).
//!
//! The library exports the bridge's entry points (`shim/bridge.c`): each hook writes the
//! [`TcpState`] into the kernel-shaped socket the library keeps per flow, runs the map's
//! `tcp_congestion_ops` member, and reads back what a CC may change. Which fields those
//! are, and what is approximated, is at the top of bridge.c.

use std::ffi::{c_void, CStr, CString};
use std::sync::Arc;

use crate::{AckSample, CaState, CongestionControl, CwndEvent, RateSample, TcpState};

/// bridge.c's CCLAB_ABI_VERSION: a library built by another version of the shim is refused.
const ABI_VERSION: u32 = 2;
/// include/net/tcp.h: TCP_CONG_NEEDS_ECN.
const TCP_CONG_NEEDS_ECN: u32 = 0x2;

/// bridge.c's `enum cclab_op`.
#[derive(Clone, Copy)]
#[repr(u32)]
enum Op {
    Init = 0,
    Release = 1,
    Ssthresh = 2,
    CongAvoid = 3,
    SetState = 4,
    CwndEvent = 5,
    InAckEvent = 6,
    PktsAcked = 7,
    MinTsoSegs = 8,
    CongControl = 9,
    UndoCwnd = 10,
    SndbufExpand = 11,
}

impl Op {
    /// The tcp_congestion_ops member.
    fn hook(self) -> &'static str {
        match self {
            Op::Init => "init",
            Op::Release => "release",
            Op::Ssthresh => "ssthresh",
            Op::CongAvoid => "cong_avoid",
            Op::SetState => "set_state",
            Op::CwndEvent => "cwnd_event",
            Op::InAckEvent => "in_ack_event",
            Op::PktsAcked => "pkts_acked",
            Op::MinTsoSegs => "min_tso_segs",
            Op::CongControl => "cong_control",
            Op::UndoCwnd => "undo_cwnd",
            Op::SndbufExpand => "sndbuf_expand",
        }
    }
}

/// bridge.c's `struct cclab_tcp`.
#[repr(C)]
#[derive(Default)]
struct CTcp {
    now_ns: u64,
    delivered_mstamp_ns: u64,
    pacing_rate: u64,
    snd_nxt_segs: u64,
    snd_una_segs: u64,
    delivered: u64,
    delivered_ce: u64,
    lost: u64,
    app_limited: u64,
    next_send_time_ns: u64,
    mss_cache: u32,
    snd_cwnd: u32,
    snd_cwnd_cnt: u32,
    snd_cwnd_clamp: u32,
    snd_ssthresh: u32,
    prior_cwnd: u32,
    ca_state: u32,
    packets_in_flight: u32,
    srtt_us: u32,
    is_cwnd_limited: u32,
    is_cwnd_limited_raw: u32,
    ecn_ok: u32,
    pacing_needed: u32,
}

/// bridge.c's `struct cclab_rs`.
#[repr(C)]
struct CRateSample {
    interval_us: i64,
    rtt_us: i64,
    prior_delivered: u64,
    delivered: u64,
    delivered_ce: u64,
    losses: u32,
    acked_sacked: u32,
    prior_in_flight: u32,
    is_app_limited: u32,
    is_retrans: u32,
    is_ack_delayed: u32,
    ece: u32,
}

type CallFn = unsafe extern "C" fn(*mut c_void, *mut CTcp, u32, u64, u64, *const c_void) -> u64;

/// A loaded library: the bridge's entry points, shared by every flow of the CC.
pub struct NativeLibrary {
    path: String,
    handle: *mut c_void,
    new: unsafe extern "C" fn(u64) -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void),
    call: CallFn,
    ops: u32,
    flags: u32,
}

// The library holds no state of its own between calls but the per-flow sockets (each
// owned by one NativeCc) and a thread-local current socket: safe to move across threads.
unsafe impl Send for NativeLibrary {}
unsafe impl Sync for NativeLibrary {}

impl NativeLibrary {
    /// dlopens `path` (RTLD_LOCAL: two users' libraries keep their own symbols).
    pub fn open(path: &str) -> Result<Arc<Self>, String> {
        let c_path = CString::new(path).map_err(|_| format!("{path:?}: a NUL in the path"))?;
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("{path}: {}", dl_error()));
        }
        let symbol = |name: &str| -> Result<*mut c_void, String> {
            let c_name = CString::new(name).unwrap();
            let ptr = unsafe { libc::dlsym(handle, c_name.as_ptr()) };
            if ptr.is_null() {
                Err(format!("{path}: no {name} (not built by cclab's shim)"))
            } else {
                Ok(ptr)
            }
        };
        let loaded = (|| {
            let abi: unsafe extern "C" fn() -> u32 = unsafe { std::mem::transmute(symbol("cclab_cc_abi")?) };
            let abi = unsafe { abi() };
            if abi != ABI_VERSION {
                return Err(format!("{path}: built by shim version {abi}, the simulator has {ABI_VERSION}; rebuild it"));
            }
            let ops: unsafe extern "C" fn() -> u32 = unsafe { std::mem::transmute(symbol("cclab_cc_ops")?) };
            let flags: unsafe extern "C" fn() -> u32 = unsafe { std::mem::transmute(symbol("cclab_cc_flags")?) };
            Ok(NativeLibrary {
                path: path.to_string(),
                handle,
                new: unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u64) -> *mut c_void>(symbol("cclab_cc_new")?) },
                free: unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(symbol("cclab_cc_free")?) },
                call: unsafe { std::mem::transmute::<*mut c_void, CallFn>(symbol("cclab_cc_call")?) },
                ops: unsafe { ops() },
                flags: unsafe { flags() },
            })
        })();
        if loaded.is_err() {
            unsafe { libc::dlclose(handle) };
        }
        let library = loaded?;
        // tcp_validate_congestion_control() (net/ipv4/tcp_cong.c): "all algorithms must
        // implement" ssthresh, undo_cwnd, and cong_avoid or cong_control.
        if !library.has(Op::Ssthresh) || !library.has(Op::UndoCwnd) || !(library.has(Op::CongAvoid) || library.has(Op::CongControl)) {
            return Err(format!("{path}: the map must set ssthresh, undo_cwnd, and cong_avoid or cong_control, as Linux requires"));
        }
        Ok(Arc::new(library))
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    fn has(&self, op: Op) -> bool {
        self.ops & (1 << op as u32) != 0
    }
}

impl Drop for NativeLibrary {
    fn drop(&mut self) {
        unsafe { libc::dlclose(self.handle) };
    }
}

fn dl_error() -> String {
    let err = unsafe { libc::dlerror() };
    if err.is_null() {
        "dlopen failed".into()
    } else {
        unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned()
    }
}

/// How to build one: the library, loaded once per run.
#[derive(Clone)]
pub struct NativeCcConfig {
    pub library: Arc<NativeLibrary>,
}

impl std::fmt::Debug for NativeCcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NativeCcConfig({})", self.library.path)
    }
}

impl PartialEq for NativeCcConfig {
    fn eq(&self, other: &Self) -> bool {
        self.library.path == other.library.path
    }
}

/// One flow's congestion control: its socket in the library.
pub struct NativeCc {
    library: Arc<NativeLibrary>,
    sock: *mut c_void,
    /// `tp->delivered_ce` at the previous ACK: an ACK that grew it echoed CE (CA_ACK_ECE).
    last_delivered_ce: u64,
    /// Whether the ACK being processed echoed CE (in_ack_event comes before cong_control).
    ack_ece: bool,
    pacing_needed: bool,
}

unsafe impl Send for NativeCc {}

impl NativeCc {
    pub fn new(config: &NativeCcConfig, seed: u64) -> Self {
        let sock = unsafe { (config.library.new)(seed) };
        assert!(!sock.is_null(), "out of memory for a native congestion control's socket");
        NativeCc { library: config.library.clone(), sock, last_delivered_ce: 0, ack_ece: false, pacing_needed: false }
    }

    /// A hook that only answers (`min_tso_segs`, `sndbuf_expand`), which the trait asks
    /// through `&self`: the socket is brought up to `tcp` and nothing is read back.
    fn query(&self, tcp: &TcpState, op: Op) -> Option<u32> {
        if !self.library.has(op) {
            return None;
        }
        let mut c = to_c(tcp);
        Some(unsafe { (self.library.call)(self.sock, &mut c, op as u32, 0, 0, std::ptr::null()) } as u32)
    }

    fn call(&mut self, tcp: &mut TcpState, op: Op, a: u64, b: u64, sample: *const c_void) -> u64 {
        let mut c = to_c(tcp);
        let ret = unsafe { (self.library.call)(self.sock, &mut c, op as u32, a, b, sample) };
        // A window of 0 would stall the flow for good (Linux's TCP never sends then); the
        // run fails with the hook's name (engines/sim_child.py reports it in one line).
        assert!(c.snd_cwnd > 0, "the congestion control set snd_cwnd to 0 in its {} hook", op.hook());
        tcp.snd_cwnd = c.snd_cwnd;
        tcp.snd_cwnd_cnt = c.snd_cwnd_cnt;
        tcp.snd_cwnd_clamp = c.snd_cwnd_clamp;
        tcp.snd_ssthresh = c.snd_ssthresh;
        tcp.prior_cwnd = c.prior_cwnd;
        // tp->app_limited is a u32 in Linux (~0U until the first delivery, where the simulator
        // keeps u64::MAX): only a value the CC wrote is taken back (cclab cc compare found it).
        if c.app_limited != tcp.app_limited as u32 as u64 {
            tcp.app_limited = c.app_limited;
        }
        tcp.pacing_rate_bytes_per_sec = c.pacing_rate;
        self.pacing_needed = c.pacing_needed != 0;
        ret
    }
}

impl Drop for NativeCc {
    fn drop(&mut self) {
        if self.library.has(Op::Release) {
            // The flow's state is gone by now (TCP drops its CC last); `release` frees what
            // the CC holds and, as every tcp_congestion_ops in Linux, reads no window.
            let mut tcp = TcpState::new(1448);
            self.call(&mut tcp, Op::Release, 0, 0, std::ptr::null());
        }
        unsafe { (self.library.free)(self.sock) };
    }
}

fn to_c(tcp: &TcpState) -> CTcp {
    CTcp {
        now_ns: tcp.now.as_nanos(),
        delivered_mstamp_ns: tcp.delivered_time.as_nanos(),
        pacing_rate: tcp.pacing_rate_bytes_per_sec,
        snd_nxt_segs: tcp.snd_nxt,
        snd_una_segs: tcp.snd_una,
        delivered: tcp.delivered,
        delivered_ce: tcp.delivered_ce,
        lost: tcp.lost,
        app_limited: tcp.app_limited,
        next_send_time_ns: tcp.next_send_time.as_nanos(),
        mss_cache: tcp.mss_bytes,
        snd_cwnd: tcp.snd_cwnd,
        snd_cwnd_cnt: tcp.snd_cwnd_cnt,
        snd_cwnd_clamp: tcp.snd_cwnd_clamp,
        snd_ssthresh: tcp.snd_ssthresh,
        prior_cwnd: tcp.prior_cwnd,
        ca_state: ca_state_number(tcp.ca_state),
        packets_in_flight: tcp.packets_in_flight,
        srtt_us: (tcp.srtt.as_nanos() / 1000) as u32,
        is_cwnd_limited: tcp.is_cwnd_limited as u32,
        is_cwnd_limited_raw: tcp.is_cwnd_limited_raw as u32,
        ecn_ok: tcp.ecn_ok as u32,
        pacing_needed: 0,
    }
}

/// Linux `enum tcp_ca_state`.
fn ca_state_number(state: CaState) -> u32 {
    match state {
        CaState::Open => 0,
        CaState::Disorder => 1,
        CaState::Cwr => 2,
        CaState::Recovery => 3,
        CaState::Loss => 4,
    }
}

/// Linux `enum tcp_ca_event`.
fn event_number(event: CwndEvent) -> u64 {
    match event {
        CwndEvent::TxStart => 0,
        CwndEvent::CwndRestart => 1,
        CwndEvent::CompleteCwr => 2,
        CwndEvent::Loss => 3,
    }
}

fn micros(d: Option<crate::SimDuration>) -> i64 {
    d.map_or(-1, |d| (d.as_nanos() / 1000) as i64)
}

impl CongestionControl for NativeCc {
    fn init(&mut self, tcp: &mut TcpState) {
        self.last_delivered_ce = tcp.delivered_ce;
        self.call(tcp, Op::Init, 0, 0, std::ptr::null());
    }

    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        // .ssthresh reads the socket; what it writes there besides its own state TCP ignores.
        let mut copy = tcp.clone();
        self.call(&mut copy, Op::Ssthresh, 0, 0, std::ptr::null()) as u32
    }

    fn cong_avoid(&mut self, tcp: &mut TcpState, ack_seq: u64, acked_pkts: u32) {
        if self.library.has(Op::CongAvoid) {
            self.call(tcp, Op::CongAvoid, ack_seq, acked_pkts as u64, std::ptr::null());
        }
    }

    fn pkts_acked(&mut self, tcp: &mut TcpState, sample: &AckSample) {
        if self.library.has(Op::PktsAcked) {
            let s: [u64; 3] = [sample.pkts_acked as u64, micros(sample.rtt) as u64, sample.in_flight as u64];
            self.call(tcp, Op::PktsAcked, 0, 0, s.as_ptr().cast());
        }
    }

    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        if self.library.has(Op::SetState) {
            self.call(tcp, Op::SetState, ca_state_number(new_state) as u64, 0, std::ptr::null());
        }
    }

    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        if self.library.has(Op::CwndEvent) {
            self.call(tcp, Op::CwndEvent, event_number(event), 0, std::ptr::null());
        }
    }

    fn in_ack_event(&mut self, tcp: &mut TcpState) {
        self.ack_ece = tcp.delivered_ce > self.last_delivered_ce;
        self.last_delivered_ce = tcp.delivered_ce;
        if self.library.has(Op::InAckEvent) {
            self.call(tcp, Op::InAckEvent, self.ack_ece as u64, 0, std::ptr::null());
        }
    }

    fn needs_ecn(&self) -> bool {
        self.library.flags & TCP_CONG_NEEDS_ECN != 0
    }

    fn cong_control(&mut self, tcp: &mut TcpState, rs: &RateSample) -> bool {
        if !self.library.has(Op::CongControl) {
            return false;
        }
        let c = CRateSample {
            interval_us: micros(rs.interval),
            rtt_us: micros(rs.rtt),
            prior_delivered: rs.prior_delivered,
            delivered: rs.delivered,
            delivered_ce: rs.delivered_ce,
            losses: rs.losses,
            acked_sacked: rs.acked_sacked,
            prior_in_flight: rs.prior_in_flight,
            is_app_limited: rs.is_app_limited as u32,
            is_retrans: rs.is_retrans as u32,
            is_ack_delayed: rs.is_ack_delayed as u32,
            ece: (self.ack_ece || rs.ece_delta > 0) as u32,
        };
        let ack_seq = tcp.snd_una;
        self.call(tcp, Op::CongControl, ack_seq, 0, (&c as *const CRateSample).cast());
        true
    }

    fn needs_pacing(&self) -> bool {
        self.pacing_needed
    }
    fn has_cong_control(&self) -> bool {
        self.library.has(Op::CongControl)
    }
    fn min_tso_segs(&self, tcp: &TcpState) -> Option<u32> {
        self.query(tcp, Op::MinTsoSegs).filter(|&segs| segs > 0)
    }
    /// Asked once, when the sender is built (before `init`), as the simulator's send buffer
    /// reads it; Linux asks at each expansion. A source's answer is a constant (BBR's 3).
    fn sndbuf_expand(&self) -> Option<u32> {
        // No socket yet: a fresh one (at the default MSS) stands in for it.
        self.query(&TcpState::new(1448), Op::SndbufExpand).filter(|&n| n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_not_built_by_the_shim_is_refused_by_name() {
        let err = NativeLibrary::open("libm.so.6").err().expect("libm has no bridge");
        assert!(err.contains("no cclab_cc_abi"), "{err}");
        let err = NativeLibrary::open("/nonexistent/cc.so").err().expect("no such file");
        assert!(err.starts_with("/nonexistent/cc.so: "), "{err}");
    }
}

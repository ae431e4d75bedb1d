//! The differential harness: two congestion controls driven by the same hook calls.
//!
//! A [`Recorder`] wraps the CC of one flow in a simulated run (one more [`AnyCc`] arm) and
//! hands every call of a `tcp_congestion_ops` hook that may change the CC or the socket
//! (which hook, its arguments and the [`TcpState`] it was called with) to a [`Comparator`],
//! which makes the same call on two fresh CCs (say the built-in CUBIC and a user's source of
//! it), each from that state, so both see exactly the inputs the recorded run produced, and
//! tallies per hook and per field where their outputs part. Driving both open loop means one
//! difference does not snowball into every later call: each later difference is one of its
//! own (or of state the CC keeps). Nothing is stored per call: a run of any length costs
//! memory for three CCs.
//!
//! What is compared after each call: the socket fields a CC writes (`snd_cwnd`,
//! `snd_ssthresh`, `snd_cwnd_cnt`, `sk_pacing_rate`, `sk_pacing_status`, `tp->app_limited`,
//! `prior_cwnd`), the
//! hook's return value (`ssthresh`, whether `cong_control` ran), what TCP asks of the CC
//! between calls (`min_tso_segs`, `sndbuf_expand`), and the CC's published estimates (mode,
//! bandwidth, min RTT, pacing gain, ECN alpha) where both publish one.

use crate::{AckSample, AnyCc, CaState, CcTelemetry, CongestionControl, CwndEvent, LostPacket, RateSample, TcpState};

/// One call of a hook that may change state; queries (`needs_pacing`, `telemetry`, ...) are
/// not recorded: they change nothing.
#[derive(Clone, Copy, Debug)]
pub enum HookCall {
    Init,
    Ssthresh,
    CongAvoid { ack_seq: u64, acked_pkts: u32 },
    PktsAcked(AckSample),
    SetState(CaState),
    CwndEvent(CwndEvent),
    InAckEvent,
    CongControl(RateSample),
    SkbMarkedLost(LostPacket),
}

impl HookCall {
    /// The `tcp_congestion_ops` member.
    pub fn hook(&self) -> &'static str {
        match self {
            HookCall::Init => "init",
            HookCall::Ssthresh => "ssthresh",
            HookCall::CongAvoid { .. } => "cong_avoid",
            HookCall::PktsAcked(_) => "pkts_acked",
            HookCall::SetState(_) => "set_state",
            HookCall::CwndEvent(_) => "cwnd_event",
            HookCall::InAckEvent => "in_ack_event",
            HookCall::CongControl(_) => "cong_control",
            HookCall::SkbMarkedLost(_) => "skb_marked_lost",
        }
    }

    /// Calls the hook on `cc`; what it returned, as a number (`ssthresh`'s value,
    /// `cong_control`'s 1 or 0), for the hooks that return one.
    pub fn apply(&self, cc: &mut AnyCc, tcp: &mut TcpState) -> Option<u64> {
        match *self {
            HookCall::Init => cc.init(tcp),
            HookCall::Ssthresh => return Some(cc.ssthresh(tcp) as u64),
            HookCall::CongAvoid { ack_seq, acked_pkts } => cc.cong_avoid(tcp, ack_seq, acked_pkts),
            HookCall::PktsAcked(sample) => cc.pkts_acked(tcp, &sample),
            HookCall::SetState(state) => cc.set_state(tcp, state),
            HookCall::CwndEvent(event) => cc.cwnd_event(tcp, event),
            HookCall::InAckEvent => cc.in_ack_event(tcp),
            HookCall::CongControl(rs) => return Some(cc.cong_control(tcp, &rs) as u64),
            HookCall::SkbMarkedLost(pkt) => cc.skb_marked_lost(tcp, &pkt),
        }
        None
    }
}

/// A CC whose state-changing hook calls also go to a [`Comparator`] (the
/// [`AnyCc::Recorded`] arm).
pub struct Recorder {
    inner: AnyCc,
    comparator: Comparator,
}

impl Recorder {
    pub fn new(inner: AnyCc, comparator: Comparator) -> Self {
        Recorder { inner, comparator }
    }

    pub fn comparison(&self) -> Comparison {
        self.comparator.comparison()
    }

    fn forward(&mut self, call: HookCall, tcp: &mut TcpState) -> Option<u64> {
        self.comparator.step(call, tcp);
        call.apply(&mut self.inner, tcp)
    }
}

impl CongestionControl for Recorder {
    fn init(&mut self, tcp: &mut TcpState) {
        self.forward(HookCall::Init, tcp);
    }
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        // `ssthresh` gets the socket read-only: the copy it runs on is thrown away.
        self.forward(HookCall::Ssthresh, &mut tcp.clone()).unwrap_or_default() as u32
    }
    fn cong_avoid(&mut self, tcp: &mut TcpState, ack_seq: u64, acked_pkts: u32) {
        self.forward(HookCall::CongAvoid { ack_seq, acked_pkts }, tcp);
    }
    fn pkts_acked(&mut self, tcp: &mut TcpState, sample: &AckSample) {
        self.forward(HookCall::PktsAcked(*sample), tcp);
    }
    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        self.forward(HookCall::SetState(new_state), tcp);
    }
    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        self.forward(HookCall::CwndEvent(event), tcp);
    }
    fn in_ack_event(&mut self, tcp: &mut TcpState) {
        self.forward(HookCall::InAckEvent, tcp);
    }
    fn cong_control(&mut self, tcp: &mut TcpState, rs: &RateSample) -> bool {
        self.forward(HookCall::CongControl(*rs), tcp) == Some(1)
    }
    fn skb_marked_lost(&mut self, tcp: &TcpState, pkt: &LostPacket) {
        self.forward(HookCall::SkbMarkedLost(*pkt), &mut tcp.clone());
    }
    fn needs_ecn(&self) -> bool {
        self.inner.needs_ecn()
    }
    fn needs_accecn(&self) -> bool {
        self.inner.needs_accecn()
    }
    fn min_tso_segs(&self, tcp: &TcpState) -> Option<u32> {
        self.inner.min_tso_segs(tcp)
    }
    fn tso_segs(&self, tcp: &TcpState) -> Option<u32> {
        self.inner.tso_segs(tcp)
    }
    fn needs_pacing(&self) -> bool {
        self.inner.needs_pacing()
    }
    fn has_cong_control(&self) -> bool {
        self.inner.has_cong_control()
    }
    fn sndbuf_expand(&self) -> Option<u32> {
        self.inner.sndbuf_expand()
    }
    fn telemetry(&self, tcp: &TcpState) -> CcTelemetry {
        self.inner.telemetry(tcp)
    }
}

/// `sysctl_tcp_min_tso_segs`'s default (net/ipv4/tcp_ipv4.c).
const TCP_DEFAULT_MIN_TSO_SEGS: u32 = 2;
/// `tcp_sndbuf_expand`'s multiple of cwnd for a CC without `.sndbuf_expand` (tcp_input.c).
const TCP_DEFAULT_SNDBUF_EXPAND: u32 = 2;

/// What is compared after every call, in this order.
pub const FIELDS: [&str; 15] = [
    "returned",
    "pacing_needed",
    "min_tso_segs",
    "sndbuf_expand",
    "snd_cwnd",
    "snd_ssthresh",
    "snd_cwnd_cnt",
    "pacing_rate_bytes_per_sec",
    "app_limited",
    "prior_cwnd",
    "mode",
    "bw_estimate_bps",
    "min_rtt_ns",
    "pacing_gain",
    "ecn_alpha",
];

/// One CC's outputs after one call, as text (so every field compares and prints alike);
/// `None` where the CC publishes no such value.
fn outputs(returned: Option<u64>, cc: &AnyCc, tcp: &TcpState) -> [Option<String>; 15] {
    let telemetry = cc.telemetry(tcp);
    [
        returned.map(|v| v.to_string()),
        Some(cc.needs_pacing().to_string()),
        // What TCP asks of the CC without a call that changes it, as TCP then uses it: the
        // skb floor (else sysctl_tcp_min_tso_segs) and the send buffer's multiple of cwnd
        // (else tcp_sndbuf_expand's own), both 2 in Linux.
        Some(cc.min_tso_segs(tcp).unwrap_or(TCP_DEFAULT_MIN_TSO_SEGS).to_string()),
        Some(cc.sndbuf_expand().unwrap_or(TCP_DEFAULT_SNDBUF_EXPAND).to_string()),
        Some(tcp.snd_cwnd.to_string()),
        Some(tcp.snd_ssthresh.to_string()),
        Some(tcp.snd_cwnd_cnt.to_string()),
        Some(tcp.pacing_rate_bytes_per_sec.to_string()),
        Some(tcp.app_limited.to_string()),
        Some(tcp.prior_cwnd.to_string()),
        Some(telemetry.mode.to_string()),
        telemetry.bw_estimate_bps.map(|v| v.to_string()),
        telemetry.min_rtt.map(|v| v.as_nanos().to_string()),
        telemetry.pacing_gain.map(|v| format!("{v:.6}")),
        telemetry.ecn_alpha.map(|v| format!("{v:.6}")),
    ]
}

/// The first call at which one field parted, and how many calls it parted on.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDifference {
    pub field: &'static str,
    pub first_call: usize,
    pub first_hook: &'static str,
    pub first_time_ns: u64,
    pub reference: String,
    pub candidate: String,
    pub calls: usize,
}

/// Per hook: how often it was called and on how many calls any field parted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HookTally {
    pub hook: &'static str,
    pub calls: usize,
    pub differing_calls: usize,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub calls: usize,
    pub differing_calls: usize,
    pub hooks: Vec<HookTally>,
    /// Fields that parted at least once, in [`FIELDS`] order.
    pub fields: Vec<FieldDifference>,
}

/// Two fresh CCs (`reference`, `candidate`) driven through the same calls, each from the
/// socket the call came with. A field only one of the two publishes (a BBR estimate beside
/// a source that has no way to publish it) is not a difference.
pub struct Comparator {
    reference: AnyCc,
    candidate: AnyCc,
    /// Whether both publish a mode of their own: a C source cannot (its telemetry's mode is
    /// slow start or congestion avoidance by ssthresh, whatever the source does).
    modes_comparable: bool,
    tally: Comparison,
    by_field: Vec<Option<FieldDifference>>,
}

impl Comparator {
    pub fn new(reference: AnyCc, candidate: AnyCc) -> Self {
        let modes_comparable = !matches!(reference, AnyCc::Native(_)) && !matches!(candidate, AnyCc::Native(_));
        Comparator { reference, candidate, modes_comparable, tally: Comparison::default(), by_field: vec![None; FIELDS.len()] }
    }

    pub fn step(&mut self, call: HookCall, before: &TcpState) {
        let index = self.tally.calls;
        self.tally.calls += 1;
        let hook = call.hook();
        let mut ref_tcp = before.clone();
        let mut cand_tcp = before.clone();
        let ref_returned = call.apply(&mut self.reference, &mut ref_tcp);
        let ref_out = outputs(ref_returned, &self.reference, &ref_tcp);
        let cand_returned = call.apply(&mut self.candidate, &mut cand_tcp);
        let cand_out = outputs(cand_returned, &self.candidate, &cand_tcp);
        let hooks = &mut self.tally.hooks;
        let tally = match hooks.iter().position(|t| t.hook == hook) {
            Some(i) => &mut hooks[i],
            None => {
                hooks.push(HookTally { hook, ..HookTally::default() });
                hooks.last_mut().expect("just pushed")
            }
        };
        tally.calls += 1;
        let mut differs = false;
        for (field, (r, c)) in ref_out.iter().zip(cand_out.iter()).enumerate() {
            let (Some(r), Some(c)) = (r, c) else { continue };
            if FIELDS[field] == "mode" && !self.modes_comparable {
                continue;
            }
            if r == c {
                continue;
            }
            differs = true;
            match &mut self.by_field[field] {
                Some(known) => known.calls += 1,
                slot @ None => {
                    *slot = Some(FieldDifference {
                        field: FIELDS[field],
                        first_call: index,
                        first_hook: hook,
                        first_time_ns: before.now.0,
                        reference: r.clone(),
                        candidate: c.clone(),
                        calls: 1,
                    })
                }
            }
        }
        if differs {
            tally.differing_calls += 1;
            self.tally.differing_calls += 1;
        }
    }

    /// The tally so far.
    pub fn comparison(&self) -> Comparison {
        Comparison { fields: self.by_field.iter().flatten().cloned().collect(), ..self.tally.clone() }
    }
}

#[cfg(test)]
#[path = "differential_tests.rs"]
mod tests;

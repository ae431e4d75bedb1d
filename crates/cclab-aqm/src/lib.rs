//! Queue disciplines behind one small trait shaped like Linux's `struct Qdisc_ops`
//! (`.enqueue`, `.dequeue`), one file per algorithm, as `cclab-cc` does for
//! congestion controls.
//!
//! The same code serves two engines: the simulator's bottleneck (a tbf-like
//! shaper that dequeues whenever its link is free) and the kernel engine's
//! userspace bottleneck, used where the host kernel lacks the qdisc. The
//! packet type is a parameter (`P`): the simulator queues its data packets,
//! the userspace bottleneck its NFQUEUE packet ids.
//!
//! A qdisc never reads a clock or a global random source: time arrives as
//! `now`, randomness from a generator the caller seeds.
//!
//! The hard limit of the scenario (`buffer`) is enforced by the caller as a
//! tail drop before `enqueue`; each qdisc enforces its own tc `limit` the way
//! its Linux code does (e.g. fq_codel drops from its fattest flow).
//!
//! `delivery_trace` is the one piece here that is not a qdisc: a Mahimahi trace serving
//! the bottleneck in place of its token bucket, shared by both engines for the same reason.

pub mod codel;
pub mod cake;
mod cobalt;
pub mod config;
pub mod delivery_trace;
pub mod dualpi2;
pub mod ecn;
pub mod fifo;
pub mod fq_codel;
pub mod pie;
pub mod red;
#[cfg(test)]
mod testutil;

pub use config::{AqmConfig, QueueLimit};

use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;

/// `psched_mtu(dev)` (`dev->mtu + dev->hard_header_len`) of a 1500-byte-MTU Ethernet device:
/// what the qdiscs' own tests and defaults assume. Engines pass their bottleneck's (`build`).
pub const PSCHED_MTU_BYTES: u32 = 1500 + delivery_trace::ETHERNET_HEADER_BYTES;

/// The ECN field of a packet's IP header (RFC 3168 section 5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ecn {
    #[default]
    NotEct,
    Ect0,
    Ect1,
    Ce,
}

impl Ecn {
    /// ECN-capable transport: an AQM may mark it instead of dropping it.
    pub fn is_ect(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// What a qdisc reads of a packet (Linux: the skb fields `sch_*.c` use).
#[derive(Clone, Copy, Debug)]
pub struct PacketMeta {
    /// `qdisc_pkt_len(skb)`: bytes on the wire, Ethernet header included.
    pub len_bytes: u32,
    /// `skb_get_hash(skb)`: hash of the 5-tuple (flow queues).
    pub flow_hash: u32,
    /// Hashes of the source and destination addresses (CAKE's per-host isolation).
    pub src_host_hash: u32,
    pub dst_host_hash: u32,
    pub ecn: Ecn,
    /// When the packet entered the qdisc; set by `enqueue` (CoDel's timestamp).
    pub enqueue_time: SimTime,
    /// DualPI2's classification (`dualpi2_skb_cb.classified`): set by its `enqueue`
    /// when the packet went to the L4S queue; false under every other qdisc.
    pub l4s_queue: bool,
}

impl PacketMeta {
    /// A packet of `len_bytes` with codepoint `ecn`, from flow `flow_hash`, hosts unnamed.
    pub fn new(len_bytes: u32, flow_hash: u32, ecn: Ecn) -> Self {
        PacketMeta { len_bytes, flow_hash, src_host_hash: 0, dst_host_hash: 0, ecn, enqueue_time: SimTime::ZERO, l4s_queue: false }
    }
}

pub struct Packet<P> {
    pub meta: PacketMeta,
    pub inner: P,
}

/// Why a qdisc discarded a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The qdisc's own limit was reached (tail drop, or fq_codel's fattest-flow drop).
    Overflow,
    /// The AQM's congestion signal (CoDel's control law, RED's or PIE's probability, ...).
    Aqm,
}

pub struct Dropped<P> {
    pub packet: Packet<P>,
    pub reason: DropReason,
}

/// Counters since the qdisc was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    pub overflow_drops: u64,
    pub aqm_drops: u64,
    /// Packets this qdisc set to CE.
    pub ce_marks: u64,
}

/// One queue discipline: the hooks of Linux `struct Qdisc_ops` that a
/// bottleneck needs. Packets it discards (on enqueue or dequeue) go to
/// `dropped` so the caller can count them per flow.
pub trait Qdisc<P> {
    /// `.enqueue`: accept `pkt` at `now` (stamping `meta.enqueue_time`) or drop it
    /// or another packet.
    fn enqueue(&mut self, now: SimTime, pkt: Packet<P>, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>);
    /// `.dequeue`: the packet to transmit at `now`, or `None` when empty. AQMs that
    /// act at dequeue (CoDel, fq_codel, CAKE) drop or CE-mark here.
    fn dequeue(&mut self, now: SimTime, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>>;
    /// Bytes queued (`sch->qstats.backlog`).
    fn backlog_bytes(&self) -> u64;
    /// Packets queued (`sch->q.qlen`).
    fn backlog_packets(&self) -> usize;
    fn stats(&self) -> QdiscStats;
}

/// The one dispatch enum over every queue discipline (static dispatch).
pub enum AnyQdisc<P> {
    Fifo(fifo::Fifo<P>),
    Codel(codel::Codel<P>),
    FqCodel(fq_codel::FqCodel<P>),
    Red(red::Red<P>),
    Pie(pie::Pie<P>),
    Cake(cake::Cake<P>),
    DualPi2(dualpi2::DualPi2<P>),
}

macro_rules! dispatch {
    ($self:ident, $q:ident => $body:expr) => {
        match $self {
            AnyQdisc::Fifo($q) => $body,
            AnyQdisc::Codel($q) => $body,
            AnyQdisc::FqCodel($q) => $body,
            AnyQdisc::Red($q) => $body,
            AnyQdisc::Pie($q) => $body,
            AnyQdisc::Cake($q) => $body,
            AnyQdisc::DualPi2($q) => $body,
        }
    };
}

impl<P> Qdisc<P> for AnyQdisc<P> {
    fn enqueue(&mut self, now: SimTime, pkt: Packet<P>, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        dispatch!(self, q => q.enqueue(now, pkt, rng, dropped))
    }
    fn dequeue(&mut self, now: SimTime, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        dispatch!(self, q => q.dequeue(now, rng, dropped))
    }
    fn backlog_bytes(&self) -> u64 {
        dispatch!(self, q => q.backlog_bytes())
    }
    fn backlog_packets(&self) -> usize {
        dispatch!(self, q => q.backlog_packets())
    }
    fn stats(&self) -> QdiscStats {
        dispatch!(self, q => q.stats())
    }
}

impl AqmConfig {
    /// Builds the qdisc. `limit` is the scenario's hard buffer; `rate_bps` the
    /// link it feeds (RED's idle-time estimate, PIE's and CAKE's rate knowledge);
    /// `psched_mtu_bytes` its device's MTU with the link header, `psched_mtu(dev)`, which
    /// CoDel, PIE, CAKE and DualPI2 read.
    pub fn build<P>(&self, limit: QueueLimit, rate_bps: u64, psched_mtu_bytes: u32) -> AnyQdisc<P> {
        match self {
            AqmConfig::Fifo => AnyQdisc::Fifo(fifo::Fifo::new(limit)),
            AqmConfig::Codel(cfg) => AnyQdisc::Codel(codel::Codel::new(cfg, psched_mtu_bytes)),
            AqmConfig::FqCodel(cfg) => AnyQdisc::FqCodel(fq_codel::FqCodel::new(cfg, psched_mtu_bytes)),
            AqmConfig::Red(c) => AnyQdisc::Red(red::Red::new(c, rate_bps)),
            AqmConfig::Pie(c) => AnyQdisc::Pie(pie::Pie::new(c, psched_mtu_bytes)),
            AqmConfig::Cake(c) => AnyQdisc::Cake(cake::Cake::new(c, psched_mtu_bytes)),
            AqmConfig::DualPi2(c) => AnyQdisc::DualPi2(dualpi2::DualPi2::new(c, psched_mtu_bytes)),
        }
    }
}

//! The kernel engine's hosts wake late after an idle spell.
//!
//! All of the kernel engine's hosts, its router and its delay line share one machine's
//! CPUs. When no packet has moved for a while the CPUs halt (the guest's `haltpoll` idle
//! driver, here with `guest_halt_poll_ns = 0`, halts at once), and the next packet waits
//! for a CPU to wake before a host handles it. On a busy path the CPUs never get that far,
//! and the simulator's per-ACK noise (jitter.rs) stands for what is left.
//!
//! Measured on the reference machine (docs/history/FIDELITY-investigations.md, "The idle machine: PROBE_RTT's
//! rounds and slow start's reads"), from router captures of BBR at 300 Mbit/s x 100 ms in
//! PROBE_RTT, where 4 packets cross the path every round and the machine idles ~50 ms
//! between crossings. The constants come from the first 4 runs (13 rounds); 12 runs (36
//! rounds) give 64 and ~100 us:
//! - the ACK left the router towards the sender (through the delay line, which sits on that
//!   direction) [`DELAY_LINE_WAKE_NS`] later than the simulator's noisy ACK arrives (median
//!   137 us over the configured RTT, against the noise's mean of 71 us); the receiver's own
//!   answer, seen at the router's receiver side, was only ~15 us slower than on a busy path;
//! - the sender's next data reached the router a median 116 us after the ACK that released
//!   it left the router, against ~10-15 us when the sender is busy (its 10th percentile in
//!   STARTUP); [`SENDER_WAKE_NS`] is the difference.
//!
//! Both wait on the ACK's way to its sender, so they are added there, to an ACK that
//! reaches a sender on an idle machine; ACKs arriving meanwhile wait with it and are
//! handled together, as the captures show.
//!
//! The receiving application sleeps too: after 5 ms without data its first read comes
//! 45 us plus an exponential late (tcp/receiver.rs `idle_reader_wake`). The two go together:
//! alone, the longer rounds line each autotuning measurement up with one whole slow-start
//! burst (copied 10, 10, 20, 40, ... 1280 in every seed), and the receiver's window never
//! holds a round back (1% of seeds, kernel 27%); with the reader's scattered wake-ups the
//! measurements cut bursts as the kernel's do (30% of seeds).
//!
//! What counts as idle is a threshold, [`IDLE_NS`]: pings on the idle testbed took the
//! busy path's minimum (~40 us over the configured RTT) when sent 0.2-2 ms apart and
//! 70-160 us more when sent 5-200 ms apart.

use cclab_cc::{SimDuration, SimTime};

/// How long the machine must have been idle for a packet to find it asleep.
pub const IDLE_NS: u64 = 5_000_000;
/// How much later than the busy path's noise the delay line releases an ACK after idling.
pub const DELAY_LINE_WAKE_NS: u64 = 66_000;
/// How much later than when busy an idle sender answers an ACK.
pub const SENDER_WAKE_NS: u64 = 101_000;
/// What an ACK reaching its sender on an idle machine waits in all.
pub const ACK_WAKE_NS: u64 = DELAY_LINE_WAKE_NS + SENDER_WAKE_NS;

/// The machine's idle state: when it last worked, and until when it is still waking.
#[derive(Clone, Debug, Default)]
pub struct MachineWake {
    enabled: bool,
    last_busy: SimTime,
    awake_at: SimTime,
}

impl MachineWake {
    /// The kernel engine's machine when the noise is on; a machine that never sleeps when
    /// it is off, so `jitter_ns = 0` keeps the noiseless model.
    pub fn kernel_like(enabled: bool) -> Self {
        MachineWake { enabled, ..Self::default() }
    }

    /// When an ACK reaching its sender at `now` is handled: `now` on a busy machine;
    /// [`ACK_WAKE_NS`] later on one that was idle for [`IDLE_NS`]; and, for ACKs arriving
    /// while it wakes, when it is awake (handled together, as in one softirq).
    pub fn ready_at(&mut self, now: SimTime) -> SimTime {
        if !self.enabled {
            return now;
        }
        if now < self.awake_at {
            return self.awake_at;
        }
        if now.saturating_since(self.last_busy) >= SimDuration(IDLE_NS) {
            self.awake_at = now + SimDuration(ACK_WAKE_NS);
            self.last_busy = self.awake_at;
            return self.awake_at;
        }
        now
    }

    /// The machine worked at `now` (a host handled a packet or sent one).
    pub fn busy(&mut self, now: SimTime) {
        self.last_busy = self.last_busy.max(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_busy_machine_handles_packets_at_once() {
        let mut m = MachineWake::kernel_like(true);
        m.busy(SimTime(10 * MS));
        let t = SimTime(10 * MS + IDLE_NS - 1);
        assert_eq!(m.ready_at(t), t);
    }

    #[test]
    fn after_an_idle_spell_an_ack_waits_for_the_delay_line_and_the_sender_to_wake() {
        let mut m = MachineWake::kernel_like(true);
        m.busy(SimTime(10 * MS));
        let t = SimTime(10 * MS + IDLE_NS);
        assert_eq!(m.ready_at(t), t + SimDuration(DELAY_LINE_WAKE_NS + SENDER_WAKE_NS));
    }

    #[test]
    fn acks_arriving_while_the_machine_wakes_wait_for_it_and_then_it_is_busy() {
        let mut m = MachineWake::kernel_like(true);
        let first = SimTime(50 * MS);
        let awake = m.ready_at(first);
        assert!(awake > first);
        // A second ACK 30 us behind the first is handled with it, not woken for again.
        assert_eq!(m.ready_at(first + SimDuration(30_000)), awake);
        // The re-delivered first ACK finds the machine awake.
        assert_eq!(m.ready_at(awake), awake);
        let later = awake + SimDuration(IDLE_NS - 1);
        assert_eq!(m.ready_at(later), later);
    }

    #[test]
    fn without_the_noise_the_machine_never_sleeps() {
        let mut m = MachineWake::kernel_like(false);
        let t = SimTime(500 * MS);
        assert_eq!(m.ready_at(t), t);
    }
}

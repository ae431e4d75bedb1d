//! Loss recovery (`tcp_fastretrans_alert`): the Open/Disorder/Recovery state machine,
//! cwnd reduction bookkeeping, and RACK loss detection over the time-ordered queue, or
//! without RACK (`net.ipv4.tcp_recovery = 0`) the duplicate-ACK scoreboard.

use super::{FlowEvent, TcpSender, XmitTimer, LOST, RETRANS_IN_FLIGHT, SACKED, TCP_REORDERING, TCP_TIMEOUT_MIN};
use crate::event::EventQueue;
use crate::tcp::prr::Prr;
use crate::tcp::rack;
use cclab_cc::{CaState, CongestionControl, CwndEvent, LostPacket, SimDuration, SimTime, INFINITE_SSTHRESH};
use std::cmp::Reverse;

impl TcpSender {

    pub(super) fn set_ca_state(&mut self, now: SimTime, new_state: CaState) {
        if self.tcp.ca_state == new_state {
            return;
        }
        self.sync_state(now);
        self.cc.set_state(&mut self.tcp, new_state);
        self.events.push(FlowEvent { time: now, kind: "ca_state", detail: format!("{:?}", new_state).to_lowercase() });
        self.tcp.ca_state = new_state;
    }

    pub(super) fn in_cwnd_reduction(&self) -> bool {
        matches!(self.tcp.ca_state, CaState::Recovery | CaState::Cwr)
    }

    /// `tcp_init_cwnd_reduction`.
    pub(super) fn init_cwnd_reduction(&mut self, now: SimTime) {
        self.high_seq = self.tcp.snd_nxt;
        self.tlp_high_seq = None;
        self.tcp.snd_cwnd_cnt = 0;
        self.tcp.prior_cwnd = self.tcp.snd_cwnd;
        self.prr = Prr::start(self.tcp.snd_cwnd);
        self.sync_state(now);
        self.tcp.snd_ssthresh = self.cc.ssthresh(&self.tcp);
        self.queue_cwr();
    }

    /// `tcp_ecn_queue_cwr`: tell the receiver (CWR) that the window was reduced.
    pub(super) fn queue_cwr(&mut self) {
        // AccECN has no CWR flag: the ACE counter carries the feedback.
        if self.tcp.ecn_ok && !self.accecn {
            self.ecn_queue_cwr = true;
        }
    }

    /// `tcp_enter_cwr`: an ECE starts one PRR-paced reduction to the CC's
    /// ssthresh, unless one (CWR, Recovery, Loss) is already under way.
    pub(super) fn enter_cwr(&mut self, now: SimTime) {
        if matches!(self.tcp.ca_state, CaState::Open | CaState::Disorder) {
            self.init_cwnd_reduction(now);
            self.set_ca_state(now, CaState::Cwr);
        }
    }

    /// `tcp_end_cwnd_reduction`: classic CCs resume at ssthresh.
    pub(super) fn end_cwnd_reduction(&mut self, now: SimTime) {
        if self.cc_owns_cwnd {
            return;
        }
        if self.tcp.snd_ssthresh < INFINITE_SSTHRESH {
            self.tcp.snd_cwnd = self.tcp.snd_ssthresh;
        }
        self.sync_state(now);
        self.cc.cwnd_event(&mut self.tcp, CwndEvent::CompleteCwr);
    }

    /// `tcp_enter_recovery`.
    pub(super) fn enter_recovery(&mut self, now: SimTime) {
        if !self.in_cwnd_reduction() {
            self.init_cwnd_reduction(now);
        }
        self.set_ca_state(now, CaState::Recovery);
    }

    /// `tcp_try_to_open`: an ECE enters CWR; otherwise `tcp_try_keep_open`.
    pub(super) fn try_to_open(&mut self, now: SimTime, ece: bool) {
        if ece {
            self.enter_cwr(now);
        }
        if self.tcp.ca_state == CaState::Cwr {
            return;
        }
        let state = if self.sacked_out + self.lost_out + self.retrans_out > 0 { CaState::Disorder } else { CaState::Open };
        if self.tcp.ca_state != state {
            self.set_ca_state(now, state);
            self.high_seq = self.tcp.snd_nxt;
        }
    }

    /// `tcp_mark_skb_lost`: returns true if the segment was newly counted lost.
    pub(super) fn mark_lost(&mut self, seq: u64) {
        let seg = self.segment_mut(seq);
        if seg.flags & SACKED != 0 {
            return;
        }
        if seg.flags & LOST != 0 {
            if seg.flags & RETRANS_IN_FLIGHT != 0 {
                // The retransmission itself was lost.
                seg.flags &= !RETRANS_IN_FLIGHT;
                self.retrans_out -= 1;
                self.tcp.lost += 1;
                self.lost_queue.push(Reverse(seq));
                self.notify_lost(seq);
            }
        } else {
            seg.flags |= LOST;
            self.lost_out += 1;
            self.tcp.lost += 1;
            self.lost_queue.push(Reverse(seq));
            self.notify_lost(seq);
        }
    }

    /// google/bbr v3 `tcp_notify_skb_loss_event`: tell the CC which packet
    /// was just marked lost (after `tp->lost` counted it).
    fn notify_lost(&mut self, seq: u64) {
        let tx = &self.segment(seq).tx;
        let pkt = LostPacket {
            tx_in_flight: tx.in_flight,
            tx_lost: tx.lost,
            tx_delivered_ce: tx.delivered_ce,
            is_app_limited: tx.is_app_limited,
            has_delivered_time: tx.delivered_time.is_some(),
        };
        self.cc.skb_marked_lost(&self.tcp, &pkt);
    }

    /// Is this time-sorted entry still a live transmission RACK must judge?
    pub(super) fn time_sorted_entry_live(&self, xmit_time: SimTime, seq: u64) -> bool {
        if seq < self.tcp.snd_una {
            return false;
        }
        let seg = self.segment(seq);
        seg.xmit_time == xmit_time && seg.flags & SACKED == 0 && !(seg.flags & LOST != 0 && seg.flags & RETRANS_IN_FLIGHT == 0)
    }

    /// `tcp_rack_detect_loss`: marks lost every packet sent before the most
    /// recently delivered one by more than the reordering window. Returns the
    /// longest wait for packets still inside the window.
    pub(super) fn rack_detect_loss(&mut self, now: SimTime) -> Option<SimDuration> {
        let in_recovery = matches!(self.tcp.ca_state, CaState::Recovery | CaState::Loss);
        let reo_wnd = rack::reo_wnd(false, in_recovery, self.sacked_out, self.rtt.min_rtt(), self.rtt.srtt());
        // Lost packets are a prefix of the live entries (remaining grows with send time).
        while let Some(&(xmit_time, seq)) = self.time_sorted.front() {
            if !self.time_sorted_entry_live(xmit_time, seq) {
                self.time_sorted.pop_front();
                continue;
            }
            if !rack::sent_after(self.rack.xmit_time, self.rack.end_seq, xmit_time, seq) {
                return None;
            }
            if self.rack.remaining(now, xmit_time, reo_wnd) > 0 {
                break;
            }
            self.mark_lost(seq);
            self.time_sorted.pop_front();
        }
        // Packets inside the window: wait for the last of them (Linux takes the max).
        let mut longest: Option<i64> = None;
        for &(xmit_time, seq) in self.time_sorted.iter() {
            if !self.time_sorted_entry_live(xmit_time, seq) {
                continue;
            }
            if !rack::sent_after(self.rack.xmit_time, self.rack.end_seq, xmit_time, seq) {
                break;
            }
            longest = Some(self.rack.remaining(now, xmit_time, reo_wnd));
        }
        longest.map(|ns| SimDuration(ns.max(1) as u64))
    }

    /// `tcp_identify_packet_loss`: RACK's detection for a SACK connection, nothing without it.
    /// Returns true if a retransmission was lost.
    pub(super) fn identify_packet_loss(&mut self, now: SimTime, set_xmit_timer: &mut bool, queue: &mut EventQueue) -> bool {
        if self.packets_out() == 0 || !self.rack.advanced || !self.rack_loss_detection {
            return false;
        }
        self.rack.advanced = false;
        let prior_retrans = self.retrans_out;
        if let Some(wait) = self.rack_detect_loss(now) {
            // `tcp_rack_mark_lost`: re-check when the last packet in the window expires.
            self.arm_xmit_timer(XmitTimer::ReoTimeout, now + wait + TCP_TIMEOUT_MIN, queue);
            *set_xmit_timer = false;
        }
        self.retrans_out < prior_retrans
    }

    /// `tcp_fastretrans_alert` D: Recovery ends once everything outstanding at its start is
    /// acknowledged; CWR holds until data *above* high_seq is, so the CWR flag (on the first
    /// segment past it) has reached the receiver.
    fn end_finished_reduction(&mut self, now: SimTime) {
        let snd_una = self.tcp.snd_una;
        if self.tcp.ca_state == CaState::Recovery && snd_una >= self.high_seq {
            self.set_ca_state(now, CaState::Open);
            self.end_cwnd_reduction(now);
        }
        if self.tcp.ca_state == CaState::Cwr && snd_una > self.high_seq {
            self.end_cwnd_reduction(now);
            self.set_ca_state(now, CaState::Open);
        }
    }

    /// `tcp_time_to_recover`: a loss is proven, or (without RACK) more than `tp->reordering`
    /// duplicate ACKs' worth of segments were SACKed (`tcp_dupack_heuristics`).
    fn time_to_recover(&self) -> bool {
        self.lost_out > 0 || (!self.rack_loss_detection && self.sacked_out + 1 > TCP_REORDERING)
    }

    /// `tcp_force_fast_retransmit`: SACKs reach more than `tp->reordering` segments above
    /// snd_una (`tcp_highest_sack_seq` is where the highest SACKed segment ends).
    fn force_fast_retransmit(&self) -> bool {
        self.sacked_ranges.last().is_some_and(|(_, end)| end > self.tcp.snd_una + TCP_REORDERING as u64)
    }

    /// `tcp_update_scoreboard` (SACK): a segment with `tp->reordering` SACKed segments above it
    /// is lost; on entering recovery with fewer, the head is.
    fn update_scoreboard(&mut self, fast_rexmit: bool) {
        let sacked_upto = self.sacked_out as i64 - TCP_REORDERING as i64;
        if sacked_upto >= 0 {
            self.mark_head_lost(sacked_upto as u64, false);
        } else if fast_rexmit {
            self.mark_head_lost(1, true);
        }
    }

    /// `tcp_mark_head_lost`: from the head, every segment not SACKed is lost until more than
    /// `packets` SACKed ones are passed; `mark_head`: the head only. Segments sent are the limit
    /// (`loss_high = snd_nxt`).
    fn mark_head_lost(&mut self, packets: u64, mark_head: bool) {
        let snd_una = self.tcp.snd_una;
        if mark_head {
            // "Head already handled?": the walk has been past it.
            if self.scoreboard_marked_upto <= snd_una && snd_una < self.tcp.snd_nxt {
                self.mark_lost(snd_una);
                self.scoreboard_marked_upto = snd_una + 1;
            }
            return;
        }
        // The walk stops at the SACKed segment that makes the count exceed `packets`.
        let mut count = 0;
        let mut stop = self.tcp.snd_nxt;
        for (start, end) in self.sacked_ranges.iter() {
            if count + (end - start) > packets {
                stop = start + (packets - count);
                break;
            }
            count += end - start;
        }
        let mut seq = self.scoreboard_marked_upto.max(snd_una);
        while seq < stop {
            // SACKed segments are skipped whole (mark_lost leaves them alone anyway).
            match self.sacked_ranges.range_containing(seq) {
                Some((_, end)) => seq = end,
                None => {
                    if self.segment(seq).flags & LOST == 0 {
                        self.mark_lost(seq);
                    }
                    seq += 1;
                }
            }
        }
        self.scoreboard_marked_upto = self.scoreboard_marked_upto.max(stop.min(self.tcp.snd_nxt));
    }

    /// `tcp_fastretrans_alert` for a SACK connection, with RACK (`net.ipv4.tcp_recovery = 1`,
    /// Linux's default) or the classic scoreboard (0).
    /// `dupack`: the ACK did not move snd_una (`num_dupack`); `data_sacked`: it SACKed new
    /// data (FLAG_DATA_SACKED). Without RACK they make `do_lost`.
    pub(super) fn fastretrans_alert(
        &mut self,
        now: SimTime,
        ece: bool,
        dupack: bool,
        data_sacked: bool,
        set_xmit_timer: &mut bool,
        queue: &mut EventQueue,
    ) {
        if !self.rack_loss_detection {
            let do_lost = dupack || (data_sacked && self.force_fast_retransmit());
            self.fastretrans_alert_classic(now, ece, do_lost);
            return;
        }
        let snd_una = self.tcp.snd_una;
        self.end_finished_reduction(now);
        // E. Process the state.
        match self.tcp.ca_state {
            CaState::Recovery => {
                self.identify_packet_loss(now, set_xmit_timer, queue);
                return;
            }
            CaState::Loss => {
                // tcp_process_loss: recovered once snd_una passes high_seq.
                if snd_una >= self.high_seq {
                    self.set_ca_state(now, CaState::Open);
                }
                let lost_retrans = self.identify_packet_loss(now, set_xmit_timer, queue);
                if !(self.tcp.ca_state == CaState::Open || lost_retrans) {
                    return;
                }
            }
            _ => {
                self.identify_packet_loss(now, set_xmit_timer, queue);
            }
        }
        if self.lost_out == 0 {
            self.try_to_open(now, ece);
            return;
        }
        self.enter_recovery(now);
    }

    /// `tcp_fastretrans_alert` without RACK (no undo, as on the RACK path): in Recovery the
    /// scoreboard marks; elsewhere `tcp_time_to_recover` enters Recovery and marks the head.
    fn fastretrans_alert_classic(&mut self, now: SimTime, ece: bool, do_lost: bool) {
        let snd_una = self.tcp.snd_una;
        self.end_finished_reduction(now);
        let mut fast_rexmit = false;
        if self.tcp.ca_state != CaState::Recovery {
            if self.tcp.ca_state == CaState::Loss {
                // tcp_process_loss; no lost retransmission is detected without RACK.
                if snd_una >= self.high_seq {
                    self.set_ca_state(now, CaState::Open);
                }
                if self.tcp.ca_state == CaState::Loss {
                    return;
                }
            }
            if !self.time_to_recover() {
                self.try_to_open(now, ece);
                return;
            }
            self.enter_recovery(now);
            self.scoreboard_marked_upto = snd_una;
            fast_rexmit = true;
        }
        if do_lost {
            self.update_scoreboard(fast_rexmit);
        }
    }
}

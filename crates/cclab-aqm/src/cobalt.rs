//! COBALT, CAKE's per-flow AQM: CoDel's control law and BLUE side by side
//! (net/sched/sch_cake.c `cobalt_should_drop`, `cobalt_queue_full`,
//! `cobalt_queue_empty`). CoDel handles flows that respond to signals; BLUE,
//! raised only by overflow drops, handles those that do not.

use crate::ecn::mark;
use crate::{PacketMeta, QdiscStats};
use cclab_cc::rng::SimRng;

/// `struct cobalt_params`, times in ns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CobaltParams {
    pub interval_ns: u64,
    pub target_ns: u64,
    /// Serialisation time of an MTU at the shaped rate; 0 when unlimited.
    pub mtu_time_ns: u64,
    /// BLUE steps, Q0.32 (`cake_set_rate`: 1/256 up, 1/4096 down).
    pub p_inc: u32,
    pub p_dec: u32,
    /// Signal CoDel's congestion on ECT packets with CE (CAKE always does).
    pub ecn: bool,
    /// `cobalt_rec_inv_sqrt_cache`.
    pub inv_sqrt: [u32; 16],
}

/// `struct cobalt_vars`, times in ns.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CobaltVars {
    pub count: u32,
    /// 1/sqrt(count), Q0.32.
    rec_inv_sqrt: u32,
    pub drop_next_ns: i64,
    blue_timer_ns: i64,
    /// BLUE's drop probability, Q0.32.
    pub p_drop: u32,
    dropping: bool,
}

/// `cobalt_rec_inv_sqrt_cache`: 1/sqrt(count) for count < 16 after four Newton
/// steps each (`cobalt_cache_init`); entries 0 and 1 are both ~1.0.
pub(crate) fn inv_sqrt_cache() -> [u32; 16] {
    let mut cache = [0u32; 16];
    let mut v = CobaltVars { rec_inv_sqrt: !0, ..Default::default() };
    cache[0] = v.rec_inv_sqrt;
    for count in 1..16 {
        v.count = count;
        for _ in 0..4 {
            v.newton_step();
        }
        cache[count as usize] = v.rec_inv_sqrt;
    }
    cache
}

/// `cobalt_control`: t + interval / sqrt(count) (`reciprocal_scale` of a u32 interval).
fn control(t_ns: i64, interval_ns: u64, rec_inv_sqrt: u32) -> i64 {
    t_ns + ((interval_ns as u32 as u64 * rec_inv_sqrt as u64) >> 32) as i64
}

impl CobaltVars {
    /// `cobalt_newton_step`: invsqrt' = invsqrt / 2 * (3 - count * invsqrt^2).
    fn newton_step(&mut self) {
        let invsqrt = self.rec_inv_sqrt as u64;
        let invsqrt2 = (invsqrt * invsqrt) >> 32;
        let mut val = (3u64 << 32).wrapping_sub(self.count as u64 * invsqrt2);
        val >>= 2; // avoid overflow in the multiply
        val = (val * invsqrt) >> (32 - 2 + 1);
        self.rec_inv_sqrt = val as u32;
    }

    fn invsqrt(&mut self, cache: &[u32; 16]) {
        if self.count < 16 {
            self.rec_inv_sqrt = cache[self.count as usize];
        } else {
            self.newton_step();
        }
    }

    /// `cobalt_queue_full`: an overflow drop hit this flow. Raises BLUE at most
    /// once per target; returns true when BLUE just became active.
    pub fn queue_full(&mut self, p: &CobaltParams, now_ns: i64) -> bool {
        let mut up = false;
        if now_ns - self.blue_timer_ns > p.target_ns as i64 {
            up = self.p_drop == 0;
            self.p_drop = self.p_drop.wrapping_add(p.p_inc);
            if self.p_drop < p.p_inc {
                self.p_drop = !0;
            }
            self.blue_timer_ns = now_ns;
        }
        self.dropping = true;
        self.drop_next_ns = now_ns;
        if self.count == 0 {
            self.count = 1;
        }
        up
    }

    /// `cobalt_queue_empty`: the flow was found empty. Lowers BLUE at most once
    /// per target and lets CoDel's count decay; true when BLUE just went quiet.
    pub fn queue_empty(&mut self, p: &CobaltParams, now_ns: i64) -> bool {
        let mut down = false;
        if self.p_drop != 0 && now_ns - self.blue_timer_ns > p.target_ns as i64 {
            self.p_drop = self.p_drop.saturating_sub(p.p_dec);
            self.blue_timer_ns = now_ns;
            down = self.p_drop == 0;
        }
        self.dropping = false;
        if self.count != 0 && now_ns - self.drop_next_ns >= 0 {
            self.count -= 1;
            self.invsqrt(&p.inv_sqrt);
            self.drop_next_ns = control(self.drop_next_ns, p.interval_ns, self.rec_inv_sqrt);
        }
        down
    }

    /// `cobalt_should_drop` for a freshly dequeued packet: true to drop it.
    /// CoDel's signal is a CE mark on an ECT packet (when `ecn`), else a drop;
    /// BLUE always drops. `bulk_flows` is 0 unless CAKE shapes ingress.
    pub fn should_drop(
        &mut self,
        p: &CobaltParams,
        now_ns: i64,
        meta: &mut PacketMeta,
        bulk_flows: u64,
        stats: &mut QdiscStats,
        rng: &mut SimRng,
    ) -> bool {
        let sojourn = (now_ns - meta.enqueue_time.as_nanos() as i64).max(0) as u64;
        let mut schedule = now_ns - self.drop_next_ns;
        let over_target =
            sojourn > p.target_ns && sojourn > p.mtu_time_ns * bulk_flows * 2 && sojourn > p.mtu_time_ns * 4;
        let mut next_due = self.count != 0 && schedule >= 0;
        let mut drop = false;

        if over_target {
            if !self.dropping {
                self.dropping = true;
                self.drop_next_ns = control(now_ns, p.interval_ns, self.rec_inv_sqrt);
            }
            if self.count == 0 {
                self.count = 1;
            }
        } else if self.dropping {
            self.dropping = false;
        }

        if next_due && self.dropping {
            // Use ECN mark if possible, otherwise drop.
            drop = !(p.ecn && mark(meta, stats));
            self.count = self.count.saturating_add(1);
            self.invsqrt(&p.inv_sqrt);
            self.drop_next_ns = control(self.drop_next_ns, p.interval_ns, self.rec_inv_sqrt);
            schedule = now_ns - self.drop_next_ns;
        } else {
            while next_due {
                self.count -= 1;
                self.invsqrt(&p.inv_sqrt);
                self.drop_next_ns = control(self.drop_next_ns, p.interval_ns, self.rec_inv_sqrt);
                schedule = now_ns - self.drop_next_ns;
                next_due = self.count != 0 && schedule >= 0;
            }
        }

        // Simple BLUE; the lack of ECN is deliberate (sch_cake.c). Drawn only for
        // a packet CoDel has not dropped (a CE-marked one may still be dropped).
        if self.p_drop != 0 && !drop && ((rng.next_u64() >> 32) as u32) < self.p_drop {
            drop = true;
        }

        // drop_next doubles as an activity timeout.
        if self.count == 0 {
            self.drop_next_ns = now_ns + p.interval_ns as i64;
        } else if schedule > 0 && !drop {
            self.drop_next_ns = now_ns;
        }
        drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inverse_square_root_cache_holds_one_over_root_count() {
        let cache = inv_sqrt_cache();
        assert_eq!(cache[0], !0);
        assert_eq!(cache[1], !0);
        for (n, &v) in cache.iter().enumerate().skip(2) {
            let exact = 1.0 / (n as f64).sqrt();
            let got = v as f64 / 4294967296.0;
            assert!((got - exact).abs() < 1e-3, "count {n}: {got} vs {exact}");
        }
    }
}

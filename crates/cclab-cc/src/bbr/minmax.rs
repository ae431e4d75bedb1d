//! Kathleen Nichols' windowed max filter, as Linux `lib/win_minmax.c`
//! (`minmax_running_max`) keeps it for BBR's bandwidth estimate.
//!
//! It remembers the best, second-best and third-best samples of the window,
//! with their times, in constant space; when the best one ages out of the
//! window the second takes its place. Time is a wrapping `u32` in whatever
//! unit the caller uses (BBR: packet-timed round trips), as in Linux.

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sample {
    t: u32,
    v: u64,
}

/// Linux `struct minmax` used with `minmax_running_max`.
#[derive(Clone, Debug, Default)]
pub struct WindowedMax {
    s: [Sample; 3],
}

impl WindowedMax {
    /// `minmax_reset`: forget everything; `v` at time `t` becomes all three choices.
    pub fn reset(&mut self, t: u32, v: u64) -> u64 {
        self.s = [Sample { t, v }; 3];
        v
    }

    /// `minmax_get`: the windowed maximum.
    pub fn get(&self) -> u64 {
        self.s[0].v
    }

    /// `minmax_running_max`: add measurement `v` taken at time `t`, with a window
    /// of `win` time units, and return the new maximum.
    pub fn update(&mut self, win: u32, t: u32, v: u64) -> u64 {
        let val = Sample { t, v };
        // A new maximum, or nothing left in the window: start afresh.
        if v >= self.s[0].v || t.wrapping_sub(self.s[2].t) > win {
            return self.reset(t, v);
        }
        if v >= self.s[1].v {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].v {
            self.s[2] = val;
        }
        self.subwin_update(win, val)
    }

    /// `minmax_subwin_update`: age the choices as time passes.
    fn subwin_update(&mut self, win: u32, val: Sample) -> u64 {
        let dt = val.t.wrapping_sub(self.s[0].t);
        if dt > win {
            // The best sample left the window: promote the others. The second
            // choice may be too old as well, so this can happen twice.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = val;
            if val.t.wrapping_sub(self.s[0].t) > win {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = val;
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            // A quarter of the window passed without a new second choice:
            // take one from the second quarter.
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            // Half the window passed: take a third choice from the second half.
            self.s[2] = val;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIN: u32 = 10;

    #[test]
    fn a_larger_sample_becomes_the_max_at_once() {
        let mut f = WindowedMax::default();
        f.reset(0, 0);
        assert_eq!(f.update(WIN, 1, 50), 50);
        assert_eq!(f.update(WIN, 2, 40), 50);
        assert_eq!(f.update(WIN, 3, 70), 70);
    }

    #[test]
    fn the_max_expires_after_the_window_and_the_runner_up_takes_over() {
        let mut f = WindowedMax::default();
        f.reset(0, 0);
        f.update(WIN, 1, 100);
        // At t=4 (> win/4 after the max) 60 becomes the second choice; at
        // t=7 (> win/2) 30 becomes the third.
        f.update(WIN, 4, 60);
        f.update(WIN, 7, 30);
        // t=11 is still within 10 rounds of t=1: the max holds.
        assert_eq!(f.update(WIN, 11, 20), 100);
        // t=12 is 11 rounds after the max: 60 (from t=4) takes over.
        assert_eq!(f.update(WIN, 12, 20), 60);
    }

    #[test]
    fn a_window_with_nothing_left_restarts_from_the_new_sample() {
        let mut f = WindowedMax::default();
        f.reset(0, 0);
        f.update(WIN, 1, 100);
        // The third choice (t=1) is more than 10 rounds old.
        assert_eq!(f.update(WIN, 30, 5), 5);
    }

    #[test]
    fn round_counts_that_wrap_around_u32_still_age_correctly() {
        let mut f = WindowedMax::default();
        f.reset(u32::MAX - 1, 100);
        assert_eq!(f.update(WIN, 3, 10), 100);
        assert_eq!(f.update(WIN, 10, 10), 10);
    }
}

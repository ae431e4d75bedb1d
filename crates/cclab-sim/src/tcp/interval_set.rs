//! A set of disjoint half-open segment ranges, merged on insert.
//!
//! The sender keeps its SACKed ranges here, so a SACK block that covers
//! thousands of already-SACKed segments costs O(log n), not O(n): only the
//! part of a block not yet in the set is visited. The receiver keeps its
//! out-of-order data the same way.

use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub struct IntervalSet {
    /// start -> end (exclusive); disjoint and non-adjacent.
    ranges: BTreeMap<u64, u64>,
}

impl IntervalSet {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn len_ranges(&self) -> usize {
        self.ranges.len()
    }

    /// The range containing `seq`, if any.
    pub fn range_containing(&self, seq: u64) -> Option<(u64, u64)> {
        let (&start, &end) = self.ranges.range(..=seq).next_back()?;
        (seq < end).then_some((start, end))
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.range_containing(seq).is_some()
    }

    /// Adds `[start, end)` and calls `on_new(a, b)` for each sub-range that was
    /// not already in the set, in increasing order.
    pub fn insert(&mut self, start: u64, end: u64, mut on_new: impl FnMut(u64, u64)) {
        if start >= end {
            return;
        }
        let mut merged_start = start;
        let mut merged_end = end;
        let mut cursor = start;
        // A range starting at or before `start` that reaches it absorbs the front.
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e >= start {
                if e >= end {
                    return;
                }
                merged_start = s;
                cursor = e;
                self.ranges.remove(&s);
            }
        }
        // Ranges starting inside (cursor, end] are swallowed; gaps between them are new.
        while let Some((&s, &e)) = self.ranges.range(cursor..=end).next() {
            if s > cursor {
                on_new(cursor, s);
            }
            self.ranges.remove(&s);
            cursor = cursor.max(e);
            merged_end = merged_end.max(e);
            if cursor >= end {
                break;
            }
        }
        if cursor < end {
            on_new(cursor, end);
        }
        self.ranges.insert(merged_start, merged_end);
    }

    /// Forgets everything below `seq` (cumulatively acknowledged data).
    pub fn remove_below(&mut self, seq: u64) {
        while let Some((&s, &e)) = self.ranges.first_key_value() {
            if e <= seq {
                self.ranges.remove(&s);
            } else {
                if s < seq {
                    self.ranges.remove(&s);
                    self.ranges.insert(seq, e);
                }
                break;
            }
        }
    }

    /// The highest range, if any.
    pub fn last(&self) -> Option<(u64, u64)> {
        self.ranges.last_key_value().map(|(&s, &e)| (s, e))
    }

    /// The ranges in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    /// The lowest range, if any.
    pub fn first(&self) -> Option<(u64, u64)> {
        self.ranges.first_key_value().map(|(&s, &e)| (s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn new_parts(set: &mut IntervalSet, s: u64, e: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        set.insert(s, e, |a, b| out.push((a, b)));
        out
    }

    #[test]
    fn inserting_over_existing_ranges_reports_only_the_gaps() {
        let mut set = IntervalSet::default();
        new_parts(&mut set, 10, 20);
        new_parts(&mut set, 30, 40);
        assert_eq!(new_parts(&mut set, 5, 45), vec![(5, 10), (20, 30), (40, 45)]);
        assert_eq!(set.first(), Some((5, 45)));
        assert_eq!(set.len_ranges(), 1);
    }

    #[test]
    fn a_block_inside_a_known_range_is_not_new() {
        let mut set = IntervalSet::default();
        new_parts(&mut set, 0, 100);
        assert!(new_parts(&mut set, 10, 90).is_empty());
    }

    #[test]
    fn adjacent_ranges_merge() {
        let mut set = IntervalSet::default();
        new_parts(&mut set, 0, 5);
        new_parts(&mut set, 5, 9);
        assert_eq!(set.len_ranges(), 1);
        assert_eq!(set.range_containing(7), Some((0, 9)));
    }

    #[test]
    fn remove_below_trims_the_first_range() {
        let mut set = IntervalSet::default();
        new_parts(&mut set, 3, 8);
        new_parts(&mut set, 10, 12);
        set.remove_below(5);
        assert_eq!(set.first(), Some((5, 8)));
        set.remove_below(11);
        assert_eq!(set.first(), Some((11, 12)));
    }

    proptest! {
        #[test]
        fn matches_a_plain_bitmap(ops in proptest::collection::vec((0u64..200, 1u64..30), 1..60)) {
            let mut set = IntervalSet::default();
            let mut bitmap = vec![false; 256];
            for (s, len) in ops {
                let e = (s + len).min(256);
                let mut reported = Vec::new();
                set.insert(s, e, |a, b| reported.extend(a..b));
                let expected: Vec<u64> = (s..e).filter(|&i| !bitmap[i as usize]).collect();
                prop_assert_eq!(reported, expected);
                for i in s..e { bitmap[i as usize] = true; }
                for i in 0..256u64 { prop_assert_eq!(set.contains(i), bitmap[i as usize]); }
            }
        }
    }
}

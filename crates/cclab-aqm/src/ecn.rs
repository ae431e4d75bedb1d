//! Setting CE on a packet, as include/net/inet_ecn.h `INET_ECN_set_ce` does.

use crate::{Ecn, PacketMeta, QdiscStats};

/// `INET_ECN_set_ce`: true when the packet now carries CE (it was ECT, or already CE);
/// a Not-ECT packet is left alone and the caller drops it instead.
pub fn set_ce(meta: &mut PacketMeta) -> bool {
    match meta.ecn {
        Ecn::Ect0 | Ecn::Ect1 | Ecn::Ce => {
            meta.ecn = Ecn::Ce;
            true
        }
        Ecn::NotEct => false,
    }
}

/// `set_ce`, counting a mark in `stats` whenever it succeeds, as the qdiscs count
/// `ecn_mark` / `prob_mark` on INET_ECN_set_ce's return value.
pub(crate) fn mark(meta: &mut PacketMeta, stats: &mut QdiscStats) -> bool {
    let marked = set_ce(meta);
    stats.ce_marks += marked as u64;
    marked
}

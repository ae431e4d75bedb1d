//! Setting CE on a packet, as include/net/inet_ecn.h `INET_ECN_set_ce` does.

use crate::{Ecn, PacketMeta, QdiscStats};

/// `INET_ECN_set_ce`: true when the packet now carries CE, i.e. it was ECT
/// (now marked, counted in `stats.ce_marks`) or already CE. A Not-ECT packet
/// is left alone and the caller drops it instead.
pub(crate) fn set_ce(meta: &mut PacketMeta, stats: &mut QdiscStats) -> bool {
    match meta.ecn {
        Ecn::Ect0 | Ecn::Ect1 => {
            meta.ecn = Ecn::Ce;
            stats.ce_marks += 1;
            true
        }
        Ecn::Ce => true,
        Ecn::NotEct => false,
    }
}

//! The few IPv4/TCP header fields the userspace bottleneck reads, and the one it writes:
//! the ECN field (RFC 3168 section 5), with the header checksum updated incrementally
//! (RFC 1624 eqn. 3), as the kernel's IP_ECN_set_ce (include/net/inet_ecn.h) does.

use cclab_aqm::Ecn;

/// What the bottleneck needs of one packet: wire length, ECN codepoint and the 5-tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// IP total length (bytes of the IP packet).
    pub ip_len: u16,
    pub ecn: Ecn,
    pub proto: u8,
    pub saddr: [u8; 4],
    pub daddr: [u8; 4],
    /// TCP/UDP ports (0 for other protocols or a truncated copy).
    pub sport: u16,
    pub dport: u16,
}

/// Ethernet header bytes added to the IP length: tbf counts whole frames (qdisc_pkt_len of an
/// skb on a veth includes the 14-byte hard header), so the shaper and the queue limit do too.
pub const ETH_HEADER_BYTES: u32 = 14;

const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

pub fn ecn_of(tos: u8) -> Ecn {
    match tos & 0b11 {
        0b00 => Ecn::NotEct,
        0b01 => Ecn::Ect1,
        0b10 => Ecn::Ect0,
        _ => Ecn::Ce,
    }
}

/// Parses an IPv4 header; None if `pkt` is not IPv4 or is shorter than its header.
pub fn parse(pkt: &[u8]) -> Option<Header> {
    if pkt.len() < 20 || pkt[0] >> 4 != 4 {
        return None;
    }
    let ihl = ((pkt[0] & 0x0f) as usize) * 4;
    if ihl < 20 || pkt.len() < ihl {
        return None;
    }
    let proto = pkt[9];
    let (sport, dport) = if matches!(proto, IPPROTO_TCP | IPPROTO_UDP) && pkt.len() >= ihl + 4 {
        (u16::from_be_bytes([pkt[ihl], pkt[ihl + 1]]), u16::from_be_bytes([pkt[ihl + 2], pkt[ihl + 3]]))
    } else {
        (0, 0)
    };
    Some(Header {
        ip_len: u16::from_be_bytes([pkt[2], pkt[3]]),
        ecn: ecn_of(pkt[1]),
        proto,
        saddr: pkt[12..16].try_into().unwrap(),
        daddr: pkt[16..20].try_into().unwrap(),
        sport,
        dport,
    })
}

/// Sets the ECN field of an ECT packet to CE and patches the header checksum in place.
/// Returns false (and leaves the packet alone) if it is not ECT: a Not-ECT packet must be
/// dropped, never marked (RFC 3168 section 5), and a CE packet needs no change.
pub fn set_ce(pkt: &mut [u8]) -> bool {
    if pkt.len() < 20 || !ecn_of(pkt[1]).is_ect() {
        return false;
    }
    // The first 16-bit word holds version/IHL and TOS; only its ECN bits change.
    let old_word = u16::from_be_bytes([pkt[0], pkt[1]]);
    pkt[1] |= 0b11;
    let new_word = u16::from_be_bytes([pkt[0], pkt[1]]);
    let old_check = u16::from_be_bytes([pkt[10], pkt[11]]);
    let check = incremental_checksum(old_check, old_word, new_word);
    pkt[10..12].copy_from_slice(&check.to_be_bytes());
    true
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), in one's complement arithmetic.
pub fn incremental_checksum(old_check: u16, old_word: u16, new_word: u16) -> u16 {
    let mut sum = (!old_check as u32) + (!old_word as u32) + new_word as u32;
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The header checksum computed from scratch (RFC 791): the reference the tests compare with.
#[cfg(test)]
pub fn header_checksum(header: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, pair) in header.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        sum += u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]) as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP segment's IPv4 header (20 bytes) and ports, checksum filled in.
    fn segment(tos: u8, id: u16, ttl: u8) -> Vec<u8> {
        let mut p = vec![0x45, tos, 0x05, 0xdc, (id >> 8) as u8, id as u8, 0x40, 0, ttl, 6, 0, 0, 10, 200, 1, 2, 10, 200, 0, 2];
        p.extend_from_slice(&[0x9c, 0x41, 0x14, 0x51]); // ports 40001 -> 5201
        let c = header_checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn marking_ce_keeps_the_header_checksum_equal_to_a_full_recomputation() {
        // Many headers, so that end-around carries of the one's complement sum occur.
        for id in (0..=u16::MAX).step_by(97) {
            for (tos, ttl) in [(0x02u8, 64u8), (0x01, 1), (0xba, 255), (0x02, 0)] {
                let mut p = segment(tos, id, ttl);
                assert!(set_ce(&mut p));
                assert_eq!(p[1] & 0b11, 0b11);
                assert_eq!(p[1] & !0b11, tos & !0b11, "DSCP bits must not change");
                assert_eq!(u16::from_be_bytes([p[10], p[11]]), header_checksum(&p[..20]), "id {id} tos {tos:#x}");
            }
        }
    }

    #[test]
    fn a_not_ect_or_already_ce_packet_is_left_unchanged() {
        for tos in [0x00u8, 0x03] {
            let mut p = segment(tos, 7, 64);
            let before = p.clone();
            assert!(!set_ce(&mut p));
            assert_eq!(p, before);
        }
    }

    #[test]
    fn the_parser_reads_length_ecn_addresses_and_ports() {
        let h = parse(&segment(0x02, 1, 64)).unwrap();
        assert_eq!(h.ip_len, 1500);
        assert_eq!(h.ecn, Ecn::Ect0);
        assert_eq!((h.saddr, h.daddr), ([10, 200, 1, 2], [10, 200, 0, 2]));
        assert_eq!((h.proto, h.sport, h.dport), (6, 40001, 5201));
        assert!(parse(&[0x60; 40]).is_none(), "IPv6 is not parsed");
    }
}

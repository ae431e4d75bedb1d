//! CUBIC: placeholder until the CUBIC implementation lands (same interface).
use crate::{CongestionControl, TcpState};

#[derive(Clone, Debug, PartialEq)]
pub struct CubicConfig {
    pub hystart: bool,
}
impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig { hystart: true }
    }
}

pub struct Cubic {
    reno: crate::reno::Reno,
}
impl Cubic {
    pub fn new(_config: CubicConfig) -> Self {
        Cubic { reno: crate::reno::Reno }
    }
}
impl CongestionControl for Cubic {
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        self.reno.ssthresh(tcp)
    }
    fn cong_avoid(&mut self, tcp: &mut TcpState, ack_seq: u64, acked_pkts: u32) {
        self.reno.cong_avoid(tcp, ack_seq, acked_pkts)
    }
}

//! BBRv1: placeholder until the BBR implementation lands (same interface).
use crate::{CongestionControl, TcpState};

#[derive(Clone, Debug, PartialEq)]
pub struct BbrConfig {
    /// PROBE_BW's up-gain (Linux: 5/4).
    pub probe_bw_gain: f64,
}
impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig { probe_bw_gain: 1.25 }
    }
}

pub struct Bbr {
    _config: BbrConfig,
}
impl Bbr {
    pub fn new(config: BbrConfig, _seed: u64) -> Self {
        Bbr { _config: config }
    }
}
impl CongestionControl for Bbr {
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        tcp.snd_ssthresh
    }
}

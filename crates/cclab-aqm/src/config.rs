//! The resolved AQM config, as the Python layer writes it into
//! `bottleneck.aqm` (every unit in the key). Defaults are tc's own; Python
//! fills them, so the engines see explicit values.

use crate::cake::CakeConfig;
use crate::pie::PieConfig;
use crate::red::RedConfig;
use serde::Deserialize;

/// How a queue is limited, like `bfifo limit` (bytes) or `pfifo limit` (packets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    Bytes(u64),
    Packets(u64),
}

/// `bottleneck.aqm` in the resolved config: `{"kind": "fifo"}`, `{"kind": "codel", ...}`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AqmConfig {
    /// Tail drop at the buffer limit (today's bottleneck).
    #[default]
    Fifo,
    /// sch_codel (RFC 8289).
    Codel(crate::codel::CodelConfig),
    /// sch_fq_codel (RFC 8290).
    FqCodel(crate::fq_codel::FqCodelConfig),
    /// `tc qdisc ... red`: net/sched/sch_red.c.
    Red(RedConfig),
    /// `tc qdisc ... pie`: net/sched/sch_pie.c.
    Pie(PieConfig),
    /// `tc qdisc ... cake` without a bandwidth (the caller shapes): net/sched/sch_cake.c.
    Cake(CakeConfig),
    /// `tc qdisc ... dualpi2`: net/sched/sch_dualpi2.c (RFC 9332).
    #[serde(rename = "dualpi2")]
    DualPi2(crate::dualpi2::DualPi2Config),
}

impl AqmConfig {
    /// The algorithm's tc name.
    pub fn name(&self) -> &'static str {
        match self {
            AqmConfig::Fifo => "fifo",
            AqmConfig::Codel(_) => "codel",
            AqmConfig::FqCodel(_) => "fq_codel",
            AqmConfig::Red(_) => "red",
            AqmConfig::Pie(_) => "pie",
            AqmConfig::Cake(_) => "cake",
            AqmConfig::DualPi2(_) => "dualpi2",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resolved_json_names_select_each_aqm_and_reject_unknown_keys() {
        let fq: AqmConfig = serde_json::from_str(
            r#"{"kind":"fq_codel","target_ns":5000000,"interval_ns":100000000,"limit_packets":10240,"flows":1024,
                "quantum_bytes":1514,"ecn":true,"ce_threshold_ns":null,"memory_limit_bytes":33554432,"drop_batch":64}"#,
        )
        .unwrap();
        assert_eq!(fq, AqmConfig::FqCodel(crate::fq_codel::FqCodelConfig::default()));
        let codel: AqmConfig = serde_json::from_str(r#"{"kind":"codel","ecn":true}"#).unwrap();
        assert_eq!(codel.name(), "codel");
        assert!(serde_json::from_str::<AqmConfig>(r#"{"kind":"codel","tagret_ns":1}"#).is_err());
        assert_eq!(serde_json::from_str::<AqmConfig>(r#"{"kind":"fifo"}"#).unwrap(), AqmConfig::Fifo);
    }
}

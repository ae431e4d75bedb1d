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
    /// `tc qdisc ... red`: net/sched/sch_red.c.
    Red(RedConfig),
    /// `tc qdisc ... pie`: net/sched/sch_pie.c.
    Pie(PieConfig),
    /// `tc qdisc ... cake` without a bandwidth (the caller shapes): net/sched/sch_cake.c.
    Cake(CakeConfig),
}

impl AqmConfig {
    /// The algorithm's tc name.
    pub fn name(&self) -> &'static str {
        match self {
            AqmConfig::Fifo => "fifo",
            AqmConfig::Red(_) => "red",
            AqmConfig::Pie(_) => "pie",
            AqmConfig::Cake(_) => "cake",
        }
    }
}

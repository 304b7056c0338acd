//! What the limiter bench's script part prints: the table of phases, the memory of a
//! saturated day, and a verdict for each target.

use std::fmt::Write as _;

use crate::bench::Memory;
use crate::stats::{Stats, micros};
use crate::workload::{DAY_LARGE_CALLS, DAY_SMALL_CALLS};

/// The targets the verdicts check.
const MIN_LARGE_TO_SMALL_THROUGHPUT: f64 = 0.9;
const MAX_CHARGE_TO_INCR_LATENCY: f64 = 1.3;
const MIN_NAIVE_TO_PRODUCT_MEMORY: f64 = 10.0;

/// The phases' names, as the table's rows and the verdicts give them.
pub(crate) const INCR: &str = "INCR (fixed-window floor)";
pub(crate) const NOOP: &str = "EVALSHA `return 1`";
pub(crate) const CHARGE_1: &str = "charge, cost 1";
pub(crate) const CHARGE_100: &str = "charge, cost 100";
pub(crate) const DAY_1: &str = "charge, cost 1, on a full day";
pub(crate) const DAY_100: &str = "charge, cost 100, on a full day";
pub(crate) const NAIVE_1: &str = "naive script, cost 1";
pub(crate) const NAIVE_100: &str = "naive script, cost 100";

/// One row of the table: client-side latencies, and the time the server spent in the
/// command itself (from `INFO commandstats`) over the same calls.
pub(crate) struct Row {
    pub(crate) name: &'static str,
    pub(crate) stats: Stats,
    pub(crate) server_us: f64,
}

pub(crate) struct Report {
    pub(crate) rows: Vec<Row>,
    pub(crate) memory: Memory,
}

impl Report {
    fn row(&self, name: &str) -> &Stats {
        &self
            .rows
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no phase named {name:?} was measured"))
            .stats
    }

    pub(crate) fn table(&self) -> String {
        let incr = self.row(INCR);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| {:<31} | {:>6} | {:>7} | {:>7} | {:>7} | {:>7} | {:>9} | {:>11} |",
            "phase", "calls", "mean µs", "p50 µs", "p99 µs", "calls/s", "server µs", "mean ÷ INCR"
        );
        let _ = writeln!(
            out,
            "|{:-<33}|{:->8}|{:->9}|{:->9}|{:->9}|{:->9}|{:->11}|{:->13}|",
            "", ":", ":", ":", ":", ":", ":", ":"
        );
        for row in &self.rows {
            let s = &row.stats;
            let _ = writeln!(
                out,
                "| {:<31} | {:>6} | {:>7.1} | {:>7.1} | {:>7.1} | {:>7.0} | {:>9.1} | {:>10.2}x |",
                row.name,
                s.samples,
                micros(s.mean),
                micros(s.p50),
                micros(s.p99),
                s.per_second(),
                row.server_us,
                s.mean.as_secs_f64() / incr.mean.as_secs_f64(),
            );
        }
        out
    }

    pub(crate) fn verdicts(&self) -> String {
        let mut out = String::new();
        for (large, small) in [(CHARGE_100, CHARGE_1), (DAY_100, DAY_1)] {
            let ratio = self.row(large).per_second() / self.row(small).per_second();
            let _ = writeln!(
                out,
                "[{}] {large} reaches {ratio:.2}x the throughput of {small} (target >= {MIN_LARGE_TO_SMALL_THROUGHPUT}x)",
                verdict(ratio >= MIN_LARGE_TO_SMALL_THROUGHPUT),
            );
        }
        let incr = self.row(INCR).mean.as_secs_f64();
        for name in [CHARGE_1, CHARGE_100, DAY_1, DAY_100] {
            let ratio = self.row(name).mean.as_secs_f64() / incr;
            let _ = writeln!(
                out,
                "[{}] {name}: mean latency {ratio:.2}x the INCR round trip (target <= {MAX_CHARGE_TO_INCR_LATENCY}x)",
                verdict(ratio <= MAX_CHARGE_TO_INCR_LATENCY),
            );
        }
        let m = &self.memory;
        let _ = writeln!(
            out,
            "[{}] a saturated day takes {} bytes in the product's layout and {} bytes one member per unit: {:.1}x less (target >= {MIN_NAIVE_TO_PRODUCT_MEMORY}x)",
            verdict(m.ratio() >= MIN_NAIVE_TO_PRODUCT_MEMORY),
            m.product,
            m.naive,
            m.ratio(),
        );
        out
    }

    pub(crate) fn memory(&self) -> String {
        let m = &self.memory;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "memory of a saturated day ({DAY_SMALL_CALLS}x1 + {DAY_LARGE_CALLS}x100 = {} units, MEMORY USAGE SAMPLES 0):",
            DAY_SMALL_CALLS + DAY_LARGE_CALLS * 100
        );
        for key in &m.product_keys {
            let _ = writeln!(out, "  product  {key}");
        }
        let _ = writeln!(out, "  product  total {} bytes", m.product);
        let _ = writeln!(out, "  naive    {}", m.naive_key);
        let _ = writeln!(out, "  naive    total {} bytes", m.naive);
        out
    }
}

pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "MISSED" }
}

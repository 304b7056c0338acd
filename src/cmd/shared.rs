//! What several commands show alike: times and ages for people, a region's staleness,
//! stored text on one line, the charts of a history line, a bucket's figures in JSON. Commands share these through
//! this module, never through each other.

use std::time::Duration;

use serde::Serialize;

use crate::output::human;
use crate::output::json::rfc3339;
use crate::quota::{Allowance, BucketFigures};

/// Unix seconds as RFC 3339; "far past" or "far future" outside its years, 0000 to
/// 9999 (docs/json.md).
pub(crate) fn at(s: i64) -> String {
    human::utc(jiff::SignedDuration::from_secs(s))
}

/// How far ahead of this host's clock a time may be before it is taken for a wrong
/// clock (the clock-skew bound of docs/schema.md).
const FUTURE_TOLERANCE_S: i64 = 300;

/// Whether a region whose last complete fetch was at `last_complete` (unix seconds)
/// is stale at `now`: never fetched, fetched longer than `stale_s` ago, or fetched at
/// a time still in the future, which only a wrong clock (here or on the host that
/// wrote it) explains and which would otherwise keep a health check passing for as
/// long as the clocks disagree.
pub(crate) fn is_stale(now: i64, last_complete: Option<i64>, stale_s: i64) -> bool {
    last_complete.is_none_or(|c| now.saturating_sub(c) > stale_s || c > now + FUTURE_TOLERANCE_S)
}

/// How long ago, for people: "3h 2m ago"; a time ahead of this host's clock says so
/// ("in the future, 2h 5m ahead").
/// Any two `i64` times, however far apart (a hostile or corrupt value too).
pub(crate) fn ago(now: i64, then: i64) -> String {
    let apart = |a: i64, b: i64| {
        Duration::from_secs(u64::try_from(i128::from(a) - i128::from(b)).unwrap_or(u64::MAX))
    };
    if then > now {
        return format!(
            "in the future, {} ahead of this host's clock",
            human::duration(apart(then, now))
        );
    }
    format!("{} ago", human::duration(apart(now, then)))
}

/// Text from the store (which holds scrubbed upstream messages) on one terminal
/// line: control characters are shown as escapes, never sent raw.
pub(crate) fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// The charts of a history line for people: `overall+17+25`, `-` for none.
pub(crate) fn charts_text(charts: &[u32]) -> String {
    if charts.is_empty() {
        return "-".to_owned();
    }
    charts
        .iter()
        .map(|c| match c {
            0 => "overall".to_owned(),
            c => c.to_string(),
        })
        .collect::<Vec<_>>()
        .join("+")
}

/// One bucket's figures as `status --json` and `budget --json` print them
/// (docs/json.md); `budget` adds its window's own fields ([`BudgetBucketJson`]).
#[derive(Debug, Serialize)]
pub(super) struct BucketJson {
    pub(super) name: String,
    pub(super) used: u64,
    pub(super) ceiling: u64,
    /// Left to the ceiling.
    pub(super) remaining: u64,
    pub(super) blocked_until: Option<String>,
    /// Units charged to the bucket since midnight America/Los_Angeles when the upstream
    /// first refused it this upstream day, below its quota (docs/budget.md, "When the
    /// upstream refuses").
    pub(super) upstream_spent_at: Option<u64>,
    /// The figures these are told from, for the text forms.
    #[serde(skip)]
    pub(super) figures: BucketFigures,
}

impl BucketJson {
    pub(super) fn of(figures: &BucketFigures) -> BucketJson {
        BucketJson {
            name: figures.name.clone(),
            used: figures.used,
            ceiling: figures.ceiling,
            remaining: figures.remaining(Allowance::Ceiling),
            blocked_until: figures.blocked_until.map(|u| rfc3339(u.as_i64())),
            upstream_spent_at: figures.upstream_spent_at,
            figures: figures.clone(),
        }
    }
}

#[cfg(test)]
mod tests;

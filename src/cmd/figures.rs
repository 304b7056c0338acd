//! A budget's figures as `status` and `budget` show them: each bucket on one line for
//! people, and, while the limiter cannot be read, what is still known (docs/json.md,
//! `last_known` and `journal`): the figures the latest run that read the limiter
//! recorded, with when it read them, and the calls made since while it was down that
//! wait in the journal to be counted.

use std::io::Write;

use anyhow::{Context, Result};
use serde::Serialize;

use super::shared::{BucketJson, ago};
use crate::output::human;
use crate::output::json::rfc3339;
use crate::quota::{Budget, LastKnown};
use crate::sqlite::Db;

/// The calls made while the limiter was down that the window has not counted yet:
/// `journal` in `status --json` and in `budget --json` while the limiter is down.
#[derive(Debug, Clone, Serialize)]
pub(super) struct JournalJson {
    /// 0 when none waits.
    pub(super) pending_calls: u64,
    /// When the oldest of them was made (this host's clock); null when none waits.
    pub(super) oldest_at: Option<String>,
    #[serde(skip)]
    oldest_at_us: Option<i64>,
}

impl JournalJson {
    /// What the journal of budget `key` in `db` holds; nothing without a database.
    pub(super) fn read(db: Option<&Db>, key: &str) -> Result<JournalJson> {
        let waiting = crate::quota::unreplayed(db, key)
            .with_context(|| format!("reading the journal of budget \"{key}\""))?;
        Ok(JournalJson {
            pending_calls: waiting.calls,
            oldest_at: waiting.oldest_at_us.map(rfc3339),
            oldest_at_us: waiting.oldest_at_us,
        })
    }

    /// Its line for people, at `now_s`: how many calls wait, and since when.
    pub(super) fn text(&self, now_s: i64) -> String {
        match (self.pending_calls, self.oldest_at_us) {
            (0, _) | (_, None) => {
                "journal: no call made while the limiter was down waits to be counted".to_owned()
            }
            (n, Some(oldest)) => format!(
                "journal: {n} call{} made while the limiter was down wait{} to be counted, the oldest made at {} ({}); the next command that reaches the limiter replays {}",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" },
                human::timestamp(oldest),
                ago(now_s, oldest.div_euclid(1_000_000)),
                if n == 1 { "it" } else { "them" },
            ),
        }
    }
}

/// The figures of every bucket as the latest run that read the limiter recorded them,
/// and when: `last_known` in `status --json` and `budget --json`. The same fields as
/// `status --json`'s `budget`, measured against the costs file in force, plus `as_of`.
#[derive(Debug, Serialize)]
pub(super) struct LastKnownJson {
    /// When that run read them (its host's clock); null for figures recorded by a
    /// build that did not keep the time.
    pub(super) as_of: Option<String>,
    pub(super) used: u64,
    pub(super) ceiling: u64,
    pub(super) remaining: u64,
    pub(super) blocked_until: Option<String>,
    pub(super) buckets: Vec<BucketJson>,
    #[serde(skip)]
    as_of_us: Option<i64>,
}

impl LastKnownJson {
    /// The last known figures of `budget` in `db`; none when no run has recorded any.
    pub(super) fn read(db: Option<&Db>, budget: &Budget) -> Result<Option<LastKnownJson>> {
        let known = crate::quota::figures::last_known_at(db, budget)
            .with_context(|| format!("reading budget \"{}\"", budget.key))?;
        Ok(known.and_then(LastKnownJson::of))
    }

    fn of(known: LastKnown) -> Option<LastKnownJson> {
        let buckets: Vec<BucketJson> = known.buckets.iter().map(BucketJson::of).collect();
        let main = buckets.first()?;
        Some(LastKnownJson {
            as_of: known.as_of.map(|t| rfc3339(t.as_i64())),
            used: main.used,
            ceiling: main.ceiling,
            remaining: main.remaining,
            blocked_until: main.blocked_until.clone(),
            as_of_us: known.as_of.map(|t| t.as_i64()),
            buckets,
        })
    }

    /// Its lines for people, at `now_s`, indented under the budget's line: when the
    /// figures were read, then each bucket's.
    pub(super) fn write(&self, out: &mut impl Write, now_s: i64) -> std::io::Result<()> {
        let when = self.as_of_us.map_or_else(
            || "at a time not recorded".to_owned(),
            |t| {
                format!(
                    "at {} ({})",
                    human::timestamp(t),
                    ago(now_s, t.div_euclid(1_000_000))
                )
            },
        );
        writeln!(
            out,
            "  last known figures, as the latest run that read the limiter left them {when}:"
        )?;
        for b in &self.buckets {
            writeln!(out, "    bucket \"{}\": {}", b.name, bucket_text(b))?;
        }
        Ok(())
    }
}

/// One bucket's figures for people. A block leads, since nothing can be spent from the
/// bucket while it lasts, whatever its count says (docs/budget.md, "When the upstream
/// refuses"); then what was used and what is left; then any early refusal.
pub(super) fn bucket_text(bucket: &BucketJson) -> String {
    let figures = format!(
        "{} used of ceiling {}, {} remaining",
        bucket.used, bucket.ceiling, bucket.remaining
    );
    let early = bucket.upstream_spent_at.map_or(String::new(), |units| {
        format!(
            "; the upstream said it was spent today at {units} units counted, below quota {}",
            bucket.figures.quota
        )
    });
    match bucket.figures.blocked_until {
        Some(until) => format!(
            "blocked until {} (the upstream said this quota is spent): nothing can be spent from it until then; {figures} by this budget's count{early}",
            human::timestamp(until.as_i64())
        ),
        None => format!("{figures}; not blocked{early}"),
    }
}

#[cfg(test)]
mod tests;

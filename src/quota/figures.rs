//! A bucket's figures: what the limiter says of one bucket's window, with the ceiling
//! and quota it is measured against (docs/budget.md, "Buckets"). One type for every
//! reader: a run's report and its metrics, `status`, `budget` and the dry run.
//!
//! The last known figures (docs/metrics.md) are the figures the limiter reported at
//! the end of the latest run that could read them, which that run records in the
//! database (`quota_last_figures`, one row per bucket): what the metrics show, with
//! `trendsync_limiter_up 0`, while the limiter does not answer.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::drift::{self, SpentDay};
use super::{Allowance, Budget, Kind, Status};
use crate::clock::Micros;
use crate::sqlite::{Db, Durability, Migration};

/// One bucket's figures at one moment on the limiter's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketFigures {
    /// The bucket's policy name: [`super::BUDGET_POLICY`] for the main one.
    pub name: String,
    /// Units in its window.
    pub used: u64,
    pub ceiling: u64,
    pub quota: u64,
    /// The end of an upstream block of the bucket, if one is in force.
    pub blocked_until: Option<Micros>,
    /// What this budget had charged the bucket this upstream day when the upstream
    /// first refused it early (docs/budget.md, "When the upstream refuses"); `None`
    /// when it has not.
    pub upstream_spent_at: Option<u64>,
}

impl BucketFigures {
    /// Units left to the ceiling or to the quota.
    pub fn remaining(&self, allowance: Allowance) -> u64 {
        let max = match allowance {
            Allowance::Ceiling => self.ceiling,
            Allowance::Quota => self.quota,
        };
        max.saturating_sub(self.used)
    }
}

impl Budget {
    /// Every bucket's figures, the main one first, from the limiter's `status` (read
    /// for [`Budget::policies`] or at least every bucket's) and its record of the
    /// upstream's early refusals (`spent`, [`super::Limiter::upstream_spent`]). A
    /// bucket `status` does not cover counts as empty.
    pub(crate) fn figures(&self, status: &Status, spent: &[SpentDay]) -> Vec<BucketFigures> {
        self.buckets()
            .iter()
            .map(|b| BucketFigures {
                name: b.name.clone(),
                used: status
                    .policies
                    .iter()
                    .find(|p| p.kind == Kind::Bucket && p.name == b.name)
                    .map_or(0, |p| p.used),
                ceiling: b.ceiling,
                quota: b.quota,
                blocked_until: status.blocked_until(&b.name),
                upstream_spent_at: drift::spent_today(spent, &b.name, status.now),
            })
            .collect()
    }
}

/// The last known figures could not be recorded or read.
#[derive(Debug, thiserror::Error)]
#[error("{doing} in {}: {reason}", path.display())]
pub struct FiguresError {
    path: PathBuf,
    doing: &'static str,
    reason: String,
}

fn fail(path: &Path, doing: &'static str) -> impl FnOnce(String) -> FiguresError + use<> {
    let path = path.to_path_buf();
    move |reason| FiguresError {
        path,
        doing,
        reason,
    }
}

/// Records `figures`, every bucket's as the limiter reported them at a run's end (read
/// at `as_of`), as the last known figures of budget `key` (docs/metrics.md): they
/// replace the ones recorded before, whichever buckets those had. In the database at
/// `db`, laid out by `file` (the quota's own steps brought forward first, as the
/// limiter does).
pub(crate) fn record(
    db: &Db,
    file: &[Migration],
    key: &str,
    figures: &[BucketFigures],
    as_of: Micros,
) -> Result<(), FiguresError> {
    const DOING: &str = "recording the buckets' last known figures";
    let path = db.path();
    db.make_writable()
        .map_err(|e| fail(path, DOING)(crate::error::chain(&e)))?;
    let conn = db
        .lock_durable(Durability::Normal)
        .map_err(|e| fail(path, DOING)(e.to_string()))?;
    crate::sqlite::migrate_own(&conn, path, file, super::schema::STEPS)
        .map_err(|e| fail(path, DOING)(crate::error::chain(&e)))?;
    let write = || -> rusqlite::Result<()> {
        let tx = rusqlite::Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM quota_last_figures WHERE budget = ?1", [key])?;
        let units = |u: u64| i64::try_from(u).unwrap_or(i64::MAX);
        for f in figures {
            tx.execute(
                "INSERT INTO quota_last_figures
                 (budget, bucket, used, blocked_until_us, upstream_spent_at, as_of_us)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    key,
                    f.name,
                    units(f.used),
                    f.blocked_until.map(Micros::as_i64),
                    f.upstream_spent_at.map(units),
                    as_of.as_i64(),
                ],
            )?;
        }
        tx.commit()
    };
    write().map_err(|e| fail(path, DOING)(e.to_string()))
}

/// The last known figures of a budget, and when they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastKnown {
    /// Every bucket recorded, the main one first.
    pub buckets: Vec<BucketFigures>,
    /// When the run that recorded them read them, on its host's clock; `None` for a
    /// record written before the time was kept.
    pub as_of: Option<Micros>,
}

/// The last known figures of `budget` (docs/metrics.md): what [`record`] kept of each
/// of its buckets, measured against today's ceilings and quotas. A bucket with no
/// record is left out; without one for the main bucket nothing is known (`None`), as
/// when the database does not exist or predates the record. Read without writing.
pub(crate) fn last_known(
    db: Option<&Db>,
    budget: &Budget,
) -> Result<Option<Vec<BucketFigures>>, FiguresError> {
    last_known_at(db, budget).map(|known| known.map(|k| k.buckets))
}

/// [`last_known`], with when the figures were read.
pub(crate) fn last_known_at(
    db: Option<&Db>,
    budget: &Budget,
) -> Result<Option<LastKnown>, FiguresError> {
    let Some(db) = db else {
        return Ok(None);
    };
    let read = || -> rusqlite::Result<Option<LastKnown>> {
        let conn = db.lock();
        let present = conn
            .prepare(
                "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'quota_last_figures'",
            )?
            .exists([])?;
        if !present {
            return Ok(None);
        }
        // A file no writer of this build has brought forward has no time yet; it is
        // read as it is, not changed.
        let timed = conn
            .prepare(
                "SELECT 1 FROM pragma_table_info('quota_last_figures') WHERE name = 'as_of_us'",
            )?
            .exists([])?;
        let mut row = conn.prepare(if timed {
            "SELECT used, blocked_until_us, upstream_spent_at, as_of_us FROM quota_last_figures
             WHERE budget = ?1 AND bucket = ?2"
        } else {
            "SELECT used, blocked_until_us, upstream_spent_at, NULL FROM quota_last_figures
             WHERE budget = ?1 AND bucket = ?2"
        })?;
        let units = |u: i64| u64::try_from(u).unwrap_or(0);
        let mut known = Vec::new();
        let mut as_of = None;
        for b in budget.buckets() {
            let recorded = row
                .query_row(params![budget.key, b.name], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                        r.get::<_, Option<i64>>(3)?,
                    ))
                })
                .optional()?;
            match recorded {
                Some((used, blocked, spent, at)) => {
                    // One run records every bucket at once; the main bucket's time is
                    // the record's.
                    if b.is_main() {
                        as_of = at.map(Micros::new);
                    }
                    known.push(BucketFigures {
                        name: b.name.clone(),
                        used: units(used),
                        ceiling: b.ceiling,
                        quota: b.quota,
                        blocked_until: blocked.map(Micros::new),
                        upstream_spent_at: spent.map(units),
                    });
                }
                None if b.is_main() => return Ok(None),
                None => {}
            }
        }
        Ok(Some(LastKnown {
            buckets: known,
            as_of,
        }))
    };
    read().map_err(|e| fail(db.path(), "reading the buckets' last known figures")(e.to_string()))
}

#[cfg(test)]
mod tests;

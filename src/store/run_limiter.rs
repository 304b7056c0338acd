//! Which limiter each run charged, and under which parsed budget: written with the
//! run's row, read by the commands that must say whether they read the same one.
//!
//! The columns come with a late step (`RUN_LIMITERS`) that the read-only open does not
//! wait for: a file a run has not upgraded yet simply has no run that recorded one.

use rusqlite::{OptionalExtension, params};

use super::{RunKind, Store, StoreError};
use crate::clock::Secs;
use crate::region_status::{LimiterKind, Recorded, RegionStatus};

/// The limiter a run charged, as recorded: its `kind` (a word this build does not know,
/// written by another trendsync, is kept as it is); `url` the Redis URL with its
/// password masked (none for the embedded limiter, which is the database itself);
/// `costs_fingerprint` the parsed budget's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunLimiter {
    pub(crate) kind: Recorded<LimiterKind>,
    pub(crate) url: Option<String>,
    pub(crate) costs_fingerprint: String,
}

/// The latest run that recorded its limiter, with that record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastRunLimiter {
    pub(crate) run_id: String,
    pub(crate) started_at: i64,
    pub(crate) limiter: RunLimiter,
}

impl Store {
    /// [`Store::begin_run`], recording the run's limiter in the same transaction.
    pub(crate) fn begin_run_on(
        &self,
        run_id: &str,
        kind: RunKind,
        started_at: Secs,
        limiter: &RunLimiter,
    ) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            tx.execute(
                "INSERT INTO runs (run_id, kind, started_at, status, limiter_kind, limiter_url,
                                   costs_fingerprint)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    run_id,
                    kind.as_str(),
                    started_at.as_i64(),
                    RegionStatus::Running,
                    limiter.kind,
                    limiter.url,
                    limiter.costs_fingerprint
                ],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!("recording the start of run {run_id}")))
    }

    /// The latest run that recorded its limiter, by the order the runs were recorded
    /// (their rowid: one more than the largest, and runs are never deleted), never by
    /// `started_at`: a run on a clock days ahead is stamped days ahead, and would
    /// outrank every run after it, `--switch-limiter` included (docs/commands.md).
    /// None when no run recorded one, or the file predates the record.
    pub(crate) fn last_run_limiter(&self) -> Result<Option<LastRunLimiter>, StoreError> {
        if !self.has_run_limiters()? {
            return Ok(None);
        }
        self.conn
            .query_row(
                "SELECT run_id, started_at, limiter_kind, limiter_url, costs_fingerprint
                 FROM runs WHERE limiter_kind IS NOT NULL
                 ORDER BY rowid DESC LIMIT 1",
                [],
                |row| {
                    Ok(LastRunLimiter {
                        run_id: row.get(0)?,
                        started_at: row.get(1)?,
                        limiter: RunLimiter {
                            kind: row.get(2)?,
                            url: row.get(3)?,
                            costs_fingerprint: row.get::<_, Option<String>>(4)?.unwrap_or_default(),
                        },
                    })
                },
            )
            .optional()
            .map_err(self.err("reading the limiter of the latest run"))
    }

    fn has_run_limiters(&self) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'limiter_kind'",
                [],
                |row| row.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(self.err("looking for the runs' limiter columns"))
    }
}

#[cfg(test)]
mod tests;

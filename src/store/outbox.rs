//! The sink's outbox (schema step 20): each finished slot of a region waits here, in
//! the same file as its rows, until its chart snapshots are on the sink
//! (docs/commands.md, `--sink`). Shipping is at least once: a slot leaves the backlog
//! only once the sink holds its objects, and `prune` keeps the fetches of every slot
//! still queued, so an outage of the sink delays shipping and loses nothing.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};
use crate::clock::Secs;
use crate::sqlite::Migration;

/// Step 20.
pub(crate) const STEP: Migration = Migration {
    description: "the sink's outbox: each finished slot of a region until it is shipped",
    sql: CREATE,
    data: None,
};

/// One row per (run, region) whose slot is to be shipped. `queued_at` is when its run
/// began (unix seconds), so that the age of the backlog is told on the run's clock;
/// `token` is the slot lease's fencing token (none with the embedded limiter).
const CREATE: &str = "
CREATE TABLE sink_outbox (
    run_id     TEXT NOT NULL,
    region     TEXT NOT NULL,
    slot_start INTEGER NOT NULL,
    slot_secs  INTEGER NOT NULL CHECK (slot_secs >= 1),
    token      INTEGER,
    queued_at  INTEGER NOT NULL,
    shipped_at INTEGER,
    attempts   INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error TEXT,
    PRIMARY KEY (run_id, region)
) STRICT;
CREATE INDEX sink_outbox_queued ON sink_outbox (queued_at) WHERE shipped_at IS NULL;
";

/// A slot waiting for the sink: the chart fetches of `region` in run `run_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuedSlot {
    pub(crate) run_id: String,
    pub(crate) region: String,
    /// The slot's id: its start, unix seconds.
    pub(crate) slot_start: i64,
    pub(crate) slot_secs: u32,
    pub(crate) token: Option<i64>,
    pub(crate) queued_at: i64,
    /// Attempts that failed so far.
    pub(crate) attempts: u32,
}

/// How much waits for the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SinkBacklog {
    /// Slots queued and not shipped.
    pub(crate) slots: u64,
    /// When the oldest of them was queued (unix seconds); none when nothing waits.
    pub(crate) oldest_queued_at: Option<i64>,
}

/// One chart fetch of a queued slot: what the sink writes one object of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotFetch {
    /// The fetch's number in `fetches`.
    pub(crate) fetch: i64,
    /// 0 for the overall chart, else the category id.
    pub(crate) chart: u32,
}

impl Store {
    /// Queues the slot `slot_start_s` (of `slot_secs` seconds) of `region`, as run
    /// `run_id` fetched it, for the sink. Queuing a (run, region) twice keeps the first.
    pub fn queue_for_sink(
        &self,
        run_id: &str,
        region: &str,
        slot_start_s: i64,
        slot_secs: u32,
        token: Option<i64>,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO sink_outbox (run_id, region, slot_start, slot_secs, token, queued_at)
                 VALUES (?1, ?2, ?3, ?4, ?5,
                         coalesce((SELECT started_at FROM runs WHERE run_id = ?1), ?3))
                 ON CONFLICT (run_id, region) DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![run_id, region, slot_start_s, slot_secs, token]))
            .map(drop)
            .map_err(self.err(format!(
                "queuing region {region} of run {run_id} for the sink"
            )))
    }

    /// The slots queued and not shipped, oldest first.
    pub(crate) fn sink_pending(&self) -> Result<Vec<QueuedSlot>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT run_id, region, slot_start, slot_secs, token, queued_at, attempts
                 FROM sink_outbox WHERE shipped_at IS NULL
                 ORDER BY queued_at, slot_start, region, run_id",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(QueuedSlot {
                    run_id: r.get(0)?,
                    region: r.get(1)?,
                    slot_start: r.get(2)?,
                    slot_secs: r.get(3)?,
                    token: r.get(4)?,
                    queued_at: r.get(5)?,
                    attempts: r.get(6)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err("listing the slots queued for the sink"))
    }

    /// The chart fetches (not the searches) of `region` in run `run_id`, by chart.
    pub(crate) fn slot_fetches(
        &self,
        run_id: &str,
        region: &str,
    ) -> Result<Vec<SlotFetch>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT f.num, f.chart FROM fetches AS f
                 JOIN run_nums AS r ON r.num = f.run
                 JOIN regions AS g ON g.num = f.region
                 WHERE r.run_id = ?1 AND g.code = ?2 AND f.search = 0
                 ORDER BY f.chart",
            )?;
            let rows = stmt.query_map([run_id, region], |r| {
                Ok(SlotFetch {
                    fetch: r.get(0)?,
                    chart: r.get(1)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!(
            "listing the chart fetches of region {region} in run {run_id}"
        )))
    }

    /// The slot of `region` in run `run_id` is on the sink, as of `at`.
    pub(crate) fn mark_shipped(
        &self,
        run_id: &str,
        region: &str,
        at: Secs,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE sink_outbox SET shipped_at = ?3, attempts = attempts + 1, last_error = NULL
                 WHERE run_id = ?1 AND region = ?2 AND shipped_at IS NULL",
            )
            .and_then(|mut s| s.execute(params![run_id, region, at.as_i64()]))
            .map(drop)
            .map_err(self.err(format!(
                "recording that region {region} of run {run_id} is on the sink"
            )))
    }

    /// An attempt to ship the slot of `region` in run `run_id` failed with `error`; the
    /// slot stays queued.
    pub(crate) fn record_sink_error(
        &self,
        run_id: &str,
        region: &str,
        error: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE sink_outbox SET attempts = attempts + 1, last_error = ?3
                 WHERE run_id = ?1 AND region = ?2 AND shipped_at IS NULL",
            )
            .and_then(|mut s| s.execute(params![run_id, region, error]))
            .map(drop)
            .map_err(self.err(format!(
                "recording a failed shipment of region {region} of run {run_id}"
            )))
    }

    /// Whether the file has the outbox: one older than step 20, opened read-only, has
    /// not.
    pub(super) fn has_outbox(&self) -> rusqlite::Result<bool> {
        Ok(self
            .conn
            .query_row(
                "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'sink_outbox'",
                [],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// How many slots wait for the sink, and since when. Nothing waits in a file older
    /// than the outbox (a read-only open does not bring it up).
    pub(crate) fn sink_backlog(&self) -> Result<SinkBacklog, StoreError> {
        (|| {
            if !self.has_outbox()? {
                return Ok(SinkBacklog::default());
            }
            self.conn.query_row(
                "SELECT count(*), min(queued_at) FROM sink_outbox WHERE shipped_at IS NULL",
                [],
                |r| {
                    Ok(SinkBacklog {
                        slots: r.get::<_, i64>(0)?.max(0) as u64,
                        oldest_queued_at: r.get(1)?,
                    })
                },
            )
        })()
        .map_err(self.err("counting the slots queued for the sink"))
    }
}

#[cfg(test)]
mod tests;

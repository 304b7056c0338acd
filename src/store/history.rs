//! The run history: each run's outcome per region, its calls by method and outcome,
//! and the runs a killed process left `running`. What `status`, `runs` and the
//! metrics file are built from.

use rusqlite::{Transaction, TransactionBehavior, named_params, params};

use super::{RunKind, Store, StoreError};
use crate::clock::Secs;
use crate::region_status::{CallOutcome, Recorded, RegionStatus};

/// How one region of a run went (a row of `run_regions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionOutcome {
    pub region: String,
    /// A run status, or `queued` / `running` / `abandoned`.
    pub status: Recorded<RegionStatus>,
    pub pages: u64,
    pub videos: u64,
    pub units: u64,
    pub reason: Option<String>,
}

/// Attempts at one upstream method that ended one way (a row of `run_calls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCount {
    pub method: String,
    pub outcome: Recorded<CallOutcome>,
    pub calls: u64,
}

/// One line of the history: a run in one region, or a run that had no region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HistoryRow {
    pub(crate) run_id: String,
    pub(crate) kind: RunKind,
    /// `None` for a run that had no region to fetch (a backfill with nothing stale).
    pub(crate) region: Option<String>,
    pub(crate) started_at: i64,
    pub(crate) ended_at: Option<i64>,
    /// The region's status in that run (the run's own when it had no region).
    pub(crate) status: Recorded<RegionStatus>,
    pub(crate) pages: u64,
    pub(crate) videos: u64,
    pub(crate) units: u64,
    /// The region's reason; for a region the run's stop cut short without one of its
    /// own, the run's stop reason; for a run with no region, the run's.
    pub(crate) reason: Option<String>,
    /// The charts the run stored of the region: 0 for the overall chart, else the
    /// category id; in that order.
    pub(crate) charts: Vec<u32>,
    /// How long the run took, to the microsecond (none before schema 7, or while it
    /// runs).
    pub(crate) run_duration_us: Option<u64>,
}

/// The charts a history line's run stored of its region, comma-separated: one seek of
/// the fetches' key per line.
const CHARTS_OF_LINE: &str = "
(SELECT group_concat(f.chart, ',' ORDER BY f.chart) FROM fetches AS f
 WHERE f.run = (SELECT n.num FROM run_nums AS n WHERE n.run_id = r.run_id)
   AND f.region = (SELECT g.num FROM regions AS g WHERE g.code = rr.region)
   AND f.search = 0)";

/// A line's reason. A region that completed, failed or was skipped says its own (a
/// complete region has none): the run's stop reason may be another region's failure.
/// A region the run's stop cut short (budget, upstream quota, a signal, never
/// reached) is explained by that stop when it has no reason of its own. Its statuses
/// are the named parameters `:complete`, `:failed` and `:skipped`.
const REGION_REASON: &str = "CASE WHEN rr.run_id IS NULL THEN r.stop_reason
     WHEN rr.status IN (:complete, :failed, :skipped) THEN rr.reason
     ELSE coalesce(rr.reason, r.stop_reason) END";

/// Which history lines to read; newest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct HistoryFilter {
    /// Runs started at or after this (unix seconds).
    pub(crate) since: Option<i64>,
    /// Only these regions (all when empty).
    pub(crate) regions: Vec<String>,
    pub(crate) status: Option<RegionStatus>,
    pub(crate) limit: u32,
}

/// A run by id and start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunStart {
    pub(crate) run_id: String,
    pub(crate) kind: RunKind,
    pub(crate) started_at: i64,
}

const ABANDONED_REASON: &str =
    "the process running it ended without finishing it (killed, or the host went down)";

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    /// Records the regions a run set out to fetch, each `queued` until its fetch starts
    /// ([`Store::mark_region_running`]) and [`Store::record_run_details`] says how it went.
    pub fn begin_run_regions(
        &self,
        run_id: &str,
        started_at: Secs,
        regions: &[String],
    ) -> Result<(), StoreError> {
        let started_at = started_at.as_i64();
        (|| {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO run_regions (run_id, region, started_at, status)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (run_id, region) DO NOTHING",
                )?;
                for region in regions {
                    insert.execute(params![run_id, region, started_at, RegionStatus::Queued])?;
                }
            }
            tx.commit()
        })()
        .map_err(self.err(format!("recording the regions of run {run_id}")))
    }

    /// Records what a region of a run still going is doing: `running` while it holds
    /// a concurrency slot, `queued` while it waits for one, or how it ended once it has
    /// nothing left to fetch (the end of the run records it again, with its numbers).
    /// A line that has ended is left as it is.
    pub(crate) fn mark_region(
        &self,
        run_id: &str,
        region: &str,
        status: RegionStatus,
    ) -> Result<(), StoreError> {
        let [queued, running] = RegionStatus::IN_PROGRESS;
        self.conn
            .prepare_cached(
                "UPDATE run_regions SET status = ?3
                 WHERE run_id = ?1 AND region = ?2 AND status IN (?4, ?5)",
            )
            .and_then(|mut s| s.execute(params![run_id, region, status, queued, running]))
            .map(|_| ())
            .map_err(self.err(format!(
                "recording that region {region} of run {run_id} is {status}"
            )))
    }

    /// Records the units a run still `running` has charged so far, in all and for
    /// `region`, so that a process killed mid-run leaves rows that show what it spent
    /// (the end of the run records the final numbers). Never lowers them: concurrent
    /// regions may report out of order.
    pub(crate) fn record_units(
        &self,
        run_id: &str,
        region: &str,
        region_units: u64,
        run_units: u64,
    ) -> Result<(), StoreError> {
        let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        (|| {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            let running = RegionStatus::Running;
            tx.prepare_cached(
                "UPDATE run_regions SET units = max(coalesce(units, 0), ?3)
                 WHERE run_id = ?1 AND region = ?2 AND status = ?4",
            )?
            .execute(params![run_id, region, as_i64(region_units), running])?;
            tx.prepare_cached(
                "UPDATE runs SET units = max(coalesce(units, 0), ?2)
                 WHERE run_id = ?1 AND status = ?3",
            )?
            .execute(params![run_id, as_i64(run_units), running])?;
            tx.commit()
        })()
        .map_err(self.err(format!("recording the units run {run_id} has charged")))
    }

    /// Records how each region of a run went and the run's attempts by method and
    /// outcome, in one transaction. Called once per run: the attempts are also added
    /// to the totals of every run.
    pub fn record_run_details(
        &self,
        run_id: &str,
        regions: &[RegionOutcome],
        calls: &[CallCount],
    ) -> Result<(), StoreError> {
        (|| {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            {
                let mut region = tx.prepare_cached(
                    "INSERT INTO run_regions
                         (run_id, region, started_at, status, pages, videos, units, reason)
                     VALUES (?1, ?2, (SELECT started_at FROM runs WHERE run_id = ?1),
                             ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (run_id, region) DO UPDATE SET
                         status = excluded.status, pages = excluded.pages,
                         videos = excluded.videos, units = excluded.units,
                         reason = excluded.reason",
                )?;
                for r in regions {
                    region.execute(params![
                        run_id,
                        r.region,
                        r.status,
                        to_i64(r.pages),
                        to_i64(r.videos),
                        to_i64(r.units),
                        r.reason
                    ])?;
                }
                let mut call = tx.prepare_cached(
                    "INSERT INTO run_calls (run_id, method, outcome, calls) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (run_id, method, outcome) DO UPDATE SET calls = excluded.calls",
                )?;
                let mut total = tx.prepare_cached(
                    "INSERT INTO call_totals (method, outcome, calls) VALUES (?1, ?2, ?3)
                     ON CONFLICT (method, outcome) DO UPDATE SET calls = calls + excluded.calls",
                )?;
                for c in calls.iter().filter(|c| c.calls > 0) {
                    call.execute(params![run_id, c.method, c.outcome, to_i64(c.calls)])?;
                    total.execute(params![c.method, c.outcome, to_i64(c.calls)])?;
                }
            }
            tx.commit()
        })()
        .map_err(self.err(format!("recording the regions and calls of run {run_id}")))
    }

    /// Runs whose row says `running`, oldest first: in progress, or left by a process
    /// that died.
    pub(crate) fn running_runs(&self) -> Result<Vec<RunStart>, StoreError> {
        self.run_starts(
            "SELECT run_id, kind, started_at FROM runs WHERE status = ?1
             ORDER BY started_at, run_id",
            [RegionStatus::Running],
        )
    }

    /// Abandoned runs started at or after `since`, newest first.
    pub(crate) fn abandoned_runs(&self, since: i64) -> Result<Vec<RunStart>, StoreError> {
        self.run_starts(
            "SELECT run_id, kind, started_at FROM runs
             WHERE status = ?2 AND started_at >= ?1
             ORDER BY started_at DESC, run_id",
            params![since, RegionStatus::Abandoned],
        )
    }

    fn run_starts<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
    ) -> Result<Vec<RunStart>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql)?;
            let rows = stmt.query_map(params, |row| {
                let kind: String = row.get(1)?;
                Ok(RunStart {
                    run_id: row.get(0)?,
                    kind: RunKind::from_db(&kind).unwrap_or(RunKind::Run),
                    started_at: row.get(2)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err("reading the runs"))
    }

    /// Marks a run that is still `running` as `abandoned`, with its regions that were
    /// still going. Returns false when the run had ended meanwhile (nothing changed).
    pub(crate) fn abandon_run(&self, run_id: &str) -> Result<bool, StoreError> {
        (|| {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
            let abandoned = RegionStatus::Abandoned;
            let [queued, running] = RegionStatus::IN_PROGRESS;
            let changed = tx.execute(
                "UPDATE runs SET status = ?3, stop_reason = ?2
                 WHERE run_id = ?1 AND status = ?4",
                params![run_id, ABANDONED_REASON, abandoned, running],
            )?;
            if changed > 0 {
                tx.execute(
                    "UPDATE run_regions SET status = ?3, reason = ?2
                     WHERE run_id = ?1 AND status IN (?4, ?5)",
                    params![run_id, ABANDONED_REASON, abandoned, queued, running],
                )?;
            }
            tx.commit()?;
            Ok(changed > 0)
        })()
        .map_err(self.err(format!("marking run {run_id} abandoned")))
    }

    /// The history, one line per run and region, newest first.
    pub(crate) fn history(&self, filter: &HistoryFilter) -> Result<Vec<HistoryRow>, StoreError> {
        let regions = (!filter.regions.is_empty())
            .then(|| serde_json::Value::from(filter.regions.clone()).to_string());
        (|| {
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT r.run_id, r.kind, rr.region, r.started_at, r.ended_at,
                        coalesce(rr.status, r.status),
                        coalesce(rr.pages, 0), coalesce(rr.videos, 0),
                        coalesce(rr.units, r.units, 0),
                        {REGION_REASON}, {CHARTS_OF_LINE}, r.duration_us
                 FROM runs AS r LEFT JOIN run_regions AS rr ON rr.run_id = r.run_id
                 WHERE (:since IS NULL OR r.started_at >= :since)
                   AND (:regions IS NULL OR rr.region IN (SELECT value FROM json_each(:regions)))
                   AND (:status IS NULL OR coalesce(rr.status, r.status) = :status)
                 ORDER BY r.started_at DESC, r.run_id DESC, rr.region
                 LIMIT :limit"
            ))?;
            let rows = stmt.query_map(
                named_params! {
                    ":since": filter.since,
                    ":regions": regions,
                    ":status": filter.status,
                    ":limit": i64::from(filter.limit),
                    ":complete": RegionStatus::Complete,
                    ":failed": RegionStatus::Failed,
                    ":skipped": RegionStatus::Skipped,
                },
                history_row,
            )?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err("reading the run history"))
    }

    /// Each region's last attempt: its line of the newest run that reached it (a run
    /// that skipped it because another process held it does not count).
    pub(crate) fn last_attempts(&self) -> Result<Vec<HistoryRow>, StoreError> {
        (|| {
            // One index probe per region (run_regions_by_region), however long the
            // history: the metrics file reads this after every run.
            let mut stmt = self.conn.prepare_cached(&format!(
                "SELECT r.run_id, r.kind, rr.region, r.started_at, r.ended_at, rr.status,
                        rr.pages, rr.videos, rr.units, {REGION_REASON},
                        {CHARTS_OF_LINE}, r.duration_us
                 FROM (SELECT DISTINCT region FROM run_regions) AS g
                 JOIN run_regions AS rr
                   ON rr.region = g.region
                  AND rr.run_id = (SELECT x.run_id FROM run_regions AS x
                                   WHERE x.region = g.region AND x.status <> :skipped
                                   ORDER BY x.started_at DESC, x.run_id DESC LIMIT 1)
                 JOIN runs AS r ON r.run_id = rr.run_id
                 ORDER BY rr.region"
            ))?;
            let rows = stmt.query_map(
                named_params! {
                    ":complete": RegionStatus::Complete,
                    ":failed": RegionStatus::Failed,
                    ":skipped": RegionStatus::Skipped,
                },
                history_row,
            )?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err("reading the regions' last attempts"))
    }

    /// A run's outcome per region, by region.
    pub(crate) fn run_regions(&self, run_id: &str) -> Result<Vec<RegionOutcome>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT region, status, pages, videos, units, reason FROM run_regions
                 WHERE run_id = ?1 ORDER BY region",
            )?;
            let rows = stmt.query_map([run_id], |row| {
                Ok(RegionOutcome {
                    region: row.get(0)?,
                    status: row.get(1)?,
                    pages: to_u64(row.get(2)?),
                    videos: to_u64(row.get(3)?),
                    units: to_u64(row.get(4)?),
                    reason: row.get(5)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("reading the regions of run {run_id}")))
    }

    /// Attempts by method and outcome: of one run, or of every run recorded.
    pub(crate) fn call_counts(&self, run_id: Option<&str>) -> Result<Vec<CallCount>, StoreError> {
        (|| {
            let mut stmt = match run_id {
                Some(_) => self.conn.prepare_cached(
                    "SELECT method, outcome, calls FROM run_calls WHERE run_id = ?1
                     ORDER BY method, outcome",
                )?,
                None => self.conn.prepare_cached(
                    "SELECT method, outcome, calls FROM call_totals WHERE ?1 IS NULL
                     ORDER BY method, outcome",
                )?,
            };
            let rows = stmt.query_map([run_id], |row| {
                Ok(CallCount {
                    method: row.get(0)?,
                    outcome: row.get(1)?,
                    calls: to_u64(row.get(2)?),
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err("reading the calls by method and outcome"))
    }
}

/// A history line from the columns both history queries select, in their order:
/// run id, kind, region, start, end, status, pages, videos, units, reason, charts,
/// the run's duration.
fn history_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<HistoryRow> {
    let kind: String = row.get(1)?;
    let charts: Option<String> = row.get(10)?;
    Ok(HistoryRow {
        run_id: row.get(0)?,
        kind: RunKind::from_db(&kind).unwrap_or(RunKind::Run),
        region: row.get(2)?,
        started_at: row.get(3)?,
        ended_at: row.get(4)?,
        status: row.get(5)?,
        pages: to_u64(row.get(6)?),
        videos: to_u64(row.get(7)?),
        units: to_u64(row.get(8)?),
        reason: row.get(9)?,
        run_duration_us: row.get::<_, Option<i64>>(11)?.map(|n| n.max(0) as u64),
        charts: charts
            .iter()
            .flat_map(|c| c.split(','))
            .filter_map(|c| c.parse().ok())
            .collect(),
    })
}

#[cfg(test)]
mod tests;

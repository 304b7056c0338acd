//! The picture the metrics file shows (docs/metrics.md), as read from the database:
//! the last run of each kind, every region's last attempt and last success, the calls,
//! and the budget's figures, from the run's report or, while the limiter does not
//! answer, the last known ones the database records. What is read, apart from how it is told.

use crate::quota::BucketFigures;
use crate::quota::skew::Skew;
use crate::store::{
    CallCount, HistoryRow, RegionOutcome, RegionState, RunKind, RunRecord, SinkBacklog, Store,
    StoreError,
};

/// The last finished run of one kind, with its regions and its attempts.
#[derive(Debug, Clone)]
pub struct LastRun {
    pub run: RunRecord,
    pub regions: Vec<RegionOutcome>,
    pub calls: Vec<CallCount>,
}

/// The budget's figures for the metrics: its key, the series' label, and every
/// bucket's figures, the main one first (docs/budget.md, "Buckets").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetFigures {
    pub key: String,
    pub buckets: Vec<BucketFigures>,
}

/// Everything the metrics file says, read from the database (and the budget's window from
/// the run's report), so that whichever of the processes sharing one file writes it last,
/// it is whole: every region's last attempt, not only the regions of the run that wrote it.
#[derive(Debug, Clone, Default)]
pub struct Picture {
    /// The last finished run of each kind.
    pub last_runs: Vec<LastRun>,
    /// Each region's last attempt (its line of the newest run that reached it).
    pub attempts: Vec<HistoryRow>,
    /// Every region the store knows, for the last complete fetch.
    pub regions: Vec<RegionState>,
    /// Attempts of every recorded run by method and outcome.
    pub calls: Vec<CallCount>,
    /// `None` when the limiter could not say.
    pub budget: Option<BudgetFigures>,
    /// The last skew seen on each limiter's clock (docs/schema.md).
    pub skews: Vec<Skew>,
    /// The regions configured in regions.toml, every one of them, not only those
    /// the run fetched: only these have per-region series.
    pub configured: Vec<String>,
    /// The limiter's health at the run's end; `None` leaves its series out.
    pub limiter: Option<LimiterHealth>,
    /// A run or backfill this process was asked for and its configuration refused
    /// (exit 78): the last run of its kind, in place of the one the database holds.
    pub refused: Option<Refused>,
    /// The fleet's missed slots this host has seen, per region (docs/metrics.md).
    pub slot_misses: std::collections::BTreeMap<String, u64>,
    /// The sink's backlog, as the outbox holds it; `None` when the database was not
    /// read.
    pub sink: Option<SinkBacklog>,
    /// The database could not be read (a run refused before it could open it): what
    /// only it can tell is left out, the calls counter above all, which would
    /// otherwise read as reset to 0.
    pub unread: bool,
}

/// A run or backfill refused by its configuration before it began (exit 78): it made
/// no call and the database does not record it, but the metrics file says it was the
/// last run of its kind, with the status `config_error`, so a bad edit alerts within
/// one run (docs/metrics.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub kind: RunKind,
    /// When it was refused, in seconds since the Unix epoch.
    pub at: i64,
}

/// Whether the limiter answered at the end of a run, and what waits to be counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterHealth {
    /// The budget's key, the series' label.
    pub key: String,
    /// The limiter gave the window at the run's end; `None` when no run asked it
    /// (one refused by its configuration), which leaves `trendsync_limiter_up` out.
    pub up: Option<bool>,
    /// Calls made while it was down, in the journal, not yet replayed into the window.
    pub pending_calls: u64,
}

impl Picture {
    /// Reads the picture from `store`; `budget` is the window a run reported.
    pub fn read(
        store: &Store,
        budget: Option<BudgetFigures>,
        configured: Vec<String>,
    ) -> Result<Picture, StoreError> {
        let mut last_runs = Vec::new();
        for kind in [RunKind::Run, RunKind::Backfill] {
            if let Some(run) = store.last_finished_run(kind)? {
                let regions = store.run_regions(&run.run_id)?;
                let calls = store.call_counts(Some(&run.run_id))?;
                last_runs.push(LastRun {
                    run,
                    regions,
                    calls,
                });
            }
        }
        Ok(Picture {
            last_runs,
            attempts: store.last_attempts()?,
            regions: store.region_states()?,
            calls: store.call_counts(None)?,
            slot_misses: store.slot_misses_by_region()?,
            budget,
            skews: Vec::new(),
            configured,
            limiter: None,
            refused: None,
            sink: Some(store.sink_backlog()?),
            unread: false,
        })
    }

    /// Whether `region` is configured, as regions.toml spells codes in any case.
    pub(super) fn is_configured(&self, region: &str) -> bool {
        self.configured
            .iter()
            .any(|c| c.eq_ignore_ascii_case(region))
    }
}

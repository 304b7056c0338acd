//! What a run writes to the store and reads from it, one typed method per kind of
//! write: each runs off the async threads (SQLite blocks), stamps what it stores with
//! the run's clock, and says what it was doing only when it fails.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::error::RunError;
use super::outcome::Status;
use super::plan::Freshness;
use crate::clock::{Clock, Secs};
use crate::sqlite::Db;
use crate::store::{
    CallCount, FollowCounts, FollowStored, LeasedSlot, RegionOutcome, RunKind, RunLimiter,
    RunOutcome, SlotMiss, SlotState, Store, StoreError, VideoRecord,
};

/// A run's store, shared by its region tasks, on the command's one connection, which
/// they take in turn.
pub(super) struct Recorder {
    db: Db,
    run_id: String,
    clock: Arc<dyn Clock>,
}

/// How one piece of work on the store failed, before it is told what it was for.
enum Failure {
    // Boxed: the store's errors are large, and this travels in every Result.
    Store(Box<StoreError>),
    /// The blocking task did not finish.
    Task(tokio::task::JoinError),
}

impl Failure {
    /// The error, saying it happened while `doing`.
    fn doing(self, doing: String) -> RunError {
        match self {
            Failure::Store(source) => RunError::Store { doing, source },
            Failure::Task(source) => RunError::Task { doing, source },
        }
    }
}

impl Recorder {
    /// Records on `store`'s connection; the store itself is let go, so that its
    /// connection is held only while a piece of work runs.
    pub(super) fn new(store: Store, run_id: String, clock: Arc<dyn Clock>) -> Recorder {
        Recorder {
            db: store.db().clone(),
            run_id,
            clock,
        }
    }

    /// Runs `work` on the store on a blocking thread.
    async fn on_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Failure> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || {
            work(&Store::resume(&db)).map_err(|e| Failure::Store(Box::new(e)))
        })
        .await
        .map_err(Failure::Task)?
    }

    /// The run's row, started at `started`.
    /// With `limiter`, that record too.
    pub(super) async fn begin_run(
        &self,
        kind: RunKind,
        started: Secs,
        limiter: Option<RunLimiter>,
    ) -> Result<(), RunError> {
        let run_id = self.run_id.clone();
        self.on_store(move |s| match &limiter {
            Some(limiter) => s.begin_run_on(&run_id, kind, started, limiter),
            None => s.begin_run(&run_id, kind, started),
        })
        .await
        .map_err(|f| f.doing(format!("recording the start of run {}", self.run_id)))
    }

    /// A row for each of the run's regions, started at `started`.
    pub(super) async fn begin_regions(
        &self,
        started: Secs,
        codes: Vec<String>,
    ) -> Result<(), RunError> {
        let run_id = self.run_id.clone();
        self.on_store(move |s| s.begin_run_regions(&run_id, started, &codes))
            .await
            .map_err(|f| f.doing(format!("recording the regions of run {}", self.run_id)))
    }

    /// Queues the slot `slot_start` (`slot_secs` long) of region `code`, which this run
    /// fetched completely, for the sink; `token` is its lease's, when it had one.
    pub(super) async fn queue_for_sink(
        &self,
        code: &str,
        slot_start: i64,
        slot_secs: u32,
        token: Option<i64>,
    ) -> Result<(), RunError> {
        let (run_id, region) = (self.run_id.clone(), code.to_owned());
        self.on_store(move |s| s.queue_for_sink(&run_id, &region, slot_start, slot_secs, token))
            .await
            .map_err(|f| f.doing(format!("queuing region {code} for the sink")))
    }

    /// What region `code` of this run is doing (see [`Store::mark_region`]).
    pub(super) async fn region_is(&self, code: &str, status: Status) -> Result<(), RunError> {
        let (run_id, region) = (self.run_id.clone(), code.to_owned());
        self.on_store(move |s| s.mark_region(&run_id, &region, status))
            .await
            .map_err(|f| f.doing(format!("recording that region {code} is {status}")))
    }

    /// The units region `code` has been granted, and the run in all.
    pub(super) async fn units(
        &self,
        code: &str,
        units: u64,
        run_units: u64,
    ) -> Result<(), RunError> {
        let (run_id, region) = (self.run_id.clone(), code.to_owned());
        self.on_store(move |s| s.record_units(&run_id, &region, units, run_units))
            .await
            .map_err(|f| f.doing(format!("recording the units of region {code}")))
    }

    /// The region's category names, (id, title).
    pub(super) async fn categories(
        &self,
        code: &str,
        pairs: Vec<(String, String)>,
    ) -> Result<(), RunError> {
        let (region, now) = (code.to_owned(), self.clock.now().to_secs());
        self.on_store(move |s| s.store_categories(&region, &pairs, now))
            .await
            .map_err(|f| f.doing(format!("storing the category names of region {code}")))
    }

    pub(super) async fn region_complete(&self, code: &str) -> Result<(), RunError> {
        let (region, now) = (code.to_owned(), self.clock.now().to_secs());
        self.on_store(move |s| s.mark_region_complete(&region, now))
            .await
            .map_err(|f| f.doing(format!("marking region {code} complete")))
    }

    /// Page `page` of one of the region's charts (the overall one when `category` is
    /// none), its first video at `first_rank`; says how many videos were stored.
    pub(super) async fn chart_page(
        &self,
        code: &str,
        category: Option<u32>,
        page: usize,
        first_rank: u32,
        items: Vec<VideoRecord>,
        lease: Option<LeasedSlot>,
    ) -> Result<usize, RunError> {
        let (run_id, region, now) = (
            self.run_id.clone(),
            code.to_owned(),
            self.clock.now().to_secs(),
        );
        self.on_store(move |s| {
            s.store_chart_page_leased(&run_id, &region, category, first_rank, &items, now, lease)
        })
        .await
        .map_err(|f| {
            f.doing(match category {
                Some(c) => {
                    format!("storing page {page} of the chart of category {c} of region {code}")
                }
                None => format!("storing trending page {page} of region {code}"),
            })
        })
    }

    /// The largest fencing token the file has noted: a claim's floor.
    pub(super) async fn largest_slot_token(&self) -> Result<i64, RunError> {
        self.on_store(|s| s.largest_slot_token())
            .await
            .map_err(|f| f.doing("reading the largest fencing token noted".to_owned()))
    }

    /// That a claim of this run's was given `token`.
    pub(super) async fn note_slot_token(&self, token: i64) -> Result<(), RunError> {
        self.on_store(move |s| s.note_slot_token(token))
            .await
            .map_err(|f| f.doing(format!("noting fencing token {token}")))
    }

    /// That another host fetched region `code`'s slot, done at `at_s`.
    pub(super) async fn done_elsewhere(&self, code: &str, at_s: i64) -> Result<(), RunError> {
        let region = code.to_owned();
        self.on_store(move |s| s.mark_done_elsewhere(&region, at_s))
            .await
            .map_err(|f| f.doing(format!("noting that another host fetched region {code}")))
    }

    /// Where this run's leased fetches of each region stand now, in one transaction.
    pub(super) async fn slot_states(
        &self,
        marks: Vec<(String, SlotState)>,
    ) -> Result<(), RunError> {
        if marks.is_empty() {
            return Ok(());
        }
        let run_id = self.run_id.clone();
        let regions = marks
            .iter()
            .map(|(code, state)| format!("{code} {}", state.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        self.on_store(move |s| s.mark_slots(&run_id, &marks))
            .await
            .map_err(|f| f.doing(format!("marking this run's fetches of {regions}")))
    }

    /// That the region has no chart of `category`.
    pub(super) async fn chart_missing(&self, code: &str, category: u32) -> Result<(), RunError> {
        let (region, now) = (code.to_owned(), self.clock.now().to_secs());
        self.on_store(move |s| s.mark_chart_missing(&region, category, now))
            .await
            .map_err(|f| {
                f.doing(format!(
                    "noting that region {code} has no chart of category {category}"
                ))
            })
    }

    /// The videos due for a follow-up (see [`Store::due_for_follow_up`]).
    pub(super) async fn due_for_follow_up(
        &self,
        charted_since: Secs,
        counted_before: Secs,
    ) -> Result<Vec<String>, RunError> {
        let (charted_since, counted_before) = (charted_since.as_i64(), counted_before.as_i64());
        self.on_store(move |s| s.due_for_follow_up(charted_since, counted_before))
            .await
            .map_err(|f| f.doing("choosing the videos due for a follow-up".to_owned()))
    }

    /// One follow-up's answer: `counts` of the videos `asked` for.
    pub(super) async fn follow_ups(
        &self,
        asked: Vec<String>,
        counts: Vec<FollowCounts>,
    ) -> Result<FollowStored, RunError> {
        let now = self.clock.now().to_secs();
        self.on_store(move |s| s.store_follow_ups(&asked, &counts, now))
            .await
            .map_err(|f| f.doing("storing a follow-up's counts".to_owned()))
    }

    /// What search `name` of the region found, in rank order; says how many videos
    /// were stored.
    pub(super) async fn search_page(
        &self,
        code: &str,
        name: &str,
        ranked: Vec<VideoRecord>,
        lease: Option<LeasedSlot>,
    ) -> Result<usize, RunError> {
        let (run_id, region, search, now) = (
            self.run_id.clone(),
            code.to_owned(),
            name.to_owned(),
            self.clock.now().to_secs(),
        );
        self.on_store(move |s| {
            s.store_search_page_leased(&run_id, &region, &search, 1, &ranked, now, lease)
        })
        .await
        .map_err(|f| f.doing(format!("storing search \"{name}\" of region {code}")))
    }

    /// When region `code` was last attempted (`at`) and how it went.
    pub(super) async fn region_attempt(
        &self,
        code: &str,
        at: Secs,
        status: Status,
    ) -> Result<(), RunError> {
        let region = code.to_owned();
        self.on_store(move |s| s.mark_region_attempt(&region, at, status))
            .await
            .map_err(|f| f.doing(format!("recording the attempt at region {code}")))
    }

    /// The run's end: each region's outcome, its calls by method and outcome, and its
    /// own outcome.
    pub(super) async fn end_run(
        &self,
        details: Vec<RegionOutcome>,
        calls: Vec<CallCount>,
        outcome: RunOutcome,
    ) -> Result<(), RunError> {
        let run_id = self.run_id.clone();
        self.on_store(move |s| {
            s.record_run_details(&run_id, &details, &calls)?;
            s.finish_run(&run_id, &outcome)
        })
        .await
        .map_err(|f| f.doing(format!("recording the end of run {}", self.run_id)))
    }

    /// Notes the fleet's missed slots seen; how many were new.
    pub(super) async fn slot_misses(&self, misses: Vec<SlotMiss>) -> Result<usize, RunError> {
        let at = self.clock.now().to_secs();
        self.on_store(move |s| s.note_slot_misses(&misses, at))
            .await
            .map_err(|f| f.doing("noting the fleet's missed slots".to_owned()))
    }

    /// What the store knows of each region.
    pub(super) async fn freshness(&self) -> Result<BTreeMap<String, Freshness>, RunError> {
        self.on_store(read_freshness)
            .await
            .map_err(|f| f.doing("reading the regions' state".to_owned()))
    }
}

/// The regions' last complete fetch and category fetch, from the store.
pub fn read_freshness(store: &Store) -> Result<BTreeMap<String, Freshness>, StoreError> {
    let mut out = BTreeMap::new();
    for state in store.region_states()? {
        let categories_fetched_at = store.categories_fetched_at(&state.region)?;
        let missing_charts = store.missing_charts(&state.region)?.into_iter().collect();
        out.insert(
            state.region.clone(),
            Freshness {
                last_complete_at: state.last_complete_at,
                categories_fetched_at,
                missing_charts,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

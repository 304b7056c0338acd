//! What a run does for each region, phase by phase (core charts and category names,
//! category charts, searches), and the follow-ups after them: the calls each step
//! makes, in order, each page stored as it arrives.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::call::Failed;
use super::outcome::{FollowReport, RegionReport, Status};
use super::plan::{self, Step};
use super::run::Run;
use crate::clock::Secs;
use crate::config::{Follow, Region};
use crate::error::chain;
use crate::output::progress::RegionBar;
use crate::quota::micros;
use crate::store::FollowCounts;
use crate::youtube::{
    MAX_RESULTS, SEARCH_LIST, SearchRequest, VIDEO_CATEGORIES_LIST, VIDEOS_BATCH_GET_STATS,
    VIDEOS_LIST, VideoRecord,
};

/// What the follow-ups of a run have done so far.
#[derive(Debug, Default)]
struct FollowTally {
    /// Calls made: batchGetStats and the videos.list that confirm what it left out.
    calls: u64,
    missing: u64,
    missing_found: u64,
    removed: u64,
}

/// The deepest chart position stored: the chart holds 200 videos (docs/upstream.md).
const MAX_RANK: usize = 200;

impl Run {
    /// The region's trending pages, then its category names when `steps` (the
    /// region's [`plan::steps`]) list them.
    pub(super) async fn core(
        self: Arc<Self>,
        region: Region,
        steps: Vec<Step>,
        mut report: RegionReport,
    ) -> RegionReport {
        self.mark_region(&region.code, Status::Running).await;
        let bar = RegionBar::new(
            &region.code,
            steps
                .iter()
                .filter(|s| s.phase() == plan::Phase::Core)
                .count() as u64,
        );
        let result = async {
            let pages = steps
                .iter()
                .filter(|s| matches!(s, Step::TrendingPage(_)))
                .count();
            self.chart(&region, None, pages, &mut report, &bar).await?;
            if steps.contains(&Step::Categories) {
                let got = self
                    .call(VIDEO_CATEGORIES_LIST, &mut report, || {
                        self.upstream.categories(&region.code, region.hl.as_deref())
                    })
                    .await?;
                let pairs: Vec<(String, String)> =
                    got.into_iter().map(|c| (c.id, c.title)).collect();
                self.record.categories(&region.code, pairs).await?;
                bar.step("categories");
            }
            self.record.region_complete(&region.code).await?;
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            end_region(&mut report, failed, self.stops.status());
        }
        bar.finish(report.status.as_str());
        self.mark_after(&report, &steps, plan::Phase::Core).await;
        report
    }

    /// Records in the history what a region of this run is doing (see
    /// [`crate::store::Store::mark_region`]). A failure costs only the line's accuracy
    /// until the run ends, so it is logged, not fatal.
    async fn mark_region(&self, code: &str, status: Status) {
        if let Err(e) = self.record.region_is(code, status).await {
            tracing::warn!(region = %code, "{}", chain(&e));
        }
    }

    /// Whether the region's calls may go on: not once the run lost its lease on the
    /// region's slot (the finish then says to whom).
    fn still_held(&self, region: &Region) -> Result<(), Failed> {
        if self.lease_lost(&region.code) {
            return Err(Failed::Region(format!(
                "the lease on region {}'s slot was lost to another run; no further calls for it",
                region.code
            )));
        }
        Ok(())
    }

    /// After a phase of a region: `queued` again when a later phase has steps for it,
    /// else how it ended.
    async fn mark_after(&self, report: &RegionReport, steps: &[Step], phase: plan::Phase) {
        let later = steps.iter().any(|s| s.phase() > phase);
        let status = if report.going() && later {
            Status::Queued
        } else {
            report.status
        };
        self.mark_region(&report.code, status).await;
    }

    /// Up to `pages` pages of one of the region's charts (the overall one when
    /// `category` is none), each stored as it arrives. The chart may end before the
    /// planned pages do: no nextPageToken.
    async fn chart(
        &self,
        region: &Region,
        category: Option<u32>,
        pages: usize,
        report: &mut RegionReport,
        bar: &RegionBar,
    ) -> Result<(), Failed> {
        let chart = match category {
            Some(c) => format!("the chart of category {c}"),
            None => "the trending chart".to_owned(),
        };
        let mut token: Option<String> = None;
        // The chart position of the next video. A page may hold fewer than 50
        // videos, so ranks continue from the videos actually received, not from
        // the page number (which left gaps: 1..7, then 51..).
        let mut next_rank: u32 = 1;
        // Every token sent in this fetch: one coming back means the upstream is
        // looping, and following it would store the same videos as new ranks.
        let mut tokens_seen: HashSet<String> = HashSet::new();
        for page in 1..=pages {
            self.still_held(region)?;
            let got = self
                .call(VIDEOS_LIST, report, || {
                    self.upstream.chart_page(
                        &region.code,
                        category,
                        region.hl.as_deref(),
                        token.as_deref(),
                    )
                })
                .await?;
            let items = got.items;
            let first_rank = next_rank;
            let last_rank = first_rank as usize + items.len().saturating_sub(1);
            if !items.is_empty() && last_rank > MAX_RANK {
                return Err(Failed::Region(format!(
                    "{VIDEOS_LIST} for region {}: page {page} of {chart} would hold chart positions up to {last_rank}, past the chart's {MAX_RANK}; the upstream broke the protocol, the region stops here",
                    region.code,
                )));
            }
            next_rank = next_rank.saturating_add(u32::try_from(items.len()).unwrap_or(u32::MAX));
            let stored = self
                .record
                .chart_page(
                    &region.code,
                    category,
                    page,
                    first_rank,
                    items,
                    self.lease_of(&region.code).map(|l| l.leased()),
                )
                .await?;
            report.pages += 1;
            report.videos += stored as u64;
            bar.step(&match category {
                Some(c) => format!("category {c} page {page}"),
                None => format!("page {page}"),
            });
            if let Some(sent) = token.take() {
                tokens_seen.insert(sent);
            }
            match got.next_page_token {
                Some(t) if tokens_seen.contains(&t) => {
                    return Err(Failed::Region(self.upstream.scrub(&format!(
                        "{VIDEOS_LIST} for region {}: page {page} of {chart} gave page token {t:?} again, already followed in this fetch; the upstream broke the protocol, the region stops here",
                        region.code
                    ))));
                }
                Some(t) => token = Some(t),
                None => break,
            }
        }
        Ok(())
    }

    /// The category charts `steps` list, each up to its planned pages. A category
    /// the upstream has no chart for fails alone, with a warning, and is left out of
    /// the next runs until the region's category names are next fetched.
    pub(super) async fn charts(
        self: Arc<Self>,
        region: Region,
        steps: Vec<Step>,
        mut report: RegionReport,
    ) -> RegionReport {
        let mut planned: Vec<(u32, usize)> = Vec::new();
        for step in &steps {
            if let Step::ChartPage { category, .. } = step {
                match planned.last_mut() {
                    Some((c, pages)) if c == category => *pages += 1,
                    _ => planned.push((*category, 1)),
                }
            }
        }
        if planned.is_empty() {
            return report;
        }
        self.mark_region(&region.code, Status::Running).await;
        let bar = RegionBar::new(&region.code, planned.iter().map(|(_, n)| *n as u64).sum());
        let result = async {
            for (category, pages) in planned {
                match self
                    .chart(&region, Some(category), pages, &mut report, &bar)
                    .await
                {
                    Ok(()) => {}
                    Err(Failed::ChartNotFound(message)) => {
                        tracing::warn!(
                            region = %region.code,
                            category,
                            "{message}; region {} has no chart of category {category}: not asked again until its category names are next fetched",
                            region.code
                        );
                        self.record.chart_missing(&region.code, category).await?;
                    }
                    Err(other) => return Err(other),
                }
            }
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            end_region(&mut report, failed, self.stops.status());
        }
        bar.finish(report.status.as_str());
        self.mark_after(&report, &steps, plan::Phase::Charts).await;
        report
    }

    /// The follow-ups (docs/upstream.md): the counts of the videos on any chart
    /// in the last `follow.days` and not counted for `follow.every`, stalest first, 50
    /// a call, until none is due or their bucket says no (which stops only these).
    ///
    /// `videos.batchGetStats` is not atomic: its answer may leave out videos that still
    /// exist. A video left out is only missing; one `videos.list` of the missing ids
    /// (from the main bucket) says which are gone, and only those are marked removed.
    /// When that call cannot be made, the missing ones are left as they were, due
    /// again, and the follow-ups stop as that call's bucket says.
    pub(super) async fn follow_ups(self: Arc<Self>, follow: Follow, now: Secs) -> FollowReport {
        let mut report = RegionReport::new("follow-ups");
        let mut tally = FollowTally::default();
        let days = i64::from(follow.days) * 86_400;
        let every = i64::try_from(follow.every.as_secs()).unwrap_or(i64::MAX);
        let result = async {
            let due = self
                .record
                .due_for_follow_up(
                    Secs::new(now.as_i64() - days),
                    Secs::new(now.as_i64().saturating_sub(every)),
                )
                .await?;
            for batch in due.chunks(MAX_RESULTS) {
                self.follow_up_batch(batch, &mut report, &mut tally).await?;
            }
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            end_region(&mut report, failed, self.stops.status());
        }
        if tally.missing > 0 {
            tracing::info!(
                run_id = %self.settings.run_id,
                "follow-ups: {} videos were missing from an answer; videos.list found {} of them, and {} are no longer shown by the upstream (removed or private), marked so",
                tally.missing,
                tally.missing_found,
                tally.removed
            );
        }
        FollowReport {
            status: report.status,
            calls: tally.calls,
            videos: report.videos,
            removed: tally.removed,
            missing: tally.missing,
            missing_found: tally.missing_found,
            units: report.units,
            units_unmetered: report.units_unmetered,
            error: report.error,
        }
    }

    /// One batch of follow-ups: the counts of `batch` in one call, then the videos
    /// missing from its answer looked up with videos.list, and what was found stored.
    async fn follow_up_batch(
        &self,
        batch: &[String],
        report: &mut RegionReport,
        tally: &mut FollowTally,
    ) -> Result<(), Failed> {
        let mut asked = batch.to_vec();
        let counts = self
            .call(VIDEOS_BATCH_GET_STATS, report, || {
                self.upstream.video_counts(&asked)
            })
            .await?;
        tally.calls += 1;
        let mut counts: Vec<FollowCounts> = counts
            .into_iter()
            .map(|c| FollowCounts {
                video_id: c.id,
                view_count: c.view_count,
                like_count: c.like_count,
                comment_count: c.comment_count,
            })
            .collect();
        let answered: HashSet<&str> = counts.iter().map(|c| c.video_id.as_str()).collect();
        let missing: Vec<String> = asked
            .iter()
            .filter(|id| !answered.contains(id.as_str()))
            .cloned()
            .collect();
        let mut unconfirmed = None;
        if !missing.is_empty() {
            tally.missing += missing.len() as u64;
            match self
                .call(VIDEOS_LIST, report, || {
                    self.upstream.videos_by_id(&missing, None)
                })
                .await
            {
                Ok(page) => {
                    tally.calls += 1;
                    let shown: Vec<FollowCounts> = page
                        .items
                        .into_iter()
                        .filter(|v| missing.contains(&v.id))
                        .map(|v| FollowCounts {
                            video_id: v.id,
                            view_count: v.view_count,
                            like_count: v.like_count,
                            comment_count: v.comment_count,
                        })
                        .collect();
                    tally.missing_found += shown.len() as u64;
                    counts.extend(shown);
                }
                Err(failed) => {
                    // Not confirmed either way: neither counted nor removed.
                    asked.retain(|id| !missing.contains(id));
                    unconfirmed = Some(failed);
                }
            }
        }
        let stored = self.record.follow_ups(asked, counts).await?;
        report.videos += stored.counted as u64;
        tally.removed += stored.removed as u64;
        match unconfirmed {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    /// The searches `steps` list: one search.list each, then one videos.list for the
    /// details of what it found.
    pub(super) async fn searches(
        self: Arc<Self>,
        region: Region,
        steps: Vec<Step>,
        mut report: RegionReport,
    ) -> RegionReport {
        let planned: Vec<_> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Search { index, .. } => region.searches.get(*index),
                _ => None,
            })
            .collect();
        if planned.is_empty() {
            return report;
        }
        self.mark_region(&region.code, Status::Running).await;
        let result = async {
            for search in planned {
                self.still_held(&region)?;
                let published_after = search.published_within.and_then(|w| {
                    jiff::Timestamp::from_microsecond(self.clock.now().as_i64() - micros(w)).ok()
                });
                let req = SearchRequest {
                    region: &region.code,
                    q: &search.q,
                    order: search.order,
                    published_after,
                };
                let found = self
                    .call(SEARCH_LIST, &mut report, || self.upstream.search_page(req))
                    .await?;
                if found.video_ids.is_empty() {
                    continue;
                }
                let ids = found.video_ids;
                let details = self
                    .call(VIDEOS_LIST, &mut report, || {
                        self.upstream.videos_by_id(&ids, region.hl.as_deref())
                    })
                    .await?;
                let ranked = in_rank_order(&ids, details.items);
                let stored = self
                    .record
                    .search_page(
                        &region.code,
                        &search.name,
                        ranked,
                        self.lease_of(&region.code).map(|l| l.leased()),
                    )
                    .await?;
                report.videos += stored as u64;
            }
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            end_region(&mut report, failed, self.stops.status());
        }
        self.mark_after(&report, &steps, plan::Phase::Searches)
            .await;
        report
    }
}

/// How a region's phase that did not finish ends: as the run's stop says, or
/// `failed` with its own reason.
fn end_region(report: &mut RegionReport, failed: Failed, stop_status: Status) {
    match failed {
        Failed::Stopped => report.status = stop_status,
        // A region that made no call at all was never reached by this run.
        Failed::NotReached
            if report.pages == 0 && report.units == 0 && report.units_unmetered == 0 =>
        {
            report.status = Status::NotAttempted;
        }
        Failed::NotReached => report.status = stop_status,
        Failed::Region(message) | Failed::ChartNotFound(message) => {
            tracing::error!(region = %report.code, "{message}");
            report.status = Status::Failed;
            report.error = Some(message);
        }
    }
}

/// The details in the order the search ranked them; videos.list does not promise it.
fn in_rank_order(ids: &[String], items: Vec<VideoRecord>) -> Vec<VideoRecord> {
    let mut by_id: BTreeMap<String, VideoRecord> =
        items.into_iter().map(|v| (v.id.clone(), v)).collect();
    ids.iter().filter_map(|id| by_id.remove(id)).collect()
}

#[cfg(test)]
mod tests;

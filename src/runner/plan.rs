//! The plan of a run: every upstream call it would make, in the order docs/schema.md gives.
//! Cheap core data first (each region's overall trending pages and category names), then
//! the category charts, then the expensive searches; regions whose last complete fetch is
//! oldest go first, so a run cut short by the budget is resumed by the next one with the
//! regions it missed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::outcome::Stop;
use crate::clock::{Micros, Secs};
use crate::config::Region;
use crate::quota::drift::SpentDay;
use crate::quota::{Allowance, BUDGET_POLICY, BucketFigures, Budget, Kind, Status, model::Model};
use crate::youtube::{
    MAX_RESULTS, SEARCH_LIST, VIDEO_CATEGORIES_LIST, VIDEOS_BATCH_GET_STATS, VIDEOS_LIST,
};

/// Category names are fetched at most once a day per region.
pub const CATEGORIES_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// What one planned call fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Page `n` (from 1) of the region's trending chart.
    TrendingPage(u32),
    /// The region's category names.
    Categories,
    /// Page `page` (from 1) of the chart of category `category`.
    ChartPage { category: u32, page: u32 },
    /// The region's search number `index` (from 0, in the configuration's order).
    Search { index: usize, name: String },
    /// The details of the videos the search found.
    SearchDetails(String),
    /// The counts of `videos` videos due for a follow-up (at most 50), of no region.
    FollowUp { videos: usize },
}

impl Step {
    pub fn method(&self) -> &'static str {
        match self {
            Step::TrendingPage(_) | Step::ChartPage { .. } | Step::SearchDetails(_) => VIDEOS_LIST,
            Step::Categories => VIDEO_CATEGORIES_LIST,
            Step::Search { .. } => SEARCH_LIST,
            Step::FollowUp { .. } => VIDEOS_BATCH_GET_STATS,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Step::TrendingPage(n) => format!("trending page {n}"),
            Step::Categories => "category names".to_owned(),
            Step::ChartPage { category, page } => format!("category {category} page {page}"),
            Step::Search { name, .. } => format!("search \"{name}\""),
            Step::SearchDetails(name) => format!("details for \"{name}\""),
            Step::FollowUp { videos } => format!("follow-up of {videos} videos"),
        }
    }

    /// Which part of the run makes this call.
    pub fn phase(&self) -> Phase {
        match self {
            Step::TrendingPage(_) | Step::Categories => Phase::Core,
            Step::ChartPage { .. } => Phase::Charts,
            Step::Search { .. } | Step::SearchDetails(_) => Phase::Searches,
            Step::FollowUp { .. } => Phase::FollowUps,
        }
    }
}

/// The parts of a run, in the order they are made: each part of every region before
/// the next part of any (docs/schema.md), so the core data is in before the
/// optional calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The overall chart's pages and the category names.
    Core,
    /// The category charts.
    Charts,
    /// The configured searches and their details.
    Searches,
    /// The follow-ups: counts of videos that were on a chart, of no region.
    FollowUps,
}

impl Phase {
    pub const ALL: [Phase; 4] = [
        Phase::Core,
        Phase::Charts,
        Phase::Searches,
        Phase::FollowUps,
    ];
}

/// The follow-up calls of a run that finds `due` videos due: 50 a call, stalest
/// first, after every region's calls. They belong to no region (`region` is empty).
pub fn follow_ups(due: usize) -> Vec<Planned> {
    (0..due)
        .step_by(MAX_RESULTS)
        .map(|first| Planned {
            region: String::new(),
            step: Step::FollowUp {
                videos: (due - first).min(MAX_RESULTS),
            },
        })
        .collect()
}

/// A call of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub region: String,
    pub step: Step,
}

/// What the store knows of a region, in Unix seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Freshness {
    pub last_complete_at: Option<i64>,
    pub categories_fetched_at: Option<i64>,
    /// Categories whose chart the upstream said it does not have
    /// (`videoChartNotFound`) since the category names were last fetched: not asked
    /// again until they are fetched anew.
    pub missing_charts: BTreeSet<u32>,
}

/// The regions in the order a run takes them: never fetched first, then oldest
/// complete fetch first; the configuration's order breaks ties.
pub fn order<'a>(regions: &[&'a Region], fresh: &BTreeMap<String, Freshness>) -> Vec<&'a Region> {
    let mut ordered = regions.to_vec();
    ordered.sort_by_key(|r| {
        fresh
            .get(&r.code)
            .and_then(|f| f.last_complete_at)
            .unwrap_or(i64::MIN)
    });
    ordered
}

/// The calls a run makes for `region` at `now`, in order: its trending pages, its
/// category names when they are stale, its category charts, then each search and its
/// details. A category chart the upstream said it does not have is left out until the
/// category names are fetched again (so, in the run that fetches them, it is asked
/// again after them).
///
/// The dry run plans these and the real run walks them; the real run may make fewer
/// (a chart that ends before its last page, a search that finds nothing), never others.
pub fn steps(region: &Region, fresh: Option<&Freshness>, now: Secs) -> Vec<Step> {
    let now_s = now.as_i64();
    let max_age = i64::try_from(CATEGORIES_MAX_AGE.as_secs()).unwrap_or(i64::MAX);
    let categories_stale = fresh
        .and_then(|f| f.categories_fetched_at)
        .is_none_or(|at| now_s - at >= max_age);
    let pages = (1..=region.pages).map(Step::TrendingPage);
    let categories = categories_stale.then_some(Step::Categories);
    let charts = region
        .categories
        .iter()
        .filter(|c| categories_stale || fresh.is_none_or(|f| !f.missing_charts.contains(c)))
        .flat_map(|&category| {
            (1..=region.pages).map(move |page| Step::ChartPage { category, page })
        });
    let searches = region.searches.iter().enumerate().flat_map(|(index, s)| {
        [
            Step::Search {
                index,
                name: s.name.clone(),
            },
            Step::SearchDetails(s.name.clone()),
        ]
    });
    pages
        .chain(categories)
        .chain(charts)
        .chain(searches)
        .collect()
}

/// Every call of a run over `regions`, at `now`: each region's [`steps`], phase by
/// phase: the core data of every region, then every category chart, then every search.
pub fn plan(regions: &[&Region], fresh: &BTreeMap<String, Freshness>, now: Secs) -> Vec<Planned> {
    let per_region: Vec<(&Region, Vec<Step>)> = order(regions, fresh)
        .into_iter()
        .map(|r| (r, steps(r, fresh.get(&r.code), now)))
        .collect();
    let mut calls = Vec::new();
    for phase in Phase::ALL {
        for (r, steps) in &per_region {
            calls.extend(
                steps
                    .iter()
                    .filter(|s| s.phase() == phase)
                    .map(|step| Planned {
                        region: r.code.clone(),
                        step: step.clone(),
                    }),
            );
        }
    }
    calls
}

/// One row of a dry run.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulatedCall {
    pub call: Planned,
    /// The bucket the call is charged to (docs/budget.md, "Buckets").
    pub bucket: String,
    pub units: u64,
    /// Units of the plan in this call's bucket up to and including this call.
    pub total: u64,
    pub fits: bool,
}

/// The plan against the budget as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulation {
    pub calls: Vec<SimulatedCall>,
    /// Where the run would first stop and why: the stop the real run would record.
    pub stop: Option<Stop>,
    /// Per bucket that would stop, its stop; the calls of the other buckets go on.
    pub bucket_stops: BTreeMap<String, Stop>,
    /// Every bucket's figures after the calls that fit, the main one first.
    pub buckets: Vec<BucketFigures>,
    /// How far into the budget the plan may go.
    pub allowance: Allowance,
    /// The limiter's clock the plan was charged at.
    pub now: Micros,
}

impl Simulation {
    /// Units left to the allowance of the main bucket after the calls that fit.
    pub fn remaining(&self) -> u64 {
        self.buckets
            .first()
            .map_or(0, |b| b.remaining(self.allowance))
    }

    /// Per bucket, units left to its allowance after the calls that fit.
    pub fn remaining_by_bucket(&self) -> BTreeMap<String, u64> {
        self.buckets
            .iter()
            .map(|b| (b.name.clone(), b.remaining(self.allowance)))
            .collect()
    }
}

/// Charges the plan, call by call, to the reference [`Model`] seeded with the window
/// as the limiter reported it: the decisions of the backends, without touching the
/// limiter. `status` should list the entries of every policy (without them a
/// policy's waits come out a whole window); `spent` is the limiter's record of the
/// upstream's early refusals. A denied call stops the calls of its bucket as it would
/// in the run, with the same [`Stop`]; the details of a search that was not made are
/// not fetched either.
pub fn simulate(
    plan: &[Planned],
    budget: &Budget,
    allowance: Allowance,
    status: &Status,
    spent: &[SpentDay],
) -> Simulation {
    let now = status.now;
    let mut model = Model::from_status(status);
    let mut calls = Vec::with_capacity(plan.len());
    let mut stop: Option<Stop> = None;
    let mut fatal = false;
    let mut bucket_stops: BTreeMap<String, Stop> = BTreeMap::new();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    // Whether the search before a SearchDetails step was made.
    let mut searched = false;
    for (i, call) in plan.iter().enumerate() {
        let method = call.step.method();
        let units = budget.cost(method).unwrap_or(0);
        let bucket = budget
            .bucket_of(method)
            .map_or(BUDGET_POLICY, |b| b.name.as_str())
            .to_owned();
        let mut fits = false;
        let wanted = match call.step {
            Step::SearchDetails(_) => searched,
            _ => true,
        };
        if wanted && !fatal && !bucket_stops.contains_key(&bucket) {
            match budget.charge(&format!("dry-run-{i}"), method, 1, allowance) {
                // The real run stops at a method without a cost too.
                Err(e) => {
                    fatal = true;
                    stop.get_or_insert(Stop::Fatal {
                        message: e.to_string(),
                    });
                }
                Ok(charge) => {
                    let decision = model.charge(&charge, now.as_i64(), None);
                    if decision.granted {
                        fits = true;
                        *totals.entry(bucket.clone()).or_default() += units;
                    } else {
                        let blocked: Vec<String> = budget
                            .bucket(&charge.bucket)
                            .map_or_else(Vec::new, |b| b.methods())
                            .into_iter()
                            .filter(|m| status.blocked_methods.contains_key(m))
                            .collect();
                        let denied = Stop::denied(method, &charge.bucket, &decision, now, &blocked);
                        stop.get_or_insert(denied.clone());
                        bucket_stops.insert(bucket.clone(), denied);
                    }
                }
            }
        }
        if matches!(call.step, Step::Search { .. }) {
            searched = fits;
        }
        calls.push(SimulatedCall {
            call: call.clone(),
            total: totals.get(&bucket).copied().unwrap_or(0),
            bucket,
            units,
            fits,
        });
    }
    // The window as it stands, with what the calls that fit add to it.
    let mut buckets = budget.figures(status, spent);
    for (figures, b) in buckets.iter_mut().zip(budget.buckets()) {
        figures.used = model.used(Kind::Bucket, &b.name, &b.window, now.as_i64());
    }
    Simulation {
        calls,
        stop,
        bucket_stops,
        buckets,
        allowance,
        now,
    }
}

#[cfg(test)]
mod tests;

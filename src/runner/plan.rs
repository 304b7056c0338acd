//! The plan of a run: every upstream call it would make, in the order DESIGN.md
//! section 6 gives. Cheap core data first (each region's overall trending pages and
//! category names), then the category charts, then the expensive searches; regions
//! whose last complete fetch is oldest go first, so a run cut short by the budget is
//! resumed by the next one with the regions it missed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::outcome::Stop;
use crate::config::Region;
use crate::quota::{Allowance, BUDGET_POLICY, Budget, Status, model::Model};
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

    /// A search or its details: made after every region's charts.
    pub fn is_search(&self) -> bool {
        self.phase() == Phase::Searches
    }
}

/// The parts of a run, in the order they are made: each part of every region before
/// the next part of any (DESIGN.md section 6), so the core data is in before the
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

/// The calls a run makes for `region` at `now_s`, in order: its trending pages, its
/// category names when they are stale, its category charts, then each search and its
/// details. A category chart the upstream said it does not have is left out until the
/// category names are fetched again (so, in the run that fetches them, it is asked
/// again after them).
///
/// The dry run plans these and the real run walks them; the real run may make fewer
/// (a chart that ends before its last page, a search that finds nothing), never others.
pub fn steps(region: &Region, fresh: Option<&Freshness>, now_s: i64) -> Vec<Step> {
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

/// Every call of a run over `regions`, at `now_s`: each region's [`steps`], phase by
/// phase: the core data of every region, then every category chart, then every search.
pub fn plan(regions: &[&Region], fresh: &BTreeMap<String, Freshness>, now_s: i64) -> Vec<Planned> {
    let per_region: Vec<(&Region, Vec<Step>)> = order(regions, fresh)
        .into_iter()
        .map(|r| (r, steps(r, fresh.get(&r.code), now_s)))
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
    /// The bucket the call is charged to (DESIGN.md 3.9).
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
    /// Per bucket, units left to its allowance after the calls that fit.
    pub remaining_by_bucket: BTreeMap<String, u64>,
    /// The limiter's clock the plan was charged at, microseconds since the epoch.
    pub now_us: i64,
}

impl Simulation {
    /// Units left to the allowance of the main bucket after the calls that fit.
    pub fn remaining(&self) -> u64 {
        self.remaining_by_bucket
            .get(BUDGET_POLICY)
            .copied()
            .unwrap_or(0)
    }
}

/// Charges the plan, call by call, to the reference [`Model`] seeded with the window
/// as the limiter reported it: the decisions of the backends, without touching the
/// limiter. `status` should list the entries of every policy (without them a
/// policy's waits come out a whole window). A denied call stops the calls of its
/// bucket as it would in the run, with the same [`Stop`]; the details of a search that
/// was not made are not fetched either.
pub fn simulate(
    plan: &[Planned],
    budget: &Budget,
    allowance: Allowance,
    status: &Status,
) -> Simulation {
    let now = status.now_us;
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
            .map_or(BUDGET_POLICY, |b| b.name)
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
                    let decision = model.charge(&charge, now, None);
                    if decision.granted {
                        fits = true;
                        *totals.entry(bucket.clone()).or_default() += units;
                    } else {
                        let denied = Stop::denied(method, &charge.bucket, &decision, now);
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
    let remaining_by_bucket: BTreeMap<String, u64> = budget
        .buckets()
        .iter()
        .map(|b| {
            let used = model.used(b.name, b.window, now);
            (b.name.to_owned(), b.max_for(allowance).saturating_sub(used))
        })
        .collect();
    Simulation {
        calls,
        stop,
        bucket_stops,
        remaining_by_bucket,
        now_us: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Search;
    use crate::quota::{Entry, PolicyStatus};
    use crate::youtube::SearchOrder;

    fn region(code: &str, pages: u32, searches: &[&str]) -> Region {
        Region {
            code: code.into(),
            offset: 0,
            hl: None,
            pages,
            categories: Vec::new(),
            searches: searches
                .iter()
                .map(|n| Search {
                    name: (*n).into(),
                    q: String::new(),
                    order: SearchOrder::ViewCount,
                    published_within: None,
                })
                .collect(),
        }
    }

    fn budget(ceiling: u64) -> Budget {
        let origin = crate::config::Origin::BuiltIn;
        let mut b = crate::config::load_budget(&origin).expect("built-in costs load");
        b.ceiling = ceiling;
        b
    }

    fn status(used: u64, at_us: i64, now_us: i64) -> Status {
        Status {
            now_us,
            policies: vec![
                PolicyStatus {
                    name: "budget".into(),
                    window: Duration::from_secs(86_400).into(),
                    used,
                    next_free: None,
                    empty_in: None,
                    entries: Some(if used > 0 {
                        vec![Entry {
                            at_us,
                            units: used,
                            method: "videos.list".into(),
                        }]
                    } else {
                        vec![]
                    }),
                },
                PolicyStatus {
                    name: "search".into(),
                    window: Duration::from_secs(600).into(),
                    used: 0,
                    next_free: None,
                    empty_in: None,
                    entries: Some(vec![]),
                },
            ],
            blocked: Default::default(),
        }
    }

    #[test]
    fn core_data_of_every_region_comes_before_any_search_and_stale_regions_lead() {
        let us = region("US", 2, &["fresh"]);
        let gb = region("GB", 1, &[]);
        let fresh = BTreeMap::from([
            (
                "US".to_owned(),
                Freshness {
                    last_complete_at: Some(500),
                    categories_fetched_at: Some(1000),
                    ..Freshness::default()
                },
            ),
            (
                "GB".to_owned(),
                Freshness {
                    last_complete_at: Some(100),
                    categories_fetched_at: None,
                    ..Freshness::default()
                },
            ),
        ]);
        let got: Vec<(String, Step)> = plan(&[&us, &gb], &fresh, 2000)
            .into_iter()
            .map(|p| (p.region, p.step))
            .collect();
        assert_eq!(
            got,
            vec![
                ("GB".into(), Step::TrendingPage(1)),
                ("GB".into(), Step::Categories),
                ("US".into(), Step::TrendingPage(1)),
                ("US".into(), Step::TrendingPage(2)),
                (
                    "US".into(),
                    Step::Search {
                        index: 0,
                        name: "fresh".into()
                    }
                ),
                ("US".into(), Step::SearchDetails("fresh".into())),
            ]
        );
    }

    #[test]
    fn category_charts_come_after_every_overall_chart_and_before_any_search() {
        let mut us = region("US", 2, &["fresh"]);
        us.categories = vec![17, 25];
        let mut gb = region("GB", 1, &[]);
        gb.categories = vec![10];
        let got: Vec<String> = plan(&[&us, &gb], &BTreeMap::new(), 0)
            .into_iter()
            .map(|p| format!("{} {}", p.region, p.step.describe()))
            .collect();
        assert_eq!(
            got,
            [
                "US trending page 1",
                "US trending page 2",
                "US category names",
                "GB trending page 1",
                "GB category names",
                "US category 17 page 1",
                "US category 17 page 2",
                "US category 25 page 1",
                "US category 25 page 2",
                "GB category 10 page 1",
                "US search \"fresh\"",
                "US details for \"fresh\"",
            ]
        );
    }

    #[test]
    fn a_missing_chart_is_left_out_until_the_category_names_are_fetched_again() {
        let mut us = region("US", 1, &[]);
        us.categories = vec![17, 25];
        let fresh = BTreeMap::from([(
            "US".to_owned(),
            Freshness {
                last_complete_at: Some(0),
                categories_fetched_at: Some(0),
                missing_charts: BTreeSet::from([17]),
            },
        )]);
        let steps = |now| -> Vec<Step> {
            plan(&[&us], &fresh, now)
                .into_iter()
                .map(|p| p.step)
                .collect()
        };
        assert_eq!(
            steps(3600),
            vec![
                Step::TrendingPage(1),
                Step::ChartPage {
                    category: 25,
                    page: 1
                }
            ]
        );
        assert_eq!(
            steps(86_400),
            vec![
                Step::TrendingPage(1),
                Step::Categories,
                Step::ChartPage {
                    category: 17,
                    page: 1
                },
                Step::ChartPage {
                    category: 25,
                    page: 1
                }
            ]
        );
    }

    #[test]
    fn follow_ups_take_50_videos_a_call() {
        let sizes = |due| -> Vec<usize> {
            follow_ups(due)
                .into_iter()
                .map(|p| match p.step {
                    Step::FollowUp { videos } => videos,
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(sizes(0), Vec::<usize>::new());
        assert_eq!(sizes(50), vec![50]);
        assert_eq!(sizes(101), vec![50, 50, 1]);
    }

    #[test]
    fn categories_are_fetched_again_after_a_day() {
        let us = region("US", 1, &[]);
        let day = 86_400;
        let fresh = BTreeMap::from([(
            "US".to_owned(),
            Freshness {
                last_complete_at: Some(0),
                categories_fetched_at: Some(0),
                ..Freshness::default()
            },
        )]);
        assert_eq!(plan(&[&us], &fresh, day - 1).len(), 1);
        assert_eq!(plan(&[&us], &fresh, day).len(), 2);
    }

    #[test]
    fn the_simulation_stops_where_the_ceiling_is_reached() {
        let us = region("US", 4, &["fresh"]);
        let calls = plan(&[&us], &BTreeMap::new(), 0);
        // 4 pages + categories = 5 units, then search.list costs 100.
        let sim = simulate(
            &calls,
            &budget(100),
            Allowance::Ceiling,
            &status(90, 1_000_000, 2_000_000),
        );
        let fits: Vec<bool> = sim.calls.iter().map(|c| c.fits).collect();
        assert_eq!(fits, vec![true, true, true, true, true, false, false]);
        let stop = sim.stop.clone().expect("the search does not fit");
        assert_eq!(stop.denied_by(), Some("budget"));
        // 95 used + 100 > 100: all 95 must leave, including the 5 this plan charges
        // now, so a whole window from now; not when the 90 from t=1 s leave.
        assert_eq!(stop.retry_after(0), Some(Duration::from_secs(86_400)));
        assert_eq!(sim.remaining(), 5);
        assert_eq!(sim.calls[4].total, 5);
    }

    #[test]
    fn the_reserve_lets_the_same_plan_through() {
        let us = region("US", 4, &["fresh"]);
        let calls = plan(&[&us], &BTreeMap::new(), 0);
        let mut b = budget(100);
        b.quota = 300;
        let sim = simulate(
            &calls,
            &b,
            Allowance::Quota,
            &status(90, 1_000_000, 2_000_000),
        );
        assert!(sim.stop.is_none());
        assert_eq!(sim.calls.last().map(|c| c.total), Some(106));
    }

    #[test]
    fn a_blocked_budget_stops_the_plan_at_its_first_call_as_the_run() {
        let us = region("US", 1, &[]);
        let calls = plan(&[&us], &BTreeMap::new(), 0);
        let mut st = status(0, 0, 2_000_000);
        st.blocked.insert("budget".into(), 9_000_000);
        let sim = simulate(&calls, &budget(100), Allowance::Ceiling, &st);
        assert!(sim.calls.iter().all(|c| !c.fits));
        let stop = sim.stop.clone().expect("blocked");
        assert_eq!(stop.status(), super::super::Status::UpstreamQuotaExhausted);
        assert_eq!(stop.denied_by(), Some(crate::quota::UPSTREAM_POLICY));
        assert_eq!(stop.retry_after(sim.now_us), Some(Duration::from_secs(7)));
        assert_eq!(sim.remaining(), 100);
    }

    #[test]
    fn equal_windows_both_over_name_the_policy_the_limiter_names() {
        let us = region("US", 3, &[]);
        let calls = plan(&[&us], &BTreeMap::new(), 0);
        let mut b = budget(100);
        let limit = |name: &str| crate::quota::Limit {
            name: name.into(),
            methods: vec!["videos.list".into()],
            max: 2,
            window: Duration::from_secs(3600).into(),
            per: crate::quota::Per::Unit,
        };
        b.limits = vec![limit("pages-a"), limit("pages-b")];
        let mut st = status(0, 0, 2_000_000);
        for name in ["pages-a", "pages-b"] {
            st.policies.push(PolicyStatus {
                name: name.into(),
                window: Duration::from_secs(3600).into(),
                used: 1,
                next_free: None,
                empty_in: None,
                entries: Some(vec![Entry {
                    at_us: 1_000_000,
                    units: 1,
                    method: "videos.list".into(),
                }]),
            });
        }
        let sim = simulate(&calls, &b, Allowance::Ceiling, &st);
        let fits: Vec<bool> = sim.calls.iter().map(|c| c.fits).collect();
        assert_eq!(fits, vec![true, false, false, false]);
        // The limiters decide with model::decide; the dry run must name its choice.
        let mut limiter = Model::new();
        let page = |id: &str| b.charge(id, "videos.list", 1, Allowance::Ceiling);
        let page = |id: &str| page(id).expect("videos.list has a cost");
        assert!(limiter.charge(&page("earlier"), 1_000_000, None).granted);
        assert!(limiter.charge(&page("p1"), 2_000_000, None).granted);
        let said = limiter.charge(&page("p2"), 2_000_000, None);
        let stop = sim.stop.expect("the second page does not fit");
        assert_eq!(stop.denied_by(), said.denied_by.as_deref());
        assert_eq!(stop.retry_after(0), said.retry_after);
        assert_eq!(said.retry_after, Some(Duration::from_secs(3599)));
    }
}

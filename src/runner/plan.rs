//! The plan of a run: every upstream call it would make, in the order DESIGN.md
//! section 6 gives. Cheap core data first (each region's trending pages and category
//! names), then the expensive searches; regions whose last complete fetch is oldest go
//! first, so a run cut short by the budget is resumed by the next one with the regions
//! it missed.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::Region;
use crate::quota::{Allowance, Budget, Fit, Status, model};
use crate::youtube::{SEARCH_LIST, VIDEO_CATEGORIES_LIST, VIDEOS_LIST};

/// Category names are fetched at most once a day per region.
pub const CATEGORIES_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// What one planned call fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Page `n` (from 1) of the region's trending chart.
    TrendingPage(u32),
    /// The region's category names.
    Categories,
    /// The search named so.
    Search(String),
    /// The details of the videos the search found.
    SearchDetails(String),
}

impl Step {
    pub fn method(&self) -> &'static str {
        match self {
            Step::TrendingPage(_) | Step::SearchDetails(_) => VIDEOS_LIST,
            Step::Categories => VIDEO_CATEGORIES_LIST,
            Step::Search(_) => SEARCH_LIST,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Step::TrendingPage(n) => format!("trending page {n}"),
            Step::Categories => "category names".to_owned(),
            Step::Search(name) => format!("search \"{name}\""),
            Step::SearchDetails(name) => format!("details for \"{name}\""),
        }
    }
}

/// A call of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub region: String,
    pub step: Step,
}

/// What the store knows of a region, in Unix seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Freshness {
    pub last_complete_at: Option<i64>,
    pub categories_fetched_at: Option<i64>,
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

/// Every call of a run over `regions`, at `now_s`.
pub fn plan(regions: &[&Region], fresh: &BTreeMap<String, Freshness>, now_s: i64) -> Vec<Planned> {
    let ordered = order(regions, fresh);
    let max_age = i64::try_from(CATEGORIES_MAX_AGE.as_secs()).unwrap_or(i64::MAX);
    let mut calls = Vec::new();
    for r in &ordered {
        for page in 1..=r.pages {
            calls.push(Planned {
                region: r.code.clone(),
                step: Step::TrendingPage(page),
            });
        }
        let categories_stale = fresh
            .get(&r.code)
            .and_then(|f| f.categories_fetched_at)
            .is_none_or(|at| now_s - at >= max_age);
        if categories_stale {
            calls.push(Planned {
                region: r.code.clone(),
                step: Step::Categories,
            });
        }
    }
    for r in &ordered {
        for s in &r.searches {
            calls.push(Planned {
                region: r.code.clone(),
                step: Step::Search(s.name.clone()),
            });
            calls.push(Planned {
                region: r.code.clone(),
                step: Step::SearchDetails(s.name.clone()),
            });
        }
    }
    calls
}

/// One row of a dry run.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulatedCall {
    pub call: Planned,
    pub units: u64,
    /// Units of the plan up to and including this call.
    pub total: u64,
    pub fits: bool,
}

/// The plan against the budget as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulation {
    pub calls: Vec<SimulatedCall>,
    /// Where the run would stop: the policy that would say no and when capacity frees.
    pub stop: Option<(String, Option<Duration>)>,
    /// Units left to the allowance after the calls that fit.
    pub remaining: u64,
}

/// Charges the plan against a copy of the window, as a real run would, without
/// touching the limiter. `status` must list the entries of every policy.
pub fn simulate(
    plan: &[Planned],
    budget: &Budget,
    allowance: Allowance,
    status: &Status,
) -> Simulation {
    let now = status.now_us;
    let mut used: BTreeMap<String, u64> = status
        .policies
        .iter()
        .map(|p| (p.name.clone(), p.used))
        .collect();
    let mut entries: BTreeMap<String, Vec<(i64, u64)>> = status
        .policies
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.entries
                    .iter()
                    .flatten()
                    .map(|e| (e.at_us, e.units))
                    .collect(),
            )
        })
        .collect();
    let mut calls = Vec::with_capacity(plan.len());
    let mut stop = None;
    let mut total = 0;
    let blocked = status.blocked_until_us.filter(|u| *u > now);
    for (i, call) in plan.iter().enumerate() {
        let method = call.step.method();
        let units = budget.cost(method).unwrap_or(0);
        let mut fits = stop.is_none();
        if fits && let Some(until) = blocked {
            stop = Some((
                crate::quota::UPSTREAM_POLICY.to_owned(),
                Some(crate::quota::from_micros(until - now)),
            ));
            fits = false;
        }
        if fits {
            let Ok(charge) = budget.charge(&format!("dry-{i}"), method, 1, allowance) else {
                continue;
            };
            let mut worst: Option<(String, Fit)> = None;
            for part in &charge.parts {
                let u = used.get(&part.policy).copied().unwrap_or(0);
                let e = entries
                    .get(&part.policy)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let window = crate::quota::micros(part.window);
                let fit = model::fit(e.iter().copied(), u, part.units, part.max, window, now);
                let longer = |w: &Option<(String, Fit)>| match (&fit, w) {
                    (Fit::Now, _) => false,
                    (_, None) => true,
                    (Fit::Never, Some((_, f))) => *f != Fit::Never,
                    (Fit::After(d), Some((_, Fit::After(w)))) => d > w,
                    (Fit::After(_), Some(_)) => false,
                };
                if longer(&worst) {
                    worst = Some((part.policy.clone(), fit));
                }
            }
            match worst {
                Some((policy, fit)) => {
                    let wait = match fit {
                        Fit::After(d) => Some(d),
                        _ => None,
                    };
                    stop = Some((policy, wait));
                    fits = false;
                }
                None => {
                    for part in &charge.parts {
                        *used.entry(part.policy.clone()).or_insert(0) += part.units;
                        entries
                            .entry(part.policy.clone())
                            .or_default()
                            .push((now, part.units));
                    }
                    total += units;
                }
            }
        }
        calls.push(SimulatedCall {
            call: call.clone(),
            units,
            total,
            fits,
        });
    }
    let budget_used = used.get(crate::quota::BUDGET_POLICY).copied().unwrap_or(0);
    Simulation {
        calls,
        stop,
        remaining: budget.max_for(allowance).saturating_sub(budget_used),
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
                    window: Duration::from_secs(86_400),
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
                    window: Duration::from_secs(600),
                    used: 0,
                    next_free: None,
                    empty_in: None,
                    entries: Some(vec![]),
                },
            ],
            blocked_until_us: None,
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
                },
            ),
            (
                "GB".to_owned(),
                Freshness {
                    last_complete_at: Some(100),
                    categories_fetched_at: None,
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
                ("US".into(), Step::Search("fresh".into())),
                ("US".into(), Step::SearchDetails("fresh".into())),
            ]
        );
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
        let (policy, wait) = sim.stop.expect("the search does not fit");
        assert_eq!(policy, "budget");
        // 95 used + 100 > 100: all 95 must leave, including the 5 this plan charges
        // now, so a whole window from now; not when the 90 from t=1 s leave.
        assert_eq!(wait, Some(Duration::from_secs(86_400)));
        assert_eq!(sim.remaining, 5);
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
}

//! Unit tests of `runner/plan.rs`.

use super::*;
use crate::clock::{Micros, Secs};
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
        slot_secs: 3600,
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
    b.main_mut().ceiling = ceiling;
    b
}

fn status(used: u64, at_us: i64, now_us: i64) -> Status {
    Status {
        blocked_methods: Default::default(),
        now: Micros::new(now_us),
        policies: vec![
            PolicyStatus {
                kind: crate::quota::Kind::Bucket,
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
                kind: crate::quota::Kind::Bucket,
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
    let got: Vec<(String, Step)> = plan(&[&us, &gb], &fresh, Secs::new(2000))
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
    let got: Vec<String> = plan(&[&us, &gb], &BTreeMap::new(), Secs::new(0))
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
        plan(&[&us], &fresh, Secs::new(now))
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
    assert_eq!(plan(&[&us], &fresh, Secs::new(day - 1)).len(), 1);
    assert_eq!(plan(&[&us], &fresh, Secs::new(day)).len(), 2);
}

#[test]
fn the_simulation_stops_where_the_ceiling_is_reached() {
    let us = region("US", 4, &["fresh"]);
    let calls = plan(&[&us], &BTreeMap::new(), Secs::new(0));
    // 4 pages + categories = 5 units, then search.list costs 100.
    let sim = simulate(
        &calls,
        &budget(100),
        Allowance::Ceiling,
        &status(90, 1_000_000, 2_000_000),
        &[],
    );
    let fits: Vec<bool> = sim.calls.iter().map(|c| c.fits).collect();
    assert_eq!(fits, vec![true, true, true, true, true, false, false]);
    let stop = sim.stop.clone().expect("the search does not fit");
    assert_eq!(stop.denied_by(), Some("budget"));
    // 95 used + 100 > 100: all 95 must leave, including the 5 this plan charges
    // now, so a whole window from now; not when the 90 from t=1 s leave.
    assert_eq!(
        stop.retry_after(Micros::new(0)),
        Some(Duration::from_secs(86_400))
    );
    assert_eq!(sim.remaining(), 5);
    assert_eq!(sim.calls[4].total, 5);
}

#[test]
fn the_reserve_lets_the_same_plan_through() {
    let us = region("US", 4, &["fresh"]);
    let calls = plan(&[&us], &BTreeMap::new(), Secs::new(0));
    let mut b = budget(100);
    b.main_mut().quota = 300;
    let sim = simulate(
        &calls,
        &b,
        Allowance::Quota,
        &status(90, 1_000_000, 2_000_000),
        &[],
    );
    assert!(sim.stop.is_none());
    assert_eq!(sim.calls.last().map(|c| c.total), Some(106));
}

#[test]
fn a_blocked_budget_stops_the_plan_at_its_first_call_as_the_run() {
    let us = region("US", 1, &[]);
    let calls = plan(&[&us], &BTreeMap::new(), Secs::new(0));
    let mut st = status(0, 0, 2_000_000);
    // The upstream's block is kept per method: every method of the main bucket.
    let b = budget(100);
    for method in b.main().methods() {
        st.blocked_methods.insert(method, Micros::new(9_000_000));
    }
    let sim = simulate(&calls, &b, Allowance::Ceiling, &st, &[]);
    assert!(sim.calls.iter().all(|c| !c.fits));
    let stop = sim.stop.clone().expect("blocked");
    assert_eq!(stop.status(), super::super::Status::UpstreamQuotaExhausted);
    assert_eq!(stop.denied_by(), Some(crate::quota::UPSTREAM_POLICY));
    assert_eq!(stop.retry_after(sim.now), Some(Duration::from_secs(7)));
    assert_eq!(sim.remaining(), 100);
}

#[test]
fn equal_windows_both_over_name_the_policy_the_limiter_names() {
    let us = region("US", 3, &[]);
    let calls = plan(&[&us], &BTreeMap::new(), Secs::new(0));
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
            kind: crate::quota::Kind::Limit,
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
    let sim = simulate(&calls, &b, Allowance::Ceiling, &st, &[]);
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
    assert_eq!(stop.retry_after(Micros::new(0)), said.retry_after);
    assert_eq!(said.retry_after, Some(Duration::from_secs(3599)));
}

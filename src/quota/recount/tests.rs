//! Counting entries again under another costs file, on paper.

use super::*;
use crate::quota::{BUDGET_POLICY, Bucket, Limit, Per, Window};
use std::collections::BTreeMap;
use std::time::Duration;

fn costs(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(m, c)| ((*m).to_owned(), *c)).collect()
}

/// The default file's shape: one pool, search.list at 100, and a `search` limit.
fn default_file() -> Budget {
    let main = Bucket {
        name: BUDGET_POLICY.to_owned(),
        quota: 10_000,
        ceiling: 9_500,
        window: Window::Sliding(Duration::from_secs(86_400)),
        costs: costs(&[("videos.list", 1), ("search.list", 100)]),
    };
    let mut budget = Budget::new("key1", main, Vec::new());
    budget.limits = vec![Limit {
        name: "search".into(),
        methods: vec!["search.list".into()],
        max: 2_000,
        window: Window::Sliding(Duration::from_secs(600)),
        per: Per::Unit,
    }];
    budget
}

/// The granular file's shape: search.list in a bucket of its own, at 1.
fn granular_file() -> Budget {
    let mut b = default_file();
    b.buckets[0].costs = costs(&[("videos.list", 1)]);
    b.limits = Vec::new();
    b.buckets.push(Bucket {
        name: "search".into(),
        quota: 100,
        ceiling: 95,
        window: Window::Sliding(Duration::from_secs(86_400)),
        costs: costs(&[("search.list", 1)]),
    });
    b
}

fn searches(n: usize) -> Vec<Logged> {
    (0..n)
        .map(|i| Logged {
            id: format!("r-{i}"),
            method: "search.list".into(),
            calls: 1,
            at_us: 1_000 + i as i64,
        })
        .collect()
}

fn units(rebuilt: &[(PolicyRef, Vec<Counted>)], kind: Kind, name: &str) -> u64 {
    rebuilt
        .iter()
        .find(|(p, _)| p.kind == kind && p.name == name)
        .map_or(0, |(_, e)| e.iter().map(|c| c.units).sum())
}

#[test]
fn searches_move_to_their_own_bucket_and_back_at_todays_costs() {
    let logged = searches(3);
    let granular = rebuild(&granular_file(), &logged);
    assert_eq!(units(&granular, Kind::Bucket, "search"), 3);
    assert_eq!(units(&granular, Kind::Bucket, BUDGET_POLICY), 0);
    let default = rebuild(&default_file(), &logged);
    assert_eq!(units(&default, Kind::Bucket, BUDGET_POLICY), 300);
    assert_eq!(units(&default, Kind::Limit, "search"), 300);
    assert_eq!(units(&default, Kind::Bucket, "search"), 0);
}

#[test]
fn members_old_and_new_read_back_with_their_calls() {
    let budget = default_file();
    let new = parse_member("200|search.list|r-1|2", 5, &budget).expect("a member");
    assert_eq!(
        (new.method.as_str(), new.id.as_str(), new.calls),
        ("search.list", "r-1", 2)
    );
    // The layout before calls were kept: its units at the cost of the file in force.
    let old = parse_member("300|search.list|r-2", 5, &budget).expect("a member");
    assert_eq!((old.id.as_str(), old.calls), ("r-2", 3));
}

#[test]
fn an_entry_of_a_method_no_bucket_holds_is_kept_uncounted() {
    let logged = vec![Logged {
        id: "r-1".into(),
        method: "videos.insert".into(),
        calls: 1,
        at_us: 1,
    }];
    let rebuilt = rebuild(&default_file(), &logged);
    let main = &rebuilt[0];
    assert_eq!(main.0.name, BUDGET_POLICY);
    assert_eq!(main.1.len(), 1);
    assert_eq!(main.1[0].units, 0);
}

//! Unit tests of `quota/model.rs`.

use super::*;
use crate::quota::Part;

const S: i64 = 1_000_000;

fn part(policy: &str, window_s: u64, max: u64, units: u64) -> Part {
    Part {
        kind: crate::quota::Kind::Bucket,
        policy: policy.into(),
        window: Duration::from_secs(window_s).into(),
        max,
        units,
    }
}

fn charge(id: &str, parts: Vec<Part>) -> Charge {
    let units = parts.first().map_or(0, |p| p.units);
    Charge {
        calls: 1,
        id: id.into(),
        bucket: "budget".into(),
        method: "m".into(),
        units,
        parts,
    }
}

/// (entries as (at_s, units), used, units asked, max, window_s, now_s) -> expected fit
type FitCase<'a> = (&'a [(i64, u64)], u64, u64, u64, i64, i64, Fit);

#[test]
fn fit_table() {
    let after = |s: i64| Fit::After(from_micros(s * S));
    let cases: &[FitCase<'_>] = &[
        // Empty window: anything up to max fits.
        (&[], 0, 100, 100, 60, 0, Fit::Now),
        // Exactly at the max fits; one over does not.
        (&[(0, 99)], 99, 1, 100, 60, 10, Fit::Now),
        (&[(0, 100)], 100, 1, 100, 60, 10, after(50)),
        // Larger than the max: never.
        (&[], 0, 101, 100, 60, 0, Fit::Never),
        // 100-unit charge behind 1-unit entries: must wait until 100 units have
        // left, i.e. the 100th entry's expiry, not the oldest one's.
        (
            &[(0, 1), (1, 1), (2, 1), (3, 100)],
            103,
            100,
            150,
            60,
            10,
            // need = 103 + 100 - 150 = 53: the three 1s free 3, the 100 frees the rest.
            after(3 + 60 - 10),
        ),
        // Same, but the 1-unit entries alone are enough.
        (
            &[(0, 1), (1, 1), (2, 1), (3, 100)],
            103,
            2,
            104,
            60,
            10,
            after(60 - 10),
        ),
        (
            &[(0, 1), (1, 1), (2, 1), (3, 100)],
            103,
            3,
            104,
            60,
            10,
            after(1 + 60 - 10),
        ),
    ];
    for (i, (entries, used, units, max, window_s, now_s, want)) in cases.iter().enumerate() {
        let got = fit(
            entries.iter().map(|(a, u)| (a * S, *u)),
            *used,
            *units,
            *max,
            window_s * S,
            now_s * S,
        );
        assert_eq!(got, *want, "case {i}");
    }
}

#[test]
fn strictest_wait_wins_and_nothing_is_charged_on_denial() {
    let mut m = Model::new();
    // Fill the narrow limit at t=0 and the budget at t=5.
    let c1 = charge(
        "a",
        vec![part("budget", 100, 1000, 100), part("search", 10, 100, 100)],
    );
    assert!(m.charge(&c1, 0, None).granted);
    let c2 = charge("b", vec![part("budget", 100, 1000, 850)]);
    assert!(m.charge(&c2, 5 * S, None).granted);
    // At t=6 a search charge is denied by both; the budget waits longer (until
    // t=100, when "a" leaves) than the search limit (until t=10).
    let c3 = charge(
        "c",
        vec![part("budget", 100, 1000, 100), part("search", 10, 100, 100)],
    );
    let d = m.charge(&c3, 6 * S, None);
    assert!(!d.granted);
    assert_eq!(d.denied_by.as_deref(), Some("budget"));
    assert_eq!(d.retry_after, Some(from_micros(94 * S)));
    assert_eq!(
        m.used(
            crate::quota::Kind::Bucket,
            "budget",
            &Window::Sliding(Duration::from_secs(100)),
            6 * S
        ),
        950
    );
    assert_eq!(
        m.used(
            crate::quota::Kind::Bucket,
            "search",
            &Window::Sliding(Duration::from_secs(10)),
            6 * S
        ),
        100
    );
    // Only the narrow limit says no once the budget has room.
    let c4 = charge(
        "d",
        vec![part("budget", 100, 1000, 10), part("search", 10, 100, 100)],
    );
    let d = m.charge(&c4, 7 * S, None);
    assert_eq!(d.denied_by.as_deref(), Some("search"));
    assert_eq!(d.retry_after, Some(from_micros(3 * S)));
    assert_eq!(
        m.used(
            crate::quota::Kind::Bucket,
            "budget",
            &Window::Sliding(Duration::from_secs(100)),
            7 * S
        ),
        950
    );
}

#[test]
fn a_sliding_window_denies_the_burst_a_fixed_window_would_let_through() {
    let mut m = Model::new();
    let w = 10;
    // A full burst just before the 10 s boundary...
    for i in 0..10 {
        assert!(
            m.charge(
                &charge(&format!("x{i}"), vec![part("b", w, 10, 1)]),
                9 * S + 900_000,
                None
            )
            .granted
        );
    }
    // ...and another just after it: a fixed window would reset here.
    let d = m.charge(
        &charge("y", vec![part("b", w, 10, 1)]),
        10 * S + 100_000,
        None,
    );
    assert!(!d.granted);
    assert_eq!(
        d.retry_after,
        Some(from_micros(
            9 * S + 900_000 + w as i64 * S - (10 * S + 100_000)
        ))
    );
}

#[test]
fn the_same_charge_twice_counts_once() {
    let mut m = Model::new();
    let c = charge("same", vec![part("b", 60, 10, 4)]);
    assert!(m.charge(&c, 0, None).granted);
    let d = m.charge(&c, S, None);
    assert!(d.granted && d.duplicate);
    assert_eq!(
        m.used(
            crate::quota::Kind::Bucket,
            "b",
            &Window::Sliding(Duration::from_secs(60)),
            S
        ),
        4
    );
}

#[test]
fn a_replayed_charge_keeps_its_age_and_ignores_the_max() {
    let mut m = Model::new();
    assert!(
        m.charge(&charge("full", vec![part("b", 60, 10, 10)]), 50 * S, None)
            .granted
    );
    // Made 40 s ago while the limiter was down; counted even though it is over.
    let d = m.charge(
        &charge("late", vec![part("b", 60, 10, 5)]),
        50 * S,
        Some(Duration::from_secs(40)),
    );
    assert!(d.granted);
    assert_eq!(
        m.used(
            crate::quota::Kind::Bucket,
            "b",
            &Window::Sliding(Duration::from_secs(60)),
            50 * S
        ),
        15
    );
    // It leaves the window 60 s after it was made, at t=70.
    assert_eq!(
        m.used(
            crate::quota::Kind::Bucket,
            "b",
            &Window::Sliding(Duration::from_secs(60)),
            70 * S
        ),
        10
    );
    // Older than the window: nothing to count.
    m.charge(
        &charge("ancient", vec![part("b", 60, 10, 5)]),
        70 * S,
        Some(Duration::from_secs(61)),
    );
    assert_eq!(
        m.used(
            crate::quota::Kind::Bucket,
            "b",
            &Window::Sliding(Duration::from_secs(60)),
            70 * S
        ),
        10
    );
}

#[test]
fn a_block_denies_until_it_ends() {
    let mut m = Model::new();
    m.block_until("m", 30 * S);
    let d = m.charge(&charge("a", vec![part("b", 60, 10, 1)]), 10 * S, None);
    assert_eq!(d.denied_by.as_deref(), Some(UPSTREAM_POLICY));
    assert_eq!(d.retry_after, Some(from_micros(20 * S)));
    assert!(
        m.charge(&charge("a", vec![part("b", 60, 10, 1)]), 30 * S, None)
            .granted
    );
}

#[test]
fn a_model_seeded_from_a_status_decides_as_the_limiter_that_reported_it() {
    use crate::quota::{Entry, PolicyStatus};
    let mut charged = Model::new();
    assert!(
        charged
            .charge(&charge("a", vec![part("b", 60, 10, 6)]), 0, None)
            .granted
    );
    assert!(
        charged
            .charge(&charge("b", vec![part("b", 60, 10, 4)]), 20 * S, None)
            .granted
    );
    let policy = |entries| PolicyStatus {
        kind: crate::quota::Kind::Bucket,
        name: "b".into(),
        window: Duration::from_secs(60).into(),
        used: 10,
        next_free: None,
        empty_in: None,
        entries,
    };
    let entry = |at_us, units| Entry {
        at_us,
        units,
        method: "m".into(),
    };
    let status = |entries| Status {
        blocked_methods: Default::default(),
        now: crate::clock::Micros::new(30 * S),
        policies: vec![policy(entries)],
        blocked: Default::default(),
    };
    let mut seeded = Model::from_status(&status(Some(vec![entry(0, 6), entry(20 * S, 4)])));
    let next = charge("c", vec![part("b", 60, 10, 5)]);
    let want = charged.charge(&next, 30 * S, None);
    assert_eq!(seeded.charge(&next, 30 * S, None), want);
    assert_eq!(want.retry_after, Some(from_micros(30 * S)));
    // Without its entries, the window's units count as made now: a whole window.
    let mut blind = Model::from_status(&status(None));
    let d = blind.charge(&next, 30 * S, None);
    assert_eq!(d.retry_after, Some(Duration::from_secs(60)));
}

proptest::proptest! {
    /// Whatever the sequence of charges (sizes, gaps, two policies), no window ever
    /// holds more than its maximum, and a denied charge changes nothing.
    #[test]
    fn used_never_exceeds_the_max(
        steps in proptest::collection::vec((0u64..30, 1u64..120, proptest::bool::ANY), 1..200)
    ) {
        let mut m = Model::new();
        let mut now = 0i64;
        for (i, (gap_s, units, narrow)) in steps.into_iter().enumerate() {
            now += gap_s as i64 * S / 3;
            let mut parts = vec![part("budget", 60, 500, units)];
            if narrow {
                parts.push(part("narrow", 20, 150, units));
            }
            let before = (m.used(crate::quota::Kind::Bucket, "budget", &Window::Sliding(Duration::from_secs(60)), now), m.used(crate::quota::Kind::Bucket, "narrow", &Window::Sliding(Duration::from_secs(20)), now));
            let d = m.charge(&charge(&format!("c{i}"), parts), now, None);
            let after = (m.used(crate::quota::Kind::Bucket, "budget", &Window::Sliding(Duration::from_secs(60)), now), m.used(crate::quota::Kind::Bucket, "narrow", &Window::Sliding(Duration::from_secs(20)), now));
            proptest::prop_assert!(after.0 <= 500 && after.1 <= 150);
            if d.granted {
                proptest::prop_assert_eq!(after.0, before.0 + units);
            } else {
                proptest::prop_assert_eq!(after, before);
                // The promised wait is exact: at that moment the charge fits.
                if let Some(wait) = d.retry_after {
                    let later = now + crate::quota::micros(wait);
                    let mut probe = m.clone();
                    let mut parts = vec![part("budget", 60, 500, units)];
                    if narrow { parts.push(part("narrow", 20, 150, units)); }
                    proptest::prop_assert!(probe.charge(&charge("probe", parts.clone()), later, None).granted);
                    let mut early = m.clone();
                    proptest::prop_assert!(!early.charge(&charge("probe", parts), later - 1, None).granted);
                }
            }
        }
    }
}

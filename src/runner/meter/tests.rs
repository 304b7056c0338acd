//! Unit tests of `runner/meter.rs`.

use super::*;
use crate::clock::ManualClock;
use crate::runner::test_support::{AT_2026_US, budget};
use crate::youtube::{SEARCH_LIST, VIDEO_CATEGORIES_LIST, VIDEOS_BATCH_GET_STATS, VIDEOS_LIST};

/// One bucket whose ceiling two calls reach; searches denied while the limiter is
/// down.
const TWO_CALLS: &str = r#"
[budget]
key = "key1"
quota = 10
ceiling = 2
window = "24h"

[costs]
"videos.list" = 1
"videoCategories.list" = 1
"search.list" = 1

[when_limiter_down]
"videos.list" = "allow"
"videoCategories.list" = "allow"
"search.list" = "deny"
"#;

/// Searches in a bucket of their own, with room for one.
const SEARCH_BUCKET: &str = r#"
[budget]
key = "key1"
quota = 100
ceiling = 90
window = "24h"

[costs]
"videos.list" = 1
"videoCategories.list" = 1

[[bucket]]
name = "search"
quota = 1
ceiling = 1
window = "24h"
costs = { "search.list" = 1 }

[when_limiter_down]
"videos.list" = "allow"
"search.list" = "deny"
"#;

/// A meter over a scratch database in `dir`: the embedded limiter, or one that
/// is down.
fn meter(dir: &std::path::Path, costs: &str, down: bool) -> Meter {
    let db = dir.join("t.db");
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::starting_at(crate::clock::Micros::new(
        AT_2026_US,
    )));
    let budget = budget(costs);
    let limiter = if down {
        Limiter::Down {
            endpoint: "redis://127.0.0.1:9".into(),
            reason: "connection refused".into(),
        }
    } else {
        Limiter::Embedded(
            crate::quota::EmbeddedLimiter::open(&db, &budget.key, Arc::clone(&clock), None)
                .expect("the embedded limiter"),
        )
    };
    let db = crate::sqlite::Db::open_for_writing(&db).expect("the database");
    Meter::new(limiter, budget, Allowance::Ceiling, "r1".into(), db, clock)
}

/// A charge's outcome in a word or three, for a table to read.
fn short(m: &Metered) -> String {
    match m {
        Metered::Granted { units, .. } => format!("granted {units}"),
        Metered::Unmetered { units } => format!("unmetered {units}"),
        Metered::Stopped(Scope::Every, stop) => format!("stops every call: {}", stop.status()),
        Metered::Stopped(Scope::Bucket(b), stop) => format!("stops {b}: {}", stop.status()),
        Metered::Stopped(Scope::Method(m), stop) => format!("stops {m}: {}", stop.status()),
    }
}

/// Calls of the journal's that wait to be counted in the window.
fn journalled(dir: &std::path::Path) -> i64 {
    let db = rusqlite::Connection::open(dir.join("t.db")).expect("the database");
    let present: bool = db
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE name = 'quota_journal'",
            [],
            |r| r.get(0),
        )
        .expect("the schema");
    if !present {
        return 0;
    }
    db.query_row(
        "SELECT count(*) FROM quota_journal WHERE metered = 0",
        [],
        |r| r.get(0),
    )
    .expect("the journal")
}

/// Charges in order, and what they come to.
struct Case {
    name: &'static str,
    costs: &'static str,
    limiter_down: bool,
    /// Each charge's method and what it comes to.
    charges: &'static [(&'static str, &'static str)],
    /// Units granted, units made unmetered, calls.
    totals: (u64, u64, u64),
    /// Calls journalled, waiting to be counted in the window.
    journalled: i64,
}

#[tokio::test]
async fn what_each_charge_comes_to() {
    let cases = [
        Case {
            name: "granted up to the ceiling, then the bucket stops",
            costs: TWO_CALLS,
            limiter_down: false,
            charges: &[
                (VIDEOS_LIST, "granted 1"),
                (VIDEO_CATEGORIES_LIST, "granted 1"),
                (VIDEOS_LIST, "stops budget: budget_exhausted"),
            ],
            totals: (2, 0, 2),
            journalled: 0,
        },
        Case {
            name: "a method without a cost stops every call",
            costs: TWO_CALLS,
            limiter_down: false,
            charges: &[(VIDEOS_BATCH_GET_STATS, "stops every call: failed")],
            totals: (0, 0, 0),
            journalled: 0,
        },
        Case {
            name: "a spent bucket stops only its own calls",
            costs: SEARCH_BUCKET,
            limiter_down: false,
            charges: &[
                (SEARCH_LIST, "granted 1"),
                (SEARCH_LIST, "stops search: budget_exhausted"),
                (VIDEOS_LIST, "granted 1"),
            ],
            totals: (2, 0, 2),
            journalled: 0,
        },
        Case {
            name: "the limiter down: allowed calls are journalled and made unmetered",
            costs: TWO_CALLS,
            limiter_down: true,
            charges: &[
                (VIDEOS_LIST, "unmetered 1"),
                (VIDEOS_LIST, "unmetered 1"),
                // No ceiling while down: the window counts them once it answers.
                (VIDEO_CATEGORIES_LIST, "unmetered 1"),
            ],
            totals: (0, 3, 3),
            journalled: 3,
        },
        Case {
            name: "the limiter down: a denied method stops its bucket, the others go on",
            costs: SEARCH_BUCKET,
            limiter_down: true,
            charges: &[
                (SEARCH_LIST, "stops search: limiter_down"),
                (VIDEOS_LIST, "unmetered 1"),
            ],
            totals: (0, 1, 1),
            journalled: 1,
        },
    ];
    for c in cases {
        let dir = tempfile::tempdir().expect("temp dir");
        let meter = meter(dir.path(), c.costs, c.limiter_down);
        for (i, (method, want)) in c.charges.iter().enumerate() {
            let got = short(&meter.charge(method).await);
            assert_eq!(&got, want, "{}: charge {} ({method})", c.name, i + 1);
        }
        let t = meter.totals();
        assert_eq!(
            (t.units, t.units_unmetered, t.calls),
            c.totals,
            "{}: units granted, unmetered, calls",
            c.name
        );
        assert_eq!(
            journalled(dir.path()),
            c.journalled,
            "{}: journalled",
            c.name
        );
    }
}

/// The bucket of a method is the one whose costs list it; the main one otherwise.
#[test]
fn a_method_is_charged_to_the_bucket_that_lists_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let meter = meter(dir.path(), SEARCH_BUCKET, false);
    for (method, bucket) in [
        (SEARCH_LIST, "search"),
        (VIDEOS_LIST, crate::quota::BUDGET_POLICY),
        ("no.such.method", crate::quota::BUDGET_POLICY),
    ] {
        assert_eq!(meter.bucket_of(method), bucket, "{method}");
    }
}

/// A limiter that answers is told of a block and shows its window; one found down
/// is asked for neither, and says so.
#[tokio::test]
async fn a_limiter_found_down_is_not_asked_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let up = meter(dir.path(), SEARCH_BUCKET, false);
    assert_eq!(
        short(&up.charge(VIDEOS_LIST).await),
        "granted 1",
        "a charge before the block"
    );
    up.block_until("search", crate::clock::Micros::new(AT_2026_US + 1_000_000))
        .await
        .expect("blocked");
    let window = up.window().await.window.expect("the window");
    let got: Vec<(&str, u64, bool)> = window
        .iter()
        .map(|b| (b.name.as_str(), b.used, b.blocked_until.is_some()))
        .collect();
    assert_eq!(got, [("budget", 1, false), ("search", 0, true)]);
    let search_max = up.budget.buckets()[1].max_for(up.allowance);
    assert_eq!(
        up.remaining_by_bucket(Some(&window)),
        Some(vec![
            ("budget".to_owned(), 89),
            ("search".to_owned(), search_max)
        ])
    );
    assert_eq!(up.limiter_clock(), Some(LimiterClock::Host));

    let dir = tempfile::tempdir().expect("temp dir");
    let down = meter(dir.path(), SEARCH_BUCKET, true);
    assert_eq!(short(&down.charge(VIDEOS_LIST).await), "unmetered 1");
    let blocked = down
        .block_until("search", crate::clock::Micros::new(AT_2026_US))
        .await;
    assert!(
        blocked
            .as_ref()
            .is_err_and(|e| e.starts_with("the limiter is down: ")),
        "{blocked:?}"
    );
    assert_eq!(
        down.window().await,
        WindowRead {
            window: None,
            up: false
        }
    );
    assert_eq!(down.limiter_clock(), None);
}

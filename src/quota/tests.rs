use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

fn budget() -> Budget {
    let main = Bucket {
        name: BUDGET_POLICY.into(),
        quota: 10_000,
        ceiling: 9_500,
        window: Duration::from_secs(86_400).into(),
        costs: BTreeMap::from([
            ("videos.list".into(), 1),
            ("search.list".into(), 100),
            ("free.list".into(), 0),
        ]),
    };
    Budget {
        key: "key1".into(),
        buckets: vec![main],
        when_limiter_down: BTreeMap::from([("videos.list".into(), DownPolicy::Allow)]),
        limits: vec![
            Limit {
                name: "search".into(),
                methods: vec!["search.list".into()],
                max: 2000,
                window: Duration::from_secs(600).into(),
                per: Per::Unit,
            },
            Limit {
                name: "calls".into(),
                methods: vec!["search.list".into(), "free.list".into()],
                max: 50,
                window: Duration::from_secs(60).into(),
                per: Per::Call,
            },
        ],
    }
}

#[test]
fn a_charge_has_one_part_per_policy_listing_the_method() {
    let c = budget()
        .charge("r1-1", "search.list", 3, Allowance::Ceiling)
        .expect("known method");
    assert_eq!(c.units, 300);
    let parts: Vec<(&str, u64, u64)> = c
        .parts
        .iter()
        .map(|p| (p.policy.as_str(), p.units, p.max))
        .collect();
    assert_eq!(
        parts,
        vec![
            ("budget", 300, 9_500),
            ("search", 300, 2_000),
            ("calls", 3, 50)
        ]
    );
}

#[test]
fn the_reserve_raises_only_the_budgets_max() {
    let c = budget()
        .charge("r1-1", "videos.list", 1, Allowance::Quota)
        .expect("known method");
    assert_eq!(c.parts.len(), 1);
    assert_eq!(c.parts[0].max, 10_000);
}

#[test]
fn a_cost_of_zero_leaves_the_budget_out() {
    let c = budget()
        .charge("r1-1", "free.list", 1, Allowance::Ceiling)
        .expect("known method");
    assert_eq!(c.units, 0);
    let names: Vec<&str> = c.parts.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, vec!["calls"]);
}

#[test]
fn an_unknown_method_is_an_error_not_a_throttle() {
    let err = budget()
        .charge("r1-1", "playlists.list", 1, Allowance::Ceiling)
        .expect_err("unknown method");
    assert!(err.to_string().contains("playlists.list"));
}

#[test]
fn unlisted_methods_are_denied_while_the_limiter_is_down() {
    let b = budget();
    assert_eq!(b.when_down("videos.list"), DownPolicy::Allow);
    assert_eq!(b.when_down("search.list"), DownPolicy::Deny);
}

/// SQLite's own error stays under a limiter error, so that a caller can tell why it
/// failed without reading the words.
#[test]
fn a_limiter_error_keeps_sqlites_error_as_its_source() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("not.db");
    std::fs::write(
        &path,
        "not a database, only text longer than SQLite's header",
    )
    .expect("writing");
    let err = EmbeddedLimiter::open(&path, "key", crate::clock::system(), None)
        .expect_err("not a database");
    let source = std::error::Error::source(&err).expect("a source");
    let sqlite = source
        .downcast_ref::<SqliteCause>()
        .unwrap_or_else(|| panic!("SQLite's error: {source:?}"));
    assert_eq!(
        sqlite.0.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase)
    );
    // Said once: the error says what was being done, its source why.
    let text = crate::error::chain(&err);
    assert_eq!(text.matches(&source.to_string()).count(), 1, "{text}");
}

/// The command's connection to `db`, when the file exists.
fn reading(db: &std::path::Path) -> Option<crate::sqlite::Db> {
    db.exists()
        .then(|| crate::sqlite::Db::open_for_reading(db).expect("the database"))
}

/// The kinds a database's calls were charged on, without a run to say: whichever
/// holds calls, and both when both do, whatever clock stamped them. A call stamped
/// two days ahead (a clock that jumped) outranks nothing.
#[test]
fn the_kinds_charged_are_read_without_their_stamps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("trendsync.db");
    assert_eq!(charged_on(reading(&db).as_ref(), "key1"), vec![]);
    crate::store::Store::open(&db).expect("a database");
    assert_eq!(charged_on(reading(&db).as_ref(), "key1"), vec![]);
    let conn = rusqlite::Connection::open(&db).expect("the database");
    let now_us: i64 = 1_800_000_000_000_000;
    let ahead_us = now_us + 2 * 86_400_000_000;
    conn.execute(
        "INSERT INTO quota_journal (charge_id, budget, method, units, parts, made_at_us,
                                    metered, keep_until_us, calls)
         VALUES ('r-1', 'key1', 'videos.list', 1, '[]', ?1, 1, ?1, 1)",
        [now_us],
    )
    .expect("a call in the ledger");
    assert_eq!(
        charged_on(reading(&db).as_ref(), "key1"),
        vec![LimiterKind::Redis]
    );
    assert_eq!(
        charged_on(reading(&db).as_ref(), "key2"),
        vec![],
        "another budget's"
    );
    conn.execute(
        "INSERT INTO quota_log (budget, charge_id, method, calls, at_us)
         VALUES ('key1', 'manual-1', 'videos.list', 1, ?1)",
        [ahead_us],
    )
    .expect("a call in the embedded log, two days ahead");
    assert_eq!(
        charged_on(reading(&db).as_ref(), "key1"),
        vec![LimiterKind::Embedded, LimiterKind::Redis]
    );
    conn.execute("DELETE FROM quota_journal", [])
        .expect("the ledger let go");
    assert_eq!(
        charged_on(reading(&db).as_ref(), "key1"),
        vec![LimiterKind::Embedded]
    );
}

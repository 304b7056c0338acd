//! The journal's rows as written and read back, its openers, and its replays into an
//! embedded limiter on a set clock.

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::quota::{EmbeddedLimiter, PolicyRef};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

/// The one clock a test's journal and limiter both read: set, never slept on.
fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::starting_at(crate::clock::Micros::new(
        1_700_000_000_000_000,
    )))
}

fn charge(id: &str, units: u64) -> Charge {
    Charge {
        calls: 1,
        bucket: "budget".into(),
        id: id.into(),
        method: "videos.list".into(),
        units,
        parts: vec![
            Part {
                kind: crate::quota::Kind::Bucket,
                policy: "budget".into(),
                window: HOUR.into(),
                max: 9_500,
                units,
            },
            Part {
                kind: crate::quota::Kind::Bucket,
                policy: "calls".into(),
                window: Duration::from_secs(60).into(),
                max: 50,
                units: 1,
            },
        ],
    }
}

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    (dir, path)
}

async fn used(limiter: &Limiter, policy: &str, window: Duration) -> (u64, Option<Duration>) {
    let st = limiter
        .status(
            &[PolicyRef {
                kind: crate::quota::Kind::Bucket,
                methods: Vec::new(),
                name: policy.into(),
                window: window.into(),
            }],
            &[],
        )
        .await
        .expect("status");
    (st.policies[0].used, st.policies[0].next_free)
}

#[test]
fn a_charge_reads_back_as_it_was_written() {
    let (_dir, path) = scratch();
    let j = Journal::open(&path, crate::clock::system()).expect("open");
    j.record_at("key1", &charge("r-2", 1), 2_000)
        .expect("record");
    j.record_at("key1", &charge("r-1", 100), 1_000)
        .expect("record");
    j.record_at("other", &charge("o-1", 5), 500)
        .expect("record");
    // The same id again keeps the first row and its time.
    j.record_at("key1", &charge("r-1", 100), 9_000)
        .expect("record");
    let (rows, unreadable) = j.pending("key1").expect("pending");
    assert_eq!(unreadable, 0);
    assert_eq!(
        rows,
        vec![
            Journalled {
                charge: charge("r-1", 100),
                made_at_us: 1_000
            },
            Journalled {
                charge: charge("r-2", 1),
                made_at_us: 2_000
            },
        ]
    );
    j.remove("r-1").expect("remove");
    let (rows, _) = j.pending("key1").expect("pending");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].charge.id, "r-2");
    assert_eq!(j.pending("other").expect("pending").0.len(), 1);
}

/// A row whose units went negative is damaged: left in place and counted, never
/// replayed as 0 units (fewer than the upstream billed).
#[test]
fn negative_units_read_back_as_unreadable_not_zero() {
    let (_dir, path) = scratch();
    let j = Journal::open(&path, crate::clock::system()).expect("open");
    j.record_at("key1", &charge("r-1", 7), 1_000)
        .expect("record");
    j.record_at("key1", &charge("r-2", 3), 2_000)
        .expect("record");
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute(
            "UPDATE quota_journal SET units = -7 WHERE charge_id = 'r-1'",
            [],
        )
        .expect("damaging a row");
    let (rows, unreadable) = j.pending("key1").expect("pending");
    assert_eq!(unreadable, 1);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].charge.id, "r-2");
}

#[test]
fn processes_opening_a_fresh_journal_together_all_succeed() {
    let (_dir, path) = scratch();
    let opened: Vec<Result<Journal, JournalError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Journal::open(&path, crate::clock::system())))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    for j in opened {
        let j = j.expect("every opener prepares the journal");
        j.record_at("key1", &charge("r-1", 1), 1_000)
            .expect("record");
    }
    assert_eq!(
        Journal::open(&path, crate::clock::system())
            .expect("open")
            .pending("key1")
            .expect("pending")
            .0
            .len(),
        1
    );
}

#[test]
fn opening_only_for_pending_calls_creates_nothing() {
    let (dir, path) = scratch();
    assert!(
        Journal::open_if_pending(&path, crate::clock::system())
            .expect("no file")
            .is_none()
    );
    assert!(!path.exists(), "no database is created");
    {
        let j = Journal::open(&path, crate::clock::system()).expect("open");
        assert!(
            Journal::open_if_pending(&path, crate::clock::system())
                .expect("empty")
                .is_none()
        );
        j.record_at("key1", &charge("r-1", 1), 1).expect("record");
    }
    let j = Journal::open_if_pending(&path, crate::clock::system())
        .expect("pending")
        .expect("a journal with rows");
    assert_eq!(j.pending("key1").expect("pending").0.len(), 1);
    drop(j);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("listing")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    assert_eq!(names, ["t.db"], "no -wal or -shm left behind");
}

#[tokio::test]
async fn a_replay_counts_each_call_once_at_its_original_age() {
    let (_dir, path) = scratch();
    let clock = clock();
    let limiter = Limiter::Embedded(
        EmbeddedLimiter::open(&path, "key1", clock.clone(), None).expect("limiter"),
    );
    let j = Journal::open(&path, clock.clone()).expect("open");
    let now = clock.now().as_i64();
    let ten_min = 600 * 1_000_000;
    j.record_at("key1", &charge("r-1", 100), now - ten_min)
        .expect("record");
    j.record_at("key1", &charge("r-2", 1), now - ten_min)
        .expect("record");
    // Older than the budget's window: nothing left to count.
    j.record_at("key1", &charge("r-0", 7), now - 2 * 3_600_000_000)
        .expect("record");
    // Another budget's calls stay for that budget.
    j.record_at("other", &charge("o-1", 5), now)
        .expect("record");

    let done = j.replay("key1", &limiter).await.expect("replay");
    assert_eq!((done.calls, done.units, done.left), (3, 108, 0));
    assert!(done.interrupted.is_none());
    let (budget, next_free) = used(&limiter, "budget", HOUR).await;
    assert_eq!(budget, 101);
    // Made ten minutes ago: it leaves the hour's window in fifty minutes.
    assert_eq!(next_free, Some(Duration::from_secs(3000)));
    // The per-call limit's window is one minute: the calls are already out of it.
    assert_eq!(used(&limiter, "calls", Duration::from_secs(60)).await.0, 0);
    assert!(j.pending("key1").expect("pending").0.is_empty());
    assert_eq!(j.pending("other").expect("pending").0.len(), 1);

    // A crash after the limiter accepted a call but before its row was deleted
    // replays it again: still counted once.
    j.record_at("key1", &charge("r-1", 100), now - ten_min)
        .expect("record");
    let again = j.replay("key1", &limiter).await.expect("replay");
    assert_eq!(again.calls, 1);
    assert_eq!(used(&limiter, "budget", HOUR).await.0, 101);
}

#[test]
fn the_ledger_keeps_granted_calls_as_long_as_the_longest_window_allowed() {
    let (_dir, path) = scratch();
    let j = Journal::open(&path, crate::clock::system()).expect("open");
    j.record_granted_at("key1", &charge("g-1", 100), 1_000)
        .expect("record");
    j.record_at("key1", &charge("u-1", 1), 2_000)
        .expect("record");
    // Granted rows are the ledger, not calls waiting for a replay.
    let ids =
        |rows: Vec<Journalled>| -> Vec<String> { rows.into_iter().map(|r| r.charge.id).collect() };
    assert_eq!(ids(j.pending("key1").expect("pending").0), ["u-1"]);
    assert_eq!(ids(j.ledger("key1").expect("ledger").0), ["g-1"]);
    // Kept as long as any window that could come back could count it, not only its
    // own (the hour): a costs file with a month's window may come back.
    let kept = micros(crate::quota::KEEP);
    assert!(kept > micros(HOUR));
    assert_eq!(j.prune("key1", 1_000 + kept - 1).expect("prune"), 0);
    assert_eq!(j.prune("key1", 1_000 + kept).expect("prune"), 1);
    assert!(j.ledger("key1").expect("ledger").0.is_empty());
    // Unmetered calls are never pruned: the window has not counted them yet.
    assert_eq!(j.pending("key1").expect("pending").0.len(), 1);

    assert_eq!(j.last_epoch("key1").expect("epoch"), None);
    j.set_epoch("key1", Some(Epoch(42))).expect("set");
    j.set_epoch("other", Some(Epoch(7))).expect("set");
    assert_eq!(j.last_epoch("key1").expect("epoch"), Some(Epoch(42)));
    j.set_epoch("key1", None).expect("forget");
    assert_eq!(j.last_epoch("key1").expect("epoch"), None);
    assert_eq!(j.last_epoch("other").expect("epoch"), Some(Epoch(7)));
}

#[test]
fn a_journal_written_before_the_ledger_keeps_its_calls() {
    let (_dir, path) = scratch();
    {
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch(
            "CREATE TABLE quota_journal (
                charge_id TEXT PRIMARY KEY, budget TEXT NOT NULL, method TEXT NOT NULL,
                units INTEGER NOT NULL, parts TEXT NOT NULL CHECK (json_valid(parts)),
                made_at_us INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO quota_journal VALUES ('old-1', 'key1', 'videos.list', 1,
                '[{\"policy\":\"budget\",\"window_us\":3600000000,\"max\":9500,\"units\":1}]', 5);",
        )
        .expect("an old journal");
    }
    let j = Journal::open_if_pending(&path, crate::clock::system())
        .expect("open")
        .expect("a pending call");
    let (rows, unreadable) = j.pending("key1").expect("pending");
    assert_eq!((rows.len(), unreadable), (1, 0));
    assert_eq!(rows[0].charge.id, "old-1");
    assert!(j.ledger("key1").expect("ledger").0.is_empty());
}

#[tokio::test]
async fn a_restore_records_the_ledger_once_at_original_ages_and_keeps_it() {
    let (_dir, path) = scratch();
    let clock = clock();
    let j = Journal::open(&path, clock.clone()).expect("open");
    let now = clock.now().as_i64();
    let ten_min = 600 * 1_000_000;
    j.record_granted_at("key1", &charge("g-1", 100), now - ten_min)
        .expect("record");
    j.record_granted_at("key1", &charge("g-2", 5), now - 2 * ten_min)
        .expect("record");
    // The window this host charged into is gone: an empty one.
    let limiter = Limiter::Embedded(
        EmbeddedLimiter::open(&path.with_extension("other.db"), "key1", clock, None)
            .expect("limiter"),
    );
    for _ in 0..2 {
        let done = j.restore("key1", &limiter).await.expect("restore");
        assert_eq!((done.calls, done.units, done.left), (2, 105, 0));
        let (budget, next_free) = used(&limiter, "budget", HOUR).await;
        assert_eq!(budget, 105, "counted once, however often restored");
        // The older call, made twenty minutes ago, leaves in forty.
        assert_eq!(next_free, Some(Duration::from_secs(2400)));
    }
    assert_eq!(
        j.ledger("key1").expect("ledger").0.len(),
        2,
        "the ledger stays"
    );
}

#[tokio::test]
async fn a_replay_that_fails_leaves_the_rest_for_next_time() {
    let (_dir, path) = scratch();
    let clock = Arc::new(ManualClock::starting_at(crate::clock::Micros::new(
        1_800_000_000_000_000,
    )));
    let j = Journal::open(&path, clock.clone()).expect("open");
    j.record_at("key1", &charge("r-1", 1), clock.now().as_i64())
        .expect("record");
    j.record_at("key1", &charge("r-2", 1), clock.now().as_i64())
        .expect("record");
    let down = Limiter::Down {
        endpoint: "redis://127.0.0.1:1/0".into(),
        reason: "connection refused".into(),
    };
    let done = j.replay("key1", &down).await.expect("replay");
    assert_eq!((done.calls, done.left), (0, 2));
    assert!(
        done.interrupted
            .as_ref()
            .is_some_and(LimiterError::is_unavailable),
        "{done:?}"
    );
    assert_eq!(j.pending("key1").expect("pending").0.len(), 2);
}

/// What `status` says while the limiter is down (docs/json.md, `journal`): the calls of
/// the budget not yet replayed and when the oldest was made; the ledger's calls,
/// already counted, and another budget's are not among them.
#[test]
fn the_unreplayed_calls_are_counted_with_the_oldest_time() {
    let (_dir, path) = scratch();
    assert_eq!(
        unreplayed(None, "key1").expect("no database"),
        Unreplayed::default()
    );
    let j = Journal::open(&path, crate::clock::system()).expect("open");
    let db = Db::open_for_reading(&path).expect("reading");
    assert_eq!(
        unreplayed(Some(&db), "key1").expect("empty"),
        Unreplayed::default()
    );
    j.record_at("key1", &charge("r-2", 1), 2_000)
        .expect("record");
    j.record_at("key1", &charge("r-1", 1), 1_000)
        .expect("record");
    j.record_granted_at("key1", &charge("g-1", 1), 500)
        .expect("record");
    j.record_at("key2", &charge("o-1", 1), 100).expect("record");
    assert_eq!(
        unreplayed(Some(&db), "key1").expect("read"),
        Unreplayed {
            calls: 2,
            oldest_at_us: Some(1_000)
        }
    );
    assert_eq!(pending_calls(Some(&db), "key1").expect("read"), 2);
}

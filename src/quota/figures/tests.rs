//! Unit tests of `quota/figures.rs`.

use super::*;
use crate::config::{SourceText, parse_costs};

fn granular() -> Budget {
    parse_costs(&SourceText {
        name: "quota-costs.granular.toml".into(),
        text: include_str!("../../../quota-costs.granular.toml"),
    })
    .expect("the granular costs")
}

fn figures(budget: &Budget, used: &[(&str, u64)]) -> Vec<BucketFigures> {
    used.iter()
        .map(|(name, used)| {
            let b = budget.bucket(name).expect("a bucket of the budget");
            BucketFigures {
                name: b.name.clone(),
                used: *used,
                ceiling: b.ceiling,
                quota: b.quota,
                blocked_until: None,
                upstream_spent_at: None,
            }
        })
        .collect()
}

/// When the figures of these tests were read.
const AT: Micros = Micros::new(1_700_000_000_250_000);

fn writing(dir: &tempfile::TempDir) -> Db {
    Db::open_for_writing(&dir.path().join("t.db")).expect("the database")
}

/// What a run recorded comes back for its budget's key only, with today's ceilings and
/// quotas; a later record replaces the earlier one whole.
#[test]
fn the_last_known_figures_are_the_last_recorded_for_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = writing(&dir);
    let budget = granular();
    assert_eq!(last_known(Some(&db), &budget).expect("read"), None);
    assert_eq!(last_known(None, &budget).expect("read"), None);

    let mut first = figures(&budget, &[("budget", 20), ("search", 95)]);
    first[1].blocked_until = Some(Micros::new(1_700_086_400_123_456));
    first[1].upstream_spent_at = Some(61);
    record(&db, crate::schema::MIGRATIONS, &budget.key, &first, AT).expect("recording");
    assert_eq!(
        last_known(Some(&db), &budget).expect("read"),
        Some(first.clone())
    );

    let second = figures(&budget, &[("budget", 21)]);
    record(&db, crate::schema::MIGRATIONS, &budget.key, &second, AT).expect("recording");
    assert_eq!(
        last_known(Some(&db), &budget).expect("read"),
        Some(second),
        "a bucket the last run did not report is not known"
    );

    let mut other = budget.clone();
    other.key = "key2".into();
    assert_eq!(last_known(Some(&db), &other).expect("read"), None);

    let mut raised = budget.clone();
    raised.main_mut().ceiling -= 1;
    let known = last_known(Some(&db), &raised)
        .expect("read")
        .expect("known");
    assert_eq!(known[0].ceiling, raised.main().ceiling, "today's ceiling");
}

/// Without the main bucket's figure nothing is known, whatever the others'.
#[test]
fn without_the_main_bucket_nothing_is_known() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = writing(&dir);
    let budget = granular();
    let only_search = figures(&budget, &[("search", 3)]);
    record(
        &db,
        crate::schema::MIGRATIONS,
        &budget.key,
        &only_search,
        AT,
    )
    .expect("recording");
    assert_eq!(last_known(Some(&db), &budget).expect("read"), None);
}

/// The figures come back with when they were read (docs/json.md, `last_known.as_of`);
/// a record from before that time was kept has none, and is read without changing
/// the file.
#[test]
fn the_last_known_figures_say_when_they_were_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = writing(&dir);
    let budget = granular();
    let first = figures(&budget, &[("budget", 20), ("search", 95)]);
    record(&db, crate::schema::MIGRATIONS, &budget.key, &first, AT).expect("recording");
    let known = last_known_at(Some(&db), &budget)
        .expect("read")
        .expect("known");
    assert_eq!(known.as_of, Some(AT));
    assert_eq!(known.buckets, first);

    // As a file at the step before: the column is not there.
    db.lock()
        .execute_batch(
            "DELETE FROM quota_last_figures;
             ALTER TABLE quota_last_figures DROP COLUMN as_of_us;
             INSERT INTO quota_last_figures (budget, bucket, used) VALUES ('key1', 'budget', 7);",
        )
        .expect("an older file");
    let known = last_known_at(Some(&db), &budget)
        .expect("read")
        .expect("known");
    assert_eq!((known.as_of, known.buckets[0].used), (None, 7));
}

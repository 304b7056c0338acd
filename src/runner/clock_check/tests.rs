//! Unit tests of `runner/clock_check.rs`.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::clock::ManualClock;
use crate::quota::BUDGET_POLICY;
use crate::runner::test_support::AT_2026_US;

const AT_2026_S: i64 = AT_2026_US / 1_000_000;

/// An answer dated `off_s` from the limiter's time of the charge, a tenth of a
/// second later.
fn reading(off_s: i64) -> Reading {
    Reading {
        limiter_at: crate::clock::Micros::new(AT_2026_US),
        elapsed: Duration::from_millis(100),
        date: crate::clock::Secs::new(AT_2026_S + off_s),
    }
}

/// A check over a file whose earlier run recorded the host's clock an hour off; the
/// directory lives as long as the check is used.
fn after_an_hour_of_skew() -> (tempfile::TempDir, ClockCheck) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.db");
    crate::schema::record_skew(&db, &an_hour_off()).expect("recorded");
    (dir, ClockCheck::new("r1".into(), writing(&db)))
}

/// The command's connection to `db`, as a run has it.
fn writing(db: &std::path::Path) -> crate::sqlite::Db {
    crate::sqlite::Db::open_for_writing(db).expect("the database")
}

/// The host's clock an hour ahead, as a run measured it.
fn an_hour_off() -> Skew {
    Skew {
        clock: LimiterClock::Host,
        skew_us: 3_600_000_000,
        measured_at_us: AT_2026_US,
    }
}

fn stops() -> Stops {
    Stops::new(
        "r1".into(),
        Arc::new(ManualClock::starting_at(crate::clock::Micros::new(
            AT_2026_US,
        ))),
    )
}

/// A clock an earlier run found too far makes this one check it with one call at
/// a time, until an answer agrees.
#[tokio::test]
async fn a_clock_found_too_far_before_is_checked_one_call_at_a_time() {
    let (dir, check) = after_an_hour_of_skew();
    let db = dir.path().join("t.db");
    assert!(
        check.gate().await.is_none(),
        "trusted until the record is read"
    );
    check.distrust_if_skewed(Some(LimiterClock::Host)).await;
    assert!(check.gate().await.is_some(), "one call at a time");
    let stops = stops();
    let agrees = check.check(LimiterClock::Host, reading(0), &stops).await;
    assert_eq!(agrees, Ok(()));
    assert!(check.gate().await.is_none(), "trusted again");
    assert!(!stops.stopped(BUDGET_POLICY));
    let last = skew::recorded_for(Some(&writing(&db)), LimiterClock::Host).expect("read");
    assert!(last.is_some_and(|s| !s.too_far()), "{last:?}");
}

/// An answer too far from the limiter's clock stops every call and is recorded;
/// a second one says nothing more.
#[tokio::test]
async fn an_answer_too_far_off_stops_every_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.db");
    let check = ClockCheck::new("r1".into(), writing(&db));
    let stops = stops();
    for _ in 0..2 {
        let got = check
            .check(LimiterClock::Host, reading(-3_600), &stops)
            .await;
        assert_eq!(got, Err(TooFar));
    }
    assert!(stops.stopped(BUDGET_POLICY));
    assert!(matches!(stops.reported(), Some(Stop::ClockSkew { .. })));
    let last = skew::recorded_for(Some(&writing(&db)), LimiterClock::Host).expect("read");
    assert!(last.is_some_and(|s| s.too_far()), "{last:?}");
}

/// Neither a limiter that is down (no clock) nor a database without a record
/// makes the run distrust its clock.
#[tokio::test]
async fn no_record_no_distrust() {
    let dir = tempfile::tempdir().expect("temp dir");
    let check = ClockCheck::new("r1".into(), writing(&dir.path().join("t.db")));
    check.distrust_if_skewed(None).await;
    check.distrust_if_skewed(Some(LimiterClock::Host)).await;
    assert!(check.gate().await.is_none());
}

/// While a clock found too far is distrusted, an answer with no readable `Date`
/// cannot confirm it: the run stops as on a disagreeing answer (the check fails
/// closed), with a clock stop, and the record of the skew stays as it was.
#[tokio::test]
async fn an_answer_without_a_date_stops_a_distrusted_clock() {
    let (dir, check) = after_an_hour_of_skew();
    let db = dir.path().join("t.db");
    check.distrust_if_skewed(Some(LimiterClock::Host)).await;
    let stops = stops();
    for _ in 0..2 {
        assert_eq!(check.unconfirmed(LimiterClock::Host, &stops), Err(TooFar));
    }
    assert!(stops.stopped(BUDGET_POLICY));
    let stop = stops.reported().expect("a stop");
    assert_eq!(
        stop,
        Stop::ClockUnconfirmed {
            clock: LimiterClock::Host
        }
    );
    assert_eq!(stop.status(), crate::runner::outcome::Status::ClockSkew);
    let last = skew::recorded_for(Some(&writing(&db)), LimiterClock::Host).expect("read");
    assert_eq!(last, Some(an_hour_off()), "the record is unchanged");
}

/// A clock that is trusted has nothing to confirm: an answer without a `Date`
/// measures nothing and stops nothing.
#[tokio::test]
async fn an_answer_without_a_date_on_a_trusted_clock_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let check = ClockCheck::new("r1".into(), writing(&dir.path().join("t.db")));
    check.distrust_if_skewed(Some(LimiterClock::Host)).await;
    let stops = stops();
    assert_eq!(check.unconfirmed(LimiterClock::Host, &stops), Ok(()));
    assert!(!stops.stopped(BUDGET_POLICY));
}

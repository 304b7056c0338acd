//! Unit tests of `quota/skew.rs`.

use super::*;

const S: i64 = 1_000_000;

fn reading(limiter_at_us: i64, elapsed_ms: u64, date_s: i64) -> Measured {
    Reading {
        limiter_at: crate::clock::Micros::new(limiter_at_us),
        elapsed: Duration::from_millis(elapsed_ms),
        date: crate::clock::Secs::new(date_s),
    }
    .measure()
}

#[test]
fn agreeing_clocks_agree_whatever_the_second_and_the_latency() {
    // The limiter read 1000.9 s; the answer came 200 ms later, dated 1000 s.
    let m = reading(1000 * S + 900_000, 200, 1000);
    assert!(!m.too_far());
    assert!(m.low_us <= 0 && m.high_us >= 0, "{m:?}");
    assert!(m.estimate_us().abs() < S, "{m:?}");
}

#[test]
fn a_day_ahead_or_behind_is_too_far() {
    let ahead = reading(1000 * S + 25 * 3600 * S, 50, 1000);
    assert!(ahead.too_far());
    let skew = Skew::of(LimiterClock::Host, &ahead);
    assert!(skew.too_far());
    assert!((skew.seconds() - 90_000.0).abs() < 1.0, "{skew:?}");
    assert_eq!(
        skew.describe(),
        "this host's clock is 25h ahead of the upstream's"
    );
    let behind = Skew::of(LimiterClock::Redis, &reading(1000 * S - 400 * S, 50, 1000));
    assert!(behind.too_far());
    assert!(
        behind.describe().ends_with("6m 41s behind the upstream's"),
        "{behind:?}"
    );
}

#[test]
fn five_minutes_is_the_edge_and_slow_answers_widen_it_rather_than_trip_it() {
    // 5 min ahead at the earliest the answer can have been made: not yet too far.
    assert!(!reading(1000 * S + 301 * S, 0, 1000).too_far());
    assert!(reading(1000 * S + 301 * S + 1, 0, 1000).too_far());
    // Behind: the answer came 30 s after the charge, dated 5 min 20 s later;
    // it may have been made 30 s after the limiter read its clock.
    let slow = reading(1000 * S, 30_000, 1320);
    assert!(!slow.too_far(), "{slow:?}");
    assert!(slow.estimate_us() >= -MAX_SKEW_US, "{slow:?}");
    assert!(!Skew::of(LimiterClock::Host, &slow).too_far());
}

#[test]
fn clocks_apart_point_at_the_clock_the_records_blame() {
    const HOUR: i64 = 3600 * S;
    // Redis 26 hours ahead of this host.
    let apart = ClocksApart {
        host_at: crate::clock::Micros::new(1000 * HOUR),
        limiter_at: crate::clock::Micros::new(1026 * HOUR),
    };
    let at = |clock, skew_us| Skew {
        clock,
        skew_us,
        measured_at_us: 999 * HOUR,
    };
    let suspect = |records: &[Skew]| apart.suspect(records).map(|(c, _)| c);
    assert_eq!(suspect(&[]), None);
    // Redis agreed with the upstream: this host is off.
    assert_eq!(
        suspect(&[at(LimiterClock::Redis, 2 * S)]),
        Some(LimiterClock::Host)
    );
    // Redis was found ahead, the way it is apart: Redis is off.
    assert_eq!(
        suspect(&[at(LimiterClock::Redis, 26 * HOUR)]),
        Some(LimiterClock::Redis)
    );
    // Found behind, the other way: it says nothing about this gap.
    assert_eq!(suspect(&[at(LimiterClock::Redis, -3 * HOUR)]), None);
    // This host agreed, or was found behind: Redis, or this host.
    assert_eq!(
        suspect(&[at(LimiterClock::Host, -S)]),
        Some(LimiterClock::Redis)
    );
    assert_eq!(
        suspect(&[at(LimiterClock::Host, -26 * HOUR)]),
        Some(LimiterClock::Host)
    );
    // Two records that blame different clocks: no hint.
    assert_eq!(
        suspect(&[at(LimiterClock::Host, 0), at(LimiterClock::Redis, 0)]),
        None
    );
    assert!(
        apart
            .advice(&[at(LimiterClock::Redis, 0)])
            .contains("this host's clock is likely the one to fix"),
        "{}",
        apart.advice(&[])
    );
    assert_eq!(
        apart.to_string(),
        "the Redis server's clock (TIME, 1970-02-12T18:00:00Z) is 26h ahead of this host's clock (1970-02-11T16:00:00Z): too far apart for a calendar-day window, whose days this host names by its clock and Redis counts by its own"
    );
}

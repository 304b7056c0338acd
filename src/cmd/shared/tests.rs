//! Unit tests of `cmd/shared.rs`.

use super::*;

/// Any two times, however far apart, are told without overflowing and without a bare
/// count of seconds.
#[test]
fn times_and_ages_at_the_ends_of_i64() {
    assert_eq!(at(253_402_300_799), "9999-12-31T23:59:59Z");
    assert_eq!(at(i64::MAX), "far future");
    assert_eq!(at(i64::MIN), "far past");
    assert_eq!(ago(i64::MAX, i64::MIN), "more than 36500d ago");
    assert_eq!(
        ago(i64::MIN, i64::MAX),
        "in the future, more than 36500d ahead of this host's clock"
    );
    assert_eq!(ago(100, 40), "1m ago");
}

//! Unit tests of `cmd/status.rs`.

use super::*;

#[test]
fn ages_read_in_days_once_they_are_long() {
    assert_eq!(ago(1000, 1000), "0s ago");
    assert_eq!(ago(7_200 + 60, 0), "2h 1m ago");
    assert_eq!(ago(3 * 86_400 + 5 * 3600 + 7, 0), "3d 5h ago");
    assert_eq!(
        ago(0, 7_260),
        "in the future, 2h 1m ahead of this host's clock",
        "a clock that went back, or a writer's that was ahead"
    );
    assert!(is_stale(1_000, None, 60));
    assert!(!is_stale(1_000, Some(990), 60));
    assert!(is_stale(1_000, Some(900), 60));
    assert!(
        !is_stale(1_000, Some(1_100), 60),
        "within the skew tolerance"
    );
    assert!(is_stale(1_000, Some(1_000 + 86_400), 60), "a day ahead");
}

#[test]
fn control_characters_are_shown_not_sent() {
    assert_eq!(one_line("a\nb\tc"), "a b c");
    assert_eq!(one_line("x\u{1b}[2Jy"), "x\\u{1b}[2Jy");
}

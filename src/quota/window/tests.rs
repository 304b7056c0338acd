//! Unit tests of `quota/window.rs`.

use super::*;

fn us(text: &str) -> i64 {
    text.parse::<Timestamp>()
        .expect("an RFC 3339 instant")
        .as_microsecond()
}

fn pacific() -> Window {
    Window::Day(Zone::get("America/Los_Angeles").expect("a known zone"))
}

#[test]
fn a_pacific_day_runs_from_local_midnight_to_local_midnight() {
    let w = pacific();
    // 2026-11-23 10:00 PST is 18:00Z; that day began at 08:00Z.
    let span = w.at(us("2026-11-23T18:00:00Z"));
    assert_eq!(span.cutoff_us, us("2026-11-23T08:00:00Z") - 1);
    assert_eq!(span.end_us, Some(us("2026-11-24T08:00:00Z")));
    // Every entry of the day leaves at the next midnight.
    assert_eq!(
        w.leaves(us("2026-11-23T09:00:00Z"), us("2026-11-23T18:00:00Z")),
        us("2026-11-24T08:00:00Z")
    );
}

#[test]
fn days_across_daylight_saving_changes_are_23_and_25_hours() {
    let w = pacific();
    assert_eq!(
        w.length_at(us("2026-03-08T12:00:00Z")),
        Duration::from_secs(82_800)
    );
    assert_eq!(
        w.length_at(us("2026-11-01T12:00:00Z")),
        Duration::from_secs(90_000)
    );
    assert_eq!(
        w.length_at(us("2026-11-23T12:00:00Z")),
        Duration::from_secs(86_400)
    );
}

#[test]
fn one_microsecond_before_midnight_and_at_midnight_are_two_days() {
    let w = pacific();
    let midnight = us("2026-11-24T08:00:00Z");
    assert_eq!(w.at(midnight - 1).end_us, Some(midnight));
    assert_eq!(w.at(midnight).cutoff_us, midnight - 1);
}

#[test]
fn a_sliding_window_trails_now() {
    let w = Window::Sliding(Duration::from_secs(60));
    let span = w.at(100_000_000);
    assert_eq!(span.cutoff_us, 40_000_000);
    assert_eq!(span.end_us, None);
    assert_eq!(w.leaves(50_000_000, 100_000_000), 110_000_000);
}

#[test]
fn the_script_gets_four_midnights_around_now() {
    let arg = pacific().script_arg(us("2026-11-23T18:00:00Z"));
    let expected = format!(
        "d{},{},{},{}",
        us("2026-11-23T08:00:00Z"),
        us("2026-11-24T08:00:00Z"),
        us("2026-11-22T08:00:00Z"),
        us("2026-11-25T08:00:00Z")
    );
    assert_eq!(arg, expected);
    assert_eq!(
        Window::Sliding(Duration::from_secs(2)).script_arg(0),
        "2000000"
    );
}

#[test]
fn windows_print_as_configured() {
    assert_eq!(pacific().to_string(), "day@America/Los_Angeles");
    assert_eq!(
        Window::Sliding(Duration::from_secs(86_400)).to_string(),
        "24h"
    );
    assert_eq!(Window::Sliding(Duration::from_secs(600)).to_string(), "10m");
    assert_eq!(Window::Sliding(Duration::from_secs(90)).to_string(), "90s");
    assert!(Zone::get("Mars/Olympus_Mons").is_err());
}

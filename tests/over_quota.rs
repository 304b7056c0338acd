//! The over-quota repros of issue 34, through the binary as an operator ran them
//! (docs/budget.md): in each, no grant on a right clock takes a window over its quota.
//! The clocks are `faketime`'s, on the embedded limiter, whose clock is the host's.

use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::{Costs, Limit};

/// `budget charge` of `count` calls of `method`, on the clock `faketime` sets with
/// `clock` (none: the right one), expecting `code`.
fn charge(h: &Harness<'_>, clock: Option<&[&str]>, args: &[&str], code: i32) -> Value {
    let mut cmd = h
        .bare()
        .args(["budget", "charge"])
        .args(args)
        .arg("--json")
        .status(code)
        // A charge back on the right clock after a jumped one says the clock went back.
        .allow_stderr("went back")
        .allow_stderr("were counted again at this host's costs");
    if let Some(clock) = clock {
        cmd = cmd.faketime(clock);
    }
    cmd.run().json()
}

/// Units the budget's main bucket holds now, on the right clock.
fn used(h: &Harness<'_>) -> u64 {
    let budget = h
        .bare()
        .args(["budget", "--json"])
        .allow_stderr("went back")
        .allow_stderr("were counted again at this host's costs")
        .run()
        .json();
    budget["used"].as_u64().expect("used")
}

/// The first repro, under the sliding day and the upstream's day: the quota charged by
/// hand, one charge on a clock 26 hours ahead (allowed: nothing could tell), then the
/// whole quota again back on the right clock, which the jumped charge's pruning let
/// through ("10000 used").
#[test]
fn a_jump_ahead_with_no_run_does_not_empty_the_window() {
    for window in ["24h", "day@America/Los_Angeles"] {
        let mut h = Harness::new(None);
        h.costs(Costs::youtube().window(window).to_toml());
        charge(
            &h,
            None,
            &["videos.list", "--count", "10000", "--reserve"],
            0,
        );
        charge(&h, None, &["videos.list", "--reserve"], 75);
        charge(&h, Some(&["-f", "+26h"]), &["videos.list"], 0);
        let denied = charge(
            &h,
            None,
            &["videos.list", "--count", "9999", "--reserve"],
            75,
        );
        assert_eq!(denied["granted"], false, "{window}: {denied}");
        assert!(
            used(&h) >= 10_000,
            "{window}: the window still holds the quota"
        );
    }
}

/// The second: 94 of a ceiling of 95 charged by hand, then the first run ever on a
/// clock 25 hours ahead, which makes what is in flight and stops on the skew. Back on
/// the right clock the 94 must still count: the next run may not make 16 calls.
#[test]
fn a_first_run_on_a_clock_ahead_does_not_prune_what_was_charged_by_hand() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100).ceiling(95).to_toml());
    charge(&h, None, &["videos.list", "--count", "94"], 0);
    let ahead = h
        .cmd()
        .args(["run", "--json"])
        .faketime(&["-f", "+25h"])
        .expect_stderr("this host's clock is 25h ahead")
        .expect_ended("clock_skew")
        .status(75)
        .run()
        .json();
    let first = ahead["units_charged"].as_u64().expect("units");
    assert!((1..=4).contains(&first), "{ahead}");
    assert_eq!(used(&h), 94 + first, "the 94 still count");
    let next = h
        .cmd()
        .args(["run", "--json"])
        .status(75)
        .allow_stderr("went back")
        .allow_stderr("budget exhausted")
        .allow_stderr("budget_exhausted in")
        .allow_stderr("the clocks agree again")
        .allow_stderr("when last compared")
        .run()
        .json();
    // Over the ceiling already: nothing more on the right clock.
    assert_eq!(next["units_charged"], 0, "{next}");
    assert!(used(&h) <= 100, "the quota of a real day holds");
}

/// The third: a local day of 26 hours (Antarctica/Troll, 2026-10-25: 22:00Z on the 24th
/// to midnight UTC on the 26th). 9,000 at 22:10Z on the 24th and 1,000 at 23:50Z on the
/// 25th fill it; a switch to a file that differs by one `[[limit]]` and back counted the
/// window again from 25 hours, and granted 1,000 more.
#[test]
fn a_switch_and_back_counts_a_day_of_26_hours_whole() {
    let troll = Costs::youtube().window("day@Antarctica/Troll");
    let mut h = Harness::new(None);
    h.costs(troll.to_toml());
    let at = |h: &Harness<'_>, when: &str, args: &[&str], code: i32| {
        h.at_time(when)
            .args(["budget", "charge"])
            .args(args)
            .arg("--json")
            .status(code)
            .allow_stderr("were counted again at this host's costs")
            .run()
            .json()
    };
    at(
        &h,
        "2026-10-24T22:10:00Z",
        &["videos.list", "--count", "9000", "--reserve"],
        0,
    );
    at(
        &h,
        "2026-10-25T23:50:00Z",
        &["videos.list", "--count", "1000", "--reserve"],
        0,
    );
    h.costs(
        troll
            .clone()
            .limit(Limit::new("searches", 2000, "10m").method("search.list"))
            .to_toml(),
    );
    at(
        &h,
        "2026-10-25T23:51:00Z",
        &["videos.list", "--reserve"],
        75,
    );
    h.costs(troll.to_toml());
    let denied = at(
        &h,
        "2026-10-25T23:52:00Z",
        &["videos.list", "--count", "1000", "--reserve"],
        75,
    );
    assert_eq!(denied["used"], 10_000, "{denied}");
}

/// The fourth: a week's window of quota 5 charged full; two days later a charge under
/// the default file, which kept entries 25 hours; back under the week's file it showed
/// 1 used and granted 3 more.
#[test]
fn a_week_window_comes_back_whole_after_two_days_under_a_day_window() {
    let week = Costs::one_unit_each().window("168h").quota(5).ceiling(5);
    let mut h = Harness::new(None);
    h.costs(week.to_toml());
    charge(&h, None, &["videos.list", "--count", "5"], 0);
    h.costs(Costs::one_unit_each().to_toml());
    charge(&h, Some(&["-f", "+2d"]), &["videos.list"], 0);
    h.costs(week.to_toml());
    let denied = h
        .bare()
        .args(["budget", "charge", "videos.list", "--json"])
        .faketime(&["-f", "+2d"])
        .allow_stderr("were counted again at this host's costs")
        .status(75)
        .run()
        .json();
    assert_eq!(denied["granted"], false, "{denied}");
    assert_eq!(denied["used"], 6, "{denied}");
}

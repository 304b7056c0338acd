//! This host's clock and Redis `TIME` more than a day apart, under calendar-day windows
//! (docs/alerts.md): the host sends the midnights of the days around its own clock and
//! Redis counts by its own, so a Redis day outside them cannot be counted. Before, the
//! script's error came back raw (`… script: 3fe0…, on @user_script:94`), the run ended
//! `failed` (1) and the metrics said the limiter was down though it had answered. Now
//! it is a clock stop: `clock_skew` (75), naming both clocks and what to do, with
//! `trendsync_limiter_up` 1; `budget charge`, `budget` and `backfill` alike.

use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::redis_server::{real_now_us, unix_us};
use crate::common::upstream::API_KEY;
use crate::common::{RedisServer, Trendsync, contains, lacks};

/// The shipped granular cost file: every bucket's window is the upstream's day.
const GRANULAR: &str = include_str!("../quota-costs.granular.toml");

const HOUR_US: i64 = 3600 * 1_000_000;

/// The host's clock and Redis's, each case far enough apart, at that time of the
/// Pacific day, that Redis `TIME` is outside the three days around the host's: the
/// host at 23:30 in Los Angeles with Redis 26 hours ahead (01:30 two days later), and
/// the host at 00:30 with Redis 26 hours behind (22:30 two days before). Then what the
/// message says of them: Redis's clock runs on during a command, the host's stands.
const CASES: [(&str, i64, &str); 2] = [
    (
        "2026-01-15T07:30:00Z",
        26 * HOUR_US,
        "ahead of this host's clock (2026-01-15T07:30:00Z)",
    ),
    (
        "2026-01-15T08:30:00Z",
        -26 * HOUR_US,
        "behind this host's clock (2026-01-15T08:30:00Z)",
    ),
];

/// What the script's error carried that no person should read.
const SCRIPT_TEXT: [&str; 3] = ["user_script", "script:", "CLOCKAPART"];

/// The binary on a host clock that stands still at `host` (RFC 3339, UTC), with the
/// fake upstream and the key; Redis's clock is set `shift_us` from it first (it runs
/// on from there).
fn on_host_clock(h: &Harness<'_>, host: &str, shift_us: i64) -> Trendsync {
    if let Some(server) = h.redis {
        server.clock().set_now_us(unix_us(host) + shift_us);
    }
    let stamp = host.trim_end_matches('Z').replace('T', " ");
    h.bare()
        .env("TZ", "UTC")
        .faketime(&["--exclude-monotonic", "-f", &stamp])
        .args(["--api-base", &h.fake.uri()])
        .env("YOUTUBE_API_KEY", API_KEY)
}

/// Checks that `stderr` names both clocks and what to do, and quotes no script.
#[track_caller]
fn assert_names_both_clocks(stderr: &str, apart: &str) {
    assert!(
        stderr.contains("the Redis server's clock (TIME, "),
        "{stderr}"
    );
    assert!(stderr.contains(apart), "{stderr}");
    assert!(
        stderr.contains("compare each with the upstream's time"),
        "{stderr}"
    );
    for text in SCRIPT_TEXT {
        assert!(
            !stderr.contains(text),
            "quotes the script ({text}): {stderr}"
        );
    }
}

/// The sample of `name` for budget "key1" in the metrics file.
fn sample(metrics: &str, name: &str) -> String {
    let prefix = format!("{name}{{budget=\"key1\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix}in:\n{metrics}"))
        .to_owned()
}

#[test]
fn clocks_more_than_a_day_apart_stop_run_and_backfill_with_clock_skew() {
    for (host, shift_us, apart) in CASES {
        let server = RedisServer::start_at(unix_us(host) + shift_us);
        let mut h = Harness::new(Some(&server));
        h.costs(GRANULAR);
        for kind in ["run", "backfill"] {
            let ran = on_host_clock(&h, host, shift_us)
                .args(["--metrics-file", "trendsync.prom", kind, "--json"])
                .expect_stderr(apart)
                .expect_ended("clock_skew")
                .status(75)
                .run();
            assert_names_both_clocks(&ran.stderr, apart);
            let report = ran.json();
            assert_eq!(report["status"], "clock_skew", "{kind}: {report}");
            assert_eq!(report["calls"], 0, "{kind}: {report}");
            assert_eq!(report["bucket"], Value::Null, "{kind}: {report}");
            let regions = report["regions"].as_array().expect("regions");
            assert!(!regions.is_empty(), "{report}");
            for r in regions {
                assert!(
                    r["status"] == "clock_skew" || r["status"] == "not_attempted",
                    "{kind}: {r}"
                );
            }
            assert!(
                regions.iter().any(|r| r["status"] == "clock_skew"),
                "{kind}: {report}"
            );
            let metrics =
                std::fs::read_to_string(h.scratch.file("trendsync.prom")).expect("metrics");
            assert_eq!(
                sample(&metrics, "trendsync_limiter_up"),
                "1",
                "{kind}: Redis answered"
            );
            assert!(
                metrics.contains(&format!(
                    "trendsync_last_run_status{{kind=\"{kind}\",status=\"clock_skew\"}} 1\n"
                )),
                "{kind}: {metrics}"
            );
        }
        assert_eq!(h.fake.received(), 0, "no call was made");

        let ran = on_host_clock(&h, host, shift_us)
            .args(["budget", "charge", "videos.list", "--json"])
            .expect_stderr(apart)
            .status(75)
            .stderr(contains("nothing was charged"))
            .run();
        assert_names_both_clocks(&ran.stderr, apart);
        let charged = ran.json();
        assert_eq!(charged["granted"], false, "{charged}");
        assert_eq!(charged["denied_by"], "clock", "{charged}");

        // The window cannot be counted: what is still known, which no run has
        // recorded here (none could read the window).
        let ran = on_host_clock(&h, host, shift_us)
            .args(["budget"])
            .expect_stderr(apart)
            .status(75)
            .stdout(contains("nothing below is current"))
            .stdout(contains("no figures are known"))
            .run();
        assert_names_both_clocks(&ran.stderr, apart);
    }
}

/// A skew recorded when the clocks last agreed with the upstream says which of the
/// two is likely the wrong one: Redis's clock agreed, so it is this host's (here 60
/// hours ahead, which is outside the three days around it at any time of day).
#[test]
fn a_recorded_skew_says_which_clock_is_likely_off() {
    let server = RedisServer::start_at(real_now_us());
    let mut h = Harness::new(Some(&server));
    h.costs(GRANULAR);
    h.cmd().args(["run", "--region", "US"]).run();
    let ran = h
        .cmd()
        .args(["run", "--region", "US"])
        .faketime(&["-f", "+60h"])
        .expect_stderr("behind this host's clock")
        .expect_ended("clock_skew")
        .status(75)
        .stderr(contains("this host's clock is likely the one to fix"))
        .stderr(lacks("user_script"))
        .run();
    assert!(
        ran.stderr
            .contains("the Redis server's clock (TIME) agreed with the upstream's")
            && ran.stderr.contains("when last compared, at 20"),
        "{}",
        ran.stderr
    );
}

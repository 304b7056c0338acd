//! Times and durations in text output have one form each (docs/commands.md, "Text
//! output"): RFC 3339 UTC to the second (`2026-11-23T17:41:47Z`), and `3h 12m`, `45s`,
//! `850ms`. Every command that prints one is run through the binary and its output
//! searched for the other forms: a fraction of a second, a date and a time apart, a
//! decimal or Debug-formatted duration.

use crate::common::harness::Harness;
use crate::common::upstream::{OVERRIDE, answer_fixture, categories};

/// `dddd-dd-ddThh:mm:ssZ`, to the second.
fn is_time_to_the_second(word: &str) -> bool {
    let b = word.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'Z'
}

fn is_date(word: &str) -> bool {
    let b = word.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// `12.5` and the like: a number with a fraction.
fn is_decimal(word: &str) -> bool {
    word.split_once('.').is_some_and(|(whole, frac)| {
        !whole.is_empty()
            && !frac.is_empty()
            && whole.bytes().all(|c| c.is_ascii_digit())
            && frac.bytes().all(|c| c.is_ascii_digit())
    })
}

/// The forms of a time or a duration that text output must not use, each with the
/// line it is on. The timestamp that starts a text log line is held to the same form.
fn stray_forms(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| "()[],;\"'".contains(c)))
            .collect();
        for (i, w) in words.iter().enumerate() {
            let next = words.get(i + 1).copied().unwrap_or("");
            let w = w.trim_end_matches([':', '.']);
            let stray = (w.contains('T') && w.contains(':') && w.contains('.') && w.ends_with('Z'))
                || (is_date(w) && next.as_bytes().get(2) == Some(&b':'))
                || ["ms", "s", "µs", "us", "ns"]
                    .iter()
                    .any(|unit| w.strip_suffix(unit).is_some_and(is_decimal))
                || (is_decimal(w) && ["s", "ms", "sec", "seconds"].contains(&next))
                || w.ends_with("µs");
            if stray {
                found.push(format!("{w:?} in {line:?}"));
            }
        }
    }
    found
}

fn times_in(text: &str) -> usize {
    text.split(|c: char| c.is_whitespace() || "()[],;\"'".contains(c))
        .map(|w| w.trim_end_matches([':', '.']))
        .filter(|w| is_time_to_the_second(w))
        .count()
}

#[test]
fn the_checker_finds_every_stray_form_and_passes_the_right_ones() {
    for bad in [
        "trying again in 104.556609ms",
        "retry after 23h 59m (86397.328 s)",
        "started 2026-11-23 17:38:11Z",
        "blocked until 2026-11-24T08:00:00.123456Z",
        "waited 12µs",
        "2026-11-23T21:34:58.536261Z  WARN retry after 23h 59m",
    ] {
        assert_eq!(stray_forms(bad).len(), 1, "{bad}");
    }
    let good = "2026-11-23T21:34:58Z  WARN retry after 23h 59m (at 2026-11-24T21:34:55Z); \
                trying again in 105ms; 4m 10s; version 1.2";
    assert_eq!(stray_forms(good), Vec::<String>::new());
    assert_eq!(times_in(good), 2);
}

/// A run with a retried call and an upstream that then says the key's quota is spent,
/// and every command that shows what it left.
#[test]
fn every_command_writes_times_and_durations_in_one_form() {
    let h = Harness::new(None);
    h.fake.mount(
        categories("US")
            .respond_with(answer_fixture(500, "error_backend.json"))
            .up_to_n_times(1)
            .with_priority(OVERRIDE),
    );
    h.fake.answer_instead(
        categories("GB"),
        answer_fixture(403, "error_daily_limit_exceeded.json"),
    );
    h.expect_stderr("trying again in ")
        .expect_stderr("quota is spent")
        .expect_stderr("quota is lower than configured")
        .expect_ended("upstream_quota_exhausted")
        .status(75);
    let (run, _) = h.run(&[
        "run",
        "--region",
        "US",
        "--region",
        "GB",
        "--concurrency",
        "1",
    ]);
    let video: String = h
        .db()
        .query_row("SELECT id FROM videos LIMIT 1", [], |r| r.get(0))
        .expect("a stored video");

    let text = |args: &[&str], status: i32| {
        let ran = h.cmd().args(args).status(status).run();
        format!("{}{}", ran.stdout, ran.stderr)
    };
    // What each command must show at least one time of, and its output; the upstream
    // said the quota is spent, so what would charge is denied (75).
    let outputs = [
        ("run", 0, format!("{}{}", run.stdout, run.stderr)),
        ("runs", 2, text(&["runs"], 0)),
        ("status", 1, text(&["status"], 0)),
        ("budget", 1, text(&["budget"], 0)),
        (
            "budget charge",
            1,
            text(&["budget", "charge", "videos.list"], 75),
        ),
        ("run --dry-run", 1, text(&["run", "--dry-run"], 75)),
        ("video", 2, text(&["video", &video], 0)),
    ];
    for (what, at_least, output) in &outputs {
        assert_eq!(
            stray_forms(output),
            Vec::<String>::new(),
            "{what}: {output}"
        );
        assert!(
            times_in(output) >= *at_least,
            "{what} shows a time to the second: {output}"
        );
    }
}

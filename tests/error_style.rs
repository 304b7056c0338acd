//! Errors in what a person typed or wrote (usage, 2; configuration, 78) read like
//! clap's own: `error: ...`, a tip on its own line, no log timestamp. What went wrong
//! while working (1) stays a log event, and `--log-format json` keeps every failure a
//! JSON log line.

use serde_json::Value;

use crate::common::{PredicateBooleanExt, Scratch, contains, ends_with, starts_with};

/// A database to search: `budget charge` creates one without calling anything.
fn with_database() -> Scratch {
    let s = Scratch::new();
    s.cmd().args(["budget", "charge", "videos.list"]).run();
    s
}

/// Says `error: ` first, once, and nothing in the form of a log line.
fn assert_clap_style(stderr: &str) {
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(stderr.matches("error: ").count(), 1, "{stderr}");
    assert!(!stderr.contains("ERROR"), "no log line: {stderr}");
}

#[test]
fn a_bad_search_query_is_a_usage_error_in_clap_style_with_a_tip() {
    let s = with_database();
    let ran = s
        .cmd()
        .args(["search", "\"unclosed"])
        .expect_stderr("is not valid: ")
        .status(2)
        .stdout("")
        .stderr(starts_with(
            "error: the search query \"\\\"unclosed\" is not valid: ",
        ))
        // The tip on its own line.
        .stderr(contains("\n\n  tip: words are matched as typed"))
        .stderr(ends_with("\n\nFor more information, try '--help'.\n"))
        .run();
    assert_clap_style(&ran.stderr);
    // --json: the object says it on one line, tip included.
    let ran = s
        .cmd()
        .args(["search", "\"unclosed", "--json"])
        .expect_stderr("is not valid: ")
        .status(2)
        .run();
    let error = ran.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        error.contains("is not valid") && error.contains("words are matched as typed"),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
}

#[test]
fn with_json_logs_a_failure_stays_a_json_log_line() {
    let s = with_database();
    let ran = s
        .cmd()
        .args(["--log-format", "json", "search", "a AND"])
        .expect_stderr("is not valid: ")
        .status(2)
        .run();
    let line: Value = serde_json::from_str(ran.stderr.trim())
        .unwrap_or_else(|e| panic!("one JSON log line ({e}): {}", ran.stderr));
    assert_eq!(line["level"], "ERROR", "{line}");
    assert!(
        line["message"]
            .as_str()
            .is_some_and(|m| m.contains("is not valid")),
        "{line}"
    );
}

#[test]
fn typed_mistakes_and_configuration_errors_share_the_style() {
    let s = with_database();
    for (args, code, says) in [
        (&["runs", "--region", "UK"][..], 2, "did you mean GB?"),
        (&["export", "--until", "yesterday"][..], 2, "RFC 3339"),
        (&["--db", "nosuch.db", "status"][..], 78, "no such file"),
        (&["--costs", "nosuch.toml", "budget"][..], 78, "nosuch.toml"),
        (&["--api-key-file", "nokey", "run"][..], 78, "nokey"),
        (&["--api-key-file", "nokey", "crontab"][..], 78, "nokey"),
        (
            &[
                "--api-base",
                "www.example.test/youtube/v3",
                "run",
                "--dry-run",
            ][..],
            78,
            "https://",
        ),
    ] {
        let ran = s
            .cmd()
            .env("YOUTUBE_API_KEY", "AIzaSyA-test-key-0123456789abcdefghijk")
            .args(args)
            .expect_stderr(says)
            .status(code)
            .run();
        assert_clap_style(&ran.stderr);
        assert_eq!(
            ran.stderr.contains("For more information, try '--help'."),
            code == 2,
            "{args:?}: {}",
            ran.stderr
        );
    }
}

#[test]
fn a_failure_while_working_is_still_a_log_line() {
    let s = with_database();
    // An id never seen: exit 1 (docs/commands.md), what the database answered.
    s.cmd()
        .args(["video", "dQw4w9WgXcQ"])
        .expect_stderr("ERROR")
        .status(1)
        .stderr(starts_with("error: ").not())
        .run();
}

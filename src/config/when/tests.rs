//! Unit tests of `config/when.rs`.

use super::*;

fn at(s: &str) -> Secs {
    Secs::new(s.parse::<jiff::Timestamp>().map_or(0, |t| t.as_second()))
}

#[test]
fn the_three_forms_and_what_each_takes_in() {
    let now = at("2026-11-25T12:00:00Z");
    for (text, since, until) in [
        ("36h", "2026-11-24T00:00:00Z", "2026-11-24T00:00:00Z"),
        (" 7d ", "2026-11-18T12:00:00Z", "2026-11-18T12:00:00Z"),
        ("2026-11-01", "2026-11-01T00:00:00Z", "2026-11-01T23:59:59Z"),
        ("2026-11-30", "2026-11-30T00:00:00Z", "2026-11-30T23:59:59Z"),
        (
            "2026-11-01T08:00:00Z",
            "2026-11-01T08:00:00Z",
            "2026-11-01T08:00:00Z",
        ),
        (
            "2026-11-01T00:30:00-08:00",
            "2026-11-01T08:30:00Z",
            "2026-11-01T08:30:00Z",
        ),
    ] {
        let when = parse_when(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(when.since(now), at(since), "--since {text}");
        assert_eq!(when.until(now), at(until), "--until {text}");
    }
}

#[test]
fn anything_else_names_the_three_forms() {
    for text in [
        "",
        "yesterday",
        "2026-13-01",
        "2026-11",
        "0s",
        "-3h",
        "2026-11-01T25:00Z",
    ] {
        let err = parse_when(text).expect_err(text);
        assert!(
            err.contains("a duration back from now") && err.contains("RFC 3339"),
            "{text}: {err}"
        );
    }
}

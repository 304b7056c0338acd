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
        assert_eq!(when.since(now), Ok(at(since)), "--since {text}");
        assert_eq!(when.until(now), Ok(at(until)), "--until {text}");
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

#[test]
fn every_date_of_the_civil_range_means_what_it_says() {
    let now = at("2026-11-25T12:00:00Z");
    // 9999-12-31 and its last second lie beyond jiff::Timestamp's range: seconds
    // counted on the calendar hold them.
    let last_day_start = 253_402_214_400;
    for (text, since, until) in [
        ("9999-12-31", last_day_start, last_day_start + 86_399),
        (
            "9999-12-31T23:59:59Z",
            last_day_start + 86_399,
            last_day_start + 86_399,
        ),
        (
            "9999-12-31T00:00:00+01:00",
            last_day_start - 3600,
            last_day_start - 3600,
        ),
        ("0001-01-01", -62_135_596_800, -62_135_596_800 + 86_399),
        ("0001-01-01T00:00:00Z", -62_135_596_800, -62_135_596_800),
        ("1970-01-01", 0, 86_399),
        ("2000-02-29", 951_782_400, 951_782_400 + 86_399),
    ] {
        let when = parse_when(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(when.since(now), Ok(Secs::new(since)), "--since {text}");
        assert_eq!(when.until(now), Ok(Secs::new(until)), "--until {text}");
    }
    // The calendar's arithmetic agrees with jiff wherever jiff reaches.
    for date in [
        "1969-12-31",
        "1600-03-01",
        "0004-02-29",
        "9999-12-30",
        "-009999-01-03",
    ] {
        let d: jiff::civil::Date = date.parse().expect(date);
        let jiff = d
            .to_zoned(jiff::tz::TimeZone::UTC)
            .expect(date)
            .timestamp()
            .as_second();
        assert_eq!(day_start(d), jiff, "{date}");
    }
}

#[test]
fn a_duration_back_past_the_first_day_there_is_is_out_of_range() {
    let now = at("2026-11-25T12:00:00Z");
    let when = parse_when("18446744073709551615s").expect("a duration");
    assert!(when.since(now).is_err());
    let err = when.until(now).expect_err("out of range");
    assert!(
        err.to_string().contains("before the earliest time"),
        "{err}"
    );
    // A long one that stays in range is fine.
    assert!(parse_when("36500d").expect("a duration").since(now).is_ok());
}

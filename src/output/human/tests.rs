//! Unit tests of `output/human.rs`.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn durations_at_the_boundaries_of_each_form() {
    for (d, want) in [
        (Duration::ZERO, "0s"),
        (Duration::from_nanos(1), "1ms"),
        (Duration::from_micros(104_556), "105ms"),
        (ms(850), "850ms"),
        (ms(999), "999ms"),
        (Duration::from_micros(999_001), "1s"),
        (s(1), "1s"),
        (ms(1500), "2s"),
        (s(45), "45s"),
        (s(59), "59s"),
        (ms(59_001), "1m"),
        (s(60), "1m"),
        (s(250), "4m 10s"),
        (s(600), "10m"),
        (s(3599), "59m 59s"),
        (s(3600), "1h"),
        (s(3 * 3600 + 12 * 60 + 5), "3h 12m"),
        (s(86_397), "23h 59m"),
        (s(86_400), "24h"),
        (s(90_000), "25h"),
        (s(2 * 86_400 - 1), "47h 59m"),
        (s(2 * 86_400), "2d"),
        (s(2 * 86_400 + 3600), "2d 1h"),
        (s(36_500 * 86_400), "36500d"),
    ] {
        assert_eq!(duration(d), want, "{d:?}");
    }
}

#[test]
fn durations_never_use_other_forms() {
    for n in (0..200_000u64).step_by(997) {
        let text = duration(Duration::from_micros(n * 1_234_567));
        assert!(
            !text.contains('.') && !text.contains("µs") && !text.contains(" s"),
            "{text}"
        );
    }
}

#[test]
fn timestamps_are_utc_to_the_second() {
    assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
    assert_eq!(timestamp(1_795_455_707_999_999), "2026-11-23T17:41:47Z");
    assert_eq!(timestamp_s(1_795_455_707), "2026-11-23T17:41:47Z");
    assert_eq!(timestamp(-1), "1969-12-31T23:59:59Z");
}

#[test]
fn sizes_in_binary_units_at_the_boundaries_of_each_form() {
    for (bytes, want) in [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (10_188, "9.9 KiB"),
        (10_189, "10 KiB"),
        (548_864, "536 KiB"),
        (1_048_575, "1024 KiB"),
        (1_048_576, "1 MiB"),
        (3_650_722_201, "3.4 GiB"),
        (u64::MAX, "16 EiB"),
    ] {
        assert_eq!(size(bytes), want, "{bytes}");
    }
}

#[test]
fn counts_group_their_thousands() {
    for (n, shown) in [
        (0, "0"),
        (42, "42"),
        (999, "999"),
        (1_000, "1,000"),
        (311_784, "311,784"),
        (1_234_567, "1,234,567"),
        (-1_200, "-1,200"),
        (i64::MIN, "-9,223,372,036,854,775,808"),
    ] {
        assert_eq!(count(n), shown, "{n}");
    }
}

/// Every `i64` of seconds or microseconds is written as RFC 3339 or as far past/far
/// future: never jiff's `@…s` for what it cannot hold, never a panic.
#[test]
fn times_at_the_edges_of_what_can_be_written() {
    let s = |n: i64| utc(jiff::SignedDuration::from_secs(n));
    let us = |n: i64| utc(jiff::SignedDuration::from_micros(n));
    for (got, want) in [
        (s(0), "1970-01-01T00:00:00Z"),
        (s(1_795_455_707), "2026-11-23T17:41:47Z"),
        (us(1_795_455_707_250_000), "2026-11-23T17:41:47.25Z"),
        // The last second of 9999, past where jiff's `Timestamp` ends.
        (s(253_402_300_799), "9999-12-31T23:59:59Z"),
        (timestamp_s(253_402_300_799), "9999-12-31T23:59:59Z"),
        (timestamp(253_402_300_799_999_999), "9999-12-31T23:59:59Z"),
        (s(253_402_300_800), FAR_FUTURE),
        (s(-62_167_219_200), "0000-01-01T00:00:00Z"),
        (s(-62_167_219_201), FAR_PAST),
        (s(i64::MAX), FAR_FUTURE),
        (s(i64::MIN), FAR_PAST),
        (us(i64::MAX), FAR_FUTURE),
        (us(i64::MIN), FAR_PAST),
        (timestamp(i64::MIN), FAR_PAST),
        // What `prune --older-than 18446744073709551615s` once made its cutoff.
        (s(-9_223_372_035_058_954_626), FAR_PAST),
    ] {
        assert_eq!(got, want);
    }
}

#[test]
fn a_duration_beyond_a_hundred_years_says_so() {
    assert_eq!(duration(LONGEST), "36500d");
    assert_eq!(duration(LONGEST + s(1)), "more than 36500d");
    assert_eq!(duration(Duration::MAX), "more than 36500d");
}

proptest::proptest! {
    #[test]
    fn no_time_is_written_as_a_count(n in proptest::num::i64::ANY) {
        for text in [
            utc(jiff::SignedDuration::from_secs(n)),
            utc(jiff::SignedDuration::from_micros(n)),
            timestamp(n),
            timestamp_s(n),
        ] {
            proptest::prop_assert!(!text.contains('@'), "{n}: {text}");
            proptest::prop_assert!(
                text == FAR_PAST
                    || text == FAR_FUTURE
                    || text
                        .strip_suffix('Z')
                        .is_some_and(|t| t.len() >= 19 && t.parse::<jiff::civil::DateTime>().is_ok()),
                "{n}: {text}"
            );
        }
    }

    #[test]
    fn no_duration_is_absurd(secs in proptest::num::u64::ANY, nanos in 0u32..1_000_000_000) {
        let text = duration(Duration::new(secs, nanos));
        proptest::prop_assert!(text.len() <= "more than 36500d".len(), "{text}");
    }
}

//! Times and durations as text for people, in one form everywhere (DESIGN.md 2, "Text
//! output"): every command's text output and every log message use these, so that a
//! person reads `2026-11-23T17:41:47Z` and `3h 12m` wherever they look. JSON keeps its
//! own machine forms (RFC 3339 at full precision, fractional seconds).
//!
//! At the bottom of the crate: it imports nothing of trendsync, so every module can
//! use it.

use std::time::Duration;

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// A duration: below a second in milliseconds (`850ms`), then the two largest units
/// (`45s`, `4m 10s`, `3h 12m`, `23h 59m`, `47h 59m`), from two days on in days and
/// hours (`2d 1h`); a second unit that is 0 is left out (`10m`, `24h`, `3d`).
///
/// Rounded up, to the millisecond below a second and to the second above, so that a
/// wait is never shown as shorter than it is, nor as `0s` when it is not over; what is
/// finer than the two units shown is dropped (`3h 12m 5s` is `3h 12m`).
pub fn duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    let ms = d.as_nanos().div_ceil(1_000_000);
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let two = |big: u64, big_unit: &str, small: u64, small_unit: &str| {
        if small == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit} {small}{small_unit}")
        }
    };
    match secs {
        s if s < MINUTE => format!("{s}s"),
        s if s < HOUR => two(s / MINUTE, "m", s % MINUTE, "s"),
        s if s < 2 * DAY => two(s / HOUR, "h", s % HOUR / MINUTE, "m"),
        s => two(s / DAY, "d", s % DAY / HOUR, "h"),
    }
}

/// A moment, in microseconds since the Unix epoch, as RFC 3339 UTC to the second:
/// `2026-11-23T17:41:47Z` (the fraction is dropped, as `date` does).
pub fn timestamp(us: i64) -> String {
    timestamp_s(us.div_euclid(1_000_000))
}

/// [`timestamp`] of a moment in whole seconds since the Unix epoch.
pub fn timestamp_s(s: i64) -> String {
    jiff::Timestamp::from_second(s).map_or_else(|_| format!("@{s}s"), |t| t.to_string())
}

#[cfg(test)]
mod tests {
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
}

//! `WHEN` on the command line (`--since`, `--until` of `export` and `runs`): a
//! duration back from now (`36h`), a UTC date (`2026-11-01`) or an RFC 3339 time
//! (`2026-11-01T08:00:00Z`). A date is its whole UTC day: its start for `--since`, its
//! last second for `--until`, so that `--since 2026-11-01 --until 2026-11-30` is November.

use std::time::Duration;

use crate::clock::Secs;

/// A moment as the user wrote it, resolved against the command's clock by
/// [`When::since`] or [`When::until`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// This long before now.
    Ago(Duration),
    /// A whole UTC day.
    Day(jiff::civil::Date),
    /// An instant.
    At(jiff::Timestamp),
}

const DAY_S: i64 = 86_400;

impl When {
    /// The first second `--since WHEN` takes in.
    pub(crate) fn since(self, now: Secs) -> Secs {
        match self {
            When::Ago(d) => ago(now, d),
            When::Day(date) => Secs::new(day_start(date)),
            When::At(t) => Secs::new(t.as_second()),
        }
    }

    /// The last second `--until WHEN` takes in (inclusive).
    pub(crate) fn until(self, now: Secs) -> Secs {
        match self {
            When::Ago(d) => ago(now, d),
            When::Day(date) => Secs::new(day_start(date).saturating_add(DAY_S - 1)),
            When::At(t) => Secs::new(t.as_second()),
        }
    }
}

fn ago(now: Secs, d: Duration) -> Secs {
    Secs::new(
        now.as_i64()
            .saturating_sub(i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
    )
}

/// Seconds since the Unix epoch at the start of `date` in UTC.
fn day_start(date: jiff::civil::Date) -> i64 {
    // Every civil date jiff accepts (years -9999 to 9999) has a UTC midnight.
    date.to_zoned(jiff::tz::TimeZone::UTC)
        .map_or(i64::MIN, |z| z.timestamp().as_second())
}

/// Parses `WHEN`, saying the three forms it takes when it is none of them.
pub(crate) fn parse_when(text: &str) -> Result<When, String> {
    let t = text.trim();
    if let Ok(at) = t.parse::<jiff::Timestamp>() {
        return Ok(When::At(at));
    }
    if t.len() == 10
        && let Ok(date) = t.parse::<jiff::civil::Date>()
    {
        return Ok(When::Day(date));
    }
    if t.starts_with(|c: char| c.is_ascii_digit())
        && let Ok(d) = super::parse_duration(t)
    {
        return Ok(When::Ago(d));
    }
    Err(format!(
        "\"{text}\" is not a time; expected a duration back from now (36h, 7d), a UTC date \
         (2026-11-01) or an RFC 3339 time (2026-11-01T08:00:00Z)"
    ))
}

#[cfg(test)]
mod tests;

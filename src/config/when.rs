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
    /// An instant, as Unix seconds: kept as seconds rather than a `jiff::Timestamp`,
    /// whose range ends a day before the last civil date (9999-12-31T23:59:59Z is a
    /// valid RFC 3339 time that it cannot hold).
    At(i64),
}

const DAY_S: i64 = 86_400;

/// A `WHEN` that names a time before the first one trendsync can write down (a
/// duration back from now that reaches past year -9999).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0} back from now is before the earliest time there is (-9999-01-01); give a shorter \
     duration, or leave the option out for no bound"
)]
pub struct OutOfRange(pub String);

impl When {
    /// The first second `--since WHEN` takes in.
    pub(crate) fn since(self, now: Secs) -> Result<Secs, OutOfRange> {
        Ok(match self {
            When::Ago(d) => ago(now, d)?,
            When::Day(date) => Secs::new(day_start(date)),
            When::At(t) => Secs::new(t),
        })
    }

    /// The last second `--until WHEN` takes in (inclusive).
    pub(crate) fn until(self, now: Secs) -> Result<Secs, OutOfRange> {
        Ok(match self {
            When::Ago(d) => ago(now, d)?,
            When::Day(date) => Secs::new(day_start(date) + DAY_S - 1),
            When::At(t) => Secs::new(t),
        })
    }
}

fn ago(now: Secs, d: Duration) -> Result<Secs, OutOfRange> {
    let back = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let earliest = day_start(jiff::civil::Date::MIN);
    match now.as_i64().checked_sub(back) {
        Some(t) if t >= earliest => Ok(Secs::new(t)),
        _ => Err(OutOfRange(format!("{}s", d.as_secs()))),
    }
}

/// Seconds since the Unix epoch at the start of `date` in UTC: plain arithmetic on
/// the civil calendar, so every date jiff accepts (years -9999 to 9999) has one, the
/// last ones included, which a `jiff::Timestamp` cannot hold.
fn day_start(date: jiff::civil::Date) -> i64 {
    days_from_civil(
        i64::from(date.year()),
        i64::from(date.month()),
        i64::from(date.day()),
    ) * DAY_S
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// An RFC 3339 time as Unix seconds, over the whole civil range: what
/// `jiff::Timestamp` parses, and the times of the last day of 9999 (or the first of
/// -9999) that it cannot hold. `None` for anything else, a time without an offset
/// included (it would name no instant).
fn rfc3339_secs(text: &str) -> Option<i64> {
    use jiff::fmt::temporal::Pieces;
    if let Ok(at) = text.parse::<jiff::Timestamp>() {
        return Some(at.as_second());
    }
    let pieces = Pieces::parse(text).ok()?;
    let time = pieces.time()?;
    let offset = i64::from(pieces.offset()?.to_numeric_offset().seconds());
    if pieces.time_zone_annotation().is_some() {
        return None;
    }
    let clock =
        i64::from(time.hour()) * 3600 + i64::from(time.minute()) * 60 + i64::from(time.second());
    Some(day_start(pieces.date()) + clock - offset)
}

/// Parses `WHEN`, saying the three forms it takes when it is none of them.
pub(crate) fn parse_when(text: &str) -> Result<When, String> {
    let t = text.trim();
    if t.len() == 10
        && let Ok(date) = t.parse::<jiff::civil::Date>()
    {
        return Ok(When::Day(date));
    }
    if t.contains(['T', 't', ' '])
        && let Some(at) = rfc3339_secs(t)
    {
        return Ok(When::At(at));
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

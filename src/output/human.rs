//! Times, durations and sizes as text for people, in one form everywhere (docs/commands.md, "Text
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

/// The longest duration [`duration`] writes in figures: a hundred years of days.
pub(crate) const LONGEST: Duration = Duration::from_secs(36_500 * DAY);

/// A duration: below a second in milliseconds (`850ms`), then the two largest units
/// (`45s`, `4m 10s`, `3h 12m`, `23h 59m`, `47h 59m`), from two days on in days and
/// hours (`2d 1h`); a second unit that is 0 is left out (`10m`, `24h`, `3d`).
///
/// Rounded up, to the millisecond below a second and to the second above, so that a
/// wait is never shown as shorter than it is, nor as `0s` when it is not over; what is
/// finer than the two units shown is dropped (`3h 12m 5s` is `3h 12m`). Beyond a
/// hundred years (`36500d`), which no wait or age of the tool's reaches but a wrong
/// clock or a hostile value can, `more than 36500d`.
pub(crate) fn duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    if d > LONGEST {
        return format!("more than {}", duration(LONGEST));
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
/// `2026-11-23T17:41:47Z` (the fraction is dropped, as `date` does). Total: see
/// [`utc`].
pub(crate) fn timestamp(us: i64) -> String {
    timestamp_s(us.div_euclid(1_000_000))
}

/// [`timestamp`] of a moment in whole seconds since the Unix epoch.
pub(crate) fn timestamp_s(s: i64) -> String {
    utc(jiff::SignedDuration::from_secs(s))
}

/// What a moment before `0000-01-01T00:00:00Z` is written as: RFC 3339 has no year
/// for it.
pub(crate) const FAR_PAST: &str = "far past";
/// What a moment after `9999-12-31T23:59:59.999999999Z` is written as.
pub(crate) const FAR_FUTURE: &str = "far future";

/// The moment `since_epoch` after the Unix epoch as RFC 3339 UTC, its fraction of a
/// second written only when there is one (`2026-11-23T17:41:47Z`,
/// `2026-11-23T17:41:47.25Z`). Total over every `i64` of seconds or microseconds: the
/// years RFC 3339 has, 0000 to 9999, are written in full, up to the year's last
/// second (beyond where `jiff::Timestamp` ends, a day earlier); what is outside them is
/// [`FAR_PAST`] or [`FAR_FUTURE`], never a bare count of seconds.
pub(crate) fn utc(since_epoch: jiff::SignedDuration) -> String {
    let epoch = jiff::civil::date(1970, 1, 1).at(0, 0, 0, 0);
    match epoch.checked_add(since_epoch) {
        Ok(t) if t.year() >= 0 => format!("{t}Z"),
        Ok(_) => FAR_PAST.to_owned(),
        Err(_) if since_epoch.is_negative() => FAR_PAST.to_owned(),
        Err(_) => FAR_FUTURE.to_owned(),
    }
}

/// A count with its thousands grouped, as people read it: `311,784`, `-1,200`, `42`.
pub(crate) fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A size in bytes, in binary units as `ls -lh` and `du -h` count them: `0 B`,
/// `512 B`, `536 KiB`, `1.5 MiB`, `3.4 GiB`. One decimal below 10 of a unit, none
/// from 10 on; rounded to the nearest.
pub(crate) fn size(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut unit = 0;
    let mut scale = 1u64;
    while unit + 1 < UNITS.len() && bytes / scale >= 1024 {
        scale *= 1024;
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes} B");
    }
    // Tenths of the unit, rounded to the nearest, in integers so that no size is
    // misread through a float.
    let tenths = (u128::from(bytes) * 10 + u128::from(scale) / 2) / u128::from(scale);
    if tenths < 100 {
        let (whole, tenth) = (tenths / 10, tenths % 10);
        if tenth == 0 {
            format!("{whole} {}", UNITS[unit])
        } else {
            format!("{whole}.{tenth} {}", UNITS[unit])
        }
    } else {
        format!("{} {}", (tenths + 5) / 10, UNITS[unit])
    }
}

#[cfg(test)]
mod tests;

//! A policy's window: a sliding duration (docs/budget.md, "How the budget counts"), or the
//! calendar day of a time zone (3.9), the upstream's own day, from one local midnight to
//! the next.
//!
//! Both are described the same way to the code that counts: at an instant `now`, an
//! entry counts while it was made after [`Span::cutoff_us`], and an entry made at `at`
//! leaves the window at [`Window::leaves`]. For a sliding window that is `at + length`;
//! for a day it is the next local midnight, whenever in the day the entry was made.
//! The daylight-saving rules are the time-zone database's (jiff), never written here.

use std::fmt;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

use super::{from_micros, micros};

/// A time zone by its IANA name.
#[derive(Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl Zone {
    /// The zone named `name` (`America/Los_Angeles`), from the bundled database.
    pub fn get(name: &str) -> Result<Zone, String> {
        TimeZone::get(name)
            .map(|tz| Zone {
                name: name.to_owned(),
                tz,
            })
            .map_err(|_| {
                format!(
                    "\"{name}\" is not a time zone the time-zone database knows; use an IANA name such as \"America/Los_Angeles\""
                )
            })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The local midnight that starts the day `days` after the one holding `now_us`
    /// (0: today's, 1: tomorrow's, -1: yesterday's), microseconds since the epoch.
    pub fn midnight(&self, now_us: i64, days: i64) -> i64 {
        let start = Timestamp::from_microsecond(now_us)
            .ok()
            .map(|ts| ts.to_zoned(self.tz.clone()))
            .and_then(|z| shift_days(&z, days))
            .and_then(|z| z.start_of_day().ok());
        // Out of the time-zone database's range (years ±9999): a plain day of UTC.
        start.map_or_else(
            || (now_us.div_euclid(DAY_US) + days) * DAY_US,
            |z| z.timestamp().as_microsecond(),
        )
    }
}

const DAY_US: i64 = 86_400_000_000;

fn shift_days(z: &Zoned, days: i64) -> Option<Zoned> {
    if days == 0 {
        return Some(z.clone());
    }
    z.checked_add(jiff::Span::new().try_days(days).ok()?).ok()
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name)
    }
}

/// How long a policy counts an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Window {
    /// The trailing duration before now (3.1).
    Sliding(Duration),
    /// The calendar day of a time zone that now falls in (3.9).
    Day(Zone),
}

/// A window as it stands at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Entries made at or before this instant no longer count.
    pub cutoff_us: i64,
    /// For a calendar day, the next midnight, when every entry leaves at once.
    pub end_us: Option<i64>,
}

impl Span {
    /// When an entry made at `at_us` (and still counted) leaves the window.
    pub(crate) fn leaves(&self, at_us: i64, window: &Window) -> i64 {
        match (self.end_us, window) {
            (Some(end), _) => end,
            (None, Window::Sliding(d)) => at_us.saturating_add(micros(*d)),
            (None, Window::Day(_)) => at_us,
        }
    }
}

impl From<Duration> for Window {
    fn from(d: Duration) -> Window {
        Window::Sliding(d)
    }
}

/// The longest a calendar day can be: 26 hours, in a zone such as `Antarctica/Troll`
/// whose clocks go back two hours.
const LONGEST_DAY: Duration = Duration::from_secs(26 * 3600);

impl Window {
    /// `"day@<zone>"` or a duration's text, as the configuration files write them.
    pub(crate) const DAY_PREFIX: &'static str = "day@";

    /// The window at `now_us`.
    pub fn at(&self, now_us: i64) -> Span {
        match self {
            Window::Sliding(d) => Span {
                cutoff_us: now_us.saturating_sub(micros(*d)),
                end_us: None,
            },
            Window::Day(zone) => Span {
                cutoff_us: zone.midnight(now_us, 0) - 1,
                end_us: Some(zone.midnight(now_us, 1)),
            },
        }
    }

    /// When an entry made at `at_us` leaves the window, seen at `now_us`.
    pub(crate) fn leaves(&self, at_us: i64, now_us: i64) -> i64 {
        self.at(now_us).leaves(at_us, self)
    }

    /// The window's length at `now_us`: the duration, or that day's (82,800, 86,400
    /// or 90,000 seconds in a zone with daylight saving).
    pub fn length_at(&self, now_us: i64) -> Duration {
        match self {
            Window::Sliding(d) => *d,
            Window::Day(zone) => from_micros(zone.midnight(now_us, 1) - zone.midnight(now_us, 0)),
        }
    }

    /// The longest the window can be: how long an entry may have to be kept.
    pub fn longest(&self) -> Duration {
        match self {
            Window::Sliding(d) => *d,
            Window::Day(_) => LONGEST_DAY,
        }
    }

    /// The zone of a calendar day.
    pub(crate) fn zone(&self) -> Option<&Zone> {
        match self {
            Window::Sliding(_) => None,
            Window::Day(zone) => Some(zone),
        }
    }

    /// The window for the Redis script (`prelude.lua`): microseconds for a sliding
    /// window; for a day, `d` and four local midnights around this host's `now_us`
    /// (today's, tomorrow's, yesterday's and the day after's), from which the script
    /// takes the day that its own clock falls in.
    pub(crate) fn script_arg(&self, now_us: i64) -> String {
        match self {
            Window::Sliding(d) => micros(*d).to_string(),
            Window::Day(zone) => {
                let m = |days| zone.midnight(now_us, days);
                // Its own day first: the script reads the other two only when Redis
                // TIME falls outside it (`span` in prelude.lua).
                format!("d{},{},{},{}", m(0), m(1), m(-1), m(2))
            }
        }
    }
}

impl fmt::Display for Window {
    /// As the configuration files write it: `"24h"`, `"10m"`, `"90s"` or
    /// `"day@America/Los_Angeles"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Window::Sliding(d) => {
                let s = d.as_secs();
                match (s % 3600, s % 60) {
                    _ if d.subsec_nanos() != 0 => write!(f, "{}ms", d.as_millis()),
                    (0, _) => write!(f, "{}h", s / 3600),
                    (_, 0) => write!(f, "{}m", s / 60),
                    _ => write!(f, "{s}s"),
                }
            }
            Window::Day(zone) => write!(f, "{}{}", Window::DAY_PREFIX, zone.name()),
        }
    }
}

#[cfg(test)]
mod tests;

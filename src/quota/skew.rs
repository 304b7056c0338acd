//! The limiter's clock checked against a second one (docs/budget.md, "The clock"): the
//! limiter trusts its clock (the host's for the embedded limiter, Redis `TIME` otherwise),
//! and a clock that stepped a day ahead would let a whole day's units through again. Each
//! upstream answer says when it was made (HTTP `Date`, to the second), so every call is a
//! reading of that second clock. This module holds the arithmetic of one reading and the
//! record of the last skew seen per clock, in the `quota_clock_skew` table of the database
//! (schema step 8, in `quota/schema.rs`). It knows nothing of HTTP: the caller hands it the
//! answer's second.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rusqlite::params;

use crate::clock::{Micros, Secs};
use crate::sqlite::{Db, Durability, Migration};

/// The most two clocks may disagree before the limiter's is taken for wrong.
pub(crate) const MAX_SKEW: Duration = Duration::from_secs(300);

const MAX_SKEW_US: i64 = 300_000_000;

/// Whose clock a limiter decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimiterClock {
    /// The host's: the embedded limiter.
    Host,
    /// The Redis server's `TIME`.
    Redis,
}

impl LimiterClock {
    /// The word stored in the table and used as the metrics' label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LimiterClock::Host => "host",
            LimiterClock::Redis => "redis",
        }
    }

    fn from_db(word: &str) -> Option<LimiterClock> {
        match word {
            "host" => Some(LimiterClock::Host),
            "redis" => Some(LimiterClock::Redis),
            _ => None,
        }
    }

    /// The clock as a sentence names it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            LimiterClock::Host => "this host's clock",
            LimiterClock::Redis => "the Redis server's clock (TIME)",
        }
    }

    /// What to do about it.
    pub(crate) fn fix(self) -> &'static str {
        match self {
            LimiterClock::Host => {
                "fix this host's clock (NTP), since the embedded limiter counts its window by it"
            }
            LimiterClock::Redis => {
                "fix the clock of the Redis server's host (NTP), since the limiter counts its window by Redis TIME"
            }
        }
    }
}

/// One comparison: the limiter's clock when it decided the charge before a call, how
/// long from just before that charge until the call's answer, and the second the
/// answer's `Date` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub limiter_at: Micros,
    pub elapsed: Duration,
    pub date: Secs,
}

impl Reading {
    /// How far the limiter's clock is ahead of the other (behind when negative): the
    /// answer was made between the charge and its arrival, at a time within the
    /// second `Date` names, so the skew lies in `low_us..=high_us`.
    pub fn measure(&self) -> Measured {
        let date_us = self.date.to_micros().as_i64();
        let limiter_at_us = self.limiter_at.as_i64();
        let elapsed = super::micros(self.elapsed);
        let low_us = limiter_at_us.saturating_sub(date_us.saturating_add(1_000_000));
        let high_us = limiter_at_us
            .saturating_add(elapsed)
            .saturating_sub(date_us);
        Measured {
            low_us,
            high_us,
            upstream_at_us: date_us.saturating_add(500_000),
        }
    }
}

/// The skew one reading allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub low_us: i64,
    pub high_us: i64,
    /// The other clock's time, as near as its second says.
    pub upstream_at_us: i64,
}

impl Measured {
    /// Over [`MAX_SKEW`] whichever moment of the interval the answer was made at:
    /// neither latency nor the second's rounding can explain it.
    pub fn too_far(&self) -> bool {
        self.low_us > MAX_SKEW_US || self.high_us < -MAX_SKEW_US
    }

    /// The middle of what the reading allows, kept within [`MAX_SKEW`] when the
    /// reading does not show more (a slow answer widens the interval, not the skew).
    pub(crate) fn estimate_us(&self) -> i64 {
        let middle = self.low_us / 2 + self.high_us / 2;
        if self.too_far() {
            middle
        } else {
            middle.clamp(-MAX_SKEW_US, MAX_SKEW_US)
        }
    }
}

/// The last skew seen on one clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skew {
    pub clock: LimiterClock,
    /// The limiter's clock minus the upstream's, microseconds.
    pub skew_us: i64,
    /// The upstream's time when it was seen, microseconds since the Unix epoch.
    pub measured_at_us: i64,
}

impl Skew {
    pub fn of(clock: LimiterClock, measured: &Measured) -> Skew {
        Skew {
            clock,
            skew_us: measured.estimate_us(),
            measured_at_us: measured.upstream_at_us,
        }
    }

    /// Over [`MAX_SKEW`]: this clock is not to be trusted until a run sees it agree.
    pub fn too_far(&self) -> bool {
        self.skew_us.unsigned_abs() > MAX_SKEW_US.unsigned_abs()
    }

    pub(crate) fn seconds(&self) -> f64 {
        self.skew_us as f64 / 1e6
    }

    /// "this host's clock is 25h ahead of the upstream's", "… 200ms behind …".
    pub(crate) fn describe(&self) -> String {
        let by = Duration::from_micros(self.skew_us.unsigned_abs());
        let way = if self.skew_us < 0 {
            "behind"
        } else {
            "ahead of"
        };
        format!(
            "{} is {} {way} the upstream's",
            self.clock.name(),
            amount(by)
        )
    }
}

/// This host's clock and Redis `TIME` are too far apart for a calendar-day window to
/// be counted: the host sends the midnights of the days around its own clock, and
/// Redis `TIME` fell in none of them (docs/alerts.md: a clock stop, never a script
/// error). One of the two clocks is wrong, and the limiter alone cannot tell which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClocksApart {
    /// This host's clock when it sent the midnights.
    pub host_at: Micros,
    /// Redis `TIME` when the script read it.
    pub limiter_at: Micros,
}

impl ClocksApart {
    /// The Redis server's clock minus this host's, microseconds.
    pub(crate) fn apart_us(&self) -> i64 {
        self.limiter_at
            .as_i64()
            .saturating_sub(self.host_at.as_i64())
    }

    /// The clock the last skews recorded point at, with the record that says so:
    /// one that agreed with the upstream when last compared leaves the other; one
    /// found off the upstream's in the direction of the gap is itself the one. `None`
    /// when no record says, or two say different things. A record is as old as its
    /// time says: a clock may have moved since.
    pub(crate) fn suspect(&self, recorded: &[Skew]) -> Option<(LimiterClock, Skew)> {
        let apart = self.apart_us();
        let mut found: Option<(LimiterClock, Skew)> = None;
        for r in recorded {
            // How the recorded clock leans: Redis ahead of this host is Redis ahead
            // of the upstream, or this host behind it.
            let leans = match r.clock {
                LimiterClock::Redis => r.skew_us.signum() == apart.signum(),
                LimiterClock::Host => r.skew_us.signum() == -apart.signum(),
            };
            let other = match r.clock {
                LimiterClock::Redis => LimiterClock::Host,
                LimiterClock::Host => LimiterClock::Redis,
            };
            let off = if !r.too_far() {
                other
            } else if leans {
                r.clock
            } else {
                continue;
            };
            match found {
                Some((clock, _)) if clock != off => return None,
                Some(_) => {}
                None => found = Some((off, *r)),
            }
        }
        found
    }

    /// What to do, with the hint of the skews `recorded` when they give one.
    pub(crate) fn advice(&self, recorded: &[Skew]) -> String {
        const COMPARE: &str = "compare each with the upstream's time (the Date of its answers) or an NTP server, and fix the one that is off";
        match self.suspect(recorded) {
            None => format!("one of them is wrong: {COMPARE}"),
            Some((off, r)) => {
                let by = amount(Duration::from_micros(r.skew_us.unsigned_abs()));
                let way = if r.skew_us < 0 { "behind" } else { "ahead of" };
                let was = if r.too_far() {
                    format!("was {by} {way} the upstream's")
                } else {
                    format!("agreed with the upstream's ({by} {way} it)")
                };
                format!(
                    "{} {was} when last compared, at {}: {} is likely the one to fix (NTP); the clocks may have moved since, so if in doubt {COMPARE}",
                    r.clock.name(),
                    crate::output::human::timestamp(r.measured_at_us),
                    off.name()
                )
            }
        }
    }
}

impl fmt::Display for ClocksApart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let apart = self.apart_us();
        write!(
            f,
            "the Redis server's clock (TIME, {}) is {} {} this host's clock ({}): too far apart for a calendar-day window, whose days this host names by its clock and Redis counts by its own",
            crate::output::human::timestamp(self.limiter_at.as_i64()),
            amount(Duration::from_micros(apart.unsigned_abs())),
            if apart < 0 { "behind" } else { "ahead of" },
            crate::output::human::timestamp(self.host_at.as_i64()),
        )
    }
}

/// A skew for people, in the one form durations take (`850ms`, `6m 41s`, `25h`).
pub(crate) fn amount(d: Duration) -> String {
    crate::output::human::duration(d)
}

/// The record could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{doing} in {}: {reason}", path.display())]
pub struct SkewError {
    path: PathBuf,
    doing: &'static str,
    reason: String,
}

impl SkewError {
    /// The file could not be opened to record the skew.
    pub(crate) fn opening(path: &Path, e: &crate::sqlite::OpenError) -> SkewError {
        fail(path, "recording the clock skew")(crate::error::chain(e))
    }
}

fn fail(path: &Path, doing: &'static str) -> impl FnOnce(String) -> SkewError + use<> {
    let path = path.to_path_buf();
    move |reason| SkewError {
        path,
        doing,
        reason,
    }
}

/// Records `skew` as the last seen on its clock, in the database at `db`, laid out by
/// `file` (the quota's own steps brought forward first, as the limiter does: never a
/// data step of the store's).
pub(crate) fn record(db: &Db, file: &[Migration], skew: &Skew) -> Result<(), SkewError> {
    const DOING: &str = "recording the clock skew";
    let path = db.path();
    db.make_writable()
        .map_err(|e| fail(path, DOING)(crate::error::chain(&e)))?;
    let conn = db
        .lock_durable(Durability::Full)
        .map_err(|e| fail(path, DOING)(e.to_string()))?;
    crate::sqlite::migrate_own(&conn, path, file, super::schema::STEPS)
        .map_err(|e| fail(path, DOING)(crate::error::chain(&e)))?;
    conn.execute(
        "INSERT INTO quota_clock_skew (clock, skew_us, measured_at_us) VALUES (?1, ?2, ?3)
         ON CONFLICT (clock) DO UPDATE
         SET skew_us = excluded.skew_us, measured_at_us = excluded.measured_at_us",
        params![skew.clock.as_str(), skew.skew_us, skew.measured_at_us],
    )
    .map_err(|e| fail(path, DOING)(e.to_string()))?;
    Ok(())
}

/// The last skew seen on each clock, read without writing: none when the database
/// does not exist or predates the record.
pub(crate) fn recorded(db: Option<&Db>) -> Result<Vec<Skew>, SkewError> {
    const DOING: &str = "reading the clock skew";
    let Some(db) = db else {
        return Ok(Vec::new());
    };
    let read = || -> rusqlite::Result<Vec<Skew>> {
        let conn = db.lock();
        let present = conn
            .prepare(
                "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'quota_clock_skew'",
            )?
            .exists([])?;
        if !present {
            return Ok(Vec::new());
        }
        let mut rows = conn.prepare(
            "SELECT clock, skew_us, measured_at_us FROM quota_clock_skew ORDER BY clock",
        )?;
        let all = rows.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        let mut skews = Vec::new();
        for row in all {
            let (clock, skew_us, measured_at_us) = row?;
            // A clock this build does not know is another build's business.
            if let Some(clock) = LimiterClock::from_db(&clock) {
                skews.push(Skew {
                    clock,
                    skew_us,
                    measured_at_us,
                });
            }
        }
        Ok(skews)
    };
    read().map_err(|e| fail(db.path(), DOING)(e.to_string()))
}

/// The last skew seen on `clock`, if any.
pub fn recorded_for(db: Option<&Db>, clock: LimiterClock) -> Result<Option<Skew>, SkewError> {
    Ok(recorded(db)?.into_iter().find(|s| s.clock == clock))
}

/// The newest entry of a window was made at `newest_us`, after `now_us`: the
/// limiter's clock went back past it. Logged, since the window counts that entry
/// until it leaves by the clock that made it, and the next run's check of the clock
/// says which one was wrong.
/// Said once per process: every charge until that entry leaves would say it again.
pub(crate) fn note_clock_went_back(clock: LimiterClock, policy: &str, newest_us: i64, now_us: i64) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if SAID.swap(true, Ordering::Relaxed) {
        return;
    }
    tracing::warn!(
        clock = clock.as_str(),
        "{} went back: the window of \"{policy}\" holds an entry made at {}, {} after now ({}); the window counts it until it leaves by the clock that made it. If the clock was wrong then, the budget was overspent: check the clocks",
        clock.name(),
        crate::output::human::timestamp(newest_us),
        amount(Duration::from_micros(newest_us.abs_diff(now_us))),
        crate::output::human::timestamp(now_us),
    );
}

#[cfg(test)]
mod tests;

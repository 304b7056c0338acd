//! The host's wall clock, read in one place, and the clock every decision by time
//! reads, passed down from the front end so that a test can set the time instead of
//! sleeping (as governor's fake clock and redis-cell's store do).
//!
//! A time is typed by its unit: [`Micros`] (what the limiter, the journal and the
//! clock check decide by) and [`Secs`] (what the store keeps), each an instant since
//! the Unix epoch, so that seconds and microseconds cannot be mixed by accident. The
//! conversions are explicit; an `i64` appears only at the edges (SQL, Redis, JSON).
//! Lengths of time stay [`std::time::Duration`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An instant: microseconds since the Unix epoch (negative before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Micros(i64);

impl Micros {
    pub const fn new(us: i64) -> Micros {
        Micros(us)
    }

    /// Microseconds since the Unix epoch, for SQL, Redis and JSON.
    pub const fn as_i64(self) -> i64 {
        self.0
    }

    /// The whole second this instant falls in (rounding down, also before 1970).
    pub const fn to_secs(self) -> Secs {
        Secs(self.0.div_euclid(1_000_000))
    }

    /// This instant moved `d` later, saturating at the end of the representable time.
    pub fn after(self, d: Duration) -> Micros {
        Micros(self.0.saturating_add(duration_us(d)))
    }

    /// This instant moved `d` earlier, saturating at the start of the representable
    /// time.
    pub fn before(self, d: Duration) -> Micros {
        Micros(self.0.saturating_sub(duration_us(d)))
    }

    /// How long after `earlier` this instant is; zero when it is not after it.
    pub fn since(self, earlier: Micros) -> Duration {
        Duration::from_micros(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

/// An instant to the second: seconds since the Unix epoch (negative before it), as
/// the store keeps times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Secs(i64);

impl Secs {
    pub const fn new(s: i64) -> Secs {
        Secs(s)
    }

    /// Seconds since the Unix epoch, for SQL and JSON.
    pub const fn as_i64(self) -> i64 {
        self.0
    }

    /// The first microsecond of this second.
    pub const fn to_micros(self) -> Micros {
        Micros(self.0.saturating_mul(1_000_000))
    }
}

/// `d` in whole microseconds, saturating.
fn duration_us(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Where a command, its run and its limiter read the time. The front end makes one
/// for each command ([`system`]) and passes it down; a test passes a [`ManualClock`],
/// or a [`SystemClock`] where it wants real time.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> Micros;
}

/// The host's wall clock, to pass down: made once per command by the front end.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// The host's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Micros {
        // The one read of the wall clock below the log stamp: everything else is
        // handed this clock.
        #[allow(clippy::disallowed_methods)]
        let now = SystemTime::now();
        // 0 before 1970: no host that runs this is set so far back.
        Micros(now.duration_since(UNIX_EPOCH).map_or(0, duration_us))
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn starting_at(at: Micros) -> ManualClock {
        ManualClock(AtomicI64::new(at.0))
    }

    pub fn set(&self, at: Micros) {
        self.0.store(at.0, Ordering::SeqCst);
    }

    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(duration_us(by), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Micros {
        Micros(self.0.load(Ordering::SeqCst))
    }
}

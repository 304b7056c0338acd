//! The host's wall clock, read in one place, and the clock the embedded limiter
//! decides by, passed in so that a test can set the time instead of sleeping (as
//! governor's fake clock and redis-cell's store do).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch on this host's clock (0 before 1970): what
/// [`SystemClock`] reads, and what tests use for real time. Product code reads the
/// clock it is given.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Where a command, its run and its limiter read the time, in microseconds since the
/// Unix epoch. The front end makes one for each command ([`system`]) and passes it
/// down; a test passes a [`ManualClock`].
pub trait Clock: Send + Sync + fmt::Debug {
    fn now_us(&self) -> i64;

    /// Whole seconds since the Unix epoch.
    fn now_s(&self) -> i64 {
        self.now_us().div_euclid(1_000_000)
    }
}

/// The host's wall clock, to pass down.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// The host's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        now_us()
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn starting_at(us: i64) -> ManualClock {
        ManualClock(AtomicI64::new(us))
    }

    pub fn set(&self, us: i64) {
        self.0.store(us, Ordering::SeqCst);
    }

    pub fn advance(&self, us: i64) {
        self.0.fetch_add(us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

//! The limiter's clock against the upstream's (docs/budget.md, "The clock"): each answer's
//! `Date` is compared with the limiter's time of the charge before it. Too far apart, the
//! run stops before its next call, since the budget's window cannot be trusted on that
//! clock; a clock found too far by an earlier run is checked with one call before any other
//! is made.

use crate::sqlite::Db;
use std::sync::atomic::{AtomicBool, Ordering};

use super::outcome::Stop;
use super::stops::Stops;
use crate::quota::skew::{self, LimiterClock, Reading, Skew};

/// The limiter's clock is too far from the upstream's: the run has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooFar;

/// What a run knows of the limiter's clock.
pub(super) struct ClockCheck {
    /// The last skew recorded was too far: until an answer agrees, one call at a time,
    /// so that at most one is made on a wrong clock.
    distrusted: AtomicBool,
    /// Held from a charge until its answer is checked while the clock is distrusted.
    one_at_a_time: tokio::sync::Mutex<()>,
    /// The run has recorded a reading (one a run is enough to show the skew).
    recorded: AtomicBool,
    /// The run stopped on a skew: said and recorded once.
    stopped: AtomicBool,
    /// An answer with no readable `Date` has been said, once a run.
    undated_said: AtomicBool,
    /// For the run's log lines.
    run_id: String,
    /// The database the skew is recorded in: the command's connection.
    db: Db,
}

impl ClockCheck {
    pub(super) fn new(run_id: String, db: Db) -> ClockCheck {
        ClockCheck {
            distrusted: AtomicBool::new(false),
            one_at_a_time: tokio::sync::Mutex::new(()),
            recorded: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            undated_said: AtomicBool::new(false),
            run_id,
            db,
        }
    }

    /// Reads the last skew recorded on the limiter's `clock`: one too far makes the
    /// run check the clock with its first call before any other. A record that cannot
    /// be read is taken for one too far: the check costs only waiting for one call.
    pub(super) async fn distrust_if_skewed(&self, clock: Option<LimiterClock>) {
        let Some(clock) = clock else {
            return;
        };
        let db = self.db.clone();
        let found = tokio::task::spawn_blocking(move || skew::recorded_for(Some(&db), clock))
            .await
            .map_err(|e| e.to_string())
            .and_then(|read| read.map_err(|e| e.to_string()));
        let why = match found {
            Ok(Some(skew)) if skew.too_far() => format!(
                "{} when last compared, at {}",
                skew.describe(),
                crate::output::human::timestamp(skew.measured_at_us)
            ),
            Ok(_) => return,
            Err(e) => format!("{e}; taking the clock for a wrong one"),
        };
        tracing::warn!(
            run_id = %self.run_id,
            "{why}: the first call checks the clocks, and the run goes on only if they agree"
        );
        self.distrusted.store(true, Ordering::SeqCst);
    }

    /// While the clock is distrusted, the turn to make the one call whose answer says
    /// whether it agrees; the others wait for that answer. `None` once it is trusted.
    pub(super) async fn gate(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        if !self.distrusted.load(Ordering::SeqCst) {
            return None;
        }
        let turn = self.one_at_a_time.lock().await;
        self.distrusted.load(Ordering::SeqCst).then_some(turn)
    }

    /// Whether the clock is still distrusted and nothing has stopped the run on it:
    /// no answer has said whether the clocks agree.
    pub(super) fn awaits_confirmation(&self) -> bool {
        self.distrusted.load(Ordering::SeqCst) && !self.stopped.load(Ordering::SeqCst)
    }

    /// Compares the limiter's `clock` at a charge with the `Date` of the call's
    /// answer: too far apart, every call stops (the answer is not to be stored: its
    /// times would be the wrong clock's); agreeing, a distrusted clock is trusted
    /// again. Either way the skew is recorded, once a run.
    pub(super) async fn check(
        &self,
        clock: LimiterClock,
        reading: Reading,
        stops: &Stops,
    ) -> Result<(), TooFar> {
        self.compare(clock, reading, stops, "the run goes on").await
    }

    /// [`ClockCheck::check`] for the answer to a request that carried no key, made
    /// after the run's calls (see `Run::confirm_clock_without_key`): the same
    /// comparison and record, said as what it was.
    pub(super) async fn check_without_key(
        &self,
        clock: LimiterClock,
        reading: Reading,
        stops: &Stops,
    ) -> Result<(), TooFar> {
        self.compare(
            clock,
            reading,
            stops,
            "seen in the answer to a request without the key, which bills nothing; the skew record is cleared, and `budget charge` works again",
        )
        .await
    }

    /// [`ClockCheck::check`], `agreed` saying what follows when a distrusted clock is
    /// found to agree.
    async fn compare(
        &self,
        clock: LimiterClock,
        reading: Reading,
        stops: &Stops,
        agreed: &str,
    ) -> Result<(), TooFar> {
        let measured = reading.measure();
        let skew = Skew::of(clock, &measured);
        if measured.too_far() {
            if !self.stopped.swap(true, Ordering::SeqCst) {
                tracing::error!(
                    run_id = %self.run_id,
                    clock = clock.as_str(),
                    skew_s = skew.seconds(),
                    "{} (the Date of its answers): {}. The budget's window cannot be trusted on it, so this run stops before its next call; until a run sees the clocks agree, each run makes one call to check them and `budget charge` is refused",
                    skew.describe(),
                    clock.fix()
                );
                // Stopped first, so that no region starts a call meanwhile.
                stops.halt(Stop::ClockSkew { skew });
                self.record(skew).await;
            }
            return Err(TooFar);
        }
        let was_distrusted = self.distrusted.swap(false, Ordering::SeqCst);
        if was_distrusted {
            tracing::info!(
                run_id = %self.run_id,
                "{}: the clocks agree again; {agreed}",
                skew.describe()
            );
        }
        if !self.recorded.swap(true, Ordering::SeqCst) || was_distrusted {
            self.record(skew).await;
        }
        Ok(())
    }

    /// A call charged on the limiter's `clock` brought no readable `Date` (absent,
    /// empty, unparsable) or no answer at all. Nothing is measured; but while the
    /// clock is distrusted this was the call that was to confirm it, and an answer
    /// that cannot confirm a clock is no better than one that disagrees: the run
    /// stops (docs/budget.md, "The clock", the check fails closed), and the record stays as it was.
    pub(super) fn unconfirmed(&self, clock: LimiterClock, stops: &Stops) -> Result<(), TooFar> {
        if !self.distrusted.load(Ordering::SeqCst) {
            return Ok(());
        }
        if !self.stopped.swap(true, Ordering::SeqCst) {
            tracing::error!(
                run_id = %self.run_id,
                clock = clock.as_str(),
                "{} was too far from the upstream's when last compared, and the answer that was to check it had no readable Date (none, empty or in no HTTP date form), or none came: it cannot confirm the clock, so this run stops before its next call. {}; each run makes one call to check it",
                clock.name(),
                clock.fix()
            );
            stops.halt(Stop::ClockUnconfirmed { clock });
        }
        Err(TooFar)
    }

    /// The answer to `method` (for `region`) had no readable `Date` (absent, empty,
    /// unparsable), so the limiter's `clock` could not be checked by it. The first
    /// such answer of a run is a warning, skew recorded or not (the README's
    /// "Clocks"): without it a proxy that strips `Date` would leave the check silently
    /// off. While the clock is distrusted, [`ClockCheck::unconfirmed`] says it louder.
    pub(super) fn undated(&self, clock: LimiterClock, method: &str, region: &str) {
        if self.distrusted.load(Ordering::SeqCst) || self.undated_said.swap(true, Ordering::SeqCst)
        {
            return;
        }
        tracing::warn!(
            run_id = %self.run_id,
            region,
            clock = clock.as_str(),
            "{method} for {region}: the answer carried no readable Date (none, empty or in no HTTP date form), so {} could not be checked against the upstream's. The run goes on: a charge on a clock no answer has confirmed deletes nothing a window could still count, so a wrong clock cannot make the budget forget earlier charges. Look for a proxy between this host and the upstream that strips or rewrites Date. Said once a run",
            clock.name()
        );
    }

    /// Records `skew` as the last seen on its clock; a failure is logged (the check
    /// itself has already decided).
    async fn record(&self, skew: Skew) {
        let db = self.db.clone();
        let recorded =
            tokio::task::spawn_blocking(move || crate::schema::record_skew_on(&db, &skew)).await;
        match recorded {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(run_id = %self.run_id, "{e}"),
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, "recording the clock skew: {e}")
            }
        }
    }
}

#[cfg(test)]
mod tests;

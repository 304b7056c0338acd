//! How long a run waits before trying a transient failure again: full-jitter
//! exponential backoff, with the jitter a value the run is given (random in the
//! product, fixed where a test needs the wait known).

use std::time::Duration;

const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_CAP: Duration = Duration::from_secs(8);

/// Where in `0..=ceiling` a wait falls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    /// Uniformly anywhere, drawn afresh for every wait: many clients retrying after
    /// the same hiccup spread out.
    Random,
    /// Always this fraction of the ceiling (kept within 0..=1): 0 waits not at all,
    /// for a test that needs the wait known.
    #[cfg(test)]
    Fixed(f64),
}

impl Jitter {
    fn fraction(self) -> f64 {
        match self {
            Jitter::Random => rand::random::<f64>(),
            // `clamp` would pass a NaN on, and a NaN wait panics.
            #[cfg(test)]
            Jitter::Fixed(f) if f.is_nan() => 0.0,
            #[cfg(test)]
            Jitter::Fixed(f) => f.clamp(0.0, 1.0),
        }
    }
}

/// The wait before attempt `attempt + 1`: up to base × 2^(attempt-1), capped, where
/// `jitter` says.
pub fn backoff(attempt: u32, jitter: Jitter) -> Duration {
    let ceiling = BACKOFF_BASE
        .saturating_mul(1 << attempt.saturating_sub(1).min(16))
        .min(BACKOFF_CAP);
    ceiling.mul_f64(jitter.fraction())
}

#[cfg(test)]
mod tests;

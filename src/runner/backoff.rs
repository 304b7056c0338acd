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
    /// Always this fraction of the ceiling (kept within 0..=1): 0 waits not at all.
    Fixed(f64),
}

impl Jitter {
    fn fraction(self) -> f64 {
        match self {
            Jitter::Random => rand::random::<f64>(),
            // `clamp` would pass a NaN on, and a NaN wait panics.
            Jitter::Fixed(f) if f.is_nan() => 0.0,
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
mod tests {
    use super::*;

    #[test]
    fn backoff_is_full_jitter_under_a_growing_cap() {
        for attempt in 1..=6 {
            let cap = BACKOFF_BASE
                .saturating_mul(1 << (attempt - 1))
                .min(BACKOFF_CAP);
            for _ in 0..200 {
                assert!(backoff(attempt, Jitter::Random) <= cap);
            }
        }
        // Full jitter spreads waits over the whole range, down to near zero.
        let waits: Vec<Duration> = (0..500).map(|_| backoff(3, Jitter::Random)).collect();
        assert!(waits.iter().any(|w| *w < Duration::from_millis(100)));
        assert!(waits.iter().any(|w| *w > Duration::from_millis(800)));
    }

    #[test]
    fn a_fixed_jitter_is_a_known_share_of_the_ceiling() {
        let cases = [
            (1, 0.0, Duration::ZERO),
            (1, 1.0, BACKOFF_BASE),
            (2, 0.5, BACKOFF_BASE),
            (3, 1.0, BACKOFF_BASE * 4),
            // Capped, and a fraction out of range is clamped rather than trusted.
            (20, 1.0, BACKOFF_CAP),
            (1, 7.0, BACKOFF_BASE),
            (1, -1.0, Duration::ZERO),
            (1, f64::NAN, Duration::ZERO),
        ];
        for (attempt, fraction, want) in cases {
            assert_eq!(
                backoff(attempt, Jitter::Fixed(fraction)),
                want,
                "attempt {attempt}, fraction {fraction}"
            );
        }
    }
}

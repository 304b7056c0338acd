//! Unit tests of `runner/backoff.rs`.

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

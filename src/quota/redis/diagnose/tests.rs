//! How a Redis error is classified: down, or failed, and whether the charge it
//! answers may have been counted.

use super::*;

/// Only a refused connection proves the charge never reached Redis; a timeout
/// may come after the script ran.
#[test]
fn only_a_refused_connection_is_surely_uncounted() {
    let io = |kind| RedisError::from(std::io::Error::new(kind, "test"));
    let refused = classify(
        "redis://h",
        "charging",
        &io(std::io::ErrorKind::ConnectionRefused),
    );
    assert!(
        refused.is_unavailable() && refused.surely_uncounted(),
        "{refused:?}"
    );
    let timed_out = classify("redis://h", "charging", &io(std::io::ErrorKind::TimedOut));
    assert!(timed_out.is_unavailable(), "{timed_out:?}");
    assert!(!timed_out.surely_uncounted(), "{timed_out:?}");
    let reset = classify(
        "redis://h",
        "charging",
        &io(std::io::ErrorKind::ConnectionReset),
    );
    assert!(!reset.surely_uncounted(), "{reset:?}");
}

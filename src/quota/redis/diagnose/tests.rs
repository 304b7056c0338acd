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

/// The scripts' CLOCKAPART error carries Redis `TIME` first; any other error, or one
/// whose time cannot be read, is not it.
#[test]
fn a_clockapart_error_gives_redis_time() {
    let error = |code: &str, detail: &str| {
        redis::make_extension_error(code.to_owned(), Some(detail.to_owned()))
    };
    assert_eq!(
        clocks_apart_at(&error(
            "CLOCKAPART",
            "1768556400000000 is TIME (us), outside the days the client sent script: 3fe0, on @user_script:99."
        )),
        Some(Micros::new(1_768_556_400_000_000))
    );
    assert_eq!(clocks_apart_at(&error("CLOCKAPART", "soon")), None);
    assert_eq!(clocks_apart_at(&error("ERR", "1768556400000000")), None);
}

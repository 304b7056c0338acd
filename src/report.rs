//! Small helpers for what commands print: durations for people, seconds for JSON,
//! timestamps, run ids.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A duration for people, to the second: "3h 12m 5s".
pub fn human(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// Fractional seconds, for JSON.
pub fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Microseconds since the Unix epoch as RFC 3339.
pub fn rfc3339(us: i64) -> String {
    jiff::Timestamp::from_microsecond(us).map_or_else(|_| format!("@{us}us"), |t| t.to_string())
}

/// A run id unique across hosts and processes: the start time, then random bits.
pub fn new_run_id() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{ms:x}-{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_rounds_up_to_the_second() {
        assert_eq!(human(Duration::from_millis(1500)), "2s");
        assert_eq!(human(Duration::from_secs(3 * 3600 + 12 * 60)), "3h 12m");
    }

    #[test]
    fn run_ids_differ() {
        assert_ne!(new_run_id(), new_run_id());
    }

    #[test]
    fn rfc3339_is_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }
}

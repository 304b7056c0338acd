//! Small helpers for what commands print: durations for people, seconds for JSON,
//! timestamps, run ids.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A duration for people, rounded up to the second and shown to the two largest
/// units: "2s", "4m 10s", "23h 59m".
pub fn human(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) if s == 0 => format!("{m}m"),
        (0, _) => format!("{m}m {s}s"),
        (_, 0) => format!("{h}h"),
        _ => format!("{h}h {m}m"),
    }
}

/// Fractional seconds, for JSON.
pub fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Microseconds since the Unix epoch as RFC 3339.
pub fn rfc3339(us: i64) -> String {
    jiff::Timestamp::from_microsecond(us).map_or_else(|_| format!("@{us}us"), |t| t.to_string())
}

/// Prints `value` as one JSON object on its own line on stdout (`--json`).
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let json = serde_json::to_string(value)?;
    let text = terminal_safe_json(&json);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    Ok(())
}

/// serde_json escapes the ASCII controls but writes the others (C1 controls, bidi
/// overrides from upstream titles) raw; as `\uXXXX` escapes they are the same JSON
/// value and inert on a terminal. Outside strings JSON is ASCII, so only strings change.
pub(crate) fn terminal_safe_json(json: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| !c.is_ascii() && crate::youtube::is_unsafe_for_terminal(c);
    if !json.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if unsafe_char(c) {
            // Every such character is in the Basic Multilingual Plane: one escape each.
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
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
        assert_eq!(human(Duration::from_secs(3 * 3600 + 12 * 60 + 5)), "3h 12m");
        assert_eq!(human(Duration::from_secs(86_400)), "24h");
        assert_eq!(human(Duration::from_secs(600)), "10m");
        assert_eq!(human(Duration::from_secs(250)), "4m 10s");
    }

    #[test]
    fn run_ids_differ() {
        assert_ne!(new_run_id(), new_run_id());
    }

    #[test]
    fn json_carries_bidi_overrides_and_c1_controls_escaped() {
        let text = serde_json::to_string(&"a\u{202e}b\u{9b}c\u{1b}").unwrap_or_default();
        let safe = terminal_safe_json(&text);
        assert_eq!(safe, r#""a\u202eb\u009bc\u001b""#);
        let back: String = serde_json::from_str(&safe).unwrap_or_default();
        assert_eq!(back, "a\u{202e}b\u{9b}c\u{1b}");
    }

    #[test]
    fn rfc3339_is_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }
}

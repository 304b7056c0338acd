//! Unit tests of `output/json.rs`.

use super::*;

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

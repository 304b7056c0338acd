//! Unit tests of `youtube/key.rs`.

use super::ApiKey;

const KEY: &str = "AIzaSyTestKey-0123456789abcdefghijklmn";

#[test]
fn debug_and_display_never_show_the_key() {
    let key = ApiKey::new(KEY.to_owned());
    assert_eq!(format!("{key:?}"), "[redacted]");
    assert_eq!(format!("{key}"), "[redacted]");
    assert_eq!(format!("{:?}", Some(&key)), "Some([redacted])");
}

#[test]
fn surrounding_whitespace_is_dropped() {
    let key = ApiKey::new(format!("  {KEY}\n"));
    let header = key.header_value().expect("a trimmed key is header-safe");
    assert_eq!(header.to_str().expect("ascii"), KEY);
    assert!(header.is_sensitive());
}

#[test]
fn keys_a_header_cannot_carry_are_refused() {
    assert!(ApiKey::new("abc\ndef".to_owned()).header_value().is_none());
    assert!(ApiKey::new("clé".to_owned()).header_value().is_none());
    assert!(
        ApiKey::new("two\tparts".to_owned())
            .header_value()
            .is_none()
    );
    assert!(ApiKey::new("   ".to_owned()).is_empty());
}

#[test]
fn scrub_removes_the_key_from_upstream_text() {
    let key = ApiKey::new(KEY.to_owned());
    assert_eq!(
        key.scrub(&format!("bad key {KEY} here")),
        "bad key [redacted] here"
    );
    assert_eq!(key.scrub("nothing to hide"), "nothing to hide");
}

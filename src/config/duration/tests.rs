//! Unit tests of `config/duration.rs`.

use super::*;

#[test]
fn accepts_the_units_the_docs_show() {
    assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
    assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
    assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
}

#[test]
fn refuses_zero_and_nonsense() {
    assert!(parse_duration("0s").is_err_and(|e| e.contains("zero")));
    assert!(
        parse_duration("ten minutes").is_err_and(|e| e.contains("expected a number and a unit"))
    );
    assert!(parse_duration("10").is_err());
}

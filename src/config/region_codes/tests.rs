//! Unit tests of `config/region_codes.rs`.

use super::*;

#[test]
fn the_nearest_code_is_an_alias_a_capital_or_the_only_one_a_letter_away() {
    assert_eq!(nearest_code("UK"), Some("GB"));
    assert_eq!(nearest_code("us"), Some("US"));
    let configured = ["US", "GB", "DE", "FR", "IN", "BR", "AU", "CA"];
    assert_eq!(nearest("UK", &configured), Some("GB"));
    assert_eq!(nearest("BZ", &configured), Some("BR"));
    assert_eq!(
        nearest("DU", &configured),
        None,
        "DE and AU are both a letter away"
    );
    assert_eq!(nearest("SU", &configured), Some("US"));
    // Several a letter away: no guess.
    assert_eq!(nearest("GX", &CODES), None);
    assert_eq!(nearest("XX", &configured), None);
}

#[test]
fn codes_are_sorted_for_binary_search() {
    assert!(CODES.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn knows_real_codes_and_refuses_others() {
    for ok in ["US", "GB", "DE", "FR", "IN", "BR", "AU", "CA"] {
        assert!(is_region_code(ok), "{ok}");
    }
    for bad in ["UK", "XX", "us", "USA", "", "G"] {
        assert!(!is_region_code(bad), "{bad}");
    }
}

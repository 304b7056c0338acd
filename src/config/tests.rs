//! Unit tests of `config/mod.rs`.

use super::*;

#[test]
fn line_col_counts_from_one_in_characters() {
    let text = "a = 1\nbé = \"x\"\n";
    assert_eq!(line_col(text, 0), (1, 1));
    assert_eq!(line_col(text, 6), (2, 1));
    let x = text.find('"').unwrap_or_default();
    assert_eq!(line_col(text, x), (2, 6));
}

//! Unit tests of `output/text.rs`.

use super::visible;

#[test]
fn terminal_controls_are_shown_escaped() {
    assert_eq!(visible("plain — ünïcode"), "plain — ünïcode");
    assert_eq!(
        visible("\u{1b}[2J\u{1b}]0;owned\u{7}title\rX"),
        "\\u{1b}[2J\\u{1b}]0;owned\\u{7}title\\rX"
    );
    assert_eq!(visible("abc\u{202e}fed"), "abc\\u{202e}fed");
    assert_eq!(visible("a\u{9b}b\u{2067}c"), "a\\u{9b}b\\u{2067}c");
    assert_eq!(visible("two\nlines\t"), "two\\nlines\\t");
}

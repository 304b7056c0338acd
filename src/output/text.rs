//! Upstream text made safe to print: a title may hold a screen clear, an OSC sequence
//! that retitles the terminal, a carriage return that hides what came before it, or a
//! right-to-left override that reorders what follows. Shown escaped, never acted on.

use std::borrow::Cow;

/// Characters that change how a terminal shows text rather than being shown: the C0
/// and C1 controls, DEL, and the Unicode bidirectional formatting characters.
pub(crate) fn is_unsafe_for_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every character [`is_unsafe_for_terminal`] written as an escape
/// (`\n`, `\r`, `\t`, `\u{1b}`, `\u{202e}`), so that it is visible and inert.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe_for_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe_for_terminal(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;

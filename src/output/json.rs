//! JSON for machines: one object a line on stdout, inert on a terminal, with times in
//! RFC 3339 and durations in fractional seconds.

use std::io::Write;
use std::time::Duration;

/// Fractional seconds, for JSON.
pub(crate) fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Microseconds since the Unix epoch as RFC 3339 at full precision, for JSON; text for
/// people uses [`super::human::timestamp`].
pub(crate) fn rfc3339(us: i64) -> String {
    crate::output::human::utc(jiff::SignedDuration::from_micros(us))
}

/// Prints `value` as one JSON object on its own line on stdout (`--json`).
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
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
    let unsafe_char = |c: char| !c.is_ascii() && crate::output::text::is_unsafe_for_terminal(c);
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

#[cfg(test)]
mod tests;

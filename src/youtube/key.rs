//! The API key, kept out of every string trendsync prints.

use std::fmt;

use reqwest::header::HeaderValue;

/// The YouTube Data API key.
///
/// Debug and Display print `[redacted]`, so the key can sit inside any struct that gets
/// logged. The only way out is as the `X-Goog-Api-Key` header value (marked sensitive,
/// so the HTTP stack leaves it out of its own debug output too).
#[derive(Clone)]
pub struct ApiKey(String);

const REDACTED: &str = "[redacted]";

impl ApiKey {
    /// Surrounding whitespace is dropped: a key read from a file usually ends in a
    /// newline, which no key contains and no header may carry.
    pub fn new(key: String) -> Self {
        let trimmed = key.trim();
        if trimmed.len() == key.len() {
            ApiKey(key)
        } else {
            ApiKey(trimmed.to_owned())
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `None` unless the key is printable ASCII without spaces (real keys are; the
    /// header type alone would let non-ASCII and inner tabs through). The caller turns
    /// that into an error that does not quote the key.
    pub(crate) fn header_value(&self) -> Option<HeaderValue> {
        if !self.0.bytes().all(|b| b.is_ascii_graphic()) {
            return None;
        }
        let mut value = HeaderValue::from_str(&self.0).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// Whether `text` is this key: a budget named after the key would carry it into
    /// Redis key names and database rows.
    pub fn is(&self, text: &str) -> bool {
        !self.0.is_empty() && self.0 == text.trim()
    }

    /// Replaces the key wherever it occurs in upstream-provided text, in case a proxy
    /// or an error page echoes request headers back into a message we would print.
    pub(crate) fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() || !text.contains(&self.0) {
            text.to_owned()
        } else {
            text.replace(&self.0, REDACTED)
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests;

//! The API key a command calls the upstream with: from `--api-key-file` or
//! `YOUTUBE_API_KEY`, checked for its shape, never printed.

use anyhow::Result;

use crate::cli::Global;
use crate::error::MissingConfig;
use crate::youtube::ApiKey;

/// The key to make calls with, with a warning when its file is readable by others.
pub(crate) fn for_calls(global: &Global) -> Result<ApiKey> {
    let key = api_key(global)?;
    if let Some(path) = &global.api_key_file {
        warn_if_shared(path);
    }
    Ok(key)
}

/// The API key from `--api-key-file` or `YOUTUBE_API_KEY`; never printed.
pub(crate) fn api_key(global: &Global) -> Result<ApiKey> {
    if let Some(path) = &global.api_key_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            MissingConfig(format!(
                "cannot read the API key file {}: {e}; it must hold only the key",
                path.display()
            ))
        })?;
        if text.trim().is_empty() {
            return Err(
                MissingConfig(format!("the API key file {} is empty", path.display())).into(),
            );
        }
        return checked_key(text, &format!("the API key file {}", path.display()));
    }
    match std::env::var("YOUTUBE_API_KEY") {
        Ok(key) if !key.trim().is_empty() => checked_key(key, "YOUTUBE_API_KEY"),
        _ => Err(MissingConfig(
            "no API key: set YOUTUBE_API_KEY, or pass --api-key-file PATH (a file holding only the key); \
             --dry-run needs none"
                .to_owned(),
        )
        .into()),
    }
}

/// `url` fit to print (`config`, `crontab`): masked as every URL is (a password, a
/// query's values, a key-like path segment; see `mask.rs`), and the key this process
/// would call with removed wherever it still appears (in a host name, say).
pub(crate) fn shown_url(global: &Global, url: &str) -> String {
    let masked = crate::mask::mask_url(url);
    match api_key(global) {
        Ok(key) => key.scrub(&masked),
        Err(_) => masked,
    }
}

/// Whether `--api-base` holds something [`shown_url`] would not print: a line that
/// carries it must not be printed either.
pub(crate) fn api_base_holds_a_secret(global: &Global) -> bool {
    shown_url(global, &global.api_base) != global.api_base
}

/// A key is one line of printable ASCII. A second line or a stray character is most
/// likely a file that holds something else too; the message says what, never the key.
fn checked_key(text: String, source: &str) -> Result<ApiKey> {
    let key = text.trim();
    if key.lines().nth(1).is_some() {
        return Err(MissingConfig(format!(
            "{source} holds more than one line; it must hold only the key, on one line"
        ))
        .into());
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(MissingConfig(format!(
            "{source} holds characters no API key has (spaces, control characters or non-ASCII); \
             it must hold only the key"
        ))
        .into());
    }
    Ok(ApiKey::new(text))
}

/// A key file others can read is a key others can spend.
fn warn_if_shared(path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                "the API key file {} can be read by other users (mode {:o}); chmod 600 it",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
    }
}

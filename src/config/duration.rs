//! Durations in the configuration files and on the command line: "24h", "10m", "90s",
//! "1d", "1h30m".

use std::time::Duration;

/// Parses a positive duration, saying what is accepted when it cannot.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        format!("\"{text}\" is not a duration ({e}); expected a number and a unit, e.g. \"90s\", \"10m\", \"2h\", \"1d\"")
    })?;
    if d.is_zero() {
        return Err(format!(
            "\"{text}\" is zero; expected a positive duration such as \"10m\""
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests;

//! ISO 8601 durations as YouTube writes them in `contentDetails.duration`.
//!
//! YouTube only ever uses the day-and-time designators (`PT1H16M37S`, `P1DT2H`, `P0D` for
//! a live broadcast, occasionally `P1W2D`), so years and months are refused: their length
//! in seconds is not defined without a calendar anchor, and guessing would store a wrong
//! number that looks right.

/// Seconds in a duration such as `PT1H16M37S`, or `None` when the text is not one.
///
/// Each designator may appear at most once and in order (`W`, `D`, then after `T`: `H`,
/// `M`, `S`); a `T` must be followed by at least one time component; fractions, signs and
/// overflow are refused rather than rounded or wrapped.
pub fn parse_duration_secs(text: &str) -> Option<i64> {
    let rest = text.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) => {
            if time.is_empty() {
                return None;
            }
            (date, Some(time))
        }
        None => (rest, None),
    };
    if date.is_empty() && time.is_none() {
        return None;
    }
    let mut total: i64 = 0;
    total = add_components(total, date, &[('W', 7 * 86_400), ('D', 86_400)])?;
    if let Some(time) = time {
        total = add_components(total, time, &[('H', 3_600), ('M', 60), ('S', 1)])?;
    }
    Some(total)
}

/// Adds `<digits><designator>` pairs from `part`, which must use the designators of
/// `units` in their given order, each at most once.
fn add_components(mut total: i64, part: &str, units: &[(char, i64)]) -> Option<i64> {
    let mut next_unit = 0;
    let mut digits_start = 0;
    for (at, ch) in part.char_indices() {
        if ch.is_ascii_digit() {
            continue;
        }
        let digits = &part[digits_start..at];
        if digits.is_empty() {
            return None;
        }
        let offset = units[next_unit..].iter().position(|(d, _)| *d == ch)?;
        let (_, seconds_per) = units[next_unit + offset];
        next_unit += offset + 1;
        let count: i64 = digits.parse().ok()?;
        total = total.checked_add(count.checked_mul(seconds_per)?)?;
        digits_start = at + ch.len_utf8();
    }
    // Trailing digits without a designator ("PT5") are not a duration.
    if digits_start != part.len() {
        return None;
    }
    Some(total)
}

#[cfg(test)]
mod tests;

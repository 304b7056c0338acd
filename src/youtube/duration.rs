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
mod tests {
    use super::parse_duration_secs;

    #[test]
    fn durations_as_youtube_writes_them() {
        let cases: &[(&str, Option<i64>)] = &[
            ("PT1H16M37S", Some(4597)),
            ("PT4M13S", Some(253)),
            ("PT59S", Some(59)),
            ("PT10M", Some(600)),
            ("PT2H", Some(7200)),
            ("PT1H5S", Some(3605)),
            ("PT0S", Some(0)),
            ("P0D", Some(0)),
            ("P1D", Some(86_400)),
            ("P1DT2H", Some(93_600)),
            ("P1DT2H3M4S", Some(93_784)),
            ("P1W", Some(604_800)),
            ("P1W2DT1S", Some(777_601)),
            ("PT0100M", Some(6000)),
            // Not durations, or not ones YouTube sends.
            ("", None),
            ("P", None),
            ("PT", None),
            ("P1DT", None),
            ("T1H", None),
            ("1H", None),
            ("pt1h", None),
            ("PT1H1H", None),
            ("PT1S1M", None),
            ("PT1M1H", None),
            ("P1D1W", None),
            ("PTH", None),
            ("PT5", None),
            ("PT1.5S", None),
            ("PT-1S", None),
            ("PT+1S", None),
            ("P1Y", None),
            ("P1M", None),
            ("P1H", None),
            ("PT1D", None),
            ("PT1W", None),
            (" PT1S", None),
            ("PT1S ", None),
            ("PT٣S", None),
            ("PT9223372036854775807S", Some(i64::MAX)),
            ("PT9223372036854775807M", None),
            ("PT99999999999999999999S", None),
            ("P9223372036854775807DT1S", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration_secs(text), *expected, "parsing {text:?}");
        }
    }
}

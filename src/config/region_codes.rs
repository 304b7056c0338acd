//! The officially assigned ISO 3166-1 alpha-2 codes: a typo such as "UK" or "GE" for
//! Germany is caught when the file is loaded, not by an upstream error mid-run.

const CODES: [&str; 249] = [
    "AD", "AE", "AF", "AG", "AI", "AL", "AM", "AO", "AQ", "AR", "AS", "AT", "AU", "AW", "AX", "AZ",
    "BA", "BB", "BD", "BE", "BF", "BG", "BH", "BI", "BJ", "BL", "BM", "BN", "BO", "BQ", "BR", "BS",
    "BT", "BV", "BW", "BY", "BZ", "CA", "CC", "CD", "CF", "CG", "CH", "CI", "CK", "CL", "CM", "CN",
    "CO", "CR", "CU", "CV", "CW", "CX", "CY", "CZ", "DE", "DJ", "DK", "DM", "DO", "DZ", "EC", "EE",
    "EG", "EH", "ER", "ES", "ET", "FI", "FJ", "FK", "FM", "FO", "FR", "GA", "GB", "GD", "GE", "GF",
    "GG", "GH", "GI", "GL", "GM", "GN", "GP", "GQ", "GR", "GS", "GT", "GU", "GW", "GY", "HK", "HM",
    "HN", "HR", "HT", "HU", "ID", "IE", "IL", "IM", "IN", "IO", "IQ", "IR", "IS", "IT", "JE", "JM",
    "JO", "JP", "KE", "KG", "KH", "KI", "KM", "KN", "KP", "KR", "KW", "KY", "KZ", "LA", "LB", "LC",
    "LI", "LK", "LR", "LS", "LT", "LU", "LV", "LY", "MA", "MC", "MD", "ME", "MF", "MG", "MH", "MK",
    "ML", "MM", "MN", "MO", "MP", "MQ", "MR", "MS", "MT", "MU", "MV", "MW", "MX", "MY", "MZ", "NA",
    "NC", "NE", "NF", "NG", "NI", "NL", "NO", "NP", "NR", "NU", "NZ", "OM", "PA", "PE", "PF", "PG",
    "PH", "PK", "PL", "PM", "PN", "PR", "PS", "PT", "PW", "PY", "QA", "RE", "RO", "RS", "RU", "RW",
    "SA", "SB", "SC", "SD", "SE", "SG", "SH", "SI", "SJ", "SK", "SL", "SM", "SN", "SO", "SR", "SS",
    "ST", "SV", "SX", "SY", "SZ", "TC", "TD", "TF", "TG", "TH", "TJ", "TK", "TL", "TM", "TN", "TO",
    "TR", "TT", "TV", "TW", "TZ", "UA", "UG", "UM", "US", "UY", "UZ", "VA", "VC", "VE", "VG", "VI",
    "VN", "VU", "WF", "WS", "YE", "YT", "ZA", "ZM", "ZW",
];

pub(crate) fn is_region_code(code: &str) -> bool {
    CODES.binary_search(&code).is_ok()
}

/// Codes people write for a country whose ISO code is another.
const ALIASES: [(&str, &str); 4] = [("UK", "GB"), ("EN", "GB"), ("EL", "GR"), ("JA", "JP")];

/// The code among `known` that `code` most likely meant: its own spelling in capitals,
/// a well-known alias ("UK" for "GB"), its letters swapped, or the only one a single
/// letter away. `None` when nothing is that close, or more than one is.
pub(crate) fn nearest<'a>(code: &str, known: &[&'a str]) -> Option<&'a str> {
    let upper = code.trim().to_ascii_uppercase();
    if let Some(k) = known.iter().find(|k| **k == upper) {
        return Some(k);
    }
    if let Some((_, to)) = ALIASES.iter().find(|(from, _)| *from == upper)
        && let Some(k) = known.iter().find(|k| *k == to)
    {
        return Some(k);
    }
    let a = upper.as_bytes();
    if a.len() != 2 {
        return None;
    }
    // Its two letters swapped, then the only code one letter away.
    let swapped = [a[1], a[0]];
    if let Some(k) = known.iter().find(|k| k.as_bytes() == swapped) {
        return Some(k);
    }
    let close = |k: &&&str| {
        let b = k.as_bytes();
        b.len() == 2 && (a[0] == b[0]) != (a[1] == b[1])
    };
    let mut near = known.iter().filter(close);
    match (near.next(), near.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

/// [`nearest`] among every assigned code.
pub(crate) fn nearest_code(code: &str) -> Option<&'static str> {
    nearest(code, &CODES)
}

#[cfg(test)]
mod tests;

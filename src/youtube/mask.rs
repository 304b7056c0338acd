//! URLs as they may be shown: a refused `--api-base` or a redirect's target can carry a
//! key in a query (`?key=…`) or credentials (`user:password@`), and both end up in logs.

use url::Url;

const MASK: &str = "***";

/// `url` with its user name, password, query values and fragment replaced by `***`;
/// query names stay, so a person can still see what was wrong. Text that does not parse
/// as a URL is masked the same way by position, whatever it holds.
pub fn mask_url(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => mask_parsed(url).unwrap_or_else(|| mask_by_position(text)),
        Err(_) => mask_by_position(text),
    }
}

/// `None` if the URL refuses the masks (it cannot, having credentials already).
fn mask_parsed(mut url: Url) -> Option<String> {
    if !url.username().is_empty() {
        url.set_username(MASK).ok()?;
    }
    if url.password().is_some() {
        url.set_password(Some(MASK)).ok()?;
    }
    if let Some(query) = url.query().map(mask_query) {
        url.set_query(Some(&query));
    }
    if url.fragment().is_some() {
        url.set_fragment(Some(MASK));
    }
    Some(url.to_string())
}

/// `a=1&b` becomes `a=***&b`: the names stay, every value goes.
fn mask_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) => format!("{name}={MASK}"),
            None => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// For text `Url` cannot read: everything between `://` and the last `@` of the
/// authority, and everything after the first `?` or `#`, is masked.
fn mask_by_position(text: &str) -> String {
    let (head, tail) = match text.find(['?', '#']) {
        Some(i) => (&text[..i], Some(&text[i..i + 1])),
        None => (text, None),
    };
    let (scheme, rest) = match head.find("://") {
        Some(i) => (&head[..i + 3], &head[i + 3..]),
        None => ("", head),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(at) => format!("{MASK}{}", &rest[at..]),
        None => rest.to_owned(),
    };
    match tail {
        Some(sep) => format!("{scheme}{rest}{sep}{MASK}"),
        None => format!("{scheme}{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::mask_url;

    #[test]
    fn credentials_and_query_values_are_masked() {
        assert_eq!(
            mask_url("https://user:pa55@example.test/v3?key=AIzaSECRET&x"),
            "https://***:***@example.test/v3?key=***&x"
        );
        assert_eq!(
            mask_url("http://127.0.0.1:9/v3#AIzaSECRET"),
            "http://127.0.0.1:9/v3#***"
        );
        assert_eq!(
            mask_url("https://www.googleapis.com/youtube/v3"),
            "https://www.googleapis.com/youtube/v3"
        );
    }

    #[test]
    fn text_that_is_no_url_is_masked_by_position() {
        assert_eq!(
            mask_url("http://us er:SECRET@host:99999/x?key=SECRET"),
            "http://***@host:99999/x?***"
        );
        assert_eq!(mask_url("not a url ?key=SECRET"), "not a url ?***");
        assert!(!mask_url("ht!tp://a:SECRET@[bad/?k=SECRET").contains("SECRET"));
    }
}

//! URLs as they may be shown. trendsync sends the API key only in the
//! `X-Goog-Api-Key` header, never in a URL; but URLs it is *given* can carry secrets:
//! a `--redis-url` or a refused `--api-base` someone wrote with a password
//! (`user:password@`) or a key in a query (`?key=…`, `?pass=…`), or a redirect's
//! target chosen by whoever answered. All of them end up in logs and messages, so one
//! rule serves every URL the program prints, Redis and upstream alike.

const MASK: &str = "***";

/// Query parameters whose values are shown: they say which database, protocol or
/// account was meant and carry no secret. Every other value is masked, so a parameter
/// nobody thought of (`?sig=…`, `?k=…`) is hidden rather than shown.
const SHOWN_PARAMETERS: [&str; 4] = ["db", "protocol", "user", "username"];

/// `raw` fit to print: the scheme, the hosts (several, as Sentinel and Cluster URLs
/// have) and the path stay; every password, every query value but the harmless ones,
/// every path segment that looks like a key and the fragment become `***`.
///
/// User names stay, since they tell which account a refusal was about (`WRONGPASS`,
/// `NOPERM`), but a lone `secret@host` is masked: people paste passwords and tokens
/// there. Text without `://` is not shown at all, since there is no telling a host
/// from a password pasted in the wrong place (`--redis-url s3cretpw`). The work is
/// done by position, so text no URL parser accepts is masked all the same.
pub fn mask_url(raw: &str) -> String {
    let Some((scheme, rest)) = raw.split_once("://") else {
        return "(a URL without a scheme, not shown because it may be a password)".to_owned();
    };
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (rest, None),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (before_fragment, None),
    };
    // A password may hold a `/` (`u:pa/ss@h`): everything up to the last `@` is
    // credentials, even when that masks a path that merely had an `@` in it.
    let (userinfo, hosts_and_path) = match before_query.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, before_query),
    };
    let mut out = format!("{scheme}://");
    if let Some(userinfo) = userinfo {
        out.push_str(&mask_userinfo(userinfo));
        out.push('@');
    }
    match hosts_and_path.split_once('/') {
        Some((hosts, path)) => {
            out.push_str(hosts);
            out.push('/');
            out.push_str(&mask_path(path));
        }
        None => out.push_str(hosts_and_path),
    }
    if let Some(query) = query {
        out.push('?');
        out.push_str(&mask_query(query));
    }
    if fragment.is_some() {
        out.push('#');
        out.push_str(MASK);
    }
    out
}

/// Each segment of a path that looks like a key becomes `***`, and the value of a
/// `name=value` segment does, as a query's would: a proxy in front of the upstream
/// may take its key in the path (`/AIzaSy…/youtube/v3`, `/key=…/v3`).
fn mask_path(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment.split_once('=') {
            Some((name, _)) => format!("{name}={MASK}"),
            None if looks_like_a_key(segment) => MASK.to_owned(),
            None => segment.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A Google API key (`AIza…`), or a long opaque token: 20 or more letters, digits,
/// `-` and `_`, with both letters and digits. Words (`youtube`), versions (`v3`) and
/// Redis database numbers stay.
fn looks_like_a_key(segment: &str) -> bool {
    if segment.starts_with("AIza") {
        return true;
    }
    segment.len() >= 20
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && segment.bytes().any(|b| b.is_ascii_digit())
        && segment.bytes().any(|b| b.is_ascii_alphabetic())
}

/// `user:pass` becomes `user:***`, a lone `pass` becomes `***`.
fn mask_userinfo(userinfo: &str) -> String {
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{MASK}"),
        None if userinfo.is_empty() => String::new(),
        None => MASK.to_owned(),
    }
}

/// `db=2&pass=x&flag` becomes `db=2&pass=***&flag`: every name stays, so a person can
/// still see what was wrong; only the values of [`SHOWN_PARAMETERS`] do.
fn mask_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if !SHOWN_PARAMETERS.contains(&name.to_ascii_lowercase().as_str()) => {
                format!("{name}={MASK}")
            }
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests;

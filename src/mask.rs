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
/// have) and the path stay; every password, every query value but the harmless ones
/// and the fragment become `***`.
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
    out.push_str(hosts_and_path);
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
mod tests {
    use super::mask_url;

    #[test]
    fn redis_urls_keep_their_hosts_user_and_database() {
        for (raw, shown) in [
            (
                "redis://:s3cret@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            (
                "rediss://user:s3cret@h:6380/2",
                "rediss://user:***@h:6380/2",
            ),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://s3cret@h/", "redis://***@h/"),
            (
                "unix:///run/redis.sock?db=2&pass=s3cret",
                "unix:///run/redis.sock?db=2&pass=***",
            ),
            (
                "redis+unix:///r.sock?user=u&password=s3cret#x",
                "redis+unix:///r.sock?user=u&password=***#***",
            ),
            (
                "redis+sentinel://u:s3cret@s1:26379,s2:26379/mymaster/1",
                "redis+sentinel://u:***@s1:26379,s2:26379/mymaster/1",
            ),
            (
                "rediss+cluster://:s3:cret@n1:6379,[::1]:6380",
                "rediss+cluster://:***@n1:6379,[::1]:6380",
            ),
            ("redis://h/?token=s3cret", "redis://h/?token=***"),
            (
                "redis://h/?DB=3&Protocol=resp3",
                "redis://h/?DB=3&Protocol=resp3",
            ),
        ] {
            assert_eq!(mask_url(raw), shown, "{raw}");
        }
    }

    #[test]
    fn upstream_urls_lose_every_query_value_and_fragment() {
        for (raw, shown) in [
            // An --api-base someone wrote with a key in it: trendsync refuses it,
            // and the message that says so must not show the key.
            (
                "https://user:pa55@example.test/v3?key=AIzaSECRET&x",
                "https://user:***@example.test/v3?key=***&x",
            ),
            (
                "http://127.0.0.1:9/v3?part=snippet&k=AIzaSECRET",
                "http://127.0.0.1:9/v3?part=***&k=***",
            ),
            (
                "http://127.0.0.1:9/v3#AIzaSECRET",
                "http://127.0.0.1:9/v3#***",
            ),
            (
                "https://www.googleapis.com/youtube/v3",
                "https://www.googleapis.com/youtube/v3",
            ),
            ("ftp://AIzaSECRET@127.0.0.1/v3", "ftp://***@127.0.0.1/v3"),
            ("redis://u:pa/ss@h:1/0", "redis://u:***@h:1/0"),
        ] {
            assert_eq!(mask_url(raw), shown, "{raw}");
        }
    }

    /// What no parser takes is masked by position all the same, and text without a
    /// scheme is never shown.
    #[test]
    fn secrets_never_print_from_text_that_is_no_url() {
        assert_eq!(
            mask_url("http://us er:SECRET@host:99999/x?key=SECRET"),
            "http://us er:***@host:99999/x?key=***"
        );
        for raw in [
            "h:s3cret@x",
            "s3cretpw",
            "not a url ?pass=s3cret",
            "ht!tp//a:s3cret@[bad/?k=s3cret",
        ] {
            let shown = mask_url(raw);
            assert!(!shown.contains("s3cret"), "{raw}: {shown}");
        }
        assert!(!mask_url("127.0.0.1").contains("127"));
        assert!(!mask_url("ht!tp://a:s3cret@[bad/?k=s3cret").contains("s3cret"));
    }
}

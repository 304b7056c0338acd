//! What a `--redis-url` says: which deployment form of the README, "Redis deployments" it names
//! (one server, plain, TLS or a unix socket; a Sentinel-watched primary; a Cluster),
//! parsed and checked before any connection is tried, and what to fix when it cannot
//! work. Redis errors can quote the URL they were given, so their text is masked here
//! too, before anything prints it.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, RedisError};

use crate::mask::mask_url;

/// The schemes `--redis-url` takes, for messages.
const SCHEMES: &str = "redis://, rediss://, unix://, redis+sentinel://, rediss+sentinel://, \
                       redis+cluster:// or rediss+cluster://";

/// A Redis configuration that cannot work however long one waits: exit 78, with the
/// URL (password masked), what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[error("Redis at {url}: {problem}; {fix}")]
pub struct RedisConfigError {
    pub url: String,
    pub problem: String,
    pub fix: String,
}

/// What is wrong with a URL, and the fix.
pub(super) type Problem = (String, String);

fn malformed(what: impl Into<String>) -> Problem {
    (
        format!("is not a valid Redis URL: {}", what.into()),
        "write it as in the README, e.g. redis://[user:password@]host:6379/0".to_owned(),
    )
}

/// Where a `--redis-url` points, parsed.
#[derive(Debug, Clone)]
pub(super) enum Form {
    /// One server: `redis://`, `rediss://` or `unix://`.
    Single { info: ConnectionInfo, tls: bool },
    /// A primary found through Sentinels.
    Sentinel {
        sentinels: Vec<ConnectionAddr>,
        service: String,
        redis: RedisConnectionInfo,
        tls: bool,
    },
    /// A Cluster, through any of its nodes.
    Cluster { nodes: Vec<String>, tls: bool },
}

impl Form {
    pub(super) fn tls(&self) -> bool {
        match self {
            Form::Single { tls, .. } | Form::Sentinel { tls, .. } | Form::Cluster { tls, .. } => {
                *tls
            }
        }
    }

    /// Whether a refused or dropped connection may be a new primary being elected,
    /// worth waiting for; a lone server that refuses is down.
    pub(super) fn elects(&self) -> bool {
        !matches!(self, Form::Single { .. })
    }
}

/// The form `url` names, or what is wrong with it.
pub(super) fn parse(url: &str) -> Result<Form, Problem> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(malformed(format!("it has no scheme; use {SCHEMES}")));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "redis" | "rediss" | "unix" | "redis+unix" => {
            let info = url
                .into_connection_info()
                .map_err(|e| malformed(masked_detail(&e)))?;
            let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
            Ok(Form::Single { info, tls })
        }
        "redis+sentinel" => parse_several(rest, false, true),
        "rediss+sentinel" => parse_several(rest, true, true),
        "redis+cluster" => parse_several(rest, false, false),
        "rediss+cluster" => parse_several(rest, true, false),
        other => Err((
            format!("has the scheme \"{other}\", which trendsync does not support"),
            format!("use {SCHEMES} (the README lists each form)"),
        )),
    }
}

/// Query parameters of a one-server URL that the client never reads, so that a
/// password or a database given there would be dropped without a word: a TCP URL
/// reads none of them, a unix socket only `db`, `user` and `pass`.
pub(super) fn ignored_parameters(url: &str) -> Vec<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Vec::new();
    };
    let ignored: &[&str] = match scheme.to_ascii_lowercase().as_str() {
        "redis" | "rediss" => &["password", "pass", "pwd", "user", "username", "db"],
        "unix" | "redis+unix" => &["password", "pwd", "username"],
        _ => return Vec::new(),
    };
    let Some((_, query)) = rest.split('#').next().unwrap_or("").split_once('?') else {
        return Vec::new();
    };
    query
        .split('&')
        .filter_map(|pair| pair.split('=').next())
        .filter(|k| ignored.iter().any(|i| k.eq_ignore_ascii_case(i)))
        .map(str::to_owned)
        .collect()
}

/// `[user:pass@]h1:p1[,h2:p2…][/service[/db]]` of a Sentinel or Cluster URL.
fn parse_several(rest: &str, tls: bool, sentinel: bool) -> Result<Form, Problem> {
    if rest.contains(['?', '#']) {
        return Err(malformed(
            "query parameters are not supported in this form; give TLS files with --redis-ca-file and friends",
        ));
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let default_port = if sentinel { 26379 } else { 6379 };
    let mut addrs = Vec::new();
    for host in hosts.split(',') {
        addrs.push(host_port(host, default_port)?);
    }
    let scheme = if tls { "rediss" } else { "redis" };
    let creds = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    if sentinel {
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let service = segments.next().ok_or_else(|| {
            malformed("a Sentinel URL names the primary's service after the hosts, e.g. redis+sentinel://s1:26379/mymaster")
        })?;
        let db = match segments.next() {
            Some(db) => db
                .parse::<i64>()
                .map_err(|_| malformed(format!("\"{db}\" is not a database number")))?,
            None => 0,
        };
        if segments.next().is_some() {
            return Err(malformed("too many path segments after the service name"));
        }
        // The credentials and database are the primary's; the crate decodes them.
        let redis = format!("redis://{creds}127.0.0.1/{db}")
            .into_connection_info()
            .map_err(|e| malformed(masked_detail(&e)))?
            .redis_settings()
            .clone();
        let sentinels = addrs
            .iter()
            .map(|(h, p)| {
                format!("{scheme}://{h}:{p}")
                    .into_connection_info()
                    .map(|i| i.addr().clone())
                    .map_err(|e| malformed(masked_detail(&e)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Form::Sentinel {
            sentinels,
            service: service.to_owned(),
            redis,
            tls,
        })
    } else {
        if !matches!(path, "" | "0") {
            return Err(malformed(
                "a Cluster has only database 0; drop the path after the hosts",
            ));
        }
        let nodes: Vec<String> = addrs
            .iter()
            .map(|(h, p)| format!("{scheme}://{creds}{h}:{p}"))
            .collect();
        for node in &nodes {
            node.as_str()
                .into_connection_info()
                .map_err(|e| malformed(masked_detail(&e)))?;
        }
        Ok(Form::Cluster { nodes, tls })
    }
}

/// `host[:port]` or `[v6]:port`.
fn host_port(s: &str, default_port: u16) -> Result<(String, u16), Problem> {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| malformed(format!("\"{s}\" opens an IPv6 address it does not close")))?;
        (format!("[{h}]"), after.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (s.to_owned(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(malformed("a host is missing in the list of hosts"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| malformed(format!("\"{p}\" is not a port number")))?,
        None => default_port,
    };
    Ok((host, port))
}

/// A Redis error's text, with any URL in it masked.
pub(super) fn masked_detail(e: &RedisError) -> String {
    let text = e.to_string();
    let mut out = String::with_capacity(text.len());
    for word in text.split_inclusive(char::is_whitespace) {
        let trimmed = word.trim_end();
        if trimmed.contains("://") {
            out.push_str(&mask_url(trimmed));
            out.push_str(&word[trimmed.len()..]);
        } else {
            out.push_str(word);
        }
    }
    out
}

#[cfg(test)]
mod tests;

//! What a Redis error means to the limiter: a configuration mistake no retry can fix
//! (with a message that says what to fix), a failover to wait out, or a limiter that
//! is down or failed. Where a failed connection's error alone cannot tell (a TLS URL
//! pointed at a plain port, Sentinels electing a new primary for a name they know),
//! the server is asked once more before the answer is given.

use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, ErrorKind, RedisError, ServerErrorKind,
};

use super::conn::{CONNECT_TIMEOUT, Connector, RESPONSE_TIMEOUT};
use super::url::{Form, Problem, RedisConfigError, masked_detail};
use crate::clock::Micros;
use crate::quota::LimiterError;

/// What a failure to connect says about the configuration, if it cannot be a
/// passing outage: a message that says what to fix.
pub(super) async fn connect_failure(
    connector: &Connector,
    e: &RedisError,
) -> Option<RedisConfigError> {
    // The Sentinels find no primary of the name: a typo in the URL, unless they know the
    // name and are electing a new primary for it (the README, "Redis deployments"), which
    // is a failover to wait out.
    if e.kind() == ErrorKind::MasterNameNotFoundBySentinel
        && sentinels_know_service(connector).await
    {
        return None;
    }
    let (problem, fix) = match config_problem(e) {
        Some(p) => p,
        None if connector.form().tls() && !e.is_connection_refusal() => {
            speaks_plain_instead(connector).await?
        }
        None if e.is_connection_dropped() && !e.is_connection_refusal() => {
            speaks_tls_instead(connector).await?
        }
        None => return None,
    };
    Some(RedisConfigError {
        url: connector.endpoint().to_owned(),
        problem,
        fix,
    })
}

/// Whether any Sentinel of the URL monitors its service name (`SENTINEL
/// GET-MASTER-ADDR-BY-NAME` answers with an address, the old primary's while an
/// election goes on). Sentinels that cannot be reached say nothing either way.
async fn sentinels_know_service(connector: &Connector) -> bool {
    let Form::Sentinel {
        sentinels, service, ..
    } = connector.form()
    else {
        return false;
    };
    for addr in sentinels {
        let client = match (connector.certs(), addr) {
            (Some(certs), ConnectionAddr::TcpTls { .. }) => {
                redis::Client::build_with_tls(addr.clone(), certs.clone())
            }
            _ => redis::Client::open(addr.clone()),
        };
        let Ok(client) = client else { continue };
        let ask = async {
            let mut conn = client.get_multiplexed_async_connection().await?;
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(service)
                .query_async::<Option<Vec<String>>>(&mut conn)
                .await
        };
        if let Ok(Ok(Some(_))) = tokio::time::timeout(CONNECT_TIMEOUT, ask).await {
            return true;
        }
    }
    false
}

/// A TLS handshake that got nowhere may have reached a plain port: a Redis there
/// answers an inline PING with `+PONG` (or `-NOAUTH`).
async fn speaks_plain_instead(connector: &Connector) -> Option<Problem> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Form::Single { info, tls: true } = connector.form() else {
        return None;
    };
    let ConnectionAddr::TcpTls { host, port, .. } = info.addr() else {
        return None;
    };
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
        stream.write_all(b"PING\r\n").await?;
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).await?;
        Ok::<u8, std::io::Error>(first[0])
    };
    let first = tokio::time::timeout(CONNECT_TIMEOUT, probe)
        .await
        .ok()?
        .ok()?;
    matches!(first, b'+' | b'-').then(|| {
        (
            "does not speak TLS on that port".to_owned(),
            "use redis:// for a plain port, or point rediss:// at the server's tls-port".to_owned(),
        )
    })
}

/// A plain connection that a server cut at once may have reached a TLS port:
/// a TLS handshake that gets as far as the server's certificate tells.
async fn speaks_tls_instead(connector: &Connector) -> Option<Problem> {
    let Form::Single { info, tls: false } = connector.form() else {
        return None;
    };
    let ConnectionAddr::Tcp(host, port) = info.addr() else {
        return None;
    };
    let client = Client::open(format!("rediss://{host}:{port}")).ok()?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let tls_answered = match client
        .get_multiplexed_async_connection_with_config(&config)
        .await
    {
        Ok(_) => true,
        Err(e) => {
            let text = e.to_string().to_ascii_lowercase();
            text.contains("certificate") || text.contains("noauth")
        }
    };
    tls_answered.then(|| {
        (
            "speaks TLS on that port, and the URL asks for a plain connection".to_owned(),
            "use rediss:// (with --redis-ca-file if its certificate comes from a private CA)"
                .to_owned(),
        )
    })
}

/// A server that refuses the URL's credentials, or refuses the user a command the
/// limiter needs: no retry helps, whenever it shows.
fn permission_problem(e: &RedisError) -> Option<Problem> {
    let lower = e.to_string().to_ascii_lowercase();
    let code = e.code().unwrap_or_default();
    if code == "NOAUTH" || lower.contains("unauthenticated") || lower.contains("noauth") {
        return Some((
            "requires a password, and the URL has none".to_owned(),
            "put it in the URL: redis://:PASSWORD@host:port (user:PASSWORD@ for an ACL user), \
             or ?pass=PASSWORD for a unix socket"
                .to_owned(),
        ));
    }
    if code == "WRONGPASS"
        || e.kind() == ErrorKind::AuthenticationFailed
        || lower.contains("wrongpass")
        || lower.contains("invalid password")
        || lower.contains("invalid username-password")
    {
        return Some((
            "refused the user name or password in the URL".to_owned(),
            "check them against the server's requirepass or ACL user".to_owned(),
        ));
    }
    if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) || code == "NOPERM" {
        return Some((
            format!("refused a command the limiter needs ({})", masked_detail(e)),
            "grant the ACL user the permissions the README lists for the limiter, on this budget's keys".to_owned(),
        ));
    }
    None
}

/// [`permission_problem`] as a configuration error about `endpoint`.
fn permission_error(endpoint: &str, e: &RedisError) -> Option<RedisConfigError> {
    permission_problem(e).map(|(problem, fix)| RedisConfigError {
        url: endpoint.to_owned(),
        problem,
        fix,
    })
}

/// Configuration mistakes that show in a connection's first answers.
fn config_problem(e: &RedisError) -> Option<Problem> {
    if let Some(p) = permission_problem(e) {
        return Some(p);
    }
    let text = e.to_string();
    let lower = text.to_ascii_lowercase();
    if lower.contains("db index is out of range") || lower.contains("invalid db index") {
        return Some((
            "has no database of the number in the URL (DB index is out of range)".to_owned(),
            "use a database below the server's `databases` setting (16 unless changed), e.g. /0"
                .to_owned(),
        ));
    }
    if lower.contains("cluster support disabled") {
        return Some((
            "is not a Redis Cluster (cluster support is disabled on it)".to_owned(),
            "use redis:// (rediss://) for a single server, or point redis+cluster:// at a node of a Cluster".to_owned(),
        ));
    }
    if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        return Some((
            "presented a TLS certificate that does not name the host in the URL".to_owned(),
            "connect by a name the certificate lists (its subject alternative names), or reissue the certificate for this name".to_owned(),
        ));
    }
    if lower.contains("unknownissuer")
        || lower.contains("unknown issuer")
        || lower.contains("badsignature")
    {
        return Some((
            "presented a TLS certificate from an issuer this host does not trust".to_owned(),
            "give the CA that signed it with --redis-ca-file (TRENDSYNC_REDIS_CA_FILE)".to_owned(),
        ));
    }
    if lower.contains("expired") && lower.contains("certificate") {
        return Some((
            "presented an expired TLS certificate".to_owned(),
            "renew the server's certificate".to_owned(),
        ));
    }
    if lower.contains("certificaterequired") || lower.contains("certificate required") {
        return Some((
            "requires a client certificate (mutual TLS)".to_owned(),
            "give --redis-client-cert and --redis-client-key".to_owned(),
        ));
    }
    if lower.contains("corrupt message")
        || lower.contains("invalidcontenttype")
        || lower.contains("wrong version")
    {
        return Some((
            "does not speak TLS on that port".to_owned(),
            "use redis:// for a plain port, or point rediss:// at the server's tls-port".to_owned(),
        ));
    }
    if matches!(e.kind(), ErrorKind::Parse | ErrorKind::UnexpectedReturnType)
        || lower.contains("not a sentinel")
    {
        return Some((
            format!("did not answer as Redis does ({})", masked_detail(e)),
            "point the URL at a Redis server (or, for redis+sentinel://, at its Sentinels)"
                .to_owned(),
        ));
    }
    if e.kind() == ErrorKind::MasterNameNotFoundBySentinel {
        return Some((
            "has Sentinels that watch no primary of that service name".to_owned(),
            "use the name the Sentinels monitor (SENTINEL MASTERS lists them) after the hosts"
                .to_owned(),
        ));
    }
    if matches!(
        e.kind(),
        ErrorKind::InvalidClientConfig | ErrorKind::EmptySentinelList
    ) {
        return Some((
            format!("cannot be used ({})", masked_detail(e)),
            "check the URL and the TLS files against the README".to_owned(),
        ));
    }
    None
}

/// Whether a failed command is a failover in progress, worth the same command again
/// after a pause: a redirection, a node that is loading, read-only or waiting for its
/// primary, or (where an election can happen) a node that went away. A timeout is
/// not: a Redis too slow to answer is down, and waiting again would double what a run
/// pays for it.
pub(super) fn is_failover(e: &RedisError, elects: bool) -> bool {
    if e.is_timeout() {
        return false;
    }
    // A primary configured with min-replicas-to-write refuses writes once its replica
    // left, as it does when the replica was promoted in its place.
    if e.code() == Some("NOREPLICAS") {
        return true;
    }
    match e.kind() {
        ErrorKind::Server(
            ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::TryAgain
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask,
        ) => true,
        ErrorKind::ClusterConnectionNotFound | ErrorKind::MasterNameNotFoundBySentinel => elects,
        _ => elects && (e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()),
    }
}

/// A connection that broke (as opposed to one that is slow, or a server that said
/// no) may work again at once on a fresh connection.
pub(super) fn worth_once_more(e: &RedisError) -> bool {
    !e.is_timeout() && (e.is_connection_dropped() || e.is_io_error())
}

/// Redis `TIME` as a script names it when it fell outside the days this host sent
/// for a calendar-day window (`CLOCKAPART` in prelude.lua): the two clocks are too
/// far apart. `None` for any other error.
pub(super) fn clocks_apart_at(e: &RedisError) -> Option<Micros> {
    if e.code() != Some("CLOCKAPART") {
        return None;
    }
    let time = e.detail()?.split_whitespace().next()?;
    time.parse().ok().map(Micros::new)
}

/// A connection that failed or timed out means the limiter is down; anything else the
/// server said is a failure that must not be retried blindly.
pub(super) fn classify(endpoint: &str, doing: &'static str, e: &RedisError) -> LimiterError {
    if let Some(config) = permission_error(endpoint, e) {
        return config.into();
    }
    if e.is_io_error()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_connection_dropped()
        || is_failover(e, true)
    {
        LimiterError::Unavailable {
            endpoint: endpoint.to_owned(),
            source: RedisCause::of(e).into(),
        }
    } else {
        LimiterError::Failed {
            endpoint: endpoint.to_owned(),
            doing,
            source: RedisCause::of(e).into(),
        }
    }
}

/// A Redis error as a [`LimiterError`]'s source: its kind and code, and its text with
/// any URL masked. The `RedisError` itself is not kept: its text can quote the URL it
/// was given, password and all, and a source is printed with the error.
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct RedisCause {
    pub kind: redis::ErrorKind,
    /// The server's error code (`NOPERM`, `READONLY`), when it sent one.
    pub code: Option<String>,
    /// The server refused the connection: no request reached it. A timeout or a
    /// dropped connection may have come after the request was sent.
    pub refused: bool,
    detail: String,
}

impl RedisCause {
    fn of(e: &RedisError) -> RedisCause {
        RedisCause {
            kind: e.kind(),
            code: e.code().map(str::to_owned),
            refused: e.is_connection_refusal(),
            detail: masked_detail(e),
        }
    }
}

#[cfg(test)]
mod tests;

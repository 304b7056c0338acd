//! How the limiter reaches Redis in each deployment form of DESIGN.md section 8: one
//! server (plain, TLS or a unix socket), a Sentinel-watched primary, or a Cluster. The
//! `redis` crate's own clients do the work (the connection manager, the Sentinel
//! client, the cluster client with its MOVED/ASK handling); this module turns a
//! `--redis-url` into one of them, says which failures are a failover to wait out, and
//! turns a configuration mistake into a message that says what to fix.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind,
    IntoConnectionInfo, Pipeline, RedisConnectionInfo, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, TlsCertificates, TlsMode, Value,
};

use crate::mask::mask_url;

/// A run never hangs on Redis: a connection that cannot be made or a command that is
/// not answered within these counts as "the limiter is down" (DESIGN.md 3.6).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_millis(1_000);
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_millis(2_000);

/// The schemes `--redis-url` takes, for messages.
const SCHEMES: &str = "redis://, rediss://, unix://, redis+sentinel://, rediss+sentinel://, \
                       redis+cluster:// or rediss+cluster://";

/// The TLS files given with `--redis-ca-file`, `--redis-client-cert` and
/// `--redis-client-key`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca_file: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

impl TlsFiles {
    fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.client_cert.is_none() && self.client_key.is_none()
    }
}

/// A Redis configuration that cannot work however long one waits: exit 78, with the
/// URL (password masked), what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[error("Redis at {url}: {problem}; {fix}")]
pub struct RedisConfigError {
    pub url: String,
    pub problem: String,
    pub fix: String,
}

/// Where a `--redis-url` points, parsed.
#[derive(Debug, Clone)]
enum Form {
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
    fn tls(&self) -> bool {
        match self {
            Form::Single { tls, .. } | Form::Sentinel { tls, .. } | Form::Cluster { tls, .. } => {
                *tls
            }
        }
    }

    /// Whether a refused or dropped connection may be a new primary being elected,
    /// worth waiting for; a lone server that refuses is down.
    fn elects(&self) -> bool {
        !matches!(self, Form::Single { .. })
    }
}

/// What is wrong with a URL, and the fix.
type Problem = (String, String);

fn malformed(what: impl Into<String>) -> Problem {
    (
        format!("is not a valid Redis URL: {}", what.into()),
        "write it as in the README, e.g. redis://[user:password@]host:6379/0".to_owned(),
    )
}

fn parse(url: &str) -> Result<Form, Problem> {
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
            format!("use {SCHEMES} (DESIGN and README list each form)"),
        )),
    }
}

/// Query parameters of a one-server URL that the client never reads, so that a
/// password or a database given there would be dropped without a word: a TCP URL
/// reads none of them, a unix socket only `db`, `user` and `pass`.
fn ignored_parameters(url: &str) -> Vec<String> {
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

/// Builds connections for one `--redis-url`.
pub(super) struct Connector {
    form: Form,
    certs: Option<TlsCertificates>,
    endpoint: String,
    /// A key of the budget, whose slot picks the Cluster primary to check.
    probe_key: String,
}

impl Connector {
    /// Parses the URL and reads the TLS files; every mistake found here is one no
    /// retry can fix.
    pub(super) fn new(
        url: &str,
        tls: &TlsFiles,
        probe_key: String,
    ) -> Result<Connector, RedisConfigError> {
        let endpoint = mask_url(url);
        let config_error = |(problem, fix): Problem| RedisConfigError {
            url: endpoint.clone(),
            problem,
            fix,
        };
        let form = parse(url).map_err(config_error)?;
        for key in ignored_parameters(url) {
            tracing::warn!(
                "--redis-url {endpoint}: the parameter ?{key}= is ignored in this form of URL; \
                 put credentials before the host (redis://[user]:PASSWORD@host:6379/0) and \
                 the database after it (/0); a unix socket takes ?db=, ?user= and ?pass="
            );
        }
        if !tls.is_empty() && !form.tls() {
            return Err(config_error((
                "is not a TLS URL, yet TLS files were given (--redis-ca-file, --redis-client-cert, --redis-client-key)".to_owned(),
                "use rediss:// (or rediss+sentinel://, rediss+cluster://) for a server that speaks TLS, or drop the TLS files".to_owned(),
            )));
        }
        let certs = read_tls_files(tls).map_err(config_error)?;
        Ok(Connector {
            form,
            certs,
            endpoint,
            probe_key,
        })
    }

    pub(super) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub(super) fn elects(&self) -> bool {
        self.form.elects()
    }

    /// A connection of the URL's form, checked with a PING to the primary that holds
    /// the budget.
    pub(super) async fn connect(&self) -> RedisResult<Conn> {
        let mut conn = match &self.form {
            Form::Single { info, .. } => {
                let client = match &self.certs {
                    Some(certs) => Client::build_with_tls(info.clone(), certs.clone())?,
                    None => Client::open(info.clone())?,
                };
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_number_of_retries(1);
                Conn::Managed(ConnectionManager::new_with_config(client, config).await?)
            }
            Form::Cluster { nodes, tls } => {
                let mut builder = redis::cluster::ClusterClientBuilder::new(nodes.clone())
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(RESPONSE_TIMEOUT)
                    // The client's own retries follow MOVED/ASK and refresh the slot
                    // map; waiting out an election is the caller's bounded loop.
                    .retries(3)
                    .min_retry_wait(10)
                    .max_retry_wait(200);
                if *tls {
                    builder = builder.tls(TlsMode::Secure);
                    if let Some(certs) = &self.certs {
                        builder = builder.certs(certs.clone());
                    }
                }
                Conn::Cluster(builder.build()?.get_async_connection().await?)
            }
            Form::Sentinel {
                sentinels,
                service,
                redis,
                tls,
            } => {
                let mut builder = SentinelClientBuilder::new(
                    sentinels.clone(),
                    service,
                    SentinelServerType::Master,
                )?
                .set_client_to_redis_db(redis.db());
                if let Some(user) = redis.username() {
                    builder = builder.set_client_to_redis_username(user);
                }
                if let Some(password) = redis.password() {
                    builder = builder.set_client_to_redis_password(password);
                }
                if *tls {
                    builder = builder
                        .set_client_to_redis_tls_mode(TlsMode::Secure)
                        .set_client_to_sentinel_tls_mode(TlsMode::Secure);
                    if let Some(certs) = &self.certs {
                        builder = builder
                            .set_client_to_redis_certificates(certs.clone())
                            .set_client_to_sentinel_certificates(certs.clone());
                    }
                }
                Conn::Sentinel(SentinelConn::new(builder.build()?))
            }
        };
        conn.ping(&self.probe_key).await?;
        Ok(conn)
    }

    /// What a failure to connect says about the configuration, if it cannot be a
    /// passing outage: a message that says what to fix.
    pub(super) async fn diagnose(&self, e: &RedisError) -> Option<RedisConfigError> {
        // The Sentinels find no primary of the name: a typo in the URL, unless they
        // know the name and are electing a new primary for it (DESIGN.md 8), which is
        // a failover to wait out.
        if e.kind() == ErrorKind::MasterNameNotFoundBySentinel
            && self.sentinels_know_service().await
        {
            return None;
        }
        let (problem, fix) = match config_problem(e) {
            Some(p) => p,
            None if self.form.tls() && !e.is_connection_refusal() => {
                self.speaks_plain_instead().await?
            }
            None if e.is_connection_dropped() && !e.is_connection_refusal() => {
                self.speaks_tls_instead().await?
            }
            None => return None,
        };
        Some(RedisConfigError {
            url: self.endpoint.clone(),
            problem,
            fix,
        })
    }

    /// Whether any Sentinel of the URL monitors its service name (`SENTINEL
    /// GET-MASTER-ADDR-BY-NAME` answers with an address, the old primary's while an
    /// election goes on). Sentinels that cannot be reached say nothing either way.
    async fn sentinels_know_service(&self) -> bool {
        let Form::Sentinel {
            sentinels, service, ..
        } = &self.form
        else {
            return false;
        };
        for addr in sentinels {
            let client = match (&self.certs, addr) {
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
    async fn speaks_plain_instead(&self) -> Option<Problem> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Form::Single { info, tls: true } = &self.form else {
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
                "use redis:// for a plain port, or point rediss:// at the server's tls-port"
                    .to_owned(),
            )
        })
    }

    /// A plain connection that a server cut at once may have reached a TLS port:
    /// a TLS handshake that gets as far as the server's certificate tells.
    async fn speaks_tls_instead(&self) -> Option<Problem> {
        let Form::Single { info, tls: false } = &self.form else {
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
}

/// Reads and checks the TLS files; `None` takes the system's trust store.
fn read_tls_files(tls: &TlsFiles) -> Result<Option<TlsCertificates>, Problem> {
    if tls.is_empty() {
        return Ok(None);
    }
    let read = |flag: &str, path: &Path, marker: &str| -> Result<Vec<u8>, Problem> {
        let bytes = std::fs::read(path).map_err(|e| {
            (
                format!("cannot use {flag} {}: {e}", path.display()),
                format!("give {flag} a readable PEM file"),
            )
        })?;
        if !String::from_utf8_lossy(&bytes).contains(marker) {
            return Err((
                format!("{flag} {} holds no PEM \"{marker}\" block", path.display()),
                format!("give {flag} a PEM file (the text form, starting with -----BEGIN)"),
            ));
        }
        Ok(bytes)
    };
    let root_cert = tls
        .ca_file
        .as_deref()
        .map(|p| read("--redis-ca-file", p, "CERTIFICATE-----"))
        .transpose()?;
    let client_tls = match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read("--redis-client-cert", cert, "CERTIFICATE-----")?,
            client_key: read("--redis-client-key", key, "PRIVATE KEY-----")?,
        }),
        (None, None) => None,
        _ => {
            return Err((
                "needs both a client certificate and its key for mutual TLS, and got one"
                    .to_owned(),
                "give --redis-client-cert and --redis-client-key together".to_owned(),
            ));
        }
    };
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
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
pub(super) fn permission_error(endpoint: &str, e: &RedisError) -> Option<RedisConfigError> {
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

/// A connection of any form, cheap to clone; each form reconnects by itself.
#[derive(Clone)]
pub(super) enum Conn {
    Managed(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(SentinelConn),
}

impl Conn {
    /// PING, on a Cluster to the primary of the budget's slot.
    async fn ping(&mut self, key: &str) -> RedisResult<()> {
        let mut ping = redis::cmd("PING");
        match self {
            Conn::Cluster(c) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key, SlotAddr::Master),
                ));
                c.route_command(ping, route).await.map(drop)
            }
            other => ping.arg("trendsync").query_async::<()>(other).await,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Managed(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Managed(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Managed(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
        }
    }
}

/// The primary a Sentinel set names, asked again whenever the connection to it
/// fails in a way a failover explains (the old primary went away or turned replica).
#[derive(Clone)]
pub(super) struct SentinelConn {
    shared: Arc<SentinelShared>,
}

struct SentinelShared {
    client: tokio::sync::Mutex<SentinelClient>,
    /// The current primary's connection and a generation, so that a task that saw an
    /// old connection fail does not throw away a newer one.
    current: Mutex<(u64, Option<MultiplexedConnection>)>,
}

impl SentinelConn {
    fn new(client: SentinelClient) -> SentinelConn {
        SentinelConn {
            shared: Arc::new(SentinelShared {
                client: tokio::sync::Mutex::new(client),
                current: Mutex::new((0, None)),
            }),
        }
    }

    fn current(&self) -> (u64, Option<MultiplexedConnection>) {
        let guard = self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (guard.0, guard.1.clone())
    }

    async fn connection(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let (generation, Some(c)) = self.current() {
            return Ok((generation, c));
        }
        let mut client = self.shared.client.lock().await;
        if let (generation, Some(c)) = self.current() {
            return Ok((generation, c));
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        // Asking the Sentinels has no timeout of its own. It takes three connections
        // (a Sentinel, the primary to check its role, the primary to use), each a
        // handshake over TLS: each gets a connection's time.
        let conn = tokio::time::timeout(
            3 * CONNECT_TIMEOUT + RESPONSE_TIMEOUT,
            client.get_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| {
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the Sentinels did not name a primary in time",
            ))
        })??;
        let mut guard = self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        guard.0 += 1;
        guard.1 = Some(conn.clone());
        Ok((guard.0, conn))
    }

    /// Forgets the connection of `generation` after `e`, if `e` says the primary may
    /// have moved.
    fn forget_after(&self, generation: u64, e: &RedisError) {
        let moved = e.is_io_error()
            || e.is_connection_dropped()
            || e.code() == Some("NOREPLICAS")
            || matches!(
                e.kind(),
                ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
            );
        if moved {
            let mut guard = self
                .shared
                .current
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if guard.0 == generation {
                guard.1 = None;
            }
        }
    }
}

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut conn) = self.connection().await?;
            let result = conn.req_packed_command(cmd).await;
            if let Err(e) = &result {
                self.forget_after(generation, e);
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut conn) = self.connection().await?;
            let result = conn.req_packed_commands(cmd, offset, count).await;
            if let Err(e) = &result {
                self.forget_after(generation, e);
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.current().1.map_or(0, |c| c.get_db())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses() {
        assert!(matches!(
            parse("redis://127.0.0.1:6379/0"),
            Ok(Form::Single { tls: false, .. })
        ));
        assert!(matches!(
            parse("rediss://localhost:6380"),
            Ok(Form::Single { tls: true, .. })
        ));
        assert!(matches!(
            parse("unix:///run/redis.sock?db=1&pass=x"),
            Ok(Form::Single { tls: false, .. })
        ));
        let Ok(Form::Sentinel {
            sentinels,
            service,
            redis,
            tls,
        }) = parse("rediss+sentinel://u:p%40ss@s1:26380,[::1]/mymaster/3")
        else {
            panic!("a Sentinel URL parses")
        };
        assert_eq!(sentinels.len(), 2);
        assert_eq!(service, "mymaster");
        assert_eq!(redis.db(), 3);
        assert_eq!(redis.username(), Some("u"));
        assert_eq!(redis.password(), Some("p@ss"));
        assert!(tls);
        let Ok(Form::Cluster { nodes, tls }) = parse("redis+cluster://:pw@n1,n2:7001/") else {
            panic!("a Cluster URL parses")
        };
        assert_eq!(nodes, ["redis://:pw@n1:6379", "redis://:pw@n2:7001"]);
        assert!(!tls);
    }

    #[test]
    fn mistakes_in_urls_are_named() {
        for (url, says) in [
            ("http://127.0.0.1:6379", "scheme \"http\""),
            ("127.0.0.1:6379", "no scheme"),
            ("redis+sentinel://s1:26379", "names the primary's service"),
            ("redis+cluster://n1:6379/3", "only database 0"),
            ("redis+cluster://n1:notaport", "not a port"),
            ("redis+cluster://n1,,n2", "host is missing"),
            ("redis+sentinel://s1/m/x", "not a database"),
        ] {
            let Err((problem, fix)) = parse(url) else {
                panic!("{url} is refused")
            };
            assert!(problem.contains(says), "{url}: {problem}");
            assert!(!fix.is_empty());
        }
    }

    #[test]
    fn parameters_the_client_would_drop_are_named() {
        assert_eq!(
            ignored_parameters("redis://h:6379/0?password=x&protocol=resp3"),
            ["password"]
        );
        assert_eq!(
            ignored_parameters("rediss://h/?db=2&user=u"),
            ["db", "user"]
        );
        assert!(ignored_parameters("unix:///r.sock?db=1&user=u&pass=x").is_empty());
        assert_eq!(
            ignored_parameters("unix:///r.sock?password=x"),
            ["password"]
        );
        assert!(ignored_parameters("redis://:pw@h:6379/0").is_empty());
        assert!(ignored_parameters("s3cretpw").is_empty());
    }

    #[test]
    fn tls_files_need_a_tls_url_and_come_in_pairs() {
        let ca = TlsFiles {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..TlsFiles::default()
        };
        let err = Connector::new("redis://:pw@h:6379", &ca, "k".into())
            .err()
            .expect("refused");
        assert!(err.to_string().contains("redis://:***@h:6379"), "{err}");
        assert!(err.fix.contains("rediss://"), "{err}");
        let err = Connector::new("rediss://h:6379", &ca, "k".into())
            .err()
            .expect("refused");
        assert!(err.problem.contains("/nonexistent/ca.pem"), "{err}");
        let half = TlsFiles {
            client_cert: Some("/nonexistent/c.pem".into()),
            ..TlsFiles::default()
        };
        let err = Connector::new("rediss://h:6379", &half, "k".into())
            .err()
            .expect("refused");
        assert!(err.fix.contains("--redis-client-key"), "{err}");
    }
}

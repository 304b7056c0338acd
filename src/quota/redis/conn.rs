//! How the limiter reaches Redis in each deployment form of the README, "Redis deployments": one
//! server (plain, TLS or a unix socket), a Sentinel-watched primary, or a Cluster. The
//! `redis` crate's own clients do the work (the connection manager, the Sentinel
//! client, the cluster client with its MOVED/ASK handling); this module turns a parsed
//! `--redis-url` and its TLS files into one of them, within timeouts that keep a run
//! from hanging on Redis.

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
    AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, TlsCertificates, TlsMode, Value,
};

use super::url::{Form, Problem, RedisConfigError, ignored_parameters, parse};
use crate::mask::mask_url;

/// A run never hangs on Redis: a connection that cannot be made or a command that is not
/// answered within these counts as "the limiter is down" (docs/budget.md, "When the limiter
/// is down").
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_millis(1_000);
pub(super) const RESPONSE_TIMEOUT: Duration = Duration::from_millis(2_000);

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

    /// The URL's form, for diagnosing a failure.
    pub(super) fn form(&self) -> &Form {
        &self.form
    }

    /// The TLS files read, for diagnosing a failure; `None` takes the system's trust
    /// store.
    pub(super) fn certs(&self) -> Option<&TlsCertificates> {
        self.certs.as_ref()
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
mod tests;

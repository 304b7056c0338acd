//! A real `redis-server` for one test (or benchmark): started on a free loopback port
//! with no persistence (or, [`RedisServer::start_durable`], with every write fsynced
//! to an append-only file), waited for until it answers PING, and killed when dropped.
//! It can be stopped and started again on the same port to play a restart or an outage,
//! and can require a password, listen on a unix socket, speak TLS, replicate another
//! server or be a Cluster node (the deployments built from it are in
//! `redis_deployments.rs`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    password: Option<String>,
    /// Every write is in the append-only file before it is answered, so a restart
    /// keeps the whole window, however abruptly the server was stopped.
    durable: bool,
    /// Clients reach it through `redis.sock` in its directory ([`RedisServer::url`]).
    unix: bool,
    /// It also listens for TLS on this port, and [`RedisServer::url`] points there.
    tls: Option<(u16, super::redis_deployments::TlsCerts)>,
    /// More redis-server arguments (replication, Cluster mode).
    extra: Vec<String>,
    /// Killed through a shared reference ([`RedisServer::kill`]).
    killed: std::sync::atomic::AtomicBool,
}

/// How to start a [`RedisServer`].
#[derive(Default)]
pub struct Options {
    pub password: Option<String>,
    pub durable: bool,
    pub unix: bool,
    pub tls: Option<super::redis_deployments::TlsCerts>,
    /// The TLS port, when it must be known before the server starts [default: a free one].
    pub tls_port: Option<u16>,
    pub extra: Vec<String>,
}

pub fn redis_server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TRENDSYNC_TEST_REDIS_SERVER") {
        return PathBuf::from(p);
    }
    for dir in std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
    {
        let candidate = dir.join("redis-server");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "redis-server is not installed, and the tests need a real one: run scripts/test \
         (it installs it on Debian as root) or install the redis-server package"
    );
}

pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free loopback port");
    listener
        .local_addr()
        .expect("reading the bound port")
        .port()
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_as(None, false)
    }

    /// A server that answers only clients that authenticate with `password`
    /// (`--requirepass`); [`RedisServer::url`] carries it.
    pub fn start_with_password(password: &str) -> RedisServer {
        assert!(
            password
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "a password that needs no escaping in a URL"
        );
        RedisServer::start_as(Some(password.to_owned()), false)
    }

    /// A server that keeps its data across [`RedisServer::restart`], as a production
    /// Redis with `appendfsync always` does; its script cache still starts empty.
    pub fn start_durable() -> RedisServer {
        RedisServer::start_as(None, true)
    }

    fn start_as(password: Option<String>, durable: bool) -> RedisServer {
        RedisServer::start_with(Options {
            password,
            durable,
            ..Options::default()
        })
    }

    /// A server reached through a unix socket, with a password.
    pub fn start_unix_with_password(password: &str) -> RedisServer {
        RedisServer::start_with(Options {
            password: Some(password.to_owned()),
            unix: true,
            ..Options::default()
        })
    }

    pub fn start_with(options: Options) -> RedisServer {
        let dir = tempfile::tempdir().expect("creating a directory for redis-server");
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir,
            password: options.password,
            durable: options.durable,
            unix: options.unix,
            tls: options
                .tls
                .map(|certs| (options.tls_port.unwrap_or_else(free_port), certs)),
            extra: options.extra,
            killed: Default::default(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        self.killed
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let mut cmd = Command::new(redis_server_binary());
        if let Some(password) = &self.password {
            cmd.args(["--requirepass", password]);
        }
        if self.unix {
            cmd.arg("--unixsocket")
                .arg(self.socket())
                .args(["--unixsocketperm", "700"]);
        }
        if let Some((port, certs)) = &self.tls {
            cmd.args(["--tls-port", &port.to_string()])
                .arg("--tls-cert-file")
                .arg(certs.file("server.crt"))
                .arg("--tls-key-file")
                .arg(certs.file("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(certs.file("ca.crt"))
                // Mutual TLS: every client shows a certificate the CA signed.
                .args(["--tls-auth-clients", "yes"]);
        }
        cmd.args(&self.extra);
        let child = cmd
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                if self.durable { "yes" } else { "no" },
                "--appendfsync",
                "always",
                // A replica syncs at once instead of after the default 5 s.
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on 127.0.0.1:{} did not answer PING within 10 s",
            self.port
        );
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        let (ask, expect): (Vec<u8>, &[u8]) = match &self.password {
            None => (b"PING\r\n".to_vec(), b"+PONG\r\n"),
            Some(pw) => (
                format!("AUTH {pw}\r\nPING\r\n").into_bytes(),
                b"+OK\r\n+PONG\r\n",
            ),
        };
        let mut buf = vec![0u8; expect.len()];
        s.write_all(&ask).is_ok() && s.read_exact(&mut buf).is_ok() && buf == expect
    }

    /// The plain TCP port (which every server has, for the tests' own checks).
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// The port TLS clients use.
    pub fn tls_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|(port, _)| *port)
    }

    /// The TLS files a client needs, if it speaks TLS.
    pub fn certs(&self) -> Option<&super::redis_deployments::TlsCerts> {
        self.tls.as_ref().map(|(_, certs)| certs)
    }

    /// The URL the binary is given: `redis://[:PASSWORD@]127.0.0.1:PORT/0`; for a
    /// unix socket `unix:///…/redis.sock?db=0[&pass=PASSWORD]`; for TLS
    /// `rediss://127.0.0.1:TLS_PORT/0`.
    pub fn url(&self) -> String {
        let auth = self
            .password
            .as_ref()
            .map(|pw| format!(":{pw}@"))
            .unwrap_or_default();
        if self.unix {
            let pass = self
                .password
                .as_ref()
                .map(|pw| format!("&pass={pw}"))
                .unwrap_or_default();
            return format!("unix://{}?db=0{pass}", self.socket().display());
        }
        match &self.tls {
            Some((port, _)) => format!("rediss://{auth}127.0.0.1:{port}/0"),
            None => format!("redis://{auth}127.0.0.1:{}/0", self.port),
        }
    }

    /// The plain TCP URL, for the tests' own checks.
    pub fn tcp_url(&self) -> String {
        match &self.password {
            None => format!("redis://127.0.0.1:{}/0", self.port),
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{}/0", self.port),
        }
    }

    /// The binary's arguments for reaching this server: the URL, and the TLS files.
    pub fn client_args(&self) -> Vec<String> {
        let mut args = vec!["--redis-url".to_owned(), self.url()];
        if let Some(certs) = self.certs() {
            args.extend(certs.client_args());
        }
        args
    }

    /// Runs a command on this server's plain port.
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        cmd.query(&mut self.connection())
            .unwrap_or_else(|e| panic!("{cmd:?} on 127.0.0.1:{}: {e}", self.port))
    }

    /// Kills the server (SIGKILL): clients now find nothing listening.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open and commands are read
    /// by nobody, as with a Redis hung on a slow disk or a long script.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a paused server go on, with the commands that queued up meanwhile.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let child = self.child.as_ref().expect("the server is running");
        let status = Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill {sig} redis-server");
    }

    /// Starts it again on the same port, with an empty script cache: empty (no
    /// persistence), a restart or a failover to a fresh node; or, for a durable
    /// server, holding every write it acknowledged.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some() && !self.killed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// kill -9, through a shared reference (a node of a deployment); the process is
    /// reaped when the server is dropped.
    pub fn kill(&self) {
        self.signal("-KILL");
        self.killed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// A connection on the plain port, if the server answers.
    pub fn try_connection(&self) -> Option<redis::Connection> {
        redis::Client::open(self.tcp_url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .ok()
    }

    /// A plain synchronous connection for checking what the server holds.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.tcp_url())
            .and_then(|c| c.get_connection())
            .expect("connecting to the test redis-server")
    }

    /// Every key of the Redis database with everything it holds: its name, its value as
    /// the type's own read command returns it, and its DUMP (which may compress long
    /// strings, hence the plain reads as well).
    pub fn contents(&self) -> Vec<(String, Vec<Vec<u8>>)> {
        let mut conn = self.connection();
        let mut keys: Vec<String> = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query(&mut conn)
                .expect("SCAN");
            keys.extend(batch);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|key| {
                let kind: String = redis::cmd("TYPE").arg(&key).query(&mut conn).expect("TYPE");
                let mut read = match kind.as_str() {
                    "zset" => redis::cmd("ZRANGE"),
                    "hash" => redis::cmd("HGETALL"),
                    "list" => redis::cmd("LRANGE"),
                    "set" => redis::cmd("SMEMBERS"),
                    "string" => redis::cmd("MGET"),
                    other => panic!("{key} is a {other}, which the tests cannot read"),
                };
                read.arg(&key);
                if kind == "zset" || kind == "list" {
                    read.arg(0).arg(-1);
                }
                if kind == "zset" {
                    read.arg("WITHSCORES");
                }
                let mut values: Vec<Vec<u8>> = read.query(&mut conn).expect("reading a key");
                let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut conn).expect("DUMP");
                values.push(dump);
                (key, values)
            })
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

//! A real `redis-server` for one test (or benchmark): started on a free loopback port
//! with no persistence (or, [`RedisServer::start_durable`], with every write fsynced
//! to an append-only file), waited for until it answers PING, and killed when dropped.
//! It can be stopped and started again on the same port to play a restart or an outage,
//! and can require a password, listen on a unix socket, speak TLS, replicate another
//! server or be a Cluster node (the deployments built from it are in
//! `redis_deployments.rs`). Its wall clock can be moved ([`RedisServer::start_at`],
//! [`ClockShift`]), to put the limiter's clock (Redis `TIME`) where a test needs it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use trendsync::clock::{Clock, SystemClock};

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
    /// Its wall clock, moved by the clock-shift shim (every start, restarts too).
    clock: Option<ClockShift>,
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
    /// Its wall clock moved by this many microseconds from the start, and movable
    /// later through [`RedisServer::clock`] [default: the real clock, no shim].
    pub clock_shift_us: Option<i64>,
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

    /// A server whose clock reads `unix_us` (microseconds since the Unix epoch) now,
    /// and goes on from there; [`RedisServer::clock`] moves it.
    pub fn start_at(unix_us: i64) -> RedisServer {
        RedisServer::start_with(Options {
            clock_shift_us: Some(unix_us - real_now_us()),
            ..Options::default()
        })
    }

    pub fn start_with(options: Options) -> RedisServer {
        let dir = tempfile::tempdir().expect("creating a directory for redis-server");
        let clock = options.clock_shift_us.map(|shift_us| {
            let clock = ClockShift {
                file: dir.path().join("clock-shift-us"),
            };
            clock.write(shift_us);
            clock
        });
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
            clock,
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
        if let Some(clock) = &self.clock {
            cmd.env("LD_PRELOAD", clock_shift_library())
                .env(CLOCK_SHIFT_FILE_VAR, &clock.file);
        }
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

    /// The handle that moves this server's clock.
    pub fn clock(&self) -> ClockShift {
        self.clock.clone().expect(
            "a server started with a movable clock (RedisServer::start_at, or \
             Options::clock_shift_us)",
        )
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

/// The environment variable naming the file the shim reads the shift from.
pub const CLOCK_SHIFT_FILE_VAR: &str = "TRENDSYNC_TEST_CLOCK_SHIFT_FILE";

/// How long the shim may go on with a shift it has read (it re-reads the file at most
/// every millisecond, sparing the server a file read on every clock read), with room.
const CLOCK_SHIFT_REREAD: Duration = Duration::from_millis(3);

/// Moves the wall clock of one [`RedisServer`] (CLOCK_REALTIME, hence `TIME`, script
/// time and key expiry; not its monotonic clock) through the LD_PRELOAD shim of
/// `clock_shift.c`. Clones move the same clock. Each setter returns once the server's
/// next clock read shows the new time.
#[derive(Clone, Debug)]
pub struct ClockShift {
    /// A signed decimal number of microseconds, in the server's directory.
    file: PathBuf,
}

impl ClockShift {
    /// The server's clock reads the real one plus `shift_us` microseconds.
    pub fn set_shift_us(&self, shift_us: i64) {
        self.write(shift_us);
        std::thread::sleep(CLOCK_SHIFT_REREAD);
    }

    /// The server's clock reads `unix_us` (microseconds since the Unix epoch) now.
    pub fn set_now_us(&self, unix_us: i64) {
        self.set_shift_us(unix_us - real_now_us());
    }

    /// Jumps the server's clock by `by_us` microseconds (back, if negative).
    pub fn advance_us(&self, by_us: i64) {
        self.set_shift_us(self.shift_us() + by_us);
    }

    pub fn shift_us(&self) -> i64 {
        let file = &self.file;
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{} holds {text:?}: {e}", file.display()))
    }

    /// What the server's clock reads now, in microseconds since the Unix epoch.
    pub fn now_us(&self) -> i64 {
        real_now_us() + self.shift_us()
    }

    /// Replaces the file whole (the shim may read it at any moment), by a rename.
    fn write(&self, shift_us: i64) {
        let partial = self.file.with_extension("partial");
        std::fs::write(&partial, format!("{shift_us}\n"))
            .and_then(|()| std::fs::rename(&partial, &self.file))
            .unwrap_or_else(|e| panic!("writing {}: {e}", self.file.display()));
    }
}

/// Microseconds since the Unix epoch, by this process's (real) clock.
pub fn real_now_us() -> i64 {
    SystemClock.now().as_i64()
}

/// `2026-03-08T07:59:58Z` in microseconds since the Unix epoch.
pub fn unix_us(rfc3339: &str) -> i64 {
    let at: jiff::Timestamp = rfc3339
        .parse()
        .unwrap_or_else(|e| panic!("{rfc3339:?} is not an RFC 3339 time: {e}"));
    at.as_microsecond()
}

/// The shim, built from `clock_shift.c` once per test process.
fn clock_shift_library() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/common/clock_shift.c");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clock-shift");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let library = dir.join("libclockshift.so");
        // Another test process may be building the same file: each builds its own and
        // renames it into place, and a server already started keeps the one it loaded.
        let partial = dir.join(format!("libclockshift.{}.so", std::process::id()));
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&partial)
            .arg(&source)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "running cc ({e}): the tests that move a redis-server's clock build \
                     an LD_PRELOAD shim from {} and need a C compiler (on Debian, the \
                     build-essential package)",
                    source.display()
                )
            });
        assert!(status.success(), "cc could not build {}", source.display());
        std::fs::rename(&partial, &library)
            .unwrap_or_else(|e| panic!("moving the shim to {}: {e}", library.display()));
        library
    })
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Listens on loopback `port` (where a stopped server was) and closes every connection
/// at once: the count of connections a client asked for there, which says whether it
/// tried once more or kept reconnecting, with no timing.
pub fn closing_listener(port: u16) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener =
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("listening where the server was");
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&asked);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    asked
}

//! A real `redis-server` for one test (or benchmark): started on a free loopback port
//! with no persistence, waited for until it answers PING, and killed when dropped. It
//! can be stopped and started again on the same port to play a restart or an outage,
//! and can require a password.

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
}

fn redis_server_binary() -> PathBuf {
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

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free loopback port");
    listener
        .local_addr()
        .expect("reading the bound port")
        .port()
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_as(None)
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
        RedisServer::start_as(Some(password.to_owned()))
    }

    fn start_as(password: Option<String>) -> RedisServer {
        let dir = tempfile::tempdir().expect("creating a directory for redis-server");
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir,
            password,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(redis_server_binary());
        if let Some(password) = &self.password {
            cmd.args(["--requirepass", password]);
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
                "no",
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

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/0`, or `redis://:PASSWORD@127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        match &self.password {
            None => format!("redis://127.0.0.1:{}/0", self.port),
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{}/0", self.port),
        }
    }

    /// Kills the server: clients now find nothing listening.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty (no persistence): a restart or a
    /// failover to a fresh node, with an empty script cache.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// A plain synchronous connection for checking what the server holds.
    #[allow(dead_code)]
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connecting to the test redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

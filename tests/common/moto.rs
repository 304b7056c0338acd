//! A real S3-compatible server for the sink's tests: moto's server mode, from the
//! virtualenv scripts/test installs (`TRENDSYNC_TEST_PYTHON`), on a free loopback
//! port, waited for until it answers HTTP, and killed when dropped. Its buckets and
//! objects are reached with boto3 (which moto brings) through small scripts.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::redis_server::free_port;

/// The access key the tests give the binary and boto3; moto takes any.
pub const ACCESS_KEY_ID: &str = "AKIATRENDSYNCTEST";

pub struct MotoServer {
    child: Option<Child>,
    pub port: u16,
    python: PathBuf,
}

/// The python of the virtualenv that has moto, boto3, pyarrow, Polars and DuckDB.
pub fn python() -> PathBuf {
    std::env::var_os("TRENDSYNC_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "TRENDSYNC_TEST_PYTHON is not set, and the sink's tests run moto's S3 server \
                 and read the sink with DuckDB, pyarrow and Polars: run scripts/test (it \
                 installs them into target/analysts-venv), or point TRENDSYNC_TEST_PYTHON \
                 at a python that has moto[server], duckdb, pyarrow and polars"
            )
        })
}

impl MotoServer {
    /// A fresh server on a free port.
    pub fn start() -> MotoServer {
        let mut server = MotoServer {
            child: None,
            port: free_port(),
            python: python(),
        };
        server.restart();
        server
    }

    /// Starts the server again on its port (with nothing in it: moto keeps its
    /// objects in memory), and waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "moto is running already");
        let child = Command::new(&self.python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("starting moto's server with {}: {e}", self.python.display())
            });
        self.child = Some(child);
        let began = Instant::now();
        while !self.answers() {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "moto's server ended before it answered ({status}): is moto[server] installed?"
                );
            }
            assert!(
                began.elapsed() < Duration::from_secs(60),
                "moto's server did not answer on 127.0.0.1:{} within a minute",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether an HTTP request gets an answer.
    fn answers(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        let request = format!(
            "GET /moto-api/ HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        if conn.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        conn.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
    }

    /// Kills the server: the sink is down.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The endpoint the binary and boto3 reach it at.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs `script` with boto3's client for this server as `s3` (and `json`, `sys`
    /// imported), `args` as `sys.argv[1:]`, and returns its stdout.
    #[track_caller]
    pub fn boto3(&self, script: &str, args: &[&str]) -> String {
        let prelude = format!(
            "import boto3, json, sys\n\
             s3 = boto3.client('s3', endpoint_url='{}', region_name='us-east-1',\n\
                               aws_access_key_id='{ACCESS_KEY_ID}', aws_secret_access_key='x')\n",
            self.endpoint()
        );
        let out = Command::new(&self.python)
            .arg("-c")
            .arg(format!("{prelude}{script}"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running boto3");
        assert!(
            out.status.success(),
            "boto3 script failed: {}\n{script}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn create_bucket(&self, bucket: &str) {
        self.boto3("s3.create_bucket(Bucket=sys.argv[1])", &[bucket]);
    }

    /// Every object's key in `bucket`, sorted.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let out = self.boto3(
            "pages = s3.get_paginator('list_objects_v2').paginate(Bucket=sys.argv[1])\n\
             print(json.dumps(sorted(o['Key'] for p in pages for o in p.get('Contents', []))))",
            &[bucket],
        );
        serde_json::from_str(&out).expect("a JSON list of keys")
    }

    /// Copies every object of `bucket` into the directory `to` (key as path).
    pub fn save(&self, bucket: &str, to: &std::path::Path) {
        self.boto3(
            "import os\n\
             pages = s3.get_paginator('list_objects_v2').paginate(Bucket=sys.argv[1])\n\
             for o in (o for p in pages for o in p.get('Contents', [])):\n\
             \x20   path = os.path.join(sys.argv[2], o['Key'])\n\
             \x20   os.makedirs(os.path.dirname(path), exist_ok=True)\n\
             \x20   s3.download_file(sys.argv[1], o['Key'], path)",
            &[bucket, &to.display().to_string()],
        );
    }

    /// Creates `bucket` and puts back what [`MotoServer::save`] copied into `from`: a
    /// restarted moto holds what a durable store would have kept.
    pub fn restore(&self, bucket: &str, from: &std::path::Path) {
        self.boto3(
            "import os\n\
             s3.create_bucket(Bucket=sys.argv[1])\n\
             for root, _, files in os.walk(sys.argv[2]):\n\
             \x20   for f in files:\n\
             \x20       path = os.path.join(root, f)\n\
             \x20       s3.upload_file(path, sys.argv[1], os.path.relpath(path, sys.argv[2]))",
            &[bucket, &from.display().to_string()],
        );
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        self.stop();
    }
}

//! What the integration tests share: a real Redis, and the binary run in a scratch
//! directory with a clean environment.

pub mod harness;
pub mod promtool;
pub mod redis_deployments;
pub mod redis_server;
pub mod upstream;

use std::path::{Path, PathBuf};
use std::process::Output;

pub use redis_server::RedisServer;

/// A scratch directory to run the binary in: no `quota-costs.toml` or `regions.toml`
/// of the repository is picked up by accident, and the database lands here.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("creating a scratch directory"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `text` to `name` in the scratch directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.file(name);
        std::fs::write(&path, text).expect("writing a scratch file");
        path
    }

    /// The binary, run here, with none of the caller's trendsync settings.
    pub fn cmd(&self) -> Trendsync {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("trendsync"));
        cmd.current_dir(self.path());
        for var in [
            "TRENDSYNC_COSTS",
            "TRENDSYNC_REGIONS",
            "TRENDSYNC_DB",
            "TRENDSYNC_REDIS_URL",
            "TRENDSYNC_REDIS_CA_FILE",
            "TRENDSYNC_REDIS_CLIENT_CERT",
            "TRENDSYNC_REDIS_CLIENT_KEY",
            "TRENDSYNC_API_BASE",
            "TRENDSYNC_LOG_FORMAT",
            "TRENDSYNC_METRICS_FILE",
            "YOUTUBE_API_KEY",
            "RUST_LOG",
            "NO_COLOR",
            "COLUMNS",
        ] {
            cmd.env_remove(var);
        }
        Trendsync { cmd }
    }

    /// Every file name in the scratch directory, sorted.
    pub fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path())
            .expect("listing the scratch directory")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names
    }
}

/// The binary with a scenario's arguments, built up fluently.
pub struct Trendsync {
    pub cmd: std::process::Command,
}

/// What a run of the binary left: exit code, stdout and stderr as text.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {}", self.stdout))
    }
}

impl Trendsync {
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    /// `--costs PATH`.
    pub fn costs(self, path: &Path) -> Self {
        self.arg("--costs").arg(path)
    }

    pub fn redis(self, server: &RedisServer) -> Self {
        self.args(server.client_args())
    }

    /// The same command under `faketime` with `args` (`["-f", "+25h"]`, or a moment
    /// such as `["2026-11-24 07:59:50"]`): the binary's clock moved, and nothing else
    /// of what it was given changed.
    pub fn faketime(mut self, args: &[&str]) -> Self {
        let mut wrapped = std::process::Command::new(faketime_binary());
        wrapped
            .args(args)
            .arg(self.cmd.get_program())
            .args(self.cmd.get_args());
        if let Some(dir) = self.cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        for (k, v) in self.cmd.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        self.cmd = wrapped;
        self
    }

    /// Starts the binary and returns at once, its stdout and stderr piped.
    pub fn spawn(mut self) -> std::process::Child {
        self.cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starting trendsync")
    }

    pub fn run(mut self) -> Ran {
        let Output {
            status,
            stdout,
            stderr,
        } = self.cmd.output().expect("running trendsync");
        Ran {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

/// `faketime`, which moves the binary's clock.
fn faketime_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TRENDSYNC_TEST_FAKETIME") {
        return p.into();
    }
    for dir in std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/bin")])
    {
        if dir.join("faketime").is_file() {
            return dir.join("faketime");
        }
    }
    panic!(
        "faketime is not installed, and the tests move the binary's clock with it: run \
         scripts/test (it installs Debian's faketime package as root), install the \
         faketime package, or point TRENDSYNC_TEST_FAKETIME at a faketime binary"
    );
}

/// A costs file with the shipped costs and the given budget numbers, no narrower limits.
pub fn costs_toml(quota: u64, ceiling: u64, window: &str) -> String {
    format!(
        r#"[budget]
key = "test"
quota = {quota}
ceiling = {ceiling}
window = "{window}"

[costs]
"videos.list" = 1
"search.list" = 100
"channels.list" = 1
"videoCategories.list" = 1

[when_limiter_down]
"videos.list" = "allow"
"videoCategories.list" = "allow"
"search.list" = "deny"
"#
    )
}

/// Upgrades the database at `db` with `prune --older-than 36500d`, killed at six
/// moments: pinned by what the process visibly did (it started; its WAL has grown to
/// `wal_trigger`), then after each of `delays` ms, which land in between on a slow or
/// fast machine. After every kill `picture` must read `from` or `to` with the rows as
/// they were; the next clean start must finish the job with them unchanged. Returns
/// each kill's version and exit code.
pub fn upgrade_killed_at_six_moments<R: PartialEq + std::fmt::Debug>(
    scratch: &Scratch,
    db: &Path,
    (from, to): (u32, u32),
    wal_trigger: u64,
    delays: [u64; 3],
    picture: impl Fn(&Path) -> (u32, R),
) -> Vec<(u32, Option<i32>)> {
    use std::time::{Duration, Instant};
    let (version, original) = picture(db);
    assert_eq!(version, from, "the file starts at version {from}");
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    let prune = || {
        scratch
            .cmd()
            .args(["--db"])
            .arg(db)
            .args(["prune", "--older-than", "36500d", "--json"])
    };
    let mut outcomes = Vec::new();
    for (trigger, delay) in [
        (0, 0),
        (1, 0),
        (wal_trigger, 0),
        (0, delays[0]),
        (0, delays[1]),
        (0, delays[2]),
    ] {
        let mut child = prune().spawn();
        let started = Instant::now();
        loop {
            let grown = std::fs::metadata(&wal).map_or(0, |m| m.len()) >= trigger;
            let due = started.elapsed() >= Duration::from_millis(delay);
            let exited = child.try_wait().expect("polling the child").is_some();
            if exited || (grown && due) || started.elapsed() > Duration::from_secs(60) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill();
        let status = child.wait().expect("reaping");
        let (version, rows) = picture(db);
        assert!(
            version == from || version == to,
            "a kill left version {version}"
        );
        assert_eq!(
            rows, original,
            "a kill at version {version} lost or changed rows"
        );
        outcomes.push((version, status.code()));
    }
    eprintln!("versions and exit codes after each kill: {outcomes:?}");
    // The next start finishes the job and the file is whole.
    let ran = prune().run();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let (version, rows) = picture(db);
    assert_eq!(version, to, "kills: {outcomes:?}");
    assert_eq!(rows, original);
    outcomes
}

//! What the integration tests share: a real Redis, and the binary run in a scratch
//! directory with a clean environment, built up as the scenario and checked by one
//! final call ([`Trendsync::run`]; what it checks is in [`check`]).

pub mod check;
pub mod costs;
pub mod harness;
pub mod moto;
pub mod promtool;
pub mod redis_deployments;
pub mod redis_server;
pub mod upstream;

use std::path::{Path, PathBuf};
use std::process::Output;

use check::{Checks, TextCheck};

pub use check::{
    Expected, PredicateBooleanExt, Ran, contains, ended, ends_with, lacks, starts_with,
};
pub use costs::{Bucket, Costs, Limit};
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
            "TRENDSYNC_HOST_NAME",
            "YOUTUBE_API_KEY",
            "RUST_LOG",
            "NO_COLOR",
            "COLUMNS",
            "TRENDSYNC_CONFIG_DIR",
        ] {
            cmd.env_remove(var);
        }
        // The configuration directories: none of this user's, none of the machine's
        // (no test writes /etc/trendsync, and the machine has none).
        cmd.env("XDG_CONFIG_HOME", self.file("no-xdg-config"));
        Trendsync {
            cmd,
            checks: Checks::default(),
        }
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

/// The binary with a scenario's arguments and what it must show when it ends, built
/// up fluently and checked by [`Trendsync::run`].
pub struct Trendsync {
    pub cmd: std::process::Command,
    checks: Checks,
}

impl Trendsync {
    /// Runs with stdout and stderr on a terminal (a pty from `script`), stdin empty:
    /// `script`'s output holds what the terminal received, and its status the
    /// binary's. The scenario's checks are not applied.
    pub fn on_terminal(self) -> Output {
        let cmd = &self.cmd;
        let quote =
            |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
        let mut line = quote(cmd.get_program());
        for arg in cmd.get_args() {
            line.push(' ');
            line.push_str(&quote(arg));
        }
        let mut script = std::process::Command::new("script");
        script.args(["-qec", &line, "/dev/null"]);
        self.wrapping(script)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("running script")
    }

    /// `wrapper`, a program that runs this command as it is given (`script`, `sh -c
    /// 'exec "$@"'`), with this command's environment and working directory.
    pub fn wrapping(&self, mut wrapper: std::process::Command) -> std::process::Command {
        for (k, v) in self.cmd.get_envs() {
            match v {
                Some(v) => wrapper.env(k, v),
                None => wrapper.env_remove(k),
            };
        }
        if let Some(dir) = self.cmd.get_current_dir() {
            wrapper.current_dir(dir);
        }
        wrapper
    }

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

    /// The run must exit with `code`; without it, 0.
    pub fn status(mut self, code: i32) -> Self {
        self.checks.status(&[code]);
        self
    }

    /// The run must exit with one of `codes` (a race decides which; the test looks).
    pub fn status_in(mut self, codes: &[i32]) -> Self {
        self.checks.status(codes);
        self
    }

    /// Stdout must be exactly `check` (a `&str`), or pass it (a predicate such as
    /// [`contains`], [`lacks`] or [`starts_with`]). Each call adds a check.
    pub fn stdout<M>(mut self, check: impl TextCheck<M>) -> Self {
        self.checks.stdout(check.boxed());
        self
    }

    /// Stderr must be exactly `check`, or pass it, as [`Trendsync::stdout`].
    pub fn stderr<M>(mut self, check: impl TextCheck<M>) -> Self {
        self.checks.stderr(check.boxed());
        self
    }

    /// The run must print a warning or error line containing `needle`, and may print
    /// more such lines that contain it.
    pub fn expect_stderr(mut self, needle: impl AsRef<str>) -> Self {
        self.checks.line(Expected::line(needle.as_ref()));
        self
    }

    /// The run must end with its summary line at WARN or ERROR saying it ended
    /// `status` (`budget_exhausted`, `failed`, `skipped`, …).
    pub fn expect_ended(self, status: &str) -> Self {
        self.expect_stderr(ended(status))
    }

    /// The run may print warning or error lines containing `needle`.
    pub fn allow_stderr(mut self, needle: impl AsRef<str>) -> Self {
        self.checks.line(Expected::maybe(needle.as_ref()));
        self
    }

    /// Takes these warning and error lines as well.
    pub fn expecting(mut self, expected: &[Expected]) -> Self {
        for e in expected {
            self.checks.line(e.clone());
        }
        self
    }

    /// Takes these checks as well (a scenario's, say); their status, when they name
    /// one, replaces this one's.
    pub fn checking(mut self, checks: Checks) -> Self {
        self.checks.extend(checks);
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
    pub fn faketime(self, args: &[&str]) -> Self {
        self.within(&faketime_binary(), args)
    }

    /// The same command run by `program` with `args` before the binary and its own
    /// arguments (`faketime -f +25h trendsync …`, `sh -c 'umask 077 && exec "$0" "$@"'
    /// trendsync …`), in the same directory and environment.
    pub fn within(mut self, program: &Path, args: &[&str]) -> Self {
        let mut wrapped = std::process::Command::new(program);
        wrapped
            .args(args)
            .arg(self.cmd.get_program())
            .args(self.cmd.get_args());
        self.cmd = self.wrapping(wrapped);
        self
    }

    /// Starts the binary and returns at once, its stdout and stderr piped: for a
    /// process the test kills or races. Its stderr is not checked, since a killed
    /// process's is cut short; [`Trendsync::start`] checks it.
    pub fn spawn(mut self) -> std::process::Child {
        self.piped().spawn().expect("starting trendsync")
    }

    /// Starts the binary and returns at once; [`Running::finish`] waits for it and
    /// checks it as [`Trendsync::run`] does.
    pub fn start(mut self) -> Running {
        let checks = self.checks();
        Running {
            child: self.piped().spawn().expect("starting trendsync"),
            checks,
        }
    }

    /// Runs the binary to its end and checks, all at once as just's `Test` builder
    /// does, what the test said it must show: its exit status ([`Trendsync::status`],
    /// 0 unless said), its stdout and stderr ([`Trendsync::stdout`],
    /// [`Trendsync::stderr`]), and its warning and error lines. A warning or error
    /// line the test did not say it expects ([`Trendsync::expect_stderr`],
    /// [`Trendsync::allow_stderr`]) fails it, as does an expected one that did not
    /// come: a new warning is a change someone should look at.
    #[track_caller]
    pub fn run(mut self) -> Ran {
        let output = self.cmd.output().expect("running trendsync");
        self.checks().ran(output)
    }

    fn piped(&mut self) -> &mut std::process::Command {
        self.cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
    }

    /// The checks, with the environment and the arguments a failure names.
    fn checks(&mut self) -> Checks {
        let mut checks = std::mem::take(&mut self.checks);
        let envs = self.cmd.get_envs().filter_map(|(k, v)| {
            v.map(|v| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        });
        let args = self
            .cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned());
        let program = Path::new(self.cmd.get_program()).file_name().map_or_else(
            || "trendsync".to_owned(),
            |name| name.to_string_lossy().into_owned(),
        );
        let program = std::iter::once(program);
        checks.args = envs
            .chain(program)
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ");
        checks
    }
}

/// A started binary whose end the test waits for.
pub struct Running {
    pub child: std::process::Child,
    checks: Checks,
}

impl Running {
    /// Waits for the process and checks it as [`Trendsync::run`] does.
    #[track_caller]
    pub fn finish(self) -> Ran {
        let output = self
            .child
            .wait_with_output()
            .expect("waiting for trendsync");
        self.checks.ran(output)
    }

    /// Waits for a process the test signals or kills on purpose; its status and
    /// output are whatever the signal left, so only its warning and error lines are
    /// checked. One that ended by a signal it did not handle (`kill -9`) is not
    /// checked at all: its stderr is cut wherever the signal came. One that exited
    /// with a code (it handled the signal, or ended by itself first) printed its
    /// whole stderr, and its lines are checked: declare what it prints when it ends
    /// either way.
    #[track_caller]
    pub fn killed(self) -> Output {
        let output = self
            .child
            .wait_with_output()
            .expect("waiting for trendsync");
        if output.status.code().is_some() {
            self.checks.ran_killed(output.clone());
        }
        output
    }

    /// The process and the checks of its end, for a test that waits its own way
    /// (and then calls [`Checks::ran`]).
    pub fn into_parts(self) -> (std::process::Child, Checks) {
        (self.child, self.checks)
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
        let mut prune = prune().start();
        let started = Instant::now();
        loop {
            let grown = std::fs::metadata(&wal).map_or(0, |m| m.len()) >= trigger;
            let due = started.elapsed() >= Duration::from_millis(delay);
            let exited = prune.child.try_wait().expect("polling the child").is_some();
            if exited || (grown && due) || started.elapsed() > Duration::from_secs(60) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = prune.child.kill();
        let status = prune.killed().status;
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
    prune().run();
    let (version, rows) = picture(db);
    assert_eq!(version, to, "kills: {outcomes:?}");
    assert_eq!(rows, original);
    outcomes
}

/// A byte of the database's one lock file (`.NAME.lock` beside it), held as another
/// process would: an open-file-description lock, by the layout docs/architecture.md
/// gives ("Locks"): byte 0 for maintenance, `1 + 26·a + b` for the region whose letters
/// are `a` and `b` counted from A. Released when dropped.
pub struct HeldLock(#[allow(dead_code)] std::fs::File);

/// The byte of a region's lock.
pub fn region_byte(code: &str) -> i64 {
    let [a, b] = code.as_bytes() else {
        panic!("{code} is not two letters")
    };
    1 + i64::from(a - b'A') * 26 + i64::from(b - b'A')
}

/// Takes the byte at `offset` of the lock file beside `db`, exclusive or shared;
/// panics if someone holds it against that.
pub fn hold_lock(db: &std::path::Path, offset: i64, exclusive: bool) -> HeldLock {
    use std::os::fd::AsRawFd;
    let mut name = std::ffi::OsString::from(".");
    name.push(db.file_name().expect("a database file name"));
    name.push(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(db.with_file_name(name))
        .expect("opening the lock file");
    // SAFETY: all zeroes is a valid `flock` (plain integers), `l_pid` 0 as OFD locks
    // require.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = (if exclusive {
        libc::F_WRLCK
    } else {
        libc::F_RDLCK
    }) as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = offset;
    fl.l_len = 1;
    // SAFETY: the descriptor is `file`'s, open here; `fl` is a valid `flock`.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &raw mut fl) };
    assert_eq!(
        rc,
        0,
        "taking byte {offset}: {}",
        std::io::Error::last_os_error()
    );
    HeldLock(file)
}

/// Every file under `root`, relative to it, sorted; none when `root` does not exist
/// (a sink directory nothing was shipped to yet).
pub fn files_under(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("reading a directory under the root") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.push(
                    path.strip_prefix(root)
                        .expect("under the root")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    let mut out = Vec::new();
    if root.exists() {
        walk(root, root, &mut out);
    }
    out.sort();
    out
}

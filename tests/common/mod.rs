//! What the integration tests share: a real Redis, and the binary run in a scratch
//! directory with a clean environment.
//!
//! Every run of the binary through [`Trendsync::run`] is checked for warning and
//! error lines: a test says which it expects (`expect_stderr`, `expect_ended`, or
//! `allow_stderr` for lines that depend on timing), and any other fails it. A new
//! warning is then a change a person looks at, not noise nobody reads.

pub mod costs;
pub mod harness;
pub mod promtool;
pub mod redis_deployments;
pub mod redis_server;
pub mod upstream;

use std::path::{Path, PathBuf};
use std::process::Output;

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
            "YOUTUBE_API_KEY",
            "RUST_LOG",
            "NO_COLOR",
            "COLUMNS",
        ] {
            cmd.env_remove(var);
        }
        Trendsync {
            cmd,
            stderr: Vec::new(),
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

/// The binary with a scenario's arguments, built up fluently.
pub struct Trendsync {
    pub cmd: std::process::Command,
    /// The warning and error lines this run is expected to print (see [`Trendsync::run`]).
    stderr: Vec<Expected>,
}

/// A warning or error line a test expects: any line containing `needle`; `required`
/// when the run must print one, not merely may.
#[derive(Debug, Clone)]
pub struct Expected {
    needle: String,
    required: bool,
}

impl Expected {
    /// A line the run must print.
    pub fn line(needle: &str) -> Expected {
        Expected {
            needle: needle.to_owned(),
            required: true,
        }
    }

    /// A line the run may print (a retry's warning that depends on timing, say).
    pub fn maybe(needle: &str) -> Expected {
        Expected {
            needle: needle.to_owned(),
            required: false,
        }
    }
}

/// What the summary line of a run that ended `status` says (`run ID failed in 2s: …`).
pub fn ended(status: &str) -> String {
    format!(" {status} in ")
}

/// Whether a line of stderr is a warning or an error: a text log line at `WARN` or
/// `ERROR`, a JSON log line at those levels, a usage or configuration error
/// (`error: …`), or a panic.
pub fn is_warning_or_error(line: &str) -> bool {
    let text_level = line
        .split_whitespace()
        .nth(1)
        .is_some_and(|level| level == "WARN" || level == "ERROR")
        && line.split_whitespace().next().is_some_and(|stamp| {
            stamp.ends_with('Z') && stamp.as_bytes().first().is_some_and(u8::is_ascii_digit)
        });
    let json_level = line.starts_with('{')
        && (line.contains(r#""level":"WARN""#) || line.contains(r#""level":"ERROR""#));
    text_level
        || json_level
        || line.starts_with("error:")
        || line.starts_with("warning:")
        || line.contains("panicked at")
}

/// The warning and error lines of `stderr` that no expectation covers, and the
/// required expectations no line met.
pub fn unexpected_stderr<'a>(
    stderr: &'a str,
    expected: &'a [Expected],
) -> (Vec<&'a str>, Vec<&'a str>) {
    let flagged: Vec<&str> = stderr.lines().filter(|l| is_warning_or_error(l)).collect();
    let stray = flagged
        .iter()
        .copied()
        .filter(|line| !expected.iter().any(|e| line.contains(&e.needle)))
        .collect();
    let missing = expected
        .iter()
        .filter(|e| e.required && !flagged.iter().any(|line| line.contains(&e.needle)))
        .map(|e| e.needle.as_str())
        .collect();
    (stray, missing)
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

    /// The run must print a warning or error line containing `needle`, and may print
    /// more such lines that contain it.
    pub fn expect_stderr(mut self, needle: impl AsRef<str>) -> Self {
        self.stderr.push(Expected::line(needle.as_ref()));
        self
    }

    /// The run must end with its summary line at WARN or ERROR saying it ended
    /// `status` (`budget_exhausted`, `failed`, `skipped`, …).
    pub fn expect_ended(self, status: &str) -> Self {
        self.expect_stderr(ended(status))
    }

    /// The run may print warning or error lines containing `needle`.
    pub fn allow_stderr(mut self, needle: impl AsRef<str>) -> Self {
        self.stderr.push(Expected::maybe(needle.as_ref()));
        self
    }

    /// Takes these expectations as well.
    pub fn expecting(mut self, expected: &[Expected]) -> Self {
        self.stderr.extend_from_slice(expected);
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

    /// Starts the binary and returns at once, its stdout and stderr piped: for a
    /// process the test kills or races. Its stderr is not checked, since a killed
    /// process's is cut short; [`Trendsync::start`] checks it.
    pub fn spawn(mut self) -> std::process::Child {
        self.piped().spawn().expect("starting trendsync")
    }

    /// Starts the binary and returns at once; [`Running::finish`] waits for it and
    /// checks its stderr as [`Trendsync::run`] does.
    pub fn start(mut self) -> Running {
        let check = self.check();
        Running {
            child: self.piped().spawn().expect("starting trendsync"),
            check,
        }
    }

    /// Runs the binary to its end. As just's `Test` builder does, it fails the test on
    /// a warning or error line the test did not say it expects
    /// ([`Trendsync::expect_stderr`], [`Trendsync::allow_stderr`]), and on an expected
    /// one that did not come: a new warning is a change someone should look at.
    #[track_caller]
    pub fn run(mut self) -> Ran {
        let output = self.cmd.output().expect("running trendsync");
        self.check().ran(output)
    }

    fn piped(&mut self) -> &mut std::process::Command {
        self.cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
    }

    fn check(&self) -> StderrCheck {
        StderrCheck {
            args: self
                .cmd
                .get_args()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            expected: self.stderr.clone(),
        }
    }
}

/// A started binary whose end the test waits for.
pub struct Running {
    pub child: std::process::Child,
    check: StderrCheck,
}

impl Running {
    /// Waits for the process and checks its stderr as [`Trendsync::run`] does.
    #[track_caller]
    pub fn finish(self) -> Ran {
        let output = self
            .child
            .wait_with_output()
            .expect("waiting for trendsync");
        self.check.ran(output)
    }

    /// Waits for a process the test signals or kills on purpose. One that ended by a
    /// signal it did not handle (`kill -9`) is not checked: its stderr is cut wherever
    /// the signal came. One that exited with a code (it handled the signal, or ended
    /// by itself first) printed its whole stderr, and it is checked as
    /// [`Running::finish`] does: declare what it prints when it ends either way.
    #[track_caller]
    pub fn killed(self) -> Output {
        let output = self
            .child
            .wait_with_output()
            .expect("waiting for trendsync");
        if output.status.code().is_some() {
            self.check.ran(output.clone());
        }
        output
    }

    /// The process and the check of its output, for a test that waits its own way.
    pub fn into_parts(self) -> (std::process::Child, StderrCheck) {
        (self.child, self.check)
    }
}

/// What a run of the binary must and may print as warnings and errors.
pub struct StderrCheck {
    args: String,
    expected: Vec<Expected>,
}

impl StderrCheck {
    /// The process's outcome, once its stderr has passed the check.
    #[track_caller]
    pub fn ran(&self, output: Output) -> Ran {
        let Output {
            status,
            stdout,
            stderr,
        } = output;
        let ran = Ran {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        };
        let (stray, missing) = unexpected_stderr(&ran.stderr, &self.expected);
        assert!(
            stray.is_empty() && missing.is_empty(),
            "trendsync {args} (exit {code}) printed warning or error lines the test does \
             not expect:\n{stray}\nexpected but not printed: {missing:?}\n\
             (declare them with expect_stderr or allow_stderr)\nwhole stderr:\n{stderr}",
            args = self.args,
            code = ran.code,
            stray = stray.join("\n"),
            stderr = ran.stderr,
        );
        ran
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
    let ran = prune().run();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let (version, rows) = picture(db);
    assert_eq!(version, to, "kills: {outcomes:?}");
    assert_eq!(rows, original);
    outcomes
}

/// The stderr check itself: what it flags, what an expectation covers, and an
/// expected line that did not come.
#[test]
fn the_stderr_check_flags_unexpected_warnings_and_missing_expectations() {
    let stderr = "\
2026-11-24T00:00:00Z  INFO run r1 complete in 2s: 24 calls
2026-11-24T00:00:00Z  WARN videos.list for region US: HTTP 503; trying again in 225ms
2026-11-24T00:00:01Z ERROR run r1 failed in 2s: 3 calls
{\"timestamp\":\"2026-11-24T00:00:01Z\",\"level\":\"WARN\",\"message\":\"lifted the block\"}
{\"timestamp\":\"2026-11-24T00:00:01Z\",\"level\":\"INFO\",\"message\":\"WARN in a message\"}
error: --region UK is not in regions.toml
  tip: did you mean GB?
thread 'main' panicked at src/main.rs:1:1:
";
    let flagged: Vec<&str> = stderr.lines().filter(|l| is_warning_or_error(l)).collect();
    assert_eq!(flagged.len(), 5, "{flagged:#?}");
    let (stray, missing) = unexpected_stderr(stderr, &[]);
    assert_eq!(stray, flagged);
    assert!(missing.is_empty());
    let expected = [
        Expected::line("HTTP 503"),
        Expected::line(&ended("failed")),
        Expected::maybe("lifted the block"),
        Expected::line("did you mean"),
        Expected::maybe("never printed"),
        Expected::line("not printed either"),
    ];
    let (stray, missing) = unexpected_stderr(stderr, &expected);
    assert_eq!(
        stray,
        [
            "error: --region UK is not in regions.toml",
            "thread 'main' panicked at src/main.rs:1:1:"
        ],
        "a tip line is not the error line it belongs to"
    );
    assert_eq!(missing, ["did you mean", "not printed either"]);
}

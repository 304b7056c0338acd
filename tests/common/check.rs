//! What a run of the binary must show when it ends, checked all at once by the final
//! call ([`Trendsync::run`](super::Trendsync::run)), as just's `Test` builder does:
//! its exit status (0 unless the test says otherwise), what its stdout and stderr
//! hold, and its warning and error lines.
//!
//! Every warning or error line must be one the test expects (`expect_stderr`,
//! `expect_ended`, or `allow_stderr` for lines that depend on timing): a new warning
//! is then a change a person looks at, not noise nobody reads.
//!
//! What goes where: a run's status, and every check of a stream's plain text (the
//! whole of it, or [`contains`], [`lacks`], [`starts_with`], [`ends_with`], counted
//! with `.count(n)`), are said on the builder, before the final call. What needs the
//! output parsed (JSON, lines, columns), a check that only some rows of a table make,
//! or a needle known only after the run is asserted on the [`Ran`] it returns. A
//! status a race decides is given as the codes it may be (`status_in`), and the test
//! then looks at [`Ran::code`].

use std::process::Output;

use predicates::Predicate;
pub use predicates::prelude::PredicateBooleanExt;
pub use predicates::str::{contains, ends_with, starts_with};

/// Stdout or stderr must not contain `needle`.
pub fn lacks(needle: impl Into<String>) -> impl Predicate<str> + Send + 'static {
    contains(needle).not()
}

/// A check of a stream's text: exactly this text (`&str`), or any predicate over it
/// ([`contains`], [`lacks`], [`starts_with`], [`ends_with`], or one of these with
/// `.not()`). `M` only tells the two apart.
pub trait TextCheck<M> {
    fn boxed(self) -> Box<dyn Predicate<str> + Send>;
}

/// The [`TextCheck`] kind of a plain text: the whole stream, exactly.
pub struct Exactly;

impl TextCheck<Exactly> for &str {
    fn boxed(self) -> Box<dyn Predicate<str> + Send> {
        Box::new(predicates::ord::eq(self.to_owned()))
    }
}

impl<P: Predicate<str> + Send + 'static> TextCheck<P> for P {
    fn boxed(self) -> Box<dyn Predicate<str> + Send> {
        Box::new(self)
    }
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

/// What a run must show when it ends.
#[derive(Default)]
pub struct Checks {
    /// The command line with the environment it was given, for the failure message.
    pub args: String,
    /// The exit codes it may end with; `None` for 0 alone.
    status: Option<Vec<i32>>,
    stdout: Vec<Box<dyn Predicate<str> + Send>>,
    stderr: Vec<Box<dyn Predicate<str> + Send>>,
    /// The warning and error lines it must and may print.
    lines: Vec<Expected>,
}

impl Checks {
    /// The run must end with one of `codes`.
    pub fn status(&mut self, codes: &[i32]) {
        self.status = Some(codes.to_vec());
    }

    pub fn stdout(&mut self, check: Box<dyn Predicate<str> + Send>) {
        self.stdout.push(check);
    }

    pub fn stderr(&mut self, check: Box<dyn Predicate<str> + Send>) {
        self.stderr.push(check);
    }

    pub fn line(&mut self, expected: Expected) {
        self.lines.push(expected);
    }

    /// Takes `other`'s checks as well; its status, when it names one, wins.
    pub fn extend(&mut self, other: Checks) {
        if other.status.is_some() {
            self.status = other.status;
        }
        self.stdout.extend(other.stdout);
        self.stderr.extend(other.stderr);
        self.lines.extend(other.lines);
    }

    /// The process's outcome, once it has passed every check: one failure names
    /// every check it missed, and shows both streams whole.
    #[track_caller]
    pub fn ran(&self, output: Output) -> Ran {
        let ran = outcome(output);
        let mut missed = self.status_missed(&ran);
        for (name, text, checks) in [
            ("stdout", &ran.stdout, &self.stdout),
            ("stderr", &ran.stderr, &self.stderr),
        ] {
            for check in checks.iter().filter(|c| !c.eval(text.as_str())) {
                missed.push(format!("{name} fails {check}"));
            }
        }
        missed.extend(self.lines_missed(&ran));
        assert!(
            missed.is_empty(),
            "{args} (exit {code}) did not end as the test expects:\n{missed}\n\
             --- stdout\n{stdout}\n--- stderr\n{stderr}",
            args = self.args,
            code = ran.code,
            missed = missed.join("\n"),
            stdout = ran.stdout,
            stderr = ran.stderr,
        );
        ran
    }

    /// The outcome of a process the test killed on purpose: only its warning and
    /// error lines are checked, since its status and output are whatever the signal
    /// left.
    #[track_caller]
    pub fn ran_killed(&self, output: Output) {
        let ran = outcome(output);
        let missed = self.lines_missed(&ran);
        assert!(
            missed.is_empty(),
            "{args} (exit {code}) did not end as the test expects:\n{missed}\n\
             --- stderr\n{stderr}",
            args = self.args,
            code = ran.code,
            missed = missed.join("\n"),
            stderr = ran.stderr,
        );
    }

    fn status_missed(&self, ran: &Ran) -> Vec<String> {
        let codes = self.status.as_deref().unwrap_or(&[0]);
        if codes.contains(&ran.code) {
            Vec::new()
        } else {
            vec![format!("exit {}, expected {codes:?}", ran.code)]
        }
    }

    fn lines_missed(&self, ran: &Ran) -> Vec<String> {
        let (stray, missing) = unexpected_stderr(&ran.stderr, &self.lines);
        let mut missed = Vec::new();
        if !stray.is_empty() {
            missed.push(format!(
                "printed warning or error lines the test does not expect (declare them \
                 with expect_stderr or allow_stderr):\n{}",
                stray.join("\n")
            ));
        }
        if !missing.is_empty() {
            missed.push(format!("expected but not printed: {missing:?}"));
        }
        missed
    }
}

fn outcome(output: Output) -> Ran {
    let Output {
        status,
        stdout,
        stderr,
    } = output;
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
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

/// The final check names every check a run missed, not only the first.
#[cfg(unix)]
#[test]
fn the_final_check_names_every_miss() {
    use std::os::unix::process::ExitStatusExt;
    let mut checks = Checks::default();
    checks.stdout(contains("granted").boxed());
    checks.stdout(lacks("denied").boxed());
    checks.stderr("".boxed());
    checks.line(Expected::line("HTTP 503"));
    let output = || Output {
        status: std::process::ExitStatus::from_raw(75 << 8),
        stdout: b"denied\n".to_vec(),
        stderr: b"2026-11-24T00:00:00Z  WARN lifted the block\n".to_vec(),
    };
    let missed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| checks.ran(output())))
        .err()
        .and_then(|e| e.downcast::<String>().ok())
        .expect("the check fails");
    for says in [
        "exit 75, expected [0]",
        "stdout fails var.contains(granted)",
        "stdout fails (! var.contains(denied))",
        "stderr fails var == \"\"",
        "lifted the block",
        "expected but not printed: [\"HTTP 503\"]",
    ] {
        assert!(missed.contains(says), "{says:?} in {missed}");
    }
    let mut passing = Checks::default();
    passing.status(&[0, 75]);
    passing.stdout(starts_with("denied").boxed());
    passing.line(Expected::maybe("lifted the block"));
    assert_eq!(passing.ran(output()).code, 75);
}

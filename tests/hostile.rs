//! What a hostile or unlucky operator does (issue 16): output streams that are closed,
//! full or cut short, a `RUST_LOG` that turns everything off, prunes interrupted at
//! any point, files that are not files at `--output` and `--metrics-file`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::Trendsync;
use crate::common::harness::{Harness, unit_costs_toml};
use crate::common::upstream::API_KEY;

/// How stdout and stderr are broken for one invocation.
#[derive(Debug, Clone, Copy)]
enum Broken {
    /// Both closed before the program starts (`>&- 2>&-`).
    Closed,
    /// Both on `/dev/full`: every write fails with ENOSPC.
    Full,
    /// Both on one pipe whose reader takes three lines and goes (`2>&1 | head -n 3`).
    CutShort,
}

/// Runs `t` with its output broken as `how`; returns the exit code, or the signal
/// that ended it as its negative.
fn run_broken(t: Trendsync, how: Broken) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let status = match how {
        Broken::Closed => {
            // The shell closes both and execs the program, as a crontab line would.
            let cmd = &t.cmd;
            let mut sh = Command::new("sh");
            sh.arg("-c").arg("exec \"$@\" >&- 2>&-").arg("sh");
            sh.arg(cmd.get_program()).args(cmd.get_args());
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => sh.env(k, v),
                    None => sh.env_remove(k),
                };
            }
            if let Some(dir) = cmd.get_current_dir() {
                sh.current_dir(dir);
            }
            sh.stdin(Stdio::null()).status().expect("running sh")
        }
        Broken::Full => {
            let full = || {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .expect("opening /dev/full")
            };
            let mut cmd = t.cmd;
            cmd.stdin(Stdio::null())
                .stdout(full())
                .stderr(full())
                .status()
                .expect("running trendsync")
        }
        Broken::CutShort => {
            let (reader, writer) = std::io::pipe().expect("a pipe");
            let mut cmd = t.cmd;
            cmd.stdin(Stdio::null())
                .stdout(writer.try_clone().expect("cloning the pipe"))
                .stderr(writer);
            let mut child = cmd.spawn().expect("starting trendsync");
            // The parent's ends of the writer go with the command.
            drop(cmd);
            let mut lines = BufReader::new(reader).lines();
            for _ in 0..3 {
                if lines.next().is_none() {
                    break;
                }
            }
            drop(lines);
            child.wait().expect("waiting for trendsync")
        }
    };
    status
        .code()
        .unwrap_or_else(|| -status.signal().unwrap_or(0))
}

/// Every command with stdout and stderr closed, on `/dev/full`, and on a pipe cut
/// short: never a panic (101) nor a signal. A command that acts (run, a charge, a
/// prune, a health check) ends with the code of what it did; one whose whole point is
/// its output ends with 1 when that output hit a full disk, and as usual otherwise.
#[test]
fn broken_stdout_and_stderr_never_panic_nor_change_the_outcome() {
    let mut h = Harness::new(None);
    h.costs(&unit_costs_toml(100_000, 90_000));
    let first = h.cmd().args(["run", "--region", "US"]).run();
    assert_eq!(first.code, 0, "{}", first.stderr);

    // (arguments, whether the command acts rather than only prints, its exit code)
    let commands: &[(&[&str], bool, i32)] = &[
        (&["run", "--region", "US"], true, 0),
        (&["run", "--region", "US", "--json"], true, 0),
        (&["run", "--dry-run"], true, 0),
        (&["backfill", "--region", "GB", "--json"], true, 0),
        (&["budget", "charge", "videos.list"], true, 0),
        (
            &["budget", "charge", "videos.list", "--count", "99999"],
            true,
            75,
        ),
        (&["budget", "charge", "videos.list", "--json"], true, 0),
        (&["status", "--stale-after", "1h"], true, 1),
        (&["prune", "--older-than", "3000d"], true, 0),
        (&["prune", "--older-than", "3000d", "--json"], true, 0),
        (&["--regions", "missing.toml", "status"], true, 78),
        (&["--regions", "missing.toml", "run", "--json"], true, 78),
        (&["search", "\"unbalanced"], true, 2),
        (&["budget"], false, 0),
        (&["budget", "--json"], false, 0),
        (&["status"], false, 0),
        (&["runs", "--json"], false, 0),
        (&["search", "the"], false, 0),
        (&["export"], false, 0),
        (&["export", "--format", "jsonl"], false, 0),
        (&["crontab"], false, 0),
        (&["completions", "bash"], false, 0),
    ];
    let mut wrong = Vec::new();
    for (args, acts, code) in commands {
        for how in [Broken::Closed, Broken::Full, Broken::CutShort] {
            let t = h.cmd().arg("-v").args(*args);
            let got = run_broken(t, how);
            let want = match how {
                Broken::Full if !acts => 1,
                _ => *code,
            };
            if got != want {
                wrong.push(format!("{args:?} {how:?}: exit {got}, want {want}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A fatal error is on stderr whatever `RUST_LOG` says (DESIGN.md section 2).
#[test]
fn a_fatal_error_is_printed_whatever_rust_log_says() {
    let h = Harness::new(None);
    for filter in [
        "off",
        "trendsync=off",
        "reqwest=debug",
        "error,trendsync=off",
    ] {
        let cases: [(Trendsync, i32, &str); 4] = [
            (
                h.bare().args(["--costs", "missing.toml", "budget"]),
                78,
                "missing.toml",
            ),
            (h.bare().args(["run", "--region", "US"]), 78, "API key"),
            (
                h.bare().args(["--db", "no/such/dir/t.db", "status"]),
                78,
                "no/such/dir",
            ),
            (
                h.bare().env("YOUTUBE_API_KEY", API_KEY).args([
                    "--api-base",
                    "http://127.0.0.1:9",
                    "run",
                    "--region",
                    "US",
                ]),
                1,
                "connection",
            ),
        ];
        for (t, code, says) in cases {
            let ran = t.env("RUST_LOG", filter).run();
            assert_eq!(ran.code, code, "RUST_LOG={filter}: {}", ran.stderr);
            assert!(
                ran.stderr.contains(says),
                "RUST_LOG={filter}: stderr does not say {says:?}: {:?}",
                ran.stderr
            );
        }
    }
}

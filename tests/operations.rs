//! Operating it for months (docs/commands.md, docs/metrics.md): the crontab run as cron runs
//! it, one metrics file shared by every cron line, signals, abandoned runs, `status`
//! and `runs`, the systemd units, `budget unblock`, help and log fields.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use wiremock::Mock;
use wiremock::matchers::any;

use crate::common::harness::{Harness, REGIONS};
use crate::common::promtool::check_metrics;
use crate::common::upstream::{API_KEY, FakeUpstream, OVERRIDE, answer_fixture, page1, trending};
use crate::common::{Costs, RedisServer, Scratch, contains, lacks, starts_with};
use crate::on_both_limiters;

fn binary() -> PathBuf {
    assert_cmd::cargo::cargo_bin("trendsync")
}

/// The samples of a metrics file, `name{labels}` to value, after promtool accepted it.
pub(crate) fn metrics(path: &Path) -> BTreeMap<String, f64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let checked = check_metrics(&bytes);
    let text = String::from_utf8(bytes).expect("UTF-8");
    assert_eq!(
        (checked.code, checked.output.as_str()),
        (0, ""),
        "promtool check metrics:\n{text}"
    );
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a sample line");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

/// The status a region's last attempt has in the metrics, the one sample set to 1.
fn region_status(m: &BTreeMap<String, f64>, code: &str) -> Vec<String> {
    let prefix = format!("trendsync_region_last_run_status{{region=\"{code}\",status=\"");
    m.iter()
        .filter(|(k, v)| k.starts_with(&prefix) && **v == 1.0)
        .map(|(k, _)| k[prefix.len()..k.len() - 2].to_owned())
        .collect()
}

/// The command part of a crontab line: what follows the five schedule fields, as
/// written.
fn command_of(line: &str) -> &str {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).expect("a schedule field");
        rest = &rest[end..];
    }
    rest.trim_start()
}

/// Every generated line is run by `sh -c` as cron runs it: an empty environment but
/// cron's few variables and the crontab's own, the `cd` as written. Each line leaves
/// its summary in the log and rewrites the one metrics file with the whole picture, so
/// after the eight lines, one of them failing, the file shows all eight regions.
#[test]
fn every_crontab_line_runs_as_cron_runs_it_and_the_shared_metrics_file_shows_every_region() {
    let h = Harness::new(None);
    h.fake.answer_instead(
        page1("FR"),
        answer_fixture(404, "error_video_chart_not_found.json"),
    );
    let key = h.scratch.write("api-key", API_KEY);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    std::fs::create_dir(h.scratch.file("metrics")).expect("a metrics directory");
    let prom = h.scratch.file("metrics/trendsync.prom");
    let ran = h
        .scratch
        .cmd()
        .args(["--db", "trendsync.db", "--api-key-file", "api-key"])
        .args(["--metrics-file", "metrics/trendsync.prom"])
        .args(["--api-base", &h.fake.uri()])
        .args(["crontab", "--every", "1h", "--binary"])
        .arg(binary())
        .stdout(lacks(API_KEY))
        .run();
    let jobs: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let (vars, lines): (Vec<&str>, Vec<&str>) = jobs.into_iter().partition(|l| {
        l.split_once('=')
            .is_some_and(|(name, _)| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    });
    assert_eq!(lines.len(), 8, "{}", ran.stdout);
    // The runs keep their summary line (only the prune, commented, is quiet).
    assert!(lines.iter().all(|l| !l.contains(" -q ")), "{}", ran.stdout);
    for flag in ["--metrics-file", "--api-key-file", "--api-base", "--db"] {
        assert!(
            lines.iter().all(|l| l.contains(flag)),
            "{flag}: {}",
            ran.stdout
        );
    }

    let log = h.scratch.file("trendsync.log");
    for (i, line) in lines.iter().enumerate() {
        let code = REGIONS[i];
        assert!(line.contains(&format!("--region {code} ")), "{line}");
        let mut cron = Command::new("env");
        cron.arg("-i")
            .arg(format!("HOME={}", h.scratch.path().display()))
            .args(["LOGNAME=trendsync", "PATH=/usr/bin:/bin", "SHELL=/bin/sh"])
            .args(&vars)
            .args(["/bin/sh", "-c", command_of(line)])
            // Cron starts jobs in the home directory; the line's own `cd` must matter.
            .current_dir("/");
        let before = std::fs::read_to_string(&log).unwrap_or_default();
        let out = cron.output().expect("running a crontab line");
        assert!(
            out.stdout.is_empty() && out.stderr.is_empty(),
            "all goes to the log"
        );
        let wrote = std::fs::read_to_string(&log).expect("the log file");
        let new = &wrote[before.len()..];
        let (want_code, want_status) = if code == "FR" {
            (1, "failed")
        } else {
            (0, "complete")
        };
        assert_eq!(out.status.code(), Some(want_code), "{line}\n{new}");
        let summary: Vec<&str> = new.lines().filter(|l| l.contains("; regions ")).collect();
        assert_eq!(summary.len(), 1, "one summary line: {new}");
        assert!(
            summary[0].ends_with(&format!("; regions {code} {want_status}")),
            "{}",
            summary[0]
        );
        let m = metrics(&prom);
        for done in &REGIONS[..=i] {
            let want = if *done == "FR" { "failed" } else { "complete" };
            assert_eq!(
                region_status(&m, done),
                [want],
                "{done} after {code}'s line"
            );
        }
    }
    let m = metrics(&prom);
    assert_eq!(
        m.keys()
            .filter(|k| k.starts_with("trendsync_region_last_run_pages{"))
            .count(),
        8
    );
    assert_eq!(m["trendsync_region_last_run_pages{region=\"FR\"}"], 0.0);
    assert_eq!(m["trendsync_region_last_run_pages{region=\"US\"}"], 2.0);
    assert_eq!(m["trendsync_region_last_run_videos{region=\"US\"}"], 10.0);
    assert_eq!(m["trendsync_region_last_run_units{region=\"US\"}"], 3.0);
    assert_eq!(m["trendsync_region_last_run_units{region=\"FR\"}"], 1.0);
    // The calls of all eight processes, not only the last one's.
    assert_eq!(
        m["trendsync_upstream_calls_total{method=\"videos.list\",outcome=\"ok\"}"],
        14.0
    );
    assert_eq!(
        m["trendsync_upstream_calls_total{method=\"videos.list\",outcome=\"region_failed\"}"],
        1.0
    );
    assert_eq!(
        m["trendsync_upstream_calls_total{method=\"videoCategories.list\",outcome=\"ok\"}"],
        7.0
    );
    assert_eq!(m["trendsync_budget_used_units{budget=\"key1\"}"], 22.0);
    assert_eq!(
        m["trendsync_budget_blocked_until_timestamp_seconds{budget=\"key1\"}"],
        0.0
    );
    // Every region has its last success; FR, whose line always fails, at 0.
    assert_eq!(m.keys().filter(|k| k.contains("last_success")).count(), 8);
    assert_eq!(
        m["trendsync_region_last_success_timestamp_seconds{region=\"FR\"}"],
        0.0
    );
}

#[test]
fn crontab_prints_nothing_unless_every_line_can_be_printed() {
    let s = Scratch::new();
    // A bad flag is a usage error (2); a file the lines would name that is not there
    // is a configuration error (78), as `run` says it.
    for (args, code) in [
        (vec!["crontab", "--every", "45m"], 2),
        (vec!["--api-key-file", "no-such-key", "crontab"], 78),
        (vec!["--costs", "no-such-costs.toml", "crontab"], 78),
        (vec!["--metrics-file", "no-such-dir/t.prom", "crontab"], 78),
    ] {
        s.cmd()
            .args(&args)
            .expect_stderr("error: ")
            .status(code)
            .stdout("")
            .stderr(starts_with("error: "))
            .run();
    }
    // A password in the Redis URL is never printed; the lines expect the variable.
    s.cmd()
        .args([
            "--redis-url",
            "redis://:hunter2secret@127.0.0.1:6379/0",
            "crontab",
        ])
        .stdout(lacks("hunter2secret"))
        .stdout(lacks("redis://"))
        .stdout(contains("TRENDSYNC_REDIS_URL"))
        .run();
}

/// docs/commands.md: after the run lines, the backfill and prune lines, commented out,
/// each at a minute no run line takes, with the run lines' program, files and
/// options. Uncommented, each runs as cron runs it: the backfill fetches the regions
/// never fetched and writes the shared metrics file, the prune says nothing.
#[test]
fn crontab_prints_the_backfill_and_prune_lines_commented_and_they_run_as_cron_runs_them() {
    let h = Harness::new(None);
    let key = h.scratch.write("api-key", API_KEY);
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    std::fs::create_dir(h.scratch.file("metrics")).expect("a metrics directory");
    let regions = h.scratch.write(
        "my-regions.toml",
        "[[region]]\ncode = \"US\"\noffset = 55\n\n[[region]]\ncode = \"GB\"\noffset = 54\n",
    );
    let ran = h
        .scratch
        .cmd()
        .args(["--db", "trendsync.db", "--api-key-file", "api-key"])
        .args(["--metrics-file", "metrics/trendsync.prom"])
        .arg("--regions")
        .arg(&regions)
        .args(["--api-base", &h.fake.uri()])
        .args(["crontab", "--every", "1h", "--binary"])
        .arg(binary())
        .run();
    let runs: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(" run "))
        .collect();
    let commented = |what: &str| -> &str {
        let found: Vec<&str> = ran
            .stdout
            .lines()
            .filter(|l| l.starts_with('#') && l.contains(" && ") && l.contains(what))
            .collect();
        assert_eq!(found.len(), 1, "one {what} line: {}", ran.stdout);
        &found[0][1..]
    };
    let (backfill, prune) = (commented(" backfill "), commented(" prune "));
    // Last, after every run line.
    let last: Vec<&str> = ran.stdout.lines().rev().take(2).collect();
    assert_eq!(last, [format!("#{prune}"), format!("#{backfill}")]);
    let minute = |line: &str| {
        line.split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let taken: Vec<String> = runs.iter().map(|l| minute(l)).collect();
    assert_eq!(taken, ["55", "54"]);
    for line in [backfill, prune] {
        assert!(!taken.contains(&minute(line)), "{line}");
        // The run lines' program and options, word for word.
        let command = command_of(runs[0]);
        let common = &command[..command.find(" run ").expect("the run word")];
        assert!(command_of(line).starts_with(common), "{line}\n{common}");
        for flag in [
            "--db",
            "--regions",
            "--metrics-file",
            "--api-key-file",
            "--api-base",
        ] {
            assert!(line.contains(flag), "{flag}: {line}");
        }
    }
    assert_ne!(minute(backfill), minute(prune));
    assert!(backfill.contains(" */6 * * * "), "{backfill}");
    assert!(
        backfill.contains(" backfill --stale-after 2h >> "),
        "{backfill}"
    );
    assert!(prune.contains(" -q prune --older-than 365d >> "), "{prune}");

    let log = h.scratch.file("trendsync.log");
    for (line, want) in [(backfill, "backfill"), (prune, "")] {
        let before = std::fs::read_to_string(&log).unwrap_or_default();
        let out = Command::new("env")
            .arg("-i")
            .arg(format!("HOME={}", h.scratch.path().display()))
            .args(["LOGNAME=trendsync", "PATH=/usr/bin:/bin", "SHELL=/bin/sh"])
            .args(["/bin/sh", "-c", command_of(line)])
            .current_dir("/")
            .output()
            .expect("running a crontab line");
        let wrote = std::fs::read_to_string(&log).unwrap_or_default();
        let new = &wrote[before.len()..];
        assert_eq!(out.status.code(), Some(0), "{line}\n{new}");
        assert!(
            out.stdout.is_empty() && out.stderr.is_empty(),
            "all goes to the log"
        );
        if want.is_empty() {
            assert_eq!(new, "", "a quiet prune");
        } else {
            assert!(new.contains(&format!("{want} ")), "{new}");
        }
    }
    assert_eq!(h.fake.calls().len(), 6, "the backfill fetched both regions");
    let m = metrics(&h.scratch.file("metrics/trendsync.prom"));
    assert_eq!(
        m["trendsync_last_run_status{kind=\"backfill\",status=\"complete\"}"],
        1.0
    );
}

/// Four regions of two pages, every call costing 1 unit.
pub(crate) fn four_regions(h: &mut Harness<'_>) {
    let mut text = String::from("[defaults]\npages = 2\n");
    for (i, code) in ["US", "GB", "DE", "FR"].iter().enumerate() {
        text.push_str(&format!(
            "\n[[region]]\ncode = \"{code}\"\noffset = {}\n",
            i * 5
        ));
    }
    h.costs(Costs::one_unit_each()).regions(&text);
}

/// Waits until `fake` has received `n` requests in all.
pub(crate) fn wait_for_requests(fake: &FakeUpstream, n: usize, child: &mut Child) {
    let started = Instant::now();
    while fake.received() < n {
        assert!(
            child.try_wait().expect("polling").is_none(),
            "the run ended before its request {n}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "request {n} never came"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(crate) fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("running kill");
    assert!(status.success(), "kill -{name}");
}

/// The rows of `runs`: run id to status.
fn run_rows(h: &Harness<'_>) -> BTreeMap<String, String> {
    let db = h.db();
    let mut stmt = db
        .prepare("SELECT run_id, status FROM runs")
        .expect("preparing");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .and_then(|rows| rows.collect())
        .expect("reading runs")
}

/// Lines of stderr as they come, from a thread.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// SIGTERM in the middle of a run: the page in flight is stored, no new call is
/// made, and the run ends `interrupted` with exit 143, its summary line, the metrics
/// file and its JSON; no row stays `running`.
#[test]
fn sigterm_stops_a_run_cleanly_and_says_so_everywhere() {
    // Slow enough that the signal lands while page 2 is in flight, well within the
    // grace the run gives it (3 s).
    let mut h = Harness::with(
        FakeUpstream::youtube_after(Duration::from_millis(1200)),
        None,
    );
    four_regions(&mut h);
    let mut run = h
        .cmd()
        .args([
            "--metrics-file",
            "trendsync.prom",
            "run",
            "--json",
            "--concurrency",
            "1",
        ])
        .expect_stderr("SIGTERM: stopping: no new calls")
        .expect_stderr("stopped: interrupted by SIGTERM")
        .expect_ended("interrupted")
        .start();
    // US page 1 answered and stored, page 2 sent and not yet answered.
    wait_for_requests(&h.fake, 2, &mut run.child);
    signal(&run.child, "TERM");
    let out = run.killed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert_eq!(h.fake.settled(), 2, "no call after the signal: {stderr}");
    let report: Value =
        serde_json::from_slice(&out.stdout).expect("the JSON is printed after a signal");
    assert_eq!(report["status"], "interrupted", "{report}");
    let regions: BTreeMap<String, Value> = report["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .map(|r| (r["code"].as_str().expect("code").to_owned(), r.clone()))
        .collect();
    assert_eq!(
        regions["US"]["pages"], 2,
        "the page in flight was stored: {report}"
    );
    assert_eq!(regions["US"]["status"], "interrupted");
    // With one region at a time, the run stopped before it reached GB.
    assert_eq!(regions["GB"]["status"], "not_attempted", "{report}");
    assert_eq!(regions["GB"]["pages"], 0);
    let summary: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(" interrupted in ") && l.contains("; regions "))
        .collect();
    assert_eq!(summary.len(), 1, "{stderr}");
    let why: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(" stopped: interrupted by SIGTERM"))
        .collect();
    assert_eq!(why.len(), 1, "the reason, once: {stderr}");
    let m = metrics(&h.scratch.file("trendsync.prom"));
    assert_eq!(
        m["trendsync_last_run_status{kind=\"run\",status=\"interrupted\"}"],
        1.0
    );
    assert_eq!(region_status(&m, "US"), ["interrupted"]);
    let rows = run_rows(&h);
    assert_eq!(
        rows.values().collect::<Vec<_>>(),
        ["interrupted"],
        "{rows:?}"
    );
    let db = h.db();
    let running: i64 = db
        .query_row(
            "SELECT count(*) FROM run_regions WHERE status = 'running'",
            [],
            |r| r.get(0),
        )
        .expect("counting");
    assert_eq!(running, 0);
    assert!(
        !h.scratch.listing().iter().any(|n| n.contains(".run-")),
        "the run's lock file is gone: {:?}",
        h.scratch.listing()
    );
}

/// A second signal ends the process at once: it does not wait for the calls in
/// flight (which here would take far longer than the grace the first one gives).
#[test]
fn a_second_signal_ends_the_run_at_once() {
    let mut h = Harness::with(FakeUpstream::youtube_after(Duration::from_secs(30)), None);
    four_regions(&mut h);
    let (mut child, check) = h
        .cmd()
        .args(["run", "--region", "US"])
        .expect_stderr("SIGINT: stopping")
        .expect_stderr("a second signal; ending at once")
        .status(143)
        .start()
        .into_parts();
    let lines = stderr_lines(&mut child);
    wait_for_requests(&h.fake, 1, &mut child);
    signal(&child, "INT");
    let mut said = Vec::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a line about the signal");
        let stopping = line.contains("SIGINT: stopping");
        said.push(line);
        if stopping {
            break;
        }
    }
    signal(&child, "TERM");
    let status = child.wait().expect("waiting");
    let rest: Vec<String> = lines.iter().collect();
    said.extend(rest.iter().cloned());
    check.ran(Output {
        status,
        stdout: Vec::new(),
        stderr: said.join("\n").into_bytes(),
    });
    assert!(
        rest.iter()
            .any(|l| l.contains("a second signal; ending at once")),
        "{rest:?}"
    );
    assert!(!rest.iter().any(|l| l.contains("; regions ")), "{rest:?}");
    // Ended without recording its end: the next process will find it abandoned.
    assert_eq!(
        run_rows(&h).values().collect::<Vec<_>>(),
        ["running"],
        "{rest:?}"
    );
}

fn json_of(h: &Harness<'_>, args: &[&str]) -> Value {
    let ran = h.bare().args(args).run();
    ran.json()
}

/// "Which region failed last night, and why?": a database with a complete, a failed,
/// a budget-exhausted and an abandoned run, read by `status` and `runs`. A live run is
/// never taken for an abandoned one; a killed one is marked so by the next run.
#[test]
fn status_and_runs_say_which_region_failed_and_why() {
    let mut h = Harness::new(None);
    four_regions(&mut h);
    h.run(&["run", "--region", "US"]);
    h.fake.answer_instead(
        page1("FR"),
        answer_fixture(404, "error_video_chart_not_found.json"),
    );
    h.expect_stderr("videoChartNotFound").expect_ended("failed");
    h.status(1).run(&["run", "--region", "FR"]);

    // GB on a slow upstream: alive while we look, then killed.
    let slow = FakeUpstream::youtube_after(Duration::from_secs(30));
    let mut child = h.cmd_to(&slow).args(["run", "--region", "GB"]).spawn();
    wait_for_requests(&slow, 1, &mut child);
    let live: Vec<String> = run_rows(&h)
        .into_iter()
        .filter(|(_, s)| s == "running")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(live.len(), 1);
    let status = json_of(&h, &["status", "--json"]);
    assert_eq!(status["running"][0]["run_id"], live[0].as_str(), "{status}");
    assert_eq!(status["abandoned"], serde_json::json!([]), "{status}");
    // Another run meanwhile leaves the live one alone.
    h.run(&["run", "--region", "US"]);
    assert_eq!(run_rows(&h)[&live[0]], "running");
    let _ = child.kill();
    let _ = child.wait();

    // Read-only commands show the dead run as abandoned without writing.
    let status = json_of(&h, &["status", "--json"]);
    assert_eq!(
        status["abandoned"][0]["run_id"],
        live[0].as_str(),
        "{status}"
    );
    assert_eq!(status["running"], serde_json::json!([]), "{status}");
    assert_eq!(run_rows(&h)[&live[0]], "running");

    // DE stopped by the budget after one call; this run marks GB's abandoned.
    let used = h.budget()["used"].as_u64().expect("used");
    h.costs(Costs::one_unit_each().ceiling(used + 1));
    h.expect_stderr("marked abandoned")
        .expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted")
        .status(75)
        .stderr(contains("marked abandoned"));
    h.run(&["run", "--region", "DE"]);
    assert_eq!(run_rows(&h)[&live[0]], "abandoned");

    let status = json_of(&h, &["status", "--json"]);
    let regions: BTreeMap<String, Value> = status["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .map(|r| (r["code"].as_str().expect("code").to_owned(), r.clone()))
        .collect();
    let field = |code: &str, name: &str| regions[code][name].clone();
    assert_eq!(field("US", "last_status"), "complete");
    assert_eq!(field("US", "stale"), false);
    assert_eq!(field("US", "pages"), 2);
    assert_eq!(field("US", "videos"), 10);
    assert_eq!(field("US", "last_reason"), Value::Null);
    assert_eq!(field("FR", "last_status"), "failed");
    let why = field("FR", "last_reason");
    assert!(
        why.as_str()
            .is_some_and(|w| w.contains("videoChartNotFound")),
        "{why}"
    );
    assert_eq!(field("FR", "last_complete_at"), Value::Null);
    assert_eq!(field("FR", "stale"), true);
    assert_eq!(field("GB", "last_status"), "abandoned");
    assert_eq!(field("DE", "last_status"), "budget_exhausted");
    assert!(
        field("DE", "last_reason")
            .as_str()
            .is_some_and(|w| w.contains("budget exhausted")),
        "{status}"
    );
    assert_eq!(
        status["abandoned"][0]["run_id"],
        live[0].as_str(),
        "{status}"
    );
    assert_eq!(status["budget"]["used"], used + 1, "{status}");
    assert_eq!(status["budget"]["blocked_until"], Value::Null);

    let text = h
        .bare()
        .arg("status")
        .stdout(contains(format!("abandoned  run {}", live[0])))
        .run();
    let fr = text
        .stdout
        .lines()
        .find(|l| l.starts_with("FR "))
        .unwrap_or_else(|| panic!("{}", text.stdout));
    assert!(
        fr.contains("failed") && fr.contains("videoChartNotFound"),
        "{fr}"
    );

    // A health check: stale regions fail it; a configuration of only US passes.
    h.bare()
        .args(["status", "--stale-after", "3h"])
        .expect_stderr("stale: GB, DE, FR not fetched")
        .status(1)
        .run();
    let us_only = h
        .scratch
        .write("us.toml", "[[region]]\ncode = \"US\"\noffset = 0\n");
    h.scratch
        .cmd()
        .arg("--costs")
        .arg(h.scratch.file("costs.toml"))
        .arg("--regions")
        .arg(&us_only)
        .args(["status", "--stale-after", "3h"])
        .run();

    let runs = json_of(&h, &["runs", "--json"]);
    let lines = runs["runs"].as_array().expect("runs");
    let statuses: Vec<(&str, &str)> = lines
        .iter()
        .map(|r| {
            (
                r["region"].as_str().expect("region"),
                r["status"].as_str().expect("status"),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("DE", "budget_exhausted"),
            ("US", "complete"),
            ("GB", "abandoned"),
            ("FR", "failed"),
            ("US", "complete")
        ],
        "newest first: {runs}"
    );
    for line in lines {
        for name in [
            "run_id",
            "kind",
            "region",
            "started_at",
            "ended_at",
            "status",
            "pages",
            "videos",
            "units",
            "reason",
        ] {
            assert!(line.get(name).is_some(), "{name} in {line}");
        }
    }
    let failed = json_of(&h, &["runs", "--status", "failed", "--json"]);
    assert_eq!(failed["runs"].as_array().map(Vec::len), Some(1), "{failed}");
    assert_eq!(failed["runs"][0]["region"], "FR");
    assert_eq!(failed["runs"][0]["kind"], "run");
    let gb = json_of(&h, &["runs", "--region", "gb", "--json"]);
    assert_eq!(gb["runs"][0]["status"], "abandoned", "{gb}");
    assert_eq!(gb["runs"][0]["ended_at"], Value::Null, "{gb}");
    let text = h
        .bare()
        .args(["runs", "--since", "1h", "--region", "FR"])
        .run();
    let fr: Vec<&str> = text.stdout.lines().skip(1).collect();
    assert_eq!(fr.len(), 1, "{}", text.stdout);
    assert!(
        fr[0].contains("failed") && fr[0].contains("videoChartNotFound"),
        "{}",
        fr[0]
    );
}

on_both_limiters!(an_upstream_block_can_be_lifted_and_charge_says_which_policy);

fn an_upstream_block_can_be_lifted_and_charge_says_which_policy(redis: Option<&RedisServer>) {
    let h = Harness::new(redis);
    h.fake.mount(
        trending()
            .respond_with(answer_fixture(403, "error_quota_exceeded.json"))
            .up_to_n_times(1)
            .with_priority(OVERRIDE),
    );
    h.expect_stderr("quota is spent")
        .expect_stderr("quota is lower than configured")
        .expect_ended("upstream_quota_exhausted");
    h.status(75).run(&["run", "--region", "US"]);
    let budget = h.budget();
    assert!(budget["blocked_until"].is_string(), "{budget}");

    // While blocked, charge shows the budget's real numbers, and names the policy.
    let ran = h
        .bare()
        .args(["budget", "charge", "videos.list", "--json"])
        .status(75)
        .run();
    let charge = ran.json();
    assert_eq!(charge["denied_by"], "upstream", "{charge}");
    assert_eq!(charge["policy"], "budget", "{charge}");
    assert_eq!(charge["used"], 1, "{charge}");

    // In text each outcome is said once: a lifted block by its log line (the record
    // kept in cron's log and the journal), with nothing more on stdout ...
    h.bare()
        .args(["budget", "unblock"])
        .expect_stderr("lifted the upstream block")
        .stderr(contains("lifted the upstream block").count(1))
        .stdout("")
        .run();
    assert_eq!(h.budget()["blocked_until"], Value::Null);
    // ... and a bucket that was not blocked on stdout alone.
    h.bare()
        .args(["budget", "unblock"])
        .stdout(contains("was not blocked"))
        .stderr("")
        .run();
    let ran = h.bare().args(["budget", "unblock", "--json"]).run();
    assert_eq!(ran.json()["unblocked"], false);

    h.bare()
        .args(["budget", "charge", "videos.list"])
        .stdout(contains("2 used, 9498 remaining in bucket \"budget\""))
        .run();
}

/// `systemd-analyze`, found like promtool: `TRENDSYNC_TEST_SYSTEMD_ANALYZE`, then the
/// usual places.
fn systemd_analyze() -> PathBuf {
    if let Some(p) = std::env::var_os("TRENDSYNC_TEST_SYSTEMD_ANALYZE") {
        return PathBuf::from(p);
    }
    ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "systemd-analyze is not installed, and the tests verify the shipped units \
                 with it: run scripts/test (it installs Debian's systemd package as root), or \
                 point TRENDSYNC_TEST_SYSTEMD_ANALYZE at a systemd-analyze binary"
            )
        })
}

/// The shipped units load: `systemd-analyze verify` says nothing about them. It
/// checks that ExecStart's program exists, so the check runs on copies whose
/// ExecStart names the binary just built; nothing else is changed. The README shows
/// the same files. Every service calls exactly the exits the contract calls clean
/// success (0, 75, 130, 143: 0 is systemd's own) and runs hardened.
#[test]
fn the_shipped_systemd_units_verify_and_the_readme_shows_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let s = Scratch::new();
    let mut names: Vec<String> = std::fs::read_dir(root.join("contrib/systemd"))
        .expect("contrib/systemd")
        .map(|e| {
            e.expect("a unit")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "trendsync-backfill.service",
            "trendsync-backfill.timer",
            "trendsync-prune.service",
            "trendsync-prune.timer",
            "trendsync.service",
            "trendsync.timer",
        ]
    );
    let mut copies = Vec::new();
    let mut services = Vec::new();
    for name in &names {
        let text = std::fs::read_to_string(root.join("contrib/systemd").join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(readme.contains(&text), "README.md shows {name} as shipped");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            // systemd takes a `#` after a value as part of the value.
            assert!(!line.contains('#'), "{name}: an inline comment: {line}");
        }
        let built = binary();
        let copy = text.replace(
            "ExecStart=/usr/local/bin/trendsync ",
            &format!("ExecStart={} ", built.display()),
        );
        if name.ends_with(".service") {
            assert!(
                copy.contains(&format!("ExecStart={} ", built.display())),
                "{name}"
            );
            services.push((name.clone(), copy.clone()));
        }
        copies.push(s.write(name, &copy));
    }
    for (name, service) in &services {
        let success: Vec<&str> = service
            .lines()
            .filter_map(|l| l.strip_prefix("SuccessExitStatus="))
            .flat_map(str::split_whitespace)
            .collect();
        assert_eq!(success, ["75", "130", "143"], "{name}");
        for want in [
            "NoNewPrivileges=yes\n",
            "ProtectSystem=strict\n",
            "PrivateTmp=yes\n",
            "ReadWritePaths=/var/lib/trendsync\n",
            "WorkingDirectory=/var/lib/trendsync\n",
        ] {
            assert!(service.contains(want), "{name}: {want}");
        }
    }
    for (name, service) in &services {
        let key = |k: &str| -> Vec<&str> {
            service
                .lines()
                .filter_map(|l| l.strip_prefix(k))
                .flat_map(str::split_whitespace)
                .collect()
        };
        assert_eq!(
            (key("User="), key("Group=")),
            (vec!["trendsync"], vec!["trendsync"]),
            "{name}"
        );
        let exec = key("ExecStart=");
        let Some(at) = exec.iter().position(|w| *w == "--metrics-file") else {
            assert_eq!(name, "trendsync-prune.service", "{name} writes no metrics");
            continue;
        };
        // A fixed directory, which the unit may write and systemd creates; the
        // environment file may change the file's name only (systemd expands no
        // variable in ReadWritePaths=).
        let file = Path::new(exec[at + 1]);
        let dir = file.parent().expect("a directory").to_string_lossy();
        assert!(!dir.contains('$'), "{name}: {file:?}");
        assert_eq!(dir, "/var/lib/trendsync/metrics", "{name}");
        assert!(
            key("ReadWritePaths=").iter().any(|p| dir.starts_with(p)),
            "{name}"
        );
        assert!(
            key("StateDirectory=").contains(&"trendsync/metrics"),
            "{name}"
        );
        assert!(
            key("ReadWritePaths=").iter().all(|p| !p.contains('$')),
            "{name}"
        );
    }
    // The user and group the units run as, from the shipped sysusers.d file, created in
    // a scratch root as systemd-sysusers creates them at boot.
    let sysusers = root.join("contrib/sysusers.d/trendsync.conf");
    let fake_root = s.path().join("root");
    std::fs::create_dir_all(fake_root.join("etc")).expect("a scratch root");
    let out = Command::new(
        ["/usr/bin/systemd-sysusers", "/bin/systemd-sysusers"]
            .iter()
            .find(|p| Path::new(p).is_file())
            .expect("systemd-sysusers (Debian's systemd package)"),
    )
    .arg(format!("--root={}", fake_root.display()))
    .arg(&sysusers)
    .output()
    .expect("running systemd-sysusers");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passwd = std::fs::read_to_string(fake_root.join("etc/passwd")).expect("passwd");
    let user: Vec<&str> = passwd
        .lines()
        .find(|l| l.starts_with("trendsync:"))
        .unwrap_or_else(|| panic!("{passwd}"))
        .split(':')
        .collect();
    assert_eq!(
        (user[5], user[6]),
        ("/var/lib/trendsync", "/usr/sbin/nologin"),
        "{passwd}"
    );
    let group = std::fs::read_to_string(fake_root.join("etc/group")).expect("group");
    assert!(
        group
            .lines()
            .any(|l| l.starts_with("trendsync:") && l.split(':').nth(2) == Some(user[3])),
        "the user's own group: {group}"
    );
    let service = services
        .iter()
        .find(|(name, _)| name == "trendsync.service")
        .map(|(_, text)| text.clone())
        .expect("trendsync.service");
    let out = Command::new(systemd_analyze())
        .arg("verify")
        .args(&copies)
        .current_dir(s.path())
        .stdin(Stdio::null())
        .output()
        .expect("running systemd-analyze");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!((out.status.code(), said.as_str()), (Some(0), ""));

    // The check can fail: an inline comment is reported.
    let broken = s.write(
        "broken.service",
        &service.replace(
            "SuccessExitStatus=75 130 143\n",
            "SuccessExitStatus=75 130 143  # clean stops\n",
        ),
    );
    let out = Command::new(systemd_analyze())
        .arg("verify")
        .arg(&broken)
        .output()
        .expect("running systemd-analyze");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Failed to parse"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn help_sets_global_options_apart_and_shows_examples() {
    let s = Scratch::new();
    let top = s.cmd().arg("--help").run();
    for example in [
        // cron's PATH is /usr/bin:/bin: the cron line names the binary by its path.
        "&& /usr/local/bin/trendsync run --region GB >> trendsync.log 2>&1",
        "trendsync run --dry-run",
        "trendsync backfill --stale-after",
        "trendsync status --stale-after 3h",
    ] {
        assert!(top.stdout.contains(example), "{example}: {}", top.stdout);
    }
    for sub in [
        vec!["run"],
        vec!["backfill"],
        vec!["status"],
        vec!["runs"],
        vec!["budget", "charge"],
        vec!["crontab"],
    ] {
        let help = s.cmd().args(&sub).arg("--help").run();
        let (own, global) = help
            .stdout
            .split_once("Global options:")
            .unwrap_or_else(|| panic!("{sub:?}: {}", help.stdout));
        assert!(
            global.contains("--db <PATH>") && global.contains("--metrics-file"),
            "{sub:?}"
        );
        assert!(!own.contains("--db <PATH>"), "{sub:?}: {own}");
    }
}

/// JSON logs carry the run's numbers as fields, and every region line names its
/// region.
#[test]
fn json_logs_carry_the_runs_fields() {
    let mut h = Harness::new(None);
    four_regions(&mut h);
    h.fake.answer_instead(
        Mock::given(any()),
        answer_fixture(404, "error_video_chart_not_found.json"),
    );
    h.expect_stderr("videoChartNotFound").expect_ended("failed");
    let (ran, _) = h
        .status(1)
        .run(&["--log-format", "json", "run", "--region", "GB"]);
    let events: Vec<Value> = ran
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let summary = events
        .iter()
        .find(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("; regions "))
        })
        .unwrap_or_else(|| panic!("{}", ran.stderr));
    assert_eq!(summary["status"], "failed", "{summary}");
    assert_eq!(summary["units"], 1, "{summary}");
    assert_eq!(summary["calls"], 1, "{summary}");
    assert_eq!(summary["regions"], "GB", "{summary}");
    assert!(summary["run_id"].as_str().is_some_and(|id| !id.is_empty()));
    let region_lines: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("videoChartNotFound"))
        })
        .filter(|e| e != &summary)
        .collect();
    assert!(!region_lines.is_empty(), "{}", ran.stderr);
    for e in region_lines {
        assert_eq!(e["region"], "GB", "{e}");
    }
}

/// `trendsync man` is a page `man` renders, naming every command; `man COMMAND` is
/// that command's own page, the one the main page lists; an unknown command is a
/// usage error (2). Rendered by `man -l -`, as a reader installing it would check.
#[test]
fn the_man_pages_render_and_name_every_command() {
    let s = Scratch::new();
    let render = |roff: &str| -> String {
        let mut man = Command::new("man")
            .args(["-l", "-"])
            .env("MANWIDTH", "80")
            .env("MAN_KEEP_FORMATTING", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running man (scripts/test installs man-db)");
        std::io::Write::write_all(&mut man.stdin.take().expect("stdin"), roff.as_bytes())
            .expect("writing the page to man");
        let out = man.wait_with_output().expect("man's output");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // man's own bold and underline, as overstrikes, come off.
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut plain = String::new();
        for c in text.chars() {
            if c == '\u{8}' {
                plain.pop();
            } else {
                plain.push(c);
            }
        }
        plain
    };
    let main = s.cmd().arg("man").run();
    assert!(main.stdout.starts_with(".ie"), "{}", main.stdout);
    let page = render(&main.stdout);
    for needle in [
        "trendsync(1)",
        "SYNOPSIS",
        "TRENDSYNC_DB",
        "trendsync-run(1)",
        "trendsync-budget(1)",
        "trendsync-man(1)",
    ] {
        assert!(page.contains(needle), "{needle}: {page}");
    }
    let charge = s.cmd().args(["man", "budget", "charge"]).run();
    // Its header names the program and its version, as the main page's does.
    let version = format!("\"trendsync {}\"", env!("CARGO_PKG_VERSION"));
    for page in [&main.stdout, &charge.stdout] {
        let header = page.lines().find(|l| l.starts_with(".TH")).unwrap_or("");
        assert!(header.contains(&version), "{header}");
    }
    let page = render(&charge.stdout);
    assert!(page.contains("trendsync-budget-charge(1)"), "{page}");
    assert!(page.contains("--reserve"), "{page}");
    s.cmd()
        .args(["man", "nope"])
        .expect_stderr("no command \"nope\"")
        .status(2)
        .run();
}

/// Each shipped service's command line, with its `Environment=` defaults put in for
/// the `${…}` systemd expands and its paths moved into a scratch directory, is one the
/// binary takes: run as a dry run, it exits 0 and writes nothing. `systemd-analyze
/// verify` checks the unit, not the arguments the binary gets.
#[test]
fn every_shipped_services_command_line_is_one_the_binary_takes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in [
        "trendsync.service",
        "trendsync-prune.service",
        "trendsync-backfill.service",
    ] {
        let unit = std::fs::read_to_string(root.join("contrib/systemd").join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let defaults: BTreeMap<&str, &str> = unit
            .lines()
            .filter_map(|l| l.strip_prefix("Environment="))
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let exec = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap_or_else(|| panic!("{name}: an ExecStart"));
        let s = Scratch::new();
        let state = format!("{}/", s.path().display());
        // The state directories systemd creates before it starts the unit.
        let made: Vec<String> = unit
            .lines()
            .filter_map(|l| l.strip_prefix("StateDirectory="))
            .flat_map(str::split_whitespace)
            .filter_map(|d| d.strip_prefix("trendsync/"))
            .map(str::to_owned)
            .collect();
        for dir in &made {
            std::fs::create_dir_all(s.file(dir)).expect("a state directory");
        }
        let mut words = exec.split_whitespace().map(|word| {
            let mut word = word.replace("/var/lib/trendsync/", &state);
            // systemd puts a variable's value in place within a word too.
            while let Some(at) = word.find("${") {
                let end = at + word[at..].find('}').expect("a closing brace");
                let var = &word[at + 2..end];
                let value = defaults
                    .get(var)
                    .unwrap_or_else(|| panic!("{name}: no Environment= default for {var}"));
                word.replace_range(at..=end, value);
            }
            word
        });
        assert_eq!(
            words.next().as_deref(),
            Some("/usr/local/bin/trendsync"),
            "{name}"
        );
        let args: Vec<String> = words.collect();
        s.cmd().args(&args).arg("--dry-run").run();
        assert_eq!(s.listing(), made, "{name}: a dry run writes nothing");
        for dir in &made {
            assert_eq!(
                std::fs::read_dir(s.file(dir)).expect("listing").count(),
                0,
                "{name}: a dry run writes nothing"
            );
        }
    }
}

//! What people read (docs/commands.md "Text output", and 7): tables that fit the terminal,
//! the cron heartbeat, progress that says what is queued and what was never fetched,
//! and run durations in the metrics file.

use std::collections::BTreeMap;
use std::time::Duration;

use trendsync::output::table::columns;

use crate::common::harness::{Harness, REGIONS};
use crate::common::upstream::{answer_fixture, page1};
use crate::common::{Costs, contains, lacks, starts_with};
use crate::operations::{four_regions, metrics, signal, wait_for_requests};
use crate::run_e2e::lines_with;

/// The eight regions, two with category charts.
fn eight_regions() -> String {
    let mut text = String::from("[defaults]\npages = 2\n");
    for (i, code) in REGIONS.iter().enumerate() {
        text.push_str(&format!(
            "\n[[region]]\ncode = \"{code}\"\noffset = {}\n",
            i * 7
        ));
        if i < 2 {
            text.push_str("categories = [\"10\", \"17\"]\n");
        }
    }
    text
}

/// A history with long reasons: every region complete, then FR failing on a missing
/// chart and the budget running out part way through the others.
fn long_reasons(h: &mut Harness<'_>) {
    h.costs(Costs::one_unit_each()).regions(&eight_regions());
    h.run(&["run"]);
    h.fake.answer_instead(
        page1("FR"),
        answer_fixture(404, "error_video_chart_not_found.json"),
    );
    let used = h.budget()["used"].as_u64().expect("used");
    h.costs(Costs::one_unit_each().ceiling(used + 9));
    h.expect_stderr("videoChartNotFound")
        .expect_stderr("stopped: budget exhausted")
        .expect_ended("failed");
    h.status(1).run(&["run", "--concurrency", "1"]);
}

/// `args` run with `COLUMNS` set to `width`: stdout, with no line wider than it.
fn at_width(h: &Harness<'_>, args: &[&str], width: usize) -> String {
    let ran = h.bare().env("COLUMNS", width.to_string()).args(args).run();
    for line in ran.stdout.lines() {
        assert!(
            columns(line) <= width,
            "{args:?} at {width} columns: a line of {} columns:\n{line}\n\n{}",
            columns(line),
            ran.stdout
        );
    }
    ran.stdout
}

#[test]
fn status_and_runs_fit_120_80_and_40_columns_and_json_keeps_every_reason_whole() {
    let mut h = Harness::new(None);
    long_reasons(&mut h);

    let status = h.bare().args(["status", "--json"]).run().json();
    let reasons: Vec<String> = status["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .filter_map(|r| r["last_reason"].as_str().map(str::to_owned))
        .collect();
    assert!(
        reasons.iter().any(|r| columns(r) > 80),
        "a reason longer than a line: {reasons:?}"
    );
    let runs = h.bare().args(["runs", "--json"]).run().json();
    let whole: Vec<&str> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["reason"].as_str())
        .collect();
    for reason in &reasons {
        assert!(whole.contains(&reason.as_str()), "{reason} in {runs}");
    }

    for args in [&["status"][..], &["runs"]] {
        let wide = at_width(&h, args, 80);
        assert!(wide.contains('…'), "{args:?}: a reason cut\n{wide}");
        for code in REGIONS {
            assert!(
                wide.lines()
                    .any(|l| l.starts_with(code) || l.contains(&format!(" {code} "))),
                "{args:?}: region {code} at 80 columns\n{wide}"
            );
        }
        for word in ["status", "reason", "budget_exhausted", "failed"] {
            assert!(wide.contains(word), "{args:?}: {word} at 80\n{wide}");
        }
        // A reason cut to fit keeps its cause, which comes last.
        for reason in &reasons {
            let tail: String = {
                let mut end: Vec<char> = reason.chars().rev().take(12).collect();
                end.reverse();
                end.into_iter().collect()
            };
            assert!(
                wide.lines().any(|l| l.trim_end().ends_with(tail.trim())),
                "{args:?}: the end of {reason:?} at 80 columns\n{wide}"
            );
        }
        at_width(&h, args, 120);
        let narrow = at_width(&h, args, 40);
        for word in ["region", "status", "failed", "FR"] {
            assert!(narrow.contains(word), "{args:?}: {word} at 40\n{narrow}");
        }
        // Without a width (piped, COLUMNS unset) nothing is cut.
        let longest = reasons.iter().max_by_key(|r| r.len()).expect("reasons");
        h.bare()
            .args(args)
            .stdout(lacks('…'))
            .stdout(contains(longest.as_str()))
            .run();
    }
}

#[test]
fn the_dry_run_plan_fits_80_and_40_columns() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().ceiling(9))
        .regions(&eight_regions());
    for width in [80, 40] {
        let ran = h
            .cmd()
            .env("COLUMNS", width.to_string())
            .args(["run", "--dry-run"])
            .status(75)
            .stdout(contains("would stop here"))
            .run();
        for line in ran.stdout.lines() {
            assert!(columns(line) <= width, "{width}: {line}\n{}", ran.stdout);
        }
    }
}

/// The statuses `status --json` shows, by region.
fn last_statuses(h: &Harness<'_>) -> BTreeMap<String, String> {
    let status = h.bare().args(["status", "--json"]).run().json();
    status["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .map(|r| {
            (
                r["code"].as_str().expect("code").to_owned(),
                r["last_status"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}

/// With one region at a time, the regions waiting for the slot are `queued`, the one
/// fetching `running`, and one done says how it ended, all while the run goes on;
/// after SIGINT, those never fetched are `not_attempted` everywhere and no line stays
/// queued or running.
#[test]
fn regions_waiting_for_a_slot_are_queued_and_after_sigint_not_fetched() {
    // US is fetched at once; GB's first call is still unanswered when the signal
    // comes, and the run's grace for it (3 s) ends it.
    let mut h = Harness::new(None);
    four_regions(&mut h);
    h.fake.answer_instead(
        page1("GB"),
        answer_fixture(200, "videos_page1.json").set_delay(Duration::from_secs(30)),
    );
    let mut run = h
        .cmd()
        .args(["run", "--concurrency", "1"])
        .expect_stderr("SIGINT: stopping: no new calls")
        .expect_stderr("videos.list: the call was given up, the run is stopping region=GB")
        .expect_stderr("stopped: interrupted by SIGINT")
        .expect_ended("interrupted")
        .start();
    // US's two pages and category names, then GB's first page.
    wait_for_requests(&h.fake, 4, &mut run.child);
    let during = last_statuses(&h);
    let want: BTreeMap<String, String> = [
        ("US", "complete"),
        ("GB", "running"),
        ("DE", "queued"),
        ("FR", "queued"),
    ]
    .map(|(c, s)| (c.to_owned(), s.to_owned()))
    .into();
    assert_eq!(during, want);
    let queued = h
        .bare()
        .args(["runs", "--status", "queued", "--json"])
        .run()
        .json();
    assert_eq!(queued["runs"].as_array().map(Vec::len), Some(2), "{queued}");

    signal(&run.child, "INT");
    let out = run.killed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let after = last_statuses(&h);
    assert_eq!(after["US"], "complete", "{after:?}");
    assert_eq!(after["GB"], "interrupted", "{after:?}");
    for code in ["DE", "FR"] {
        assert_eq!(after[code], "not_attempted", "{after:?}");
    }
    let text = h.bare().args(["status"]).run().stdout;
    for code in ["DE", "FR"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(code) && l.contains("not_attempted")),
            "{text}"
        );
    }
    let going: i64 = h
        .db()
        .query_row(
            "SELECT count(*) FROM run_regions WHERE status IN ('queued', 'running')",
            [],
            |r| r.get(0),
        )
        .expect("counting");
    assert_eq!(going, 0);
}

/// The summary line of a run's stderr: the one whose message is the run's kind, id,
/// status and duration, then its numbers.
fn summary_of(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            let m = message_of(l);
            (m.starts_with("run ") || m.starts_with("backfill "))
                && m.contains(" in ")
                && (m.contains(" calls, ") || m.contains(" call, "))
        })
        .collect();
    assert_eq!(lines.len(), 1, "one summary line:\n{stderr}");
    lines[0].to_owned()
}

/// A log line's message: what follows its time and level.
fn message_of(line: &str) -> &str {
    [" INFO ", " WARN ", " ERROR "]
        .iter()
        .find_map(|level| line.split_once(level).map(|(_, m)| m))
        .unwrap_or(line)
}

/// A run, one region at a time, that stops early (75): its summary line, which says
/// its calls, units and videos however many statuses its regions ended in, and the
/// one line that says why it stopped.
fn stopped_run(h: &Harness<'_>, status: &str) -> (String, String) {
    h.expect_stderr(" stopped: ").expect_ended(status);
    // The upstream's refusal also says what this budget had counted (docs/budget.md, "When
    // the upstream refuses").
    h.allow_stderr("quota is lower than configured");
    let (ran, _) = h.status(75).run(&["run", "--concurrency", "1"]);
    let line = summary_of(&ran.stderr);
    for number in [" calls, ", " units, ", " videos; "] {
        assert!(message_of(&line).contains(number), "{number}: {line}");
    }
    let why = lines_with(&ran.stderr, " stopped: ");
    assert_eq!(why.len(), 1, "{}", ran.stderr);
    (line, why[0].to_owned())
}

/// The cron heartbeat: one line of at most 160 characters, time and level included,
/// that says how long the run took, names every region, and carries no field the
/// message already says.
#[test]
fn the_heartbeat_of_a_full_run_is_one_short_line_with_its_duration() {
    let h = Harness::new(None);
    let (ran, _) = h.run(&["run"]);
    let line = summary_of(&ran.stderr);
    assert!(
        line.chars().count() <= 160,
        "{} characters: {line}",
        line.chars().count()
    );
    let run_id = h
        .db()
        .query_row("SELECT run_id FROM runs", [], |r| r.get::<_, String>(0))
        .expect("the run");
    assert!(
        line.contains(&format!(" INFO run {run_id} complete in ")),
        "{line}"
    );
    assert!(line.contains(": 24 calls, 24 units, "), "{line}");
    assert!(
        line.ends_with("; regions US GB DE FR IN BR AU CA complete"),
        "{line}"
    );
    assert!(!line.contains('='), "no field repeats the message: {line}");

    // One call is one call.
    let mut h = Harness::new(None);
    h.regions("[defaults]\npages = 1\n\n[[region]]\ncode = \"US\"\noffset = 0\n");
    let (ran, _) = h.run(&["run"]);
    let line = summary_of(&ran.stderr);
    assert!(line.contains(": 2 calls, 2 units, "), "{line}");
    let (ran, _) = h.run(&["run"]);
    let line = summary_of(&ran.stderr);
    assert!(line.contains(": 1 call, 1 unit, "), "{line}");
}

/// A run the upstream's quotaExceeded stops says why on a line of its own, once, and
/// its summary keeps its numbers; so does one the budget stops. Their regions ended
/// three ways: the word "regions" goes to keep the line short, no number does.
#[test]
fn a_stopped_run_says_why_once_and_its_summary_keeps_its_numbers() {
    let h = Harness::new(None);
    h.fake.answer_instead(
        page1("DE"),
        answer_fixture(403, "error_quota_exceeded.json"),
    );
    let (line, why) = stopped_run(&h, "upstream_quota_exhausted");
    assert!(
        line.ends_with(
            " videos; US GB complete, DE upstream_quota_exhausted, FR IN BR AU CA not_attempted"
        ),
        "{line}"
    );
    for once in ["quota is spent", "midnight", "blocked until"] {
        assert_eq!(why.matches(once).count(), 1, "{once}: {why}");
    }
    assert!(!why.contains("run_id="), "{why}");

    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().ceiling(4));
    let (line, why) = stopped_run(&h, "budget_exhausted");
    assert!(why.contains(" stopped: budget exhausted"), "{why}");
    assert!(
        line.contains(" budget_exhausted in ")
            && line.contains(": 4 calls, 4 units, 0 left, ")
            && line.contains(" videos; "),
        "{line}"
    );
    assert!(
        line.ends_with("US complete, GB budget_exhausted, DE FR IN BR AU CA not_attempted"),
        "{line}"
    );
}

/// The cron log: eight regions, each with two category charts, and
/// follow-ups. The summary keeps the calls, the units and the videos (the run's
/// JSON says how many), in at most 160 characters of message.
#[test]
fn with_categories_and_follow_ups_the_heartbeat_keeps_its_numbers() {
    let mut h = Harness::with(
        crate::common::upstream::FakeUpstream::billing(crate::common::upstream::Billing::single(
            10_000,
        )),
        None,
    );
    let mut regions = String::from("[defaults]\npages = 2\ncategories = [\"10\", \"17\"]\n");
    for (i, code) in REGIONS.iter().enumerate() {
        regions.push_str(&format!(
            "\n[[region]]\ncode = \"{code}\"\noffset = {}\n",
            i * 7
        ));
    }
    regions.push_str("\n[follow]\ndays = 7\nevery = \"6h\"\n");
    h.regions(&regions);
    let (report, _, ran) = h.run_to(&["run", "--json"], 0, "complete");
    assert!(report["follow"].is_object(), "{report}");
    let line = summary_of(&ran.stderr);
    let message = message_of(&line);
    assert!(
        message.chars().count() <= 160,
        "{} characters: {message}",
        message.chars().count()
    );
    let videos: u64 = report["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .map(|r| r["videos"].as_u64().expect("videos"))
        .sum();
    assert!(videos > 0, "{report}");
    let numbers = format!(
        ": {} calls, {} units, {} left, {videos} videos",
        report["calls"], report["units_charged"], report["remaining"]
    );
    assert!(message.contains(&numbers), "{numbers} in {message}");
    assert!(
        message.ends_with("US GB DE FR IN BR AU CA complete"),
        "{message}"
    );
}

/// `-q prune` in a crontab writes nothing but warnings and errors; `--json` still
/// prints its object; the text says the space freed as people read sizes.
#[test]
fn a_quiet_prune_writes_nothing() {
    let h = Harness::new(None);
    h.run(&["run"]);
    h.bare()
        .args(["-q", "prune", "--older-than", "30d"])
        .stdout("")
        .stderr("")
        .run();
    h.bare()
        .args(["prune", "--older-than", "30d"])
        .stdout(starts_with("deleted snapshots"))
        // A size for people, in the binary units of `du -h`, not a count of bytes.
        .stdout(contains("B freed"))
        .stdout(lacks("bytes"))
        .run();
    let ran = h
        .bare()
        .args(["-q", "prune", "--older-than", "30d", "--json"])
        .run();
    assert_eq!(ran.json()["dry_run"], false);
}

/// A run against the loopback upstream takes well under a second: its duration in the
/// metrics file is what it took, not 0 (docs/metrics.md: seconds, fractional).
#[test]
fn run_durations_in_the_metrics_are_fractional_seconds() {
    let h = Harness::new(None);
    h.run(&["--metrics-file", "trendsync.prom", "run", "--region", "US"]);
    let took: i64 = h
        .db()
        .query_row("SELECT duration_us FROM runs", [], |r| r.get(0))
        .expect("the run's duration");
    assert!(took > 0, "{took}");
    let m = metrics(&h.scratch.file("trendsync.prom"));
    let seconds = took as f64 / 1e6;
    for series in [
        "trendsync_last_run_duration_seconds{kind=\"run\"}",
        "trendsync_region_last_run_duration_seconds{region=\"US\"}",
    ] {
        assert_eq!(m.get(series), Some(&seconds), "{series}: {m:?}");
    }
}

/// `search` and `video` fit the terminal at 40, 80 and 120 columns (the title, the
/// snippet, the places and the counts), and keep what matters: the URL search prints,
/// and every count's row.
#[test]
fn search_and_video_fit_40_80_and_120_columns() {
    let h = Harness::new(None);
    h.run(&["run"]);
    let hits = h
        .bare()
        .args(["search", "lighthouse", "--json"])
        .run()
        .json();
    let id = hits["results"][0]["video_id"]
        .as_str()
        .expect("a video found")
        .to_owned();
    let whole = h.bare().args(["video", &id]).run().stdout;
    assert!(
        whole.lines().any(|l| columns(l) > 40),
        "a line wider than 40 columns to fit:\n{whole}"
    );
    for width in [40, 80, 120] {
        let found = at_width(&h, &["search", "lighthouse"], width);
        assert!(found.contains(&id), "{width}: the URL's id\n{found}");
        let video = at_width(&h, &["video", &id], width);
        for word in ["region", "counts at", "views"] {
            assert!(video.contains(word), "{width}: {word}\n{video}");
        }
        assert_eq!(
            video.lines().filter(|l| l.contains("Z ")).count(),
            whole.lines().filter(|l| l.contains("Z ")).count(),
            "{width}: every place and count keeps its row\n{video}"
        );
    }
}

/// `config` fits `COLUMNS` as the tables do: at 80 and 40 columns no line is wider,
/// each keeps its label, and a long value is cut with `…` (a path in its middle, so
/// that the file's name and why it was chosen stay); piped with no width and in
/// `--json` everything is whole.
#[test]
fn config_fits_80_and_40_columns_and_json_keeps_every_value_whole() {
    let mut h = Harness::new(None);
    h.costs(
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/quota-costs.granular.toml"
        ))
        .expect("the granular file"),
    );
    let deep = h
        .scratch
        .file("a-rather-long-directory-name/holding/another-long-one/for-the-database");
    std::fs::create_dir_all(&deep).expect("a directory");
    let db = deep.join("trendsync.db");
    let args = ["--db", db.to_str().expect("UTF-8"), "config"];
    let whole = h.bare().args(args).run().stdout;
    assert!(
        whole.lines().any(|l| columns(l) > 80) && !whole.contains('…'),
        "the scenario has lines longer than 80 columns, whole when piped:\n{whole}"
    );
    for width in [80, 40] {
        let fitted = at_width(&h, &args, width);
        assert!(fitted.contains('…'), "{fitted}");
        assert_eq!(fitted.lines().count(), whole.lines().count(), "{fitted}");
        for (cut, full) in fitted.lines().zip(whole.lines()) {
            let label: String = full.chars().take(10).collect();
            assert!(cut.starts_with(&label), "{cut:?} keeps {label:?}");
        }
        let database = fitted
            .lines()
            .find(|l| l.starts_with("database"))
            .expect("a database line");
        assert!(database.ends_with("trendsync.db (--db)"), "{database}");
        let json = h
            .bare()
            .env("COLUMNS", width.to_string())
            .args(["--db", db.to_str().expect("UTF-8"), "config", "--json"])
            .run()
            .json();
        assert_eq!(json["db"], db.display().to_string(), "{json}");
    }
}

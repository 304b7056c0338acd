//! What a hostile or unlucky environment does to the command line: stdout closed
//! early, key files and API bases that are not what they should be, a budget named
//! after the key, a mistyped --db, a redirecting upstream, a full disk.

use serde_json::Value;
use wiremock::Mock;
use wiremock::matchers::any;

use crate::common::harness::Harness;
use crate::common::upstream::{API_KEY, OVERRIDE, answer, page1};
use crate::common::{Costs, Scratch, Trendsync, contains, lacks};

/// Runs `t` with its stdout a pipe whose reader is already gone, as in `... | true`;
/// returns the exit code and stderr.
fn with_stdout_closed(t: Trendsync) -> (i32, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut cmd = t.cmd;
    let out = cmd
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("running trendsync");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exit_codes_are_the_outcome_even_when_stdout_is_a_closed_pipe() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(1000).ceiling(5));

    // A run stopped by the ceiling: 75, in JSON and in text.
    let (code, stderr) = with_stdout_closed(h.cmd().args(["run", "--json"]));
    assert_eq!(code, 75, "run --json | true: {stderr}");
    // The dry run of what is left says it would be cut: 75.
    let (code, stderr) = with_stdout_closed(h.cmd().args(["run", "--dry-run"]));
    assert_eq!(code, 75, "run --dry-run | true: {stderr}");
    let (code, stderr) = with_stdout_closed(h.cmd().args(["run", "--dry-run", "--json"]));
    assert_eq!(code, 75, "run --dry-run --json | true: {stderr}");

    // A denied manual charge: 75, in JSON and in text.
    for args in [
        &["budget", "charge", "videos.list", "--json"][..],
        &["budget", "charge", "videos.list"][..],
    ] {
        let (code, stderr) = with_stdout_closed(h.bare().args(args));
        assert_eq!(code, 75, "{args:?} | true: {stderr}");
    }
    let (code, stderr) = with_stdout_closed(h.bare().args(["budget", "charge", "nope.list"]));
    assert_eq!(code, 2, "an unknown method stays a usage error: {stderr}");

    // search: a hit printed to nobody is still a search that worked; a bad query is 2.
    let (code, stderr) = with_stdout_closed(h.bare().args(["search", "Ammonite"]));
    assert_eq!(code, 0, "search | true: {stderr}");
    let (code, stderr) = with_stdout_closed(h.bare().args(["search", "\"unbalanced", "--json"]));
    assert_eq!(code, 2, "search with a bad query | true: {stderr}");

    // A failed run: 1.
    h.costs(Costs::one_unit_each().quota(1000).ceiling(1000));
    h.fake
        .answer_instead(Mock::given(any()), answer(200, "{\"items\": ["));
    let (code, stderr) = with_stdout_closed(h.cmd().args(["run", "--json", "--region", "US"]));
    assert_eq!(code, 1, "a failed run --json | true: {stderr}");
}

/// An export read by a reader that stopped (`| head`, `| true`) is not a failure, in
/// every format and kind: exit 0, and nothing on stderr but the log.
#[test]
fn an_export_to_a_closed_pipe_ends_quietly_in_every_format() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();
    for format in ["csv", "jsonl", "parquet"] {
        for kind in [&[][..], &["--per", "video"][..], &["--counts"][..]] {
            let (code, stderr) = with_stdout_closed(
                h.bare()
                    .args(["export", "--format", format])
                    .args(kind)
                    .stderr(lacks("rror")),
            );
            assert_eq!(
                code, 0,
                "export --format {format} {kind:?} | true: {stderr}"
            );
        }
    }
}

/// Runs `cmd`, which must exit 78 with `says` on stderr, and with --json print one
/// object on stdout that says so; returns the object.
#[track_caller]
fn config_failure(cmd: Trendsync, says: &str) -> Value {
    let json = cmd.status(78).stderr(contains(says)).run().json();
    assert_eq!(json["status"], "failed", "{json}");
    assert_eq!(json["exit_code"], 78, "{json}");
    let error = json["error"].as_str().unwrap_or_default();
    assert!(error.contains(says), "the JSON error says {says:?}: {json}");
    json
}

#[test]
fn bad_key_files_and_api_bases_are_configuration_errors_answered_in_json() {
    let h = Harness::new(None);
    let two_lines = h
        .scratch
        .write("two-lines", &format!("{API_KEY}\n{API_KEY}\n"));
    let non_ascii = h.scratch.write("non-ascii", "AIzaTEST-sécret-key\n");
    for (file, says) in [
        (&two_lines, "more than one line"),
        (&non_ascii, "characters no API key has"),
    ] {
        config_failure(
            h.bare()
                .args(["--api-base", &h.fake.uri()])
                .arg("--api-key-file")
                .arg(file)
                .args(["run", "--json"])
                .expect_stderr(says)
                .stderr(lacks(API_KEY))
                .stdout(lacks(API_KEY)),
            says,
        );
    }
    for base in [
        "not a url",
        "ftp://127.0.0.1/v3",
        "http://127.0.0.1:99999/v3",
    ] {
        config_failure(
            h.bare()
                .env("YOUTUBE_API_KEY", API_KEY)
                .args(["--api-base", base, "run", "--json"])
                .expect_stderr("is not usable"),
            "is not usable",
        );
        // The dry run refuses what the real run would.
        config_failure(
            h.bare()
                .args(["--api-base", base, "run", "--dry-run", "--json"])
                .expect_stderr("is not usable"),
            "is not usable",
        );
    }
    // Before any command starts: a config file that does not load.
    let bad = h.scratch.write("bad.toml", "[budget\n");
    config_failure(
        h.bare()
            .arg("--costs")
            .arg(&bad)
            .args(["budget", "--json"])
            .expect_stderr("bad.toml:1:"),
        "bad.toml:1:",
    );
    assert!(h.fake.calls().is_empty());
}

#[test]
fn a_budget_named_after_the_api_key_in_use_is_refused_whatever_its_shape() {
    let s = Scratch::new();
    let key = "plain-key.0123456789";
    let costs = s.write(
        "costs.toml",
        &Costs::youtube().key(key).quota(1000).ceiling(900).to_toml(),
    );
    for args in [
        &["run", "--dry-run", "--json"][..],
        &["budget", "--json"][..],
        &["budget", "charge", "videos.list", "--json"][..],
    ] {
        let json = config_failure(
            s.cmd()
                .arg("--costs")
                .arg(&costs)
                .env("YOUTUBE_API_KEY", key)
                .args(args)
                .expect_stderr("budget.key is the API key in use")
                .stdout(lacks(key))
                .stderr(lacks(key)),
            "budget.key is the API key in use",
        );
        assert_eq!(json["status"], "failed");
    }
    // The same name with another key in use is fine (a dry run, which creates no
    // database, where `budget` would now refuse the missing one).
    s.cmd()
        .arg("--costs")
        .arg(&costs)
        .env("YOUTUBE_API_KEY", "another-key")
        .args(["run", "--dry-run", "--json"])
        .run();
    assert!(s.listing().iter().all(|n| !n.starts_with("trendsync.db")));
}

#[test]
fn a_db_in_a_directory_that_does_not_exist_is_refused_not_read_as_empty() {
    let s = Scratch::new();
    let db = s.file("no-such-dir/trendsync.db");
    for args in [
        &["budget", "--json"][..],
        &["search", "anything", "--json"][..],
    ] {
        let json = config_failure(
            s.cmd()
                .arg("--db")
                .arg(&db)
                .args(args)
                .expect_stderr("does not exist"),
            "does not exist",
        );
        assert!(json.get("used").is_none(), "no empty window: {json}");
    }
    assert!(!s.file("no-such-dir").exists(), "nothing was created");
    // A database not there yet in a directory that is: refused as well, naming the
    // file rather than the directory, and not created either.
    let json = config_failure(
        s.cmd()
            .arg("--db")
            .arg(s.file("later.db"))
            .args(["budget", "--json"])
            .expect_stderr("later.db: no such file"),
        "later.db: no such file",
    );
    assert!(json.get("used").is_none(), "no empty window: {json}");
    assert!(!s.file("later.db").exists(), "nothing was created");
}

#[test]
fn a_redirect_says_where_it_pointed_masked() {
    let h = Harness::new(None);
    let target = format!("http://someone:pa55word@127.0.0.1:9/elsewhere/videos?key={API_KEY}");
    h.fake.mount(
        page1("US")
            .respond_with(
                wiremock::ResponseTemplate::new(301).insert_header("Location", target.as_str()),
            )
            .with_priority(OVERRIDE),
    );
    h.expect_stderr("HTTP 301, a redirect to")
        .expect_ended("failed");
    let (ran, calls) = h
        .status(1)
        .stdout(lacks(API_KEY))
        .stdout(lacks("pa55word"))
        .stderr(lacks(API_KEY))
        .stderr(lacks("pa55word"))
        .run(&["run", "--json", "--region", "US"]);
    assert_eq!(calls.len(), 1, "not followed, not retried");
    let error = ran.json()["regions"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains(
            "HTTP 301, a redirect to http://someone:***@127.0.0.1:9/elsewhere/videos?key=***"
        ),
        "{error}"
    );
}

#[test]
fn a_storage_error_keeps_its_cause_in_the_log_and_the_json() {
    let h = Harness::new(None);
    h.run(&["run", "--region", "US"]);
    // Every table the run's pages go to now fails as a full disk would; the runs
    // table and the limiter's stay writable, so the run itself goes on.
    {
        let db = rusqlite::Connection::open(h.db_path()).expect("opening the database");
        let tables: Vec<String> = db
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table'
                 AND name NOT LIKE 'sqlite%' AND name NOT LIKE 'quota%'
                 AND name NOT LIKE '%fts%' AND name <> 'runs'",
            )
            .and_then(|mut q| {
                q.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<Result<_, _>>()
            })
            .expect("listing tables");
        for t in tables {
            db.execute_batch(&format!(
                "CREATE TRIGGER full_{t} BEFORE INSERT ON \"{t}\"
                 BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;"
            ))
            .expect("adding a trigger");
        }
    }
    h.expect_stderr("database or disk is full")
        .expect_ended("failed");
    let (ran, _) = h
        .status(1)
        .stderr(contains("database or disk is full"))
        .run(&["run", "--json", "--region", "US"]);
    let report = ran.json();
    let error = report["regions"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("storing trending page 1 of region US")
            && error.contains("database or disk is full"),
        "{report}"
    );
}

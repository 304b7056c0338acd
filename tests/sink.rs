//! `--sink` end to end: real runs against the fake upstream ship their finished slots
//! to a `file://` directory or to moto's S3 server (tests/common/moto.rs), read back
//! as one table with DuckDB, pandas, pyarrow and Polars and compared row by row with
//! `export`; one object per slot whoever ships it and however often; a sink that is
//! down delays shipping and loses nothing, and `prune` keeps what it has not shipped;
//! no credential is ever printed.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::moto::{ACCESS_KEY_ID, MotoServer, python};
use crate::common::redis_server::{real_now_us, unix_us};
use crate::common::upstream::{API_KEY, Billing, FakeUpstream};
use crate::common::{Trendsync, files_under};

/// US and GB (at minute 7), each with the overall chart and category 17's, one page.
const TWO_REGIONS: &str = "[defaults]\npages = 1\n\n\
    [[region]]\ncode = \"US\"\noffset = 0\ncategories = [\"17\"]\n\n\
    [[region]]\ncode = \"GB\"\noffset = 7\ncategories = [\"17\"]\n";

/// The hours the scenarios run at, each its own slot of both regions.
const HOURS: [&str; 5] = [
    "2027-01-04T10:10:00Z",
    "2027-01-04T11:10:00Z",
    "2027-01-04T12:10:00Z",
    "2027-01-04T13:10:00Z",
    "2027-01-04T14:10:00Z",
];

/// The secret key the S3 scenarios give the binary: never printed.
const SENTINEL_SECRET: &str = "SENTINEL-secret-never-printed-7f3a";

fn world() -> Harness<'static> {
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.regions(TWO_REGIONS);
    h
}

/// `trendsync ARGS` against the fake upstream, its clock (and the upstream's `Date`)
/// standing at `at`.
fn at(h: &Harness<'_>, at: &str) -> Trendsync {
    h.fake
        .shift_dates((unix_us(at) - real_now_us()) / 1_000_000);
    let stamp = at.trim_end_matches('Z').replace('T', " ");
    h.bare()
        .args(["--api-base", &h.fake.uri()])
        .env("YOUTUBE_API_KEY", API_KEY)
        .env("TZ", "UTC")
        .faketime(&["--exclude-monotonic", "-f", &stamp])
}

/// `run --json --sink SINK` at `when`; its report.
#[track_caller]
fn run_at(h: &Harness<'_>, when: &str, sink: &str, env: &[(&str, &str)]) -> Value {
    let mut cmd = at(h, when).args(["run", "--json", "--sink", sink]);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let report = cmd.run().json();
    assert_eq!(report["status"], "complete", "{report}");
    report
}

/// The sink's object names the runs at `hours` give: both regions' two charts.
fn expected_objects(hours: &[&str]) -> Vec<String> {
    let mut names = Vec::new();
    for hour in hours {
        let hour = &hour[..13]; // 2027-01-04T10
        let (date, h) = (&hour[..10], &hour[11..13]);
        let compact = date.replace('-', "");
        for chart in [0, 17] {
            names.push(format!(
                "date={date}/region=US/{compact}T{h}0000Z-chart-{chart}.parquet"
            ));
            names.push(format!(
                "date={date}/region=GB/{compact}T{h}0700Z-chart-{chart}.parquet"
            ));
        }
    }
    names.sort();
    names
}

/// `export --per fetch --chart all` as Parquet, at `path`.
fn export_all(h: &Harness<'_>, path: &Path) {
    h.bare()
        .args([
            "export", "--per", "fetch", "--chart", "all", "--format", "parquet", "--output",
        ])
        .arg(path)
        .stdout("")
        .run();
}

/// The sink read by `how` (tests/fixtures/read_sink.py) and the export, row by row.
#[track_caller]
fn assert_sink_is_export(how: &str, sink: &str, export: &Path, env: &[(&str, &str)]) -> usize {
    assert_sink_since_is_export(how, sink, export, env, None)
}

/// [`assert_sink_is_export`] of the sink's rows fetched at or after `since` alone.
#[track_caller]
fn assert_sink_since_is_export(
    how: &str,
    sink: &str,
    export: &Path,
    env: &[(&str, &str)],
    since: Option<&str>,
) -> usize {
    let mut cmd = Command::new(python());
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/read_sink.py"
    ))
    .args([how, sink])
    .arg(export)
    .args(since)
    .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("running read_sink.py");
    assert!(
        out.status.success(),
        "read_sink.py {how}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).expect("JSON from read_sink.py");
    let (sink_rows, export_rows) = (
        read["sink"].as_array().expect("rows"),
        read["export"].as_array().expect("rows"),
    );
    assert!(!export_rows.is_empty());
    assert_eq!(sink_rows.len(), export_rows.len(), "{how}: rows");
    for (i, (s, e)) in sink_rows.iter().zip(export_rows).enumerate() {
        assert_eq!(s, e, "{how}: row {i}");
    }
    export_rows.len()
}

fn outbox(h: &Harness<'_>) -> Vec<(String, String, Option<i64>)> {
    let db = h.db();
    let mut stmt = db
        .prepare("SELECT run_id, region, shipped_at FROM sink_outbox ORDER BY run_id, region")
        .expect("the outbox");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("the outbox")
        .collect::<Result<_, _>>()
        .expect("the outbox")
}

#[test]
fn a_file_sink_read_by_duckdb_and_pandas_is_the_export_row_by_row() {
    let h = world();
    let root = h.scratch.file("sink");
    let sink = format!("file://{}", root.display());
    for hour in &HOURS[..3] {
        run_at(&h, hour, &sink, &[]);
    }
    // A backfill ships its slots as a run does.
    let report = at(&h, HOURS[3])
        .args([
            "backfill",
            "--json",
            "--stale-after",
            "30m",
            "--sink",
            &sink,
        ])
        .run()
        .json();
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!(files_under(&root), expected_objects(&HOURS[..4]));
    assert!(outbox(&h).iter().all(|(_, _, shipped)| shipped.is_some()));
    let export = h.scratch.file("export.parquet");
    export_all(&h, &export);
    let rows = assert_sink_is_export("duckdb", &root.display().to_string(), &export, &[]);
    assert!(
        rows > 12,
        "three hours of two regions' two charts: {rows} rows"
    );
    assert_sink_is_export("pandas", &root.display().to_string(), &export, &[]);
}

/// The environment an S3 sink on `moto` is reached with: the secret a sentinel that
/// must never be printed.
fn s3_env(moto: &MotoServer) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.to_owned()),
        ("AWS_SECRET_ACCESS_KEY", SENTINEL_SECRET.to_owned()),
        ("AWS_ENDPOINT_URL", moto.endpoint()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ]
}

fn pairs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// `run --json --sink SINK --metrics-file` at `when` on S3; the report, and everything
/// it printed and wrote, checked for the secret.
#[track_caller]
fn run_s3(h: &Harness<'_>, when: &str, sink: &str, env: &[(&str, &str)]) -> (Value, String) {
    let metrics = h.scratch.file("trendsync.prom");
    let mut cmd = at(h, when)
        .args(["run", "--json", "--sink", sink, "--metrics-file"])
        .arg(&metrics);
    for (k, v) in env {
        cmd = cmd.env(k, v);
    }
    let ran = cmd.run();
    let written = std::fs::read_to_string(&metrics).expect("the metrics file");
    for (what, text) in [
        ("stdout", &ran.stdout),
        ("stderr", &ran.stderr),
        ("the metrics file", &written),
    ] {
        assert!(
            !text.contains(SENTINEL_SECRET),
            "the secret key is in {what}:\n{text}"
        );
    }
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    (report, written)
}

fn prefixed(prefix: &str, names: Vec<String>) -> Vec<String> {
    names.into_iter().map(|n| format!("{prefix}/{n}")).collect()
}

/// The sink on a real S3 server (moto): read by pyarrow and by Polars, it is the
/// export; a second database fetching the same slots, and a retry of slots already
/// shipped, add no object and change none; the secret key is printed nowhere.
#[test]
fn an_s3_sink_read_by_pyarrow_and_polars_is_the_export_and_each_slot_is_one_object() {
    let moto = MotoServer::start();
    moto.create_bucket("charts");
    let env = s3_env(&moto);
    let env = pairs(&env);
    let sink = "s3://charts/trendsync";
    let a = world();
    for hour in &HOURS[..2] {
        let (_, metrics) = run_s3(&a, hour, sink, &env);
        assert!(
            metrics.contains("\ntrendsync_sink_backlog 0\n"),
            "{metrics}"
        );
        assert!(!metrics.contains("trendsync_sink_oldest_queued_timestamp_seconds "));
    }
    let objects = prefixed("trendsync", expected_objects(&HOURS[..2]));
    assert_eq!(moto.keys("charts"), objects);
    let export_a = a.scratch.file("a.parquet");
    export_all(&a, &export_a);
    assert_sink_is_export("pyarrow", sink, &export_a, &env);
    assert_sink_is_export("polars", sink, &export_a, &env);

    // Another host's database, fetching the same slots five minutes later: its
    // objects are already there, and stay the first host's.
    let b = world();
    let b_first = "2027-01-04T10:15:00Z";
    let (report, _) = run_s3(&b, b_first, sink, &env);
    assert_eq!(report["status"], "complete");
    assert!(outbox(&b).iter().all(|(_, _, shipped)| shipped.is_some()));
    assert_eq!(moto.keys("charts"), objects);
    assert_sink_is_export("pyarrow", sink, &export_a, &env);

    // A retry of slots the sink has (the outbox lost its marks): nothing new.
    rusqlite::Connection::open(a.db_path())
        .expect("opening the database")
        .execute("UPDATE sink_outbox SET shipped_at = NULL", [])
        .expect("forgetting the shipments");
    run_s3(&a, HOURS[2], sink, &env);
    assert!(outbox(&a).iter().all(|(_, _, shipped)| shipped.is_some()));
    assert_eq!(
        moto.keys("charts"),
        prefixed("trendsync", expected_objects(&HOURS[..3]))
    );
    export_all(&a, &export_a);
    assert_sink_is_export("pyarrow", sink, &export_a, &env);
}

/// The metrics file's value of the unlabelled gauge `name`, if it has a sample.
fn gauge(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// moto stopped for three runs: each run ends complete and exits 0, logging the sink's
/// failure in one line; the backlog grows in `status` and the metrics; a prune then
/// keeps every unshipped fetch. Back up, the next run ships the backlog: every slot is
/// on the sink once, and the backlog is 0.
#[test]
fn a_sink_down_for_three_runs_loses_nothing_and_doubles_nothing() {
    let mut moto = MotoServer::start();
    moto.create_bucket("charts");
    let env = s3_env(&moto);
    let env = pairs(&env);
    let sink = "s3://charts/trendsync";
    let h = world();
    run_s3(&h, HOURS[0], sink, &env);
    let kept = h.scratch.file("bucket-before-the-outage");
    moto.save("charts", &kept);
    moto.stop();

    for (i, hour) in HOURS[1..4].iter().enumerate() {
        h.allow_stderr("the sink s3://charts/trendsync failed");
        let (_, metrics) = run_s3(&h, hour, sink, &env);
        let waiting = 2 * (i + 1);
        assert_eq!(
            gauge(&metrics, "trendsync_sink_backlog"),
            Some(waiting as f64),
            "{metrics}"
        );
        assert_eq!(
            gauge(&metrics, "trendsync_sink_oldest_queued_timestamp_seconds"),
            Some((unix_us(HOURS[1]) / 1_000_000) as f64),
            "{metrics}"
        );
    }
    let status = h.bare().args(["status", "--json"]).run().json();
    assert_eq!(status["sink"]["queued_slots"], 6, "{status}");
    let text = at(&h, "2027-01-04T13:40:00Z").arg("status").run().stdout;
    assert!(
        text.contains("sink: 6 slots wait to be shipped, the oldest queued at"),
        "{text}"
    );
    assert_eq!(
        status["sink"]["oldest_queued_at"], "2027-01-04T11:10:00Z",
        "{status}"
    );

    // A prune of everything fetched before the outage's end keeps the unshipped slots'
    // fetches: 3 runs of 2 regions' 2 charts. The shipped hour goes.
    at(&h, "2027-01-04T13:40:00Z")
        .args(["prune", "--older-than", "1m"])
        .run();
    let fetches: i64 = h
        .db()
        .query_row("SELECT count(*) FROM fetches", [], |r| r.get(0))
        .expect("counting");
    assert_eq!(fetches, 3 * 2 * 2);

    moto.restart();
    moto.restore("charts", &kept);
    let (_, metrics) = run_s3(&h, HOURS[4], sink, &env);
    assert_eq!(
        gauge(&metrics, "trendsync_sink_backlog"),
        Some(0.0),
        "{metrics}"
    );
    assert_eq!(
        gauge(&metrics, "trendsync_sink_oldest_queued_timestamp_seconds"),
        None
    );
    assert_eq!(
        moto.keys("charts"),
        prefixed("trendsync", expected_objects(&HOURS))
    );
    let status = h.bare().args(["status", "--json"]).run().json();
    assert_eq!(status["sink"]["queued_slots"], 0, "{status}");
    // Every row the database still holds is on the sink, once.
    let export = h.scratch.file("export.parquet");
    export_all(&h, &export);
    assert_sink_since_is_export("pyarrow", sink, &export, &env, Some(HOURS[1]));
}

/// The README's lines that read the whole sink, run as written on a `file://` sink:
/// each gives the export's rows.
#[test]
fn the_readmes_lines_read_the_whole_sink_as_one_table() {
    const README: &str = include_str!("../README.md");
    let section = README
        .split("### One dataset from every host: the sink")
        .nth(1)
        .and_then(|s| s.split("\n### ").next())
        .expect("README.md has the sink's section");
    let block = section
        .split("```python\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a python block in the sink's section");
    let h = world();
    let root = h.scratch.file("sink");
    let sink = format!("file://{}", root.display());
    for hour in &HOURS[..2] {
        run_at(&h, hour, &sink, &[]);
    }
    let export = h.scratch.file("export.parquet");
    export_all(&h, &export);
    let exported: i64 = rusqlite::Connection::open(h.db_path())
        .expect("the database")
        .query_row(
            "SELECT count(*) FROM places AS p JOIN fetches AS f ON f.num = p.fetch WHERE f.search = 0",
            [],
            |r| r.get(0),
        )
        .expect("counting the places");
    // Each line assigns `charts`: its row count and columns are printed after it.
    let mut script = String::new();
    for line in block.lines() {
        let line = line.replace(
            "\"/srv/trendsync-sink\"",
            &format!("{:?}", root.display().to_string()),
        );
        script.push_str(&line);
        script.push('\n');
        if line.starts_with("charts = ") {
            script.push_str("print(len(charts), 'region' in list(charts.columns))\n");
        }
    }
    let out = Command::new(python())
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("running the README's lines");
    assert!(
        out.status.success(),
        "the README's lines failed: {}\n{script}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 3, "{printed}");
    for line in lines {
        assert_eq!(line, format!("{exported} True"), "{printed}");
    }
}

/// A `--sink` of no known form is a usage error (2) that names the forms, before any
/// call; one with a credential in it is refused without showing the credential.
#[test]
fn a_sink_of_another_form_is_a_usage_error_naming_the_forms() {
    let h = world();
    for (url, shown) in [
        (
            "https://charts.example.com/x",
            "https://charts.example.com/x",
        ),
        (
            "s3://AKIAEXAMPLE:SENTINEL-pw@charts/x",
            "s3://AKIAEXAMPLE:***@charts/x",
        ),
    ] {
        let ran = h
            .cmd()
            .args(["run", "--sink", url])
            .status(2)
            .expect_stderr(format!("--sink {shown}"))
            .run();
        assert!(!ran.stderr.contains("SENTINEL-pw"), "{}", ran.stderr);
        assert!(
            ran.stderr.contains("s3://BUCKET/PREFIX") || ran.stderr.contains("AWS environment"),
            "{}",
            ran.stderr
        );
    }
    let ran = h
        .cmd()
        .env("TRENDSYNC_SINK", "ftp://charts/x")
        .arg("run")
        .status(2)
        .expect_stderr("--sink ftp://charts/x: not a sink URL; expected s3://BUCKET/PREFIX or file:///ABSOLUTE/PATH")
        .run();
    assert!(h.fake.calls().is_empty(), "{}", ran.stderr);
}

/// A run with nothing to ship does not set the sink up: a host whose every region
/// another host fetched says nothing of a sink that could not be reached, and one that
/// queued slots says what stands in the sink directory's place.
#[test]
fn a_sink_is_set_up_only_when_a_slot_waits_for_it() {
    let redis = crate::common::RedisServer::start();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dangling = scratch.path().join("sink");
    std::os::unix::fs::symlink(scratch.path().join("nowhere"), &dangling)
        .expect("a link to nothing");
    let sink = format!("file://{}", dangling.display());
    let hosts: Vec<Harness<'_>> = (0..2)
        .map(|_| {
            let mut h = Harness::new(Some(&redis));
            h.regions(TWO_REGIONS);
            h
        })
        .collect();
    // Host A fetches and queues both regions' slots; its sink is a link to nothing.
    let a = hosts[0]
        .cmd()
        .args(["run", "--json", "--host-name", "a", "--sink", &sink])
        .expect_stderr("a link to nothing, stands there")
        .run();
    assert_eq!(a.json()["status"], "complete", "{}", a.stdout);
    // Host B finds both done: nothing queued, nothing to set up, no error line (the
    // harness fails on any it was not told of).
    let b = hosts[1]
        .cmd()
        .args(["run", "--json", "--host-name", "b", "--sink", &sink])
        .run();
    assert_eq!(b.json()["status"], "complete", "{}", b.stdout);
    assert!(!b.stderr.contains("sink"), "{}", b.stderr);
}

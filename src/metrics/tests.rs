use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::runner::{Attempts, RegionReport};

#[test]
fn label_values_escape_backslash_quote_and_newline() {
    assert_eq!(
        escape_label_value("a\\b\"c\nd"),
        r#"a\\b\"c\nd"#,
        "each of the three escaped once"
    );
    assert_eq!(escape_label_value("plain {x}=,'"), "plain {x}=,'");
    let mut exp = Exposition::new();
    exp.gauge("m", "Help with a \\ and a\nnewline and \"quotes\".")
        .sample(&[("path", "C:\\tmp\\\"x\"\n")], 1.0);
    assert_eq!(
        exp.render(),
        "# HELP m Help with a \\\\ and a\\nnewline and \"quotes\".\n\
         # TYPE m gauge\n\
         m{path=\"C:\\\\tmp\\\\\\\"x\\\"\\n\"} 1\n"
    );
}

#[test]
fn help_and_type_come_once_per_family_with_its_samples_together() {
    let mut exp = Exposition::new();
    exp.gauge("a", "A.").sample(&[("k", "1")], 1.0);
    exp.family("b", MetricType::Counter, "B.").sample(&[], 2.0);
    // Named again, with another help: the same family, its first help kept.
    exp.gauge("a", "A again.").sample(&[("k", "2")], 3.0);
    exp.gauge("empty", "Never sampled.");
    let text = exp.render();
    assert_eq!(
        text,
        "# HELP a A.\n# TYPE a gauge\na{k=\"1\"} 1\na{k=\"2\"} 3\n\
         # HELP b B.\n# TYPE b counter\nb 2\n"
    );
    assert_eq!(text.matches("# HELP a ").count(), 1);
    assert_eq!(text.matches("# TYPE a ").count(), 1);
    assert!(!text.contains("empty"), "no family without samples");
    assert!(!text.contains("EOF"), "not OpenMetrics");
}

#[test]
fn values_are_written_as_prometheus_reads_them() {
    assert_eq!(format_value(0.0), "0");
    assert_eq!(format_value(1_700_000_000.0), "1700000000");
    assert_eq!(format_value(-3.0), "-3");
    assert_eq!(format_value(0.25), "0.25");
    assert_eq!(format_value(f64::NAN), "NaN");
    assert_eq!(format_value(f64::INFINITY), "+Inf");
    assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
}

#[test]
fn names_are_checked() {
    assert!(valid_metric_name("trendsync_last_run_calls"));
    assert!(!valid_metric_name("9lives"));
    assert!(!valid_metric_name("a-b"));
    assert!(valid_label_name("kind"));
    assert!(!valid_label_name("__name__"));
    assert!(!valid_label_name("a:b"));
}

fn budget() -> Budget {
    Budget {
        key: "key1".into(),
        quota: 10_000,
        ceiling: 9_500,
        window: Duration::from_secs(86_400),
        costs: BTreeMap::from([("videos.list".to_owned(), 1)]),
        when_limiter_down: BTreeMap::new(),
        limits: Vec::new(),
    }
}

fn report() -> RunReport {
    let region = |code: &str, status: Status, videos: u64| RegionReport {
        status,
        videos,
        ..RegionReport::new(code)
    };
    RunReport {
        run_id: "r1".into(),
        status: Status::BudgetExhausted,
        units_charged: 7,
        units_unmetered: 0,
        calls: 7,
        remaining: Some(0),
        retry_after_s: Some(60.0),
        // In plan order; the file sorts them.
        regions: vec![
            region("US", Status::Complete, 10),
            region("GB", Status::BudgetExhausted, 5),
        ],
        stop_reason: None,
        ended_at: 1_700_000_100,
        budget_used: Some(9_500),
        attempts: Attempts::from([
            (("videos.list", CallOutcome::Ok), 5),
            (("videos.list", CallOutcome::Transient), 1),
            (("videoCategories.list", CallOutcome::Ok), 1),
        ]),
    }
}

#[test]
fn a_whole_file() {
    let report = report();
    let regions = [
        RegionState {
            region: "US".into(),
            last_complete_at: Some(1_700_000_050),
            last_attempt_at: Some(1_700_000_050),
            last_status: Some("complete".into()),
        },
        RegionState {
            region: "GB".into(),
            last_complete_at: None,
            last_attempt_at: Some(1_700_000_100),
            last_status: Some("budget_exhausted".into()),
        },
        RegionState {
            region: "DE".into(),
            last_complete_at: Some(1_690_000_000),
            last_attempt_at: Some(1_690_000_000),
            last_status: Some("complete".into()),
        },
    ];
    let budget = budget();
    let snapshot = Snapshot {
        kind: RunKind::Run,
        report: &report,
        other: Some(RunRecord {
            run_id: "b0".into(),
            kind: RunKind::Backfill,
            started_at: 1_600_000_000,
            ended_at: Some(1_600_000_010),
            status: "complete".into(),
            units: Some(30),
            calls: Some(31),
            stop_reason: None,
        }),
        budget: &budget,
        regions: &regions,
        methods: &["videos.list", "videoCategories.list"],
    };
    let expected = r#"# HELP trendsync_last_run_end_timestamp_seconds When the last run of this kind ended, in seconds since the Unix epoch.
# TYPE trendsync_last_run_end_timestamp_seconds gauge
trendsync_last_run_end_timestamp_seconds{kind="run"} 1700000100
trendsync_last_run_end_timestamp_seconds{kind="backfill"} 1600000010
# HELP trendsync_last_run_status 1 for the status the last run of this kind ended with, 0 for the others.
# TYPE trendsync_last_run_status gauge
trendsync_last_run_status{kind="run",status="complete"} 0
trendsync_last_run_status{kind="run",status="budget_exhausted"} 1
trendsync_last_run_status{kind="run",status="upstream_quota_exhausted"} 0
trendsync_last_run_status{kind="run",status="failed"} 0
trendsync_last_run_status{kind="run",status="skipped"} 0
trendsync_last_run_status{kind="backfill",status="complete"} 1
trendsync_last_run_status{kind="backfill",status="budget_exhausted"} 0
trendsync_last_run_status{kind="backfill",status="upstream_quota_exhausted"} 0
trendsync_last_run_status{kind="backfill",status="failed"} 0
trendsync_last_run_status{kind="backfill",status="skipped"} 0
# HELP trendsync_last_run_units_charged Quota units the last run of this kind charged to the budget.
# TYPE trendsync_last_run_units_charged gauge
trendsync_last_run_units_charged{kind="run"} 7
trendsync_last_run_units_charged{kind="backfill"} 30
# HELP trendsync_last_run_calls Upstream calls the last run of this kind made, every attempt counted.
# TYPE trendsync_last_run_calls gauge
trendsync_last_run_calls{kind="run"} 7
trendsync_last_run_calls{kind="backfill"} 31
# HELP trendsync_last_run_method_calls Upstream call attempts of the last run of the kind that wrote this file, by method and outcome.
# TYPE trendsync_last_run_method_calls gauge
trendsync_last_run_method_calls{kind="run",method="videoCategories.list",outcome="ok"} 1
trendsync_last_run_method_calls{kind="run",method="videoCategories.list",outcome="transient"} 0
trendsync_last_run_method_calls{kind="run",method="videoCategories.list",outcome="quota_exhausted"} 0
trendsync_last_run_method_calls{kind="run",method="videoCategories.list",outcome="fatal"} 0
trendsync_last_run_method_calls{kind="run",method="videoCategories.list",outcome="region_failed"} 0
trendsync_last_run_method_calls{kind="run",method="videos.list",outcome="ok"} 5
trendsync_last_run_method_calls{kind="run",method="videos.list",outcome="transient"} 1
trendsync_last_run_method_calls{kind="run",method="videos.list",outcome="quota_exhausted"} 0
trendsync_last_run_method_calls{kind="run",method="videos.list",outcome="fatal"} 0
trendsync_last_run_method_calls{kind="run",method="videos.list",outcome="region_failed"} 0
# HELP trendsync_last_run_region_videos Videos the last run of the kind that wrote this file stored for the region (trending positions and search results).
# TYPE trendsync_last_run_region_videos gauge
trendsync_last_run_region_videos{kind="run",region="GB"} 5
trendsync_last_run_region_videos{kind="run",region="US"} 10
# HELP trendsync_budget_used_units Units in the budget's sliding window after the run.
# TYPE trendsync_budget_used_units gauge
trendsync_budget_used_units{budget="key1"} 9500
# HELP trendsync_budget_remaining_units Units left after the run: to the ceiling (scheduled runs) and to the quota (backfill).
# TYPE trendsync_budget_remaining_units gauge
trendsync_budget_remaining_units{budget="key1",to="ceiling"} 0
trendsync_budget_remaining_units{budget="key1",to="quota"} 500
# HELP trendsync_region_last_success_timestamp_seconds When the region was last fetched completely, in seconds since the Unix epoch.
# TYPE trendsync_region_last_success_timestamp_seconds gauge
trendsync_region_last_success_timestamp_seconds{region="DE"} 1690000000
trendsync_region_last_success_timestamp_seconds{region="US"} 1700000050
"#;
    let got = snapshot.exposition().render();
    assert_eq!(got, expected, "got:\n{got}");
}

#[test]
fn without_the_budget_or_an_earlier_run_those_lines_are_left_out() {
    let mut report = report();
    report.budget_used = None;
    let budget = budget();
    let snapshot = Snapshot {
        kind: RunKind::Backfill,
        report: &report,
        other: None,
        budget: &budget,
        regions: &[],
        methods: &[],
    };
    let text = snapshot.exposition().render();
    assert!(!text.contains("trendsync_budget_"), "{text}");
    assert!(!text.contains("kind=\"run\""), "{text}");
    assert!(!text.contains("trendsync_region_last_success"), "{text}");
    assert!(
        text.contains(
            "trendsync_last_run_status{kind=\"backfill\",status=\"budget_exhausted\"} 1\n"
        ),
        "{text}"
    );
    // Methods attempted are listed even when not named in advance.
    assert!(
        text.contains(
            "trendsync_last_run_method_calls{kind=\"backfill\",method=\"videos.list\",outcome=\"transient\"} 1\n"
        ),
        "{text}"
    );
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[test]
fn the_file_is_replaced_whole_and_no_temporary_file_is_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trendsync.prom");
    fs::write(&path, "old\n").expect("an earlier file");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    write_atomically(&path, "new 1\n").expect("writing");
    assert_eq!(fs::read_to_string(&path).expect("reading"), "new 1\n");
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o644, "the new file's mode, not the old one's");
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("listing")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["trendsync.prom"]);
}

#[test]
fn a_file_that_cannot_be_written_says_where() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("missing").join("trendsync.prom");
    let err = write_atomically(&path, "x\n").expect_err("no such directory");
    assert!(
        err.to_string().starts_with("creating ") && err.to_string().contains("missing"),
        "{err}"
    );
    assert!(matches!(
        write_atomically(Path::new("/"), "x"),
        Err(WriteError::NoFileName(_))
    ));
    let names: Vec<_> = fs::read_dir(dir.path()).expect("listing").collect();
    assert!(names.is_empty());
}

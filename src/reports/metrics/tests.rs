use std::fs;

use super::*;
use crate::clock::Micros;
use crate::db_files::DbFiles;
use crate::quota::BucketFigures;
use crate::quota::skew::LimiterClock;
use crate::region_status::Recorded;

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

fn run(id: &str, kind: RunKind, started_at: i64, status: &str, units: u64) -> RunRecord {
    RunRecord {
        run_id: id.into(),
        kind,
        started_at,
        ended_at: Some(started_at + 40),
        status: Recorded::from_word(status),
        units: Some(units),
        calls: Some(units + 1),
        stop_reason: None,
        duration_us: Some(40_250_000),
    }
}

fn outcome(region: &str, status: &str, videos: u64) -> RegionOutcome {
    RegionOutcome {
        region: region.into(),
        status: Recorded::from_word(status),
        pages: 2,
        videos,
        units: 3,
        reason: None,
    }
}

fn calls(list: &[(&str, &str, u64)]) -> Vec<CallCount> {
    list.iter()
        .map(|(m, o, n)| CallCount {
            method: (*m).into(),
            outcome: Recorded::from_word(o),
            calls: *n,
        })
        .collect()
}

fn attempt(region: &str, started_at: i64, status: &str, ended: bool) -> HistoryRow {
    HistoryRow {
        run_id: format!("r-{region}"),
        kind: RunKind::Run,
        region: Some(region.into()),
        started_at,
        ended_at: ended.then_some(started_at + 30),
        status: Recorded::from_word(status),
        pages: 2,
        videos: 100,
        units: 3,
        reason: None,
        charts: vec![0],
        run_duration_us: ended.then_some(29_500_000),
    }
}

fn picture() -> Picture {
    Picture {
        last_runs: vec![
            LastRun {
                run: run("r1", RunKind::Run, 1_700_000_000, "failed", 6),
                regions: vec![outcome("GB", "failed", 0), outcome("US", "complete", 100)],
                calls: calls(&[
                    ("videos.list", "ok", 5),
                    ("videos.list", "region_failed", 1),
                ]),
            },
            LastRun {
                run: run("b0", RunKind::Backfill, 1_600_000_000, "complete", 30),
                regions: Vec::new(),
                calls: Vec::new(),
            },
        ],
        // An earlier run reached DE; the last one GB and US.
        attempts: vec![
            attempt("US", 1_700_000_000, "complete", true),
            attempt("DE", 1_690_000_000, "running", false),
            attempt("GB", 1_700_000_000, "failed", true),
        ],
        regions: vec![
            RegionState {
                region: "US".into(),
                last_complete_at: Some(1_700_000_030),
                last_attempt_at: Some(1_700_000_030),
                last_status: Some(RegionStatus::Complete.into()),
            },
            RegionState {
                region: "GB".into(),
                last_complete_at: None,
                last_attempt_at: Some(1_700_000_030),
                last_status: Some(RegionStatus::Failed.into()),
            },
        ],
        calls: calls(&[
            ("videos.list", "ok", 500),
            ("videos.list", "region_failed", 1),
            ("search.list", "ok", 2),
        ]),
        budget: Some(BudgetFigures {
            key: "key1".into(),
            buckets: vec![BucketFigures {
                name: "budget".into(),
                used: 9_600,
                ceiling: 9_500,
                quota: 10_000,
                blocked_until: Some(Micros::new(1_700_086_400_000_000)),
                upstream_spent_at: None,
            }],
        }),
        skews: vec![Skew {
            clock: LimiterClock::Host,
            skew_us: -250_000,
            measured_at_us: 1_700_000_001_500_000,
        }],
        configured: vec!["US".into(), "GB".into(), "DE".into()],
        limiter: Some(LimiterHealth {
            key: "key1".into(),
            up: Some(true),
            pending_calls: 0,
        }),
        slot_misses: std::collections::BTreeMap::from([("US".into(), 3), ("DE".into(), 1)]),
        refused: None,
        sink: Some(crate::store::SinkBacklog {
            slots: 2,
            oldest_queued_at: Some(1_699_990_000),
        }),
        unread: false,
    }
}

/// The sink's backlog: its slots, and the oldest's time only while one waits.
#[test]
fn the_sink_backlog_and_its_oldest_slot_while_one_waits() {
    let mut picture = picture();
    let text = picture.exposition(&["videos.list"]).render();
    assert_eq!(
        lines_of(&text, "trendsync_sink_backlog"),
        ["trendsync_sink_backlog 2"]
    );
    assert_eq!(
        lines_of(&text, "trendsync_sink_oldest_queued_timestamp_seconds"),
        ["trendsync_sink_oldest_queued_timestamp_seconds 1699990000"]
    );
    picture.sink = Some(crate::store::SinkBacklog::default());
    let text = picture.exposition(&["videos.list"]).render();
    assert_eq!(
        lines_of(&text, "trendsync_sink_backlog"),
        ["trendsync_sink_backlog 0"]
    );
    assert!(lines_of(&text, "trendsync_sink_oldest_queued_timestamp_seconds").is_empty());
    assert!(!text.contains("trendsync_sink_oldest_queued_timestamp_seconds 0"));
}

fn lines_of<'a>(text: &'a str, family: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(family))
        .collect()
}

/// Only configured regions have series: one taken out of regions.toml has none, though
/// the database remembers it, and one never reached has its last success at 0.
#[test]
fn the_configured_regions_and_only_they_have_series() {
    let mut picture = picture();
    // DE is taken out of regions.toml, FR added and never fetched yet.
    picture.configured = vec!["US".into(), "GB".into(), "FR".into()];
    let text = picture.exposition(&["videos.list"]).render();
    let regional: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("region=\""))
        .collect();
    assert!(!regional.is_empty());
    assert!(
        regional.iter().all(|l| !l.contains("region=\"DE\"")),
        "a removed region has no series: {text}"
    );
    assert_eq!(
        lines_of(&text, "trendsync_region_last_success_timestamp_seconds"),
        [
            "trendsync_region_last_success_timestamp_seconds{region=\"FR\"} 0",
            "trendsync_region_last_success_timestamp_seconds{region=\"GB\"} 0",
            "trendsync_region_last_success_timestamp_seconds{region=\"US\"} 1700000030"
        ]
    );
    assert_eq!(
        lines_of(&text, "trendsync_region_last_run_status").len(),
        2 * RegionStatus::ALL.len(),
        "US and GB were attempted, FR not yet: {text}"
    );
}

/// The fleet's missed slots: a counter per configured region, 0 for one with none, so
/// that the first miss is an increase; left out when the database could not be read.
#[test]
fn the_missed_slots_are_counted_per_configured_region_from_zero() {
    let mut picture = picture();
    picture.configured = vec!["US".into(), "GB".into(), "FR".into()];
    let text = picture.exposition(&["videos.list"]).render();
    assert!(
        text.contains("# TYPE trendsync_slots_missed_total counter"),
        "{text}"
    );
    assert_eq!(
        lines_of(&text, "trendsync_slots_missed_total"),
        [
            "trendsync_slots_missed_total{region=\"FR\"} 0",
            "trendsync_slots_missed_total{region=\"GB\"} 0",
            "trendsync_slots_missed_total{region=\"US\"} 3"
        ]
    );
    picture.unread = true;
    let text = picture.exposition(&["videos.list"]).render();
    assert!(lines_of(&text, "trendsync_slots_missed_total").is_empty());
}

#[test]
fn every_region_and_both_kinds_are_in_the_file() {
    let text = picture()
        .exposition(&["videos.list", "videoCategories.list"])
        .render();
    assert_eq!(
        lines_of(&text, "trendsync_last_run_status")
            .into_iter()
            .filter(|l| l.ends_with(" 1"))
            .collect::<Vec<_>>(),
        [
            "trendsync_last_run_status{kind=\"run\",status=\"failed\"} 1",
            "trendsync_last_run_status{kind=\"backfill\",status=\"complete\"} 1"
        ]
    );
    assert_eq!(
        lines_of(&text, "trendsync_last_run_duration_seconds"),
        [
            "trendsync_last_run_duration_seconds{kind=\"run\"} 40.25",
            "trendsync_last_run_duration_seconds{kind=\"backfill\"} 40.25"
        ]
    );
    // Regions sorted, each with its own last attempt's status.
    let ones: Vec<&str> = lines_of(&text, "trendsync_region_last_run_status")
        .into_iter()
        .filter(|l| l.ends_with(" 1"))
        .collect();
    assert_eq!(
        ones,
        [
            "trendsync_region_last_run_status{region=\"DE\",status=\"running\"} 1",
            "trendsync_region_last_run_status{region=\"GB\",status=\"failed\"} 1",
            "trendsync_region_last_run_status{region=\"US\",status=\"complete\"} 1"
        ]
    );
    assert_eq!(
        lines_of(&text, "trendsync_region_last_run_status").len(),
        3 * RegionStatus::ALL.len()
    );
    // Each region's charts by name.
    assert_eq!(
        lines_of(&text, "trendsync_region_last_run_charts"),
        [
            "trendsync_region_last_run_charts{region=\"DE\",chart=\"overall\"} 1",
            "trendsync_region_last_run_charts{region=\"GB\",chart=\"overall\"} 1",
            "trendsync_region_last_run_charts{region=\"US\",chart=\"overall\"} 1"
        ]
    );
    assert_eq!(
        lines_of(&text, "trendsync_region_last_run_duration_seconds"),
        [
            "trendsync_region_last_run_duration_seconds{region=\"GB\"} 29.5",
            "trendsync_region_last_run_duration_seconds{region=\"US\"} 29.5"
        ],
        "none while DE's run is still going"
    );
    assert_eq!(
        lines_of(&text, "trendsync_region_last_run_timestamp_seconds").len(),
        3
    );
    // Every configured region, those that never completed at 0.
    assert_eq!(
        lines_of(&text, "trendsync_region_last_success_timestamp_seconds"),
        [
            "trendsync_region_last_success_timestamp_seconds{region=\"DE\"} 0",
            "trendsync_region_last_success_timestamp_seconds{region=\"GB\"} 0",
            "trendsync_region_last_success_timestamp_seconds{region=\"US\"} 1700000030"
        ]
    );
    assert_eq!(
        lines_of(&text, "trendsync_last_run_region_videos"),
        [
            "trendsync_last_run_region_videos{kind=\"run\",region=\"GB\"} 0",
            "trendsync_last_run_region_videos{kind=\"run\",region=\"US\"} 100"
        ]
    );
    // Every named method and every method called, with every outcome.
    let total = lines_of(&text, "trendsync_upstream_calls_total");
    assert_eq!(total.len(), 3 * CallOutcome::ALL.len(), "{text}");
    assert!(text.contains("# TYPE trendsync_upstream_calls_total counter\n"));
    assert!(
        total
            .contains(&"trendsync_upstream_calls_total{method=\"videos.list\",outcome=\"ok\"} 500")
    );
    assert!(total.contains(
        &"trendsync_upstream_calls_total{method=\"videoCategories.list\",outcome=\"ok\"} 0"
    ));
    assert!(text.contains(
        "trendsync_last_run_method_calls{kind=\"run\",method=\"videos.list\",outcome=\"region_failed\"} 1\n"
    ));
    assert!(text.contains(
        "trendsync_last_run_method_calls{kind=\"backfill\",method=\"videos.list\",outcome=\"ok\"} 0\n"
    ));
    assert!(text.contains("trendsync_budget_used_units{budget=\"key1\"} 9600\n"));
    assert!(text.contains("trendsync_budget_remaining_units{budget=\"key1\",to=\"ceiling\"} 0\n"));
    assert!(text.contains("trendsync_budget_remaining_units{budget=\"key1\",to=\"quota\"} 400\n"));
    assert!(text.contains(
        "trendsync_budget_blocked_until_timestamp_seconds{budget=\"key1\"} 1700086400\n"
    ));
    // The clock's skew in fractional seconds, and when it was seen.
    assert_eq!(
        lines_of(&text, "trendsync_clock_skew_seconds"),
        ["trendsync_clock_skew_seconds{clock=\"host\"} -0.25"]
    );
    assert_eq!(
        lines_of(&text, "trendsync_clock_skew_measured_timestamp_seconds"),
        ["trendsync_clock_skew_measured_timestamp_seconds{clock=\"host\"} 1700000001"]
    );
    // Each family's help and type once.
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        assert_eq!(text.matches(&format!("{line}\n")).count(), 1, "{line}");
    }
}

/// A run refused by its configuration (exit 78) is the last run of its kind, status
/// `config_error`, with nothing charged or called; the other kind's last run and the
/// rest of the picture stay as the database has them (docs/metrics.md).
#[test]
fn a_refused_run_is_the_last_of_its_kind_with_status_config_error() {
    let mut p = picture();
    p.refused = Some(Refused {
        kind: RunKind::Run,
        at: 1_700_003_600,
    });
    p.limiter = Some(LimiterHealth {
        key: "key1".into(),
        up: None,
        pending_calls: 3,
    });
    let text = p.exposition(&["videos.list"]).render();
    assert_eq!(
        lines_of(&text, "trendsync_last_run_status")
            .into_iter()
            .filter(|l| l.ends_with(" 1"))
            .collect::<Vec<_>>(),
        [
            "trendsync_last_run_status{kind=\"run\",status=\"config_error\"} 1",
            "trendsync_last_run_status{kind=\"backfill\",status=\"complete\"} 1"
        ]
    );
    // Every status of each kind, config_error among them, so that `== 1` finds one.
    assert_eq!(
        lines_of(&text, "trendsync_last_run_status").len(),
        2 * (RegionStatus::ALL.len() + 1)
    );
    for (family, want) in [
        ("trendsync_last_run_end_timestamp_seconds", "1700003600"),
        ("trendsync_last_run_duration_seconds", "0"),
        ("trendsync_last_run_charged_units", "0"),
        ("trendsync_last_run_calls", "0"),
    ] {
        assert_eq!(
            lines_of(&text, family)[0],
            format!("{family}{{kind=\"run\"}} {want}"),
            "{text}"
        );
    }
    assert!(
        lines_of(&text, "trendsync_last_run_method_calls")
            .iter()
            .filter(|l| l.contains("kind=\"run\""))
            .all(|l| l.ends_with(" 0")),
        "{text}"
    );
    assert!(
        lines_of(&text, "trendsync_last_run_region_videos")
            .iter()
            .all(|l| !l.contains("kind=\"run\""))
    );
    // The database's picture otherwise: regions, calls, budget; no limiter was asked.
    assert_eq!(
        lines_of(&text, "trendsync_region_last_success_timestamp_seconds").len(),
        3
    );
    assert!(
        text.contains(
            "trendsync_upstream_calls_total{method=\"videos.list\",outcome=\"ok\"} 500\n"
        )
    );
    assert!(text.contains("trendsync_budget_used_units{budget=\"key1\"} 9600\n"));
    assert!(lines_of(&text, "trendsync_limiter_up").is_empty(), "{text}");
    assert_eq!(
        lines_of(&text, "trendsync_journal_pending_calls"),
        ["trendsync_journal_pending_calls{budget=\"key1\"} 3"]
    );

    // A recorded run says config_error 0.
    let text = picture().exposition(&[]).render();
    assert!(text.contains("trendsync_last_run_status{kind=\"run\",status=\"config_error\"} 0\n"));

    // Of a database that could not be read, the calls are not said (a counter at 0
    // would read as reset).
    let unread = Picture {
        refused: Some(Refused {
            kind: RunKind::Backfill,
            at: 1_700_003_600,
        }),
        unread: true,
        ..Picture::default()
    };
    let text = unread.exposition(&["videos.list"]).render();
    assert!(
        lines_of(&text, "trendsync_upstream_calls_total").is_empty(),
        "{text}"
    );
    assert!(
        text.contains("trendsync_last_run_status{kind=\"backfill\",status=\"config_error\"} 1\n")
    );
    assert!(text.contains("trendsync_build_info{"), "{text}");
    assert!(!text.contains("kind=\"run\""), "{text}");
}

#[test]
fn without_the_budget_or_any_run_those_lines_are_left_out() {
    let mut p = picture();
    p.budget = None;
    let text = p.exposition(&[]).render();
    assert!(!text.contains("trendsync_budget_"), "{text}");
    let mut p = picture();
    p.budget.as_mut().expect("a budget").buckets[0].blocked_until = None;
    assert!(
        p.exposition(&[])
            .render()
            .contains("trendsync_budget_blocked_until_timestamp_seconds{budget=\"key1\"} 0\n")
    );
    let text = Picture::default().exposition(&["videos.list"]).render();
    assert!(!text.contains("trendsync_last_run"), "{text}");
    assert!(!text.contains("trendsync_region_"), "{text}");
    assert_eq!(
        lines_of(&text, "trendsync_upstream_calls_total").len(),
        CallOutcome::ALL.len()
    );
}

/// A bucket the upstream refused early today has its figure; one it has not refused
/// early has no series at all, so that an alert on the series stays quiet.
#[test]
fn the_upstreams_early_refusal_is_a_series_only_while_there_is_one() {
    let text = picture().exposition(&[]).render();
    assert!(
        !text.contains("trendsync_bucket_upstream_spent_at_units"),
        "{text}"
    );
    let mut p = picture();
    p.budget.as_mut().expect("a budget").buckets[0].upstream_spent_at = Some(61);
    let text = p.exposition(&[]).render();
    assert_eq!(
        lines_of(&text, "trendsync_bucket_upstream_spent_at_units"),
        ["trendsync_bucket_upstream_spent_at_units{budget=\"key1\",bucket=\"budget\"} 61"]
    );
    assert!(text.contains("# TYPE trendsync_bucket_upstream_spent_at_units gauge\n"));
}

/// A database none of these files is.
fn elsewhere() -> DbFiles {
    DbFiles::of(Path::new("/nonexistent/trendsync.db"))
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
    write_atomically(&path, "new 1\n", &elsewhere()).expect("writing");
    assert_eq!(fs::read_to_string(&path).expect("reading"), "new 1\n");
    #[cfg(unix)]
    assert_eq!(mode(&path), 0o600, "a file replaced keeps its mode");
    let fresh = dir.path().join("fresh.prom");
    write_atomically(&fresh, "new 1\n", &elsewhere()).expect("writing a new file");
    #[cfg(unix)]
    assert_eq!(
        mode(&fresh),
        0o644,
        "a new file is readable by the collector"
    );
    fs::remove_file(&fresh).expect("removing the new file");
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
    let err = write_atomically(&path, "x\n", &elsewhere()).expect_err("no such directory");
    assert!(
        err.to_string().starts_with("creating ") && err.to_string().contains("missing"),
        "{err}"
    );
    assert!(matches!(
        write_atomically(Path::new("/"), "x", &elsewhere()),
        Err(WriteError::NoFileName(_))
    ));
    let names: Vec<_> = fs::read_dir(dir.path()).expect("listing").collect();
    assert!(names.is_empty());
}

fn report_with(budget: Option<Vec<BucketFigures>>) -> RunReport {
    RunReport {
        follow: None,
        run_id: "r1".into(),
        status: Status::Complete,
        bucket: None,
        units_charged: 0,
        units_unmetered: 0,
        calls: 0,
        remaining: None,
        remaining_by_bucket: None,
        retry_after_s: None,
        denied_by: None,
        regions: Vec::new(),
        stop_reason: None,
        ended_at: 0,
        took: std::time::Duration::ZERO,
        limiter_up: budget.is_some(),
        budget,
        attempts: Default::default(),
    }
}

#[test]
fn after_a_run_the_budget_is_the_window_its_report_carries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("trendsync.db");
    Store::open(&db).expect("creating the database");
    let path = dir.path().join("trendsync.prom");
    let budget = crate::config::parse_costs(&crate::config::SourceText {
        name: "quota-costs.toml".into(),
        text: crate::config::BUILTIN_COSTS,
    })
    .expect("the built-in costs");
    let main = budget.main();
    let window = vec![BucketFigures {
        name: "budget".into(),
        used: 1234,
        ceiling: main.ceiling,
        quota: main.quota,
        blocked_until: Some(Micros::new(1_700_086_400_000_000)),
        upstream_spent_at: Some(1200),
    }];
    write_after_run(
        &path,
        &writing(&db),
        &budget,
        &["US"],
        &report_with(Some(window.clone())),
    )
    .expect("writing");
    let text = fs::read_to_string(&path).expect("reading");
    let key = &budget.key;
    assert!(text.contains(&format!(
        "trendsync_budget_used_units{{budget=\"{key}\"}} 1234\n"
    )));
    assert!(text.contains(&format!(
        "trendsync_budget_remaining_units{{budget=\"{key}\",to=\"quota\"}} {}\n",
        budget.main().quota - 1234
    )));
    assert!(text.contains(&format!(
        "trendsync_budget_blocked_until_timestamp_seconds{{budget=\"{key}\"}} 1700086400\n"
    )));
    assert!(text.contains(&format!(
        "trendsync_bucket_upstream_spent_at_units{{budget=\"{key}\",bucket=\"budget\"}} 1200\n"
    )));

    assert!(text.contains(&format!("trendsync_limiter_up{{budget=\"{key}\"}} 1\n")));
    assert!(text.contains(&format!(
        "trendsync_journal_pending_calls{{budget=\"{key}\"}} 0\n"
    )));

    // A limiter that could not say: the last known figures, which the run that read
    // them recorded, stay, marked by trendsync_limiter_up 0, and the rest is still
    // written.
    let before = text;
    crate::schema::record_figures_on(&writing(&db), key, &window, crate::clock::Micros::new(0))
        .expect("recording");
    write_after_run(&path, &writing(&db), &budget, &["US"], &report_with(None)).expect("writing");
    let text = fs::read_to_string(&path).expect("reading");
    let budget_lines = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("trendsync_budget_") || l.starts_with("trendsync_bucket_"))
            .map(str::to_owned)
            .collect()
    };
    assert!(!budget_lines(&before).is_empty(), "{before}");
    assert_eq!(budget_lines(&text), budget_lines(&before), "{text}");
    assert!(text.contains(&format!("trendsync_limiter_up{{budget=\"{key}\"}} 0\n")));
    assert!(text.contains("trendsync_upstream_calls_total{method=\"search.list\""));

    // With no figures recorded, nothing is known: no budget series, the limiter down;
    // whatever the file had before.
    let fresh = dir.path().join("fresh.db");
    Store::open(&fresh).expect("creating the database");
    write_after_run(
        &path,
        &writing(&fresh),
        &budget,
        &["US"],
        &report_with(None),
    )
    .expect("writing");
    let text = fs::read_to_string(&path).expect("reading");
    assert!(budget_lines(&text).is_empty(), "{text}");
    assert!(text.contains(&format!("trendsync_limiter_up{{budget=\"{key}\"}} 0\n")));

    // A database with nothing stored yet: an empty picture, not an error.
    let none = dir.path().join("none.db");
    write_after_run(
        &path,
        &writing(&none),
        &budget,
        &["US"],
        &report_with(Some(window)),
    )
    .expect("writing");
    let text = fs::read_to_string(&path).expect("reading");
    assert!(text.contains("trendsync_upstream_calls_total"), "{text}");
    assert!(
        text.contains("trendsync_region_last_success_timestamp_seconds{region=\"US\"} 0\n"),
        "a configured region has its series before any run reached it: {text}"
    );
    assert!(!text.contains("trendsync_last_run"), "{text}");
}

/// A run's duration is what its process measured, to the microsecond: a sub-second run
/// is not 0. A run recorded before durations were has its whole seconds.
#[test]
fn run_durations_are_fractional_seconds() {
    assert_eq!(run_seconds(100, 100, Some(850_000)), 0.85);
    assert_eq!(run_seconds(100, 101, Some(1_250_000)), 1.25);
    assert_eq!(run_seconds(100, 102, None), 2.0);
    assert_eq!(run_seconds(100, 90, None), 0.0, "a clock that went back");
}

/// The command's connection to `db`, as a run has it.
fn writing(db: &std::path::Path) -> crate::sqlite::Db {
    crate::sqlite::Db::open_for_writing(db).expect("the database")
}

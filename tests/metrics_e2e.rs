//! `--metrics-file` end to end: after a run, a node_exporter textfile that promtool
//! accepts, with the run's numbers, written atomically with mode 0644.

use std::collections::BTreeMap;
use std::path::Path;

use trendsync::clock::{Clock, SystemClock};
use wiremock::Mock;
use wiremock::matchers::any;

use crate::common::harness::{Harness, REGIONS, THREE_REGIONS, assert_budget_matches_requests};
use crate::common::promtool::check_metrics;
use crate::common::upstream::{Call, OVERRIDE, answer, answer_fixture, categories, page1};
use crate::common::{Costs, Ran, RedisServer, Trendsync};
use crate::on_both_limiters;

on_both_limiters!(
    a_complete_run_writes_every_metric,
    a_run_stopped_by_the_budget_still_writes_its_metrics,
);

const STATUSES: [&str; 6] = [
    "complete",
    "budget_exhausted",
    "upstream_quota_exhausted",
    "clock_skew",
    "failed",
    "skipped",
];

fn now_s() -> f64 {
    SystemClock.now().to_secs().as_i64() as f64
}

/// The binary under `sh -c 'umask MASK; exec ...'`: the file's mode must not depend on
/// the umask cron happens to give it.
fn under_umask(t: Trendsync, mask: &str) -> Trendsync {
    t.within(
        Path::new("sh"),
        &["-c", &format!("umask {mask} && exec \"$0\" \"$@\"")],
    )
}

/// Runs `args` with `--metrics-file metrics/trendsync.prom` under umask 077; what it
/// left and what the fake received meanwhile.
fn run_with_metrics(h: &Harness<'_>, args: &[&str]) -> (Ran, Vec<Call>) {
    let before = h.fake.calls().len();
    let cmd = h.cmd().args(["--metrics-file", "metrics/trendsync.prom"]);
    let ran = under_umask(cmd.args(args), "077").run();
    let calls = h.fake.calls().split_off(before);
    (ran, calls)
}

fn metrics_dir(h: &Harness<'_>) -> std::path::PathBuf {
    let dir = h.scratch.file("metrics");
    std::fs::create_dir_all(&dir).expect("creating the metrics directory");
    dir
}

/// The file's samples, `name{labels}` as written to value, after checking what every
/// metrics file must be: mode 0644, accepted by promtool, alone in its directory.
fn read_metrics(dir: &Path) -> BTreeMap<String, f64> {
    let path = dir.join("trendsync.prom");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "mode {mode:o}, under umask 077");
    }
    let checked = check_metrics(&bytes);
    let text = String::from_utf8(bytes).expect("the metrics file is UTF-8");
    assert_eq!(
        (checked.code, checked.output.as_str()),
        (0, ""),
        "promtool check metrics:\n{text}"
    );
    let names: Vec<String> = std::fs::read_dir(dir)
        .expect("listing")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["trendsync.prom"], "no temporary file is left");
    parse(&text)
}

fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a sample line");
            let value: f64 = value.parse().unwrap_or_else(|e| panic!("{l}: {e}"));
            (series.to_owned(), value)
        })
        .collect()
}

fn get(m: &BTreeMap<String, f64>, series: &str) -> f64 {
    *m.get(series)
        .unwrap_or_else(|| panic!("no {series} in {m:#?}"))
}

/// The samples of one family.
fn family<'a>(m: &'a BTreeMap<String, f64>, name: &str) -> BTreeMap<&'a str, f64> {
    m.iter()
        .filter(|(k, _)| k.split('{').next() == Some(name))
        .map(|(k, v)| (k.as_str(), *v))
        .collect()
}

fn assert_status(m: &BTreeMap<String, f64>, kind: &str, status: &str) {
    for s in STATUSES {
        let want = if s == status { 1.0 } else { 0.0 };
        assert_eq!(
            get(
                m,
                &format!("trendsync_last_run_status{{kind=\"{kind}\",status=\"{s}\"}}")
            ),
            want,
            "{kind} {s}"
        );
    }
}

/// The attempts by method and outcome add up to the calls the fake received.
fn assert_attempts(m: &BTreeMap<String, f64>, kind: &str, calls: &[Call], outcome: &str) {
    let attempts = family(m, "trendsync_last_run_method_calls");
    assert_eq!(
        attempts.values().sum::<f64>(),
        calls.len() as f64,
        "{attempts:#?}"
    );
    for method in ["videos.list", "videoCategories.list"] {
        let sent = calls.iter().filter(|c| c.method == method).count();
        assert_eq!(
            get(
                m,
                &format!(
                    "trendsync_last_run_method_calls{{kind=\"{kind}\",method=\"{method}\",outcome=\"{outcome}\"}}"
                )
            ),
            sent as f64,
            "{method}"
        );
    }
}

fn a_complete_run_writes_every_metric(redis: Option<&RedisServer>) {
    let h = Harness::new(redis);
    let dir = metrics_dir(&h);
    let started = now_s();
    let (_, calls) = run_with_metrics(&h, &["run"]);
    let ended = now_s();
    assert_eq!(calls.len(), 24);
    let m = read_metrics(&dir);

    let units: u64 = h.units_sent(&calls).values().sum();
    assert_eq!(
        get(&m, "trendsync_last_run_charged_units{kind=\"run\"}"),
        units as f64
    );
    assert_eq!(
        get(&m, "trendsync_last_run_calls{kind=\"run\"}"),
        calls.len() as f64
    );
    assert_status(&m, "run", "complete");
    let end = get(&m, "trendsync_last_run_end_timestamp_seconds{kind=\"run\"}");
    assert!(
        (started..=ended).contains(&end),
        "{end} in {started}..{ended}"
    );
    assert_attempts(&m, "run", &calls, "ok");
    assert_eq!(
        get(&m, "trendsync_budget_used_units{budget=\"key1\"}"),
        units as f64
    );
    assert_eq!(
        get(
            &m,
            "trendsync_budget_remaining_units{budget=\"key1\",to=\"ceiling\"}"
        ),
        (9500 - units) as f64
    );
    assert_eq!(
        get(
            &m,
            "trendsync_budget_remaining_units{budget=\"key1\",to=\"quota\"}"
        ),
        (10_000 - units) as f64
    );
    let last = family(&m, "trendsync_region_last_success_timestamp_seconds");
    let videos = family(&m, "trendsync_last_run_region_videos");
    assert_eq!((last.len(), videos.len()), (8, 8), "{m:#?}");
    for code in REGIONS {
        let at = get(
            &m,
            &format!("trendsync_region_last_success_timestamp_seconds{{region=\"{code}\"}}"),
        );
        assert!((started..=ended).contains(&at), "{code}: {at}");
        assert_eq!(
            get(
                &m,
                &format!("trendsync_last_run_region_videos{{kind=\"run\",region=\"{code}\"}}")
            ),
            10.0,
            "{code}"
        );
    }
    assert!(
        !m.keys().any(|k| k.contains("kind=\"backfill\"")),
        "no backfill has run yet"
    );

    // A backfill with nothing stale still writes the file: its own numbers, and the
    // last run's from the store, so neither kind's series disappears.
    let (_, calls) = run_with_metrics(&h, &["backfill"]);
    assert!(calls.is_empty());
    let after = read_metrics(&dir);
    assert_status(&after, "backfill", "complete");
    assert_status(&after, "run", "complete");
    assert_eq!(
        get(
            &after,
            "trendsync_last_run_charged_units{kind=\"backfill\"}"
        ),
        0.0
    );
    for key in [
        "trendsync_last_run_charged_units{kind=\"run\"}",
        "trendsync_last_run_calls{kind=\"run\"}",
        "trendsync_last_run_end_timestamp_seconds{kind=\"run\"}",
    ] {
        assert_eq!(get(&after, key), get(&m, key), "{key}");
    }
    assert_eq!(
        family(&after, "trendsync_region_last_success_timestamp_seconds"),
        last
    );
    assert_budget_matches_requests(&h);
}

fn a_run_stopped_by_the_budget_still_writes_its_metrics(redis: Option<&RedisServer>) {
    let mut h = Harness::new(redis);
    h.costs(Costs::one_unit_each().quota(1000).ceiling(5));
    let dir = metrics_dir(&h);
    h.expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted")
        .status(75);
    let (_, calls) = run_with_metrics(&h, &["run", "--concurrency", "1"]);
    assert_eq!(calls.len(), 5);
    let m = read_metrics(&dir);
    assert_status(&m, "run", "budget_exhausted");
    assert_eq!(
        get(&m, "trendsync_last_run_charged_units{kind=\"run\"}"),
        5.0
    );
    assert_eq!(get(&m, "trendsync_last_run_calls{kind=\"run\"}"), 5.0);
    assert_attempts(&m, "run", &calls, "ok");
    assert_eq!(get(&m, "trendsync_budget_used_units{budget=\"test\"}"), 5.0);
    assert_eq!(
        get(
            &m,
            "trendsync_budget_remaining_units{budget=\"test\",to=\"ceiling\"}"
        ),
        0.0
    );
    assert_eq!(
        get(
            &m,
            "trendsync_budget_remaining_units{budget=\"test\",to=\"quota\"}"
        ),
        995.0
    );
    // US was completed; GB got its pages but not its category names; the others were
    // not reached. Every region has its last success, 0 for those never completed.
    let last = family(&m, "trendsync_region_last_success_timestamp_seconds");
    assert_eq!(last.len(), 8, "{last:#?}");
    assert_eq!(
        last.into_iter()
            .filter(|(_, at)| *at > 0.0)
            .map(|(series, _)| series)
            .collect::<Vec<_>>(),
        ["trendsync_region_last_success_timestamp_seconds{region=\"US\"}"]
    );
    let videos = family(&m, "trendsync_last_run_region_videos");
    assert_eq!(videos.len(), 8, "{videos:#?}");
    for code in REGIONS {
        let want = if code == "US" || code == "GB" {
            10.0
        } else {
            0.0
        };
        assert_eq!(
            get(
                &m,
                &format!("trendsync_last_run_region_videos{{kind=\"run\",region=\"{code}\"}}")
            ),
            want,
            "{code}"
        );
    }
    assert_budget_matches_requests(&h);
}

#[test]
fn retries_and_refusals_are_counted_by_outcome() {
    let h = Harness::new(None);
    let dir = metrics_dir(&h);
    let unavailable = r#"{"error":{"code":503,"message":"The service is currently unavailable.","errors":[{"message":"The service is currently unavailable.","domain":"global","reason":"backendError"}],"status":"UNAVAILABLE"}}"#;
    h.fake.mount(
        categories("US")
            .respond_with(answer(503, unavailable))
            .up_to_n_times(2)
            .with_priority(OVERRIDE),
    );
    h.expect_stderr("HTTP 503");
    let (_, calls) = run_with_metrics(&h, &["run", "--region", "US"]);
    assert_eq!(calls.len(), 5);
    let m = read_metrics(&dir);
    let series = |method: &str, outcome: &str| {
        format!(
            "trendsync_last_run_method_calls{{kind=\"run\",method=\"{method}\",outcome=\"{outcome}\"}}"
        )
    };
    assert_eq!(get(&m, &series("videoCategories.list", "transient")), 2.0);
    assert_eq!(get(&m, &series("videoCategories.list", "ok")), 1.0);
    assert_eq!(get(&m, &series("videos.list", "ok")), 2.0);
    assert_eq!(get(&m, &series("search.list", "ok")), 0.0);
    assert_eq!(get(&m, "trendsync_last_run_calls{kind=\"run\"}"), 5.0);

    // A refused key: the run fails, and the file says so.
    h.fake.answer_instead(
        Mock::given(any()),
        answer_fixture(400, "error_key_invalid.json"),
    );
    h.expect_stderr("API_KEY_INVALID")
        .expect_ended("failed")
        .status(1);
    let (_, calls) = run_with_metrics(&h, &["run", "--region", "GB"]);
    assert_eq!(calls.len(), 1);
    let m = read_metrics(&dir);
    assert_status(&m, "run", "failed");
    assert_eq!(get(&m, &series("videos.list", "fatal")), 1.0);
    assert_eq!(get(&m, &series("videos.list", "ok")), 0.0);
    assert_eq!(
        family(&m, "trendsync_last_run_method_calls")
            .values()
            .sum::<f64>(),
        1.0
    );
    assert_budget_matches_requests(&h);
}

/// The regions that have any series in the file, each once.
fn regions_in(m: &BTreeMap<String, f64>) -> Vec<String> {
    let mut regions: Vec<String> = m
        .keys()
        .filter_map(|series| {
            let (_, rest) = series.split_once("region=\"")?;
            Some(rest.split('"').next()?.to_owned())
        })
        .collect();
    regions.sort_unstable();
    regions.dedup();
    regions
}

const LAST_SUCCESS: &str = "trendsync_region_last_success_timestamp_seconds";

/// Every configured region has its last success, at 0 until it has one: a region the
/// run did not fetch, and one whose every attempt fails, so that an alert sees them.
#[test]
fn a_region_that_never_succeeded_has_its_last_success_at_zero() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    let dir = metrics_dir(&h);
    let success = |m: &BTreeMap<String, f64>, region: &str| {
        get(m, &format!("{LAST_SUCCESS}{{region=\"{region}\"}}"))
    };

    // A run of US alone: GB and DE, configured but not fetched, are there at 0.
    run_with_metrics(&h, &["run", "--region", "US"]);
    let m = read_metrics(&dir);
    assert!(success(&m, "US") > 0.0);
    assert_eq!((success(&m, "GB"), success(&m, "DE")), (0.0, 0.0));
    assert_eq!(family(&m, LAST_SUCCESS).len(), 3, "{m:#?}");

    // GB's chart always fails: DE completes, GB stays at 0.
    h.fake
        .answer_instead(page1("GB"), answer(200, r#"{"items": ["#));
    h.expect_stderr("malformed HTTP 200 response")
        .expect_ended("failed")
        .status(1);
    run_with_metrics(&h, &["run"]);
    let m = read_metrics(&dir);
    assert!(success(&m, "DE") > 0.0);
    assert_eq!(success(&m, "GB"), 0.0);
    assert_eq!(
        get(
            &m,
            "trendsync_region_last_run_status{region=\"GB\",status=\"failed\"}"
        ),
        1.0
    );
    assert_eq!(regions_in(&m), ["DE", "GB", "US"]);
}

/// A region taken out of regions.toml loses every series at the next run, though the
/// database keeps its history: otherwise its alerts would never clear.
#[test]
fn a_region_taken_out_of_regions_toml_has_no_series() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    let dir = metrics_dir(&h);
    run_with_metrics(&h, &["run"]);
    let m = read_metrics(&dir);
    assert_eq!(regions_in(&m), ["DE", "GB", "US"]);

    let without_de = THREE_REGIONS
        .split("[[region]]")
        .filter(|part| !part.contains("\"DE\""))
        .collect::<Vec<_>>()
        .join("[[region]]");
    assert!(!without_de.contains("DE"), "{without_de}");
    h.regions(&without_de);
    run_with_metrics(&h, &["run", "--region", "US"]);
    let m = read_metrics(&dir);
    assert_eq!(regions_in(&m), ["GB", "US"], "{m:#?}");
    let kept: i64 = h
        .db()
        .query_row(
            "SELECT COUNT(*) FROM regions WHERE code = 'DE'",
            [],
            |row| row.get(0),
        )
        .expect("reading the regions table");
    assert_eq!(kept, 1, "the database keeps DE's history");
}

#[test]
fn the_environment_variable_names_the_file_too() {
    let h = Harness::new(None);
    let dir = metrics_dir(&h);
    h.cmd()
        .env("TRENDSYNC_METRICS_FILE", dir.join("trendsync.prom"))
        .args(["run", "--region", "US"])
        .run();
    let m = read_metrics(&dir);
    assert_eq!(get(&m, "trendsync_last_run_calls{kind=\"run\"}"), 3.0);
}

/// A directory that is there but takes no new file, even from root: the run only finds
/// out when it writes. (One that is not there is refused before the run, 78.)
#[cfg(target_os = "linux")]
#[test]
fn a_metrics_file_that_cannot_be_written_is_an_error_but_not_the_runs_outcome() {
    let h = Harness::new(None);
    // The run completed (exit 0) all the same.
    h.expect_stderr("writing the metrics file");
    let (ran, calls) = h.run(&[
        "--metrics-file",
        "/proc/trendsync.prom",
        "run",
        "--region",
        "US",
    ]);
    assert_eq!(calls.len(), 3);
    let said: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains("writing the metrics file"))
        .collect();
    assert_eq!(said.len(), 1, "{}", ran.stderr);
    assert!(
        said[0].contains("ERROR") && said[0].contains("/proc/"),
        "{}",
        said[0]
    );
}

#[test]
fn no_metrics_after_a_dry_run() {
    let h = Harness::new(None);
    let dir = metrics_dir(&h);
    let file = dir.join("trendsync.prom");
    // A dry run writes nothing, whatever its outcome.
    for kind in ["run", "backfill"] {
        h.cmd()
            .arg("--metrics-file")
            .arg(&file)
            .args([kind, "--dry-run"])
            .run();
    }
    h.bare()
        .args(["--regions", "no-such-regions.toml"])
        .arg("--metrics-file")
        .arg(&file)
        .args(["run", "--dry-run"])
        .expect_stderr("no-such-regions.toml")
        .status(78)
        .run();
    assert!(!file.exists());
    assert!(h.fake.calls().is_empty());
}

/// The status of `kind` set to 1.
fn status_of(m: &BTreeMap<String, f64>, kind: &str) -> Vec<String> {
    family(m, "trendsync_last_run_status")
        .into_iter()
        .filter(|(k, v)| k.contains(&format!("kind=\"{kind}\"")) && *v == 1.0)
        .filter_map(|(k, _)| Some(k.split("status=\"").nth(1)?.split('"').next()?.to_owned()))
        .collect()
}

/// docs/metrics.md: a run refused by its configuration (78) still writes the whole
/// picture from the database, with itself as the last run, status `config_error`, so
/// that a bad edit of regions.toml alerts within one run. The regions are then those
/// the database knows, and nothing is called, charged or recorded.
#[test]
fn a_run_refused_by_its_configuration_writes_config_error() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    let dir = metrics_dir(&h);
    run_with_metrics(&h, &["run"]);
    let before = read_metrics(&dir);
    assert_eq!(status_of(&before, "run"), ["complete"]);
    let runs = |h: &Harness<'_>| -> i64 {
        h.db()
            .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
            .expect("counting the runs")
    };
    let recorded = runs(&h);

    // Someone breaks regions.toml (an offset out of range) before the next tick.
    h.regions("[[region]]\ncode = \"US\"\noffset = 99\n");
    h.expect_stderr("offset").status(78);
    let (_, calls) = run_with_metrics(&h, &["run"]);
    assert!(calls.is_empty(), "{calls:?}");
    assert_eq!(runs(&h), recorded, "nothing recorded");
    let m = read_metrics(&dir);
    assert_eq!(status_of(&m, "run"), ["config_error"]);
    assert_eq!(get(&m, "trendsync_last_run_calls{kind=\"run\"}"), 0.0);
    assert_eq!(
        get(&m, "trendsync_last_run_charged_units{kind=\"run\"}"),
        0.0
    );
    let ended = get(&m, "trendsync_last_run_end_timestamp_seconds{kind=\"run\"}");
    assert!((ended - now_s()).abs() < 600.0, "{ended}");
    // The rest of the picture is the database's, as after the run before.
    assert_eq!(regions_in(&m), ["DE", "GB", "US"]);
    for series in [
        "trendsync_region_last_success_timestamp_seconds{region=\"US\"}",
        "trendsync_upstream_calls_total{method=\"videos.list\",outcome=\"ok\"}",
        "trendsync_budget_used_units{budget=\"key1\"}",
        "trendsync_bucket_ceiling_units{budget=\"key1\",bucket=\"budget\"}",
    ] {
        assert_eq!(get(&m, series), get(&before, series), "{series}");
    }
    // No limiter was asked.
    assert!(family(&m, "trendsync_limiter_up").is_empty(), "{m:#?}");

    // A refused backfill is the last backfill; the run's status stays.
    h.expect_stderr("offset").status(78);
    run_with_metrics(&h, &["backfill"]);
    let m = read_metrics(&dir);
    assert_eq!(status_of(&m, "backfill"), ["config_error"]);

    // Fixed: the next run's own status clears it.
    h.regions(THREE_REGIONS);
    run_with_metrics(&h, &["run", "--region", "US"]);
    let m = read_metrics(&dir);
    assert_eq!(status_of(&m, "run"), ["complete"]);
    assert!(
        status_of(&m, "backfill").is_empty(),
        "no backfill ever ran: {m:#?}"
    );
}

/// A first run with no API key (78): no database yet, so none is created; the file
/// says so, with every configured region never fetched.
#[test]
fn a_first_run_without_a_key_writes_config_error_and_creates_no_database() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    let dir = metrics_dir(&h);
    h.bare()
        .args(["--api-base", &h.fake.uri()])
        .args(["--metrics-file", "metrics/trendsync.prom", "run"])
        .expect_stderr("no API key")
        .status(78)
        .run();
    assert!(h.fake.calls().is_empty());
    assert!(!h.db_path().exists(), "{:?}", h.scratch.listing());
    let m = read_metrics(&dir);
    assert_eq!(status_of(&m, "run"), ["config_error"]);
    assert_eq!(
        family(&m, LAST_SUCCESS)
            .values()
            .copied()
            .collect::<Vec<_>>(),
        [0.0, 0.0, 0.0]
    );
    assert_eq!(
        get(
            &m,
            "trendsync_upstream_calls_total{method=\"videos.list\",outcome=\"ok\"}"
        ),
        0.0
    );
}

/// A `--db` that is another program's SQLite file (78) is not read: the file says
/// only what is known without it (the version, the refusal), and the foreign file is
/// left byte for byte, with nothing created beside it.
#[test]
fn a_run_refused_for_a_foreign_database_writes_what_is_known_without_it() {
    let h = Harness::new(None);
    let dir = metrics_dir(&h);
    let other = h.scratch.file("other.db");
    let conn = rusqlite::Connection::open(&other).expect("creating");
    conn.execute_batch("CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('x');")
        .expect("filling");
    drop(conn);
    let bytes = std::fs::read(&other).expect("its bytes");
    let listing = h.scratch.listing();
    h.cmd()
        .args([
            "--db",
            "other.db",
            "--metrics-file",
            "metrics/trendsync.prom",
            "run",
        ])
        .expect_stderr("is an SQLite database, but not trendsync's")
        .status(78)
        .run();
    assert_eq!(std::fs::read(&other).expect("its bytes"), bytes);
    assert_eq!(h.scratch.listing(), listing);
    let m = read_metrics(&dir);
    assert_eq!(status_of(&m, "run"), ["config_error"]);
    assert_eq!(
        get(
            &m,
            &format!(
                "trendsync_build_info{{version=\"{}\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    // Nothing the database alone could tell: no region, no calls counter (0 would
    // read as a reset).
    assert!(regions_in(&m).is_empty(), "{m:#?}");
    assert!(
        family(&m, "trendsync_upstream_calls_total").is_empty(),
        "{m:#?}"
    );
}

/// A refusal about the metrics path itself writes nothing there: a directory that is
/// not there is not made, a directory at the path stays one, and the database named
/// as the metrics file is left as it was, also when the configuration is broken too.
#[test]
fn a_refusal_about_the_metrics_path_writes_nothing_there() {
    let mut h = Harness::new(None);
    metrics_dir(&h);
    run_with_metrics(&h, &["run", "--region", "US"]);
    let db = std::fs::read(h.db_path()).expect("the database");
    let listing = h.scratch.listing();

    h.expect_stderr("does not exist").status(78);
    run_with_metrics_at(&h, "no-such-dir/trendsync.prom", &["run"]);
    std::fs::create_dir(h.scratch.file("a-directory")).expect("a directory");
    h.expect_stderr("a-directory").status(78);
    run_with_metrics_at(&h, "a-directory", &["run"]);
    h.expect_stderr("trendsync.db").status(78);
    run_with_metrics_at(&h, "trendsync.db", &["run"]);
    // And with regions.toml broken as well: still nowhere to write.
    h.regions("[[region]]\ncode = \"US\"\noffset = 99\n");
    h.expect_stderr("offset").status(78);
    run_with_metrics_at(&h, "trendsync.db", &["backfill"]);
    h.expect_stderr("offset").status(78);
    run_with_metrics_at(&h, "no-such-dir/trendsync.prom", &["run"]);

    assert!(!h.scratch.file("no-such-dir").exists());
    assert!(h.scratch.file("a-directory").is_dir());
    assert_eq!(
        std::fs::read_dir(h.scratch.file("a-directory"))
            .expect("listing")
            .count(),
        0
    );
    assert_eq!(std::fs::read(h.db_path()).expect("the database"), db);
    let mut now = h.scratch.listing();
    now.retain(|n| n != "a-directory" && n != "my-regions.toml");
    assert_eq!(now, listing);
    assert_eq!(h.fake.calls().len(), 3, "only the first run called");
}

/// Runs `args` with `--metrics-file PATH`.
fn run_with_metrics_at(h: &Harness<'_>, path: &str, args: &[&str]) {
    h.cmd().args(["--metrics-file", path]).args(args).run();
}

//! Unit tests of `runner/execute.rs`.

use std::time::Duration;

use super::*;
use crate::runner::test_support::{FakeUpstream, Scratch, region};

/// The fixture `name` of the fake upstream the end-to-end tests use.
fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/youtube/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every time the run decides or records comes from the clock it was given, not
/// the host's: set to 2030, what it stores and charges is dated 2030. Through the
/// real client, over HTTP, so that the `Date` its answers carry reaches the check.
#[tokio::test]
async fn a_run_reads_the_time_only_from_its_clock() {
    use wiremock::matchers::{path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let upstream = MockServer::start().await;
    // An upstream whose clock agrees (its `Date`), or the clock check stops the run.
    let answer = |name: &str| {
        ResponseTemplate::new(200)
            .insert_header("Date", "Tue, 01 Jan 2030 00:00:00 GMT")
            .set_body_string(fixture(name))
    };
    Mock::given(path("/videos"))
        .and(query_param("chart", "mostPopular"))
        .respond_with(answer("videos_page1.json"))
        .mount(&upstream)
        .await;
    Mock::given(path("/videoCategories"))
        .respond_with(answer("categories.json"))
        .mount(&upstream)
        .await;
    const AT_2030_S: i64 = 1_893_456_000;
    let clock = Arc::new(crate::clock::ManualClock::starting_at(
        crate::clock::Secs::new(AT_2030_S).to_micros(),
    ));
    let client = crate::youtube::Client::new(
        &upstream.uri(),
        crate::youtube::ApiKey::new("AIzaTEST-key".into()),
        Duration::from_secs(1),
    )
    .expect("client");
    let dir = tempfile::tempdir().expect("temp dir");
    let run = Scratch {
        clock,
        concurrency: 2,
        ..Scratch::default()
    }
    .run(dir.path(), Arc::new(client));
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.status, Status::Complete, "{:?}", report.regions);
    assert_eq!(report.ended_at, AT_2030_S);

    let db = rusqlite::Connection::open(dir.path().join("t.db")).expect("db");
    let times = |sql: &str| -> Vec<i64> {
        let mut stmt = db.prepare(sql).expect(sql);
        stmt.query_map([], |r| r.get(0))
            .expect(sql)
            .map(|t| t.expect(sql))
            .collect()
    };
    for sql in [
        "SELECT started_at FROM runs",
        "SELECT ended_at FROM runs",
        "SELECT DISTINCT fetched_at FROM chart_places",
        "SELECT last_attempt_at FROM region_state",
        "SELECT categories_fetched_at FROM region_state",
    ] {
        assert_eq!(times(sql), [AT_2030_S], "{sql}");
    }
    let charged = times("SELECT DISTINCT at_us / 1000000 FROM quota_entry");
    assert_eq!(charged, [AT_2030_S], "the limiter's entries");
}

/// A region whose task panics ends `failed`, in its place, and fails the run; the
/// others are not affected.
#[tokio::test]
async fn a_panicking_region_task_fails_its_region_and_the_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = Scratch {
        concurrency: 2,
        ..Scratch::default()
    }
    .run(dir.path(), Arc::new(FakeUpstream::new()));
    let reports: Vec<(Region, RegionReport)> = ["US", "GB", "DE"]
        .iter()
        .map(|c| (region(c, &[]), RegionReport::new(c)))
        .collect();
    let done = each_region(&run, reports, |_run, region, mut report| async move {
        assert_ne!(region.code, "GB", "a bug in the region's code");
        report.pages = 1;
        report
    })
    .await;
    let got: Vec<(&str, Status)> = done
        .iter()
        .map(|(r, rep)| (r.code.as_str(), rep.status))
        .collect();
    assert_eq!(
        got,
        [
            ("US", Status::Complete),
            ("GB", Status::Failed),
            ("DE", Status::Complete)
        ]
    );
    let gb = &done[1].1;
    assert!(
        gb.error.as_deref().is_some_and(|e| e.contains("panicked")),
        "{:?}",
        gb.error
    );
    let regions: Vec<RegionReport> = done.into_iter().map(|(_, r)| r).collect();
    assert_eq!(overall(&regions, None), Status::Failed);
}

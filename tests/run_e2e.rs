//! `trendsync run` and `backfill` end to end: the binary against a fake YouTube on
//! loopback, the database read back with SQLite, and the budget compared with what
//! the upstream was actually sent after every scenario.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;
use trendsync::clock::{Clock, SystemClock};
use wiremock::Mock;
use wiremock::matchers::any;

use crate::common::harness::{
    Harness, REGIONS, assert_budget_matches_requests, assert_error_mentions,
    assert_report_matches_calls, blocked_until_a_pacific_midnight, regions_of, shorts,
};
use crate::common::upstream::{
    API_KEY, FakeUpstream, OVERRIDE, PAGE2_TOKEN, answer, answer_fixture, categories,
    complete_calls, fixture_json, page1, page2,
};
use crate::common::{Costs, RedisServer, contains, hold_lock, lacks, region_byte};
use crate::on_both_limiters;

on_both_limiters!(
    a_full_run_stores_every_region,
    a_run_cut_short_by_the_ceiling_is_resumed_by_the_next,
    an_upstream_quota_verdict_blocks_the_budget_until_pacific_midnight,
    an_invalid_key_fails_the_run_and_never_leaks,
);

/// The ids of a fixture page's videos, in its order.
fn fixture_ids(name: &str) -> Vec<String> {
    fixture_json(name)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|v| v["id"].as_str().expect("id").to_owned())
        .collect()
}

/// view_count, like_count, comment_count, tags, duration_s of a stored video.
type VideoRow = (
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<i64>,
);

/// (rank, video id) of `region`'s trending rows, by rank.
fn trending_rows(db: &Connection, region: &str) -> Vec<(i64, String)> {
    let mut stmt = db
        .prepare("SELECT rank, video_id FROM trending WHERE region = ?1 ORDER BY rank")
        .expect("preparing");
    stmt.query_map([region], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("querying trending")
        .collect::<Result<_, _>>()
        .expect("reading trending")
}

fn count(db: &Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |row| row.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Every file of the scratch directory with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("listing")
        .map(|e| {
            let e = e.expect("entry");
            let bytes = std::fs::read(e.path()).expect("reading a file");
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

fn bytes_contain(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Every line of stderr that contains `text`.
pub(crate) fn lines_with<'a>(stderr: &'a str, text: &str) -> Vec<&'a str> {
    stderr.lines().filter(|l| l.contains(text)).collect()
}

// 1. The whole shipped configuration, against the fixtures.
fn a_full_run_stores_every_region(redis: Option<&RedisServer>) {
    let h = Harness::new(redis);
    // Under cron stderr is no terminal: no progress bars, no cursor movement.
    let (ran, calls) = h
        .stderr(lacks('\u{1b}'))
        .stderr(lacks('\r'))
        .run(&["run", "--json"]);
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    assert!(report["retry_after_s"].is_null(), "{report}");
    assert_eq!(report["remaining"], 9500 - 24, "{report}");
    let regions = regions_of(&report);
    assert_eq!(regions.len(), 8, "{report}");
    for code in REGIONS {
        let r = &regions[code];
        assert_eq!(
            (&r["status"], &r["pages"], &r["videos"], &r["units"]),
            (
                &Value::from("complete"),
                &Value::from(2),
                &Value::from(10),
                &Value::from(3)
            ),
            "{code}: {r}"
        );
        assert!(r["error"].is_null(), "{code}: {r}");
        // Page 1, then the page its token names (the last: no token), then the
        // category names; no page 3 although 4 pages are configured.
        let mine: Vec<_> = calls
            .iter()
            .filter(|c| c.region.as_deref() == Some(code))
            .cloned()
            .collect();
        assert_eq!(shorts(&mine), complete_calls(&[code]));
    }
    assert_eq!(calls.len(), 24);
    assert_report_matches_calls(&h, &report, &calls);

    // The key travels in its header and nowhere else; the request is the documented one.
    for req in h.fake.requests() {
        assert!(!req.url.as_str().contains(API_KEY), "{}", req.url);
        assert_eq!(
            req.headers
                .get("x-goog-api-key")
                .and_then(|v| v.to_str().ok()),
            Some(API_KEY)
        );
        if req.url.path() == "/videos" {
            let q: BTreeMap<String, String> = req.url.query_pairs().into_owned().collect();
            assert_eq!(q["part"], "snippet,statistics,contentDetails");
            assert_eq!(q["maxResults"], "50");
        }
    }
    assert!(
        lines_with(&ran.stderr, "run ")
            .iter()
            .any(|l| l.contains(" complete in ")
                && l.ends_with("; regions US GB DE FR IN BR AU CA complete")),
        "a final summary line: {}",
        ran.stderr
    );

    let db = h.db();
    let expected: Vec<(i64, String)> = fixture_ids("videos_page1.json")
        .into_iter()
        .chain(fixture_ids("videos_last_page.json"))
        .enumerate()
        .map(|(i, id)| (i as i64 + 1, id))
        .collect();
    for code in REGIONS {
        assert_eq!(
            trending_rows(&db, code),
            expected,
            "{code}: ranks 1..10 in chart order"
        );
    }
    assert_eq!(count(&db, "SELECT count(*) FROM videos"), 10);
    let video = |id: &str| -> VideoRow {
        db.query_row(
            "SELECT view_count, like_count, comment_count, tags, duration_s FROM videos WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap_or_else(|e| panic!("video {id}: {e}"))
    };
    // Absent upstream is NULL, never 0; present counts are the strings' values.
    let first = &fixture_json("videos_page1.json")["items"][0];
    let (views, likes, comments, tags, duration) = video("Zq3vT8mKpLw");
    assert_eq!(
        (views, likes, comments, duration),
        (
            Some(4_815_162),
            Some(231_042),
            Some(12_877),
            Some(4 * 60 + 13)
        )
    );
    let tags: Value = serde_json::from_str(&tags.expect("tags stored when present"))
        .expect("tags are a JSON array");
    assert_eq!(tags, first["snippet"]["tags"]);
    assert_eq!(video("b7RkQw2XnE0").1, None, "hidden likeCount is NULL");
    assert_eq!(video("b7RkQw2XnE0").0, Some(2_290_455));
    assert_eq!(video("Lm0pX9cYt4U").2, None, "absent commentCount is NULL");
    assert_eq!(video("s_4HdVnQ8aI").3, None, "absent tags are NULL");
    assert_eq!(video("Vr2fJ8kLq-M").4, Some(0), "live P0D is 0 seconds");
    assert_eq!(video("Vr2fJ8kLq-M").2, Some(0), "a real 0 stays 0");
    assert_eq!(video("Jd7kL2mNp4Q").4, Some(26 * 3600));
    // One stats row per video per region fetched; the NULLs are kept there too.
    assert_eq!(count(&db, "SELECT count(*) FROM video_stats"), 80);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM video_stats WHERE video_id = 'b7RkQw2XnE0' AND like_count IS NULL"
        ),
        8
    );
    for code in REGIONS {
        let (n, music): (i64, String) = db
            .query_row(
                "SELECT count(*), (SELECT title FROM categories WHERE region = ?1 AND id = '10')
                 FROM categories WHERE region = ?1",
                [code],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("categories");
        assert_eq!((n, music.as_str()), (32, "Music"), "{code}");
    }
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM region_state WHERE last_complete_at IS NOT NULL
             AND categories_fetched_at IS NOT NULL AND last_status = 'complete'"
        ),
        8
    );
    let run: (String, String, i64, i64) = db
        .query_row("SELECT run_id, status, units, calls FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .expect("one run row");
    assert_eq!(
        (run.0.as_str(), run.1.as_str(), run.2, run.3),
        (
            report["run_id"].as_str().expect("run_id"),
            "complete",
            24,
            24
        )
    );
    assert_budget_matches_requests(&h);
}

// 2. A ceiling below the plan: the run stops cleanly, and the next resumes.
fn a_run_cut_short_by_the_ceiling_is_resumed_by_the_next(redis: Option<&RedisServer>) {
    let mut h = Harness::new(redis);
    h.costs(Costs::one_unit_each().quota(1000).ceiling(5));
    // One region at a time, so which calls fit is the plan's order, not a race.
    h.expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted");
    let (report, calls, ran) = h.run_to(
        &["run", "--json", "--concurrency", "1"],
        75,
        "budget_exhausted",
    );
    assert_eq!(report["remaining"], 0, "{report}");
    let retry = report["retry_after_s"].as_f64().expect("retry_after_s");
    assert!(retry > 86_000.0 && retry <= 86_400.0, "{report}");
    assert_eq!(
        shorts(&calls),
        ["US p1", "US p2", "US categories", "GB p1", "GB p2"],
        "exactly the granted calls reached the upstream"
    );
    assert_report_matches_calls(&h, &report, &calls);
    let regions = regions_of(&report);
    assert_eq!(regions["US"]["status"], "complete");
    assert_eq!(regions["GB"]["status"], "budget_exhausted");
    assert_eq!(
        (&regions["GB"]["pages"], &regions["GB"]["videos"]),
        (&Value::from(2), &Value::from(10))
    );
    // The regions after the stop were never reached.
    for code in &REGIONS[2..] {
        assert_eq!(regions[*code]["status"], "not_attempted", "{code}");
        assert_eq!(regions[*code]["pages"], 0, "{code}");
    }
    // The granted pages are committed whole.
    {
        let db = h.db();
        assert_eq!(trending_rows(&db, "US").len(), 10);
        assert_eq!(trending_rows(&db, "GB").len(), 10);
        assert_eq!(count(&db, "SELECT count(*) FROM trending"), 20);
        assert_eq!(
            count(&db, "SELECT count(*) FROM categories WHERE region = 'GB'"),
            0
        );
    }
    let said = lines_with(&ran.stderr, "budget exhausted");
    assert_eq!(
        said.len(),
        1,
        "one line says the budget is exhausted: {}",
        ran.stderr
    );
    assert!(
        said[0].contains("capacity frees in 24h"),
        "and when capacity frees: {}",
        said[0]
    );
    assert_budget_matches_requests(&h);

    // More room: the next run starts with the regions this one missed, and finishes.
    h.costs(Costs::one_unit_each().quota(1000).ceiling(100));
    let (report, calls, _) = h.run_to(&["run", "--json", "--concurrency", "1"], 0, "complete");
    let mut expected = complete_calls(&REGIONS[1..]);
    // US was complete: it goes last, and its category names are still fresh.
    expected.extend(["US p1".to_owned(), "US p2".to_owned()]);
    assert_eq!(shorts(&calls), expected);
    assert_report_matches_calls(&h, &report, &calls);
    assert_eq!(
        count(
            &h.db(),
            "SELECT count(*) FROM region_state WHERE last_complete_at IS NOT NULL"
        ),
        8
    );
    assert_budget_matches_requests(&h);
}

// 3. The upstream says the quota is spent although the budget had room.
fn an_upstream_quota_verdict_blocks_the_budget_until_pacific_midnight(redis: Option<&RedisServer>) {
    let h = Harness::new(redis);
    h.fake.answer_instead(
        page2("US"),
        answer_fixture(403, "error_quota_exceeded.json"),
    );
    h.expect_stderr("quota is spent")
        // The budget had counted 2 units of 10,000 (docs/budget.md, "When the upstream refuses").
        .expect_stderr("had counted 2 units of its quota 10000")
        .expect_ended("upstream_quota_exhausted")
        .stderr(contains("quotaExceeded"))
        .stderr(contains("blocked until"));
    let (report, calls, _) = h.run_to(
        &["run", "--json", "--concurrency", "1"],
        75,
        "upstream_quota_exhausted",
    );
    assert_eq!(
        shorts(&calls),
        ["US p1", "US p2"],
        "not retried, nothing after"
    );
    assert_report_matches_calls(&h, &report, &calls);
    let regions = regions_of(&report);
    assert_eq!(
        (&regions["US"]["pages"], &regions["US"]["videos"]),
        (&Value::from(1), &Value::from(7))
    );
    assert_eq!(regions["US"]["status"], "upstream_quota_exhausted");
    // The run stopped before it reached the others.
    for code in &REGIONS[1..] {
        assert_eq!(regions[*code]["status"], "not_attempted", "{code}");
    }
    assert_eq!(trending_rows(&h.db(), "US").len(), 7, "page 1 is kept");

    let budget = h.budget();
    let until = blocked_until_a_pacific_midnight(&budget, "the run's block");
    let now = jiff::Timestamp::from_microsecond(SystemClock.now().as_i64()).expect("now in range");
    let ahead = until.duration_since(now).as_secs_f64();
    assert!(
        ahead > 0.0 && ahead <= 25.0 * 3600.0,
        "the next one: {until}"
    );
    let retry = report["retry_after_s"].as_f64().expect("retry_after_s");
    assert!((retry - ahead).abs() < 60.0, "{retry} vs {ahead}");
    assert_budget_matches_requests(&h);

    // Every later run sees the block: no upstream call at all. The block an earlier
    // run met is what cut this one short: `bucket` names its bucket, and the text
    // the methods it blocks.
    h.expect_stderr("the upstream said earlier that the key's quota is spent")
        .expect_ended("upstream_quota_exhausted")
        .stderr(contains(
            "channels.list, search.list, videoCategories.list, videos.batchGetStats, videos.list are blocked until",
        ));
    let (ran, calls) = h.status(75).run(&["run", "--json"]);
    assert!(calls.is_empty(), "{calls:?}");
    let report = ran.json();
    assert_eq!(report["status"], "upstream_quota_exhausted", "{report}");
    assert_eq!(report["bucket"], "budget", "{report}");
    assert_eq!(report["units_charged"], 0);
    assert_budget_matches_requests(&h);
}

#[test]
fn daily_limit_exceeded_stops_the_run_like_quota_exceeded() {
    let h = Harness::new(None);
    h.fake.answer_instead(
        categories("US"),
        answer_fixture(403, "error_daily_limit_exceeded.json"),
    );
    h.expect_stderr("quota is spent")
        .expect_stderr("quota is lower than configured")
        .expect_ended("upstream_quota_exhausted");
    let (ran, calls) = h.status(75).run(&["run", "--json", "--concurrency", "1"]);
    assert_eq!(ran.json()["status"], "upstream_quota_exhausted");
    assert_eq!(shorts(&calls), complete_calls(&["US"]));
    assert!(h.budget()["blocked_until"].is_string());
    assert_budget_matches_requests(&h);
}

// 4. Transient failures are retried, each attempt charged.
#[test]
fn a_call_answered_503_twice_is_charged_for_all_three_attempts() {
    let h = Harness::new(None);
    let unavailable = r#"{"error":{"code":503,"message":"The service is currently unavailable.","errors":[{"message":"The service is currently unavailable.","domain":"global","reason":"backendError"}],"status":"UNAVAILABLE"}}"#;
    h.fake.mount(
        categories("US")
            .respond_with(answer(503, unavailable))
            .up_to_n_times(2)
            .with_priority(OVERRIDE),
    );
    h.expect_stderr("HTTP 503");
    let (report, calls, ran) = h.run_to(&["run", "--json", "--region", "US"], 0, "complete");
    assert_eq!(
        shorts(&calls),
        [
            "US p1",
            "US p2",
            "US categories",
            "US categories",
            "US categories"
        ]
    );
    assert_report_matches_calls(&h, &report, &calls);
    assert_eq!(regions_of(&report)["US"]["units"], 5);
    let budget = h.budget();
    assert_eq!(budget["by_method"]["videoCategories.list"], 3, "{budget}");
    assert_eq!(
        count(
            &h.db(),
            "SELECT count(*) FROM categories WHERE region = 'US'"
        ),
        32
    );
    assert_eq!(
        lines_with(&ran.stderr, "trying again in").len(),
        2,
        "{}",
        ran.stderr
    );
    assert_budget_matches_requests(&h);
}

// 5.
#[test]
fn a_rate_limited_call_is_retried_and_the_run_completes() {
    let h = Harness::new(None);
    h.fake.mount(
        page1("US")
            .respond_with(answer_fixture(403, "error_rate_limit_exceeded.json"))
            .up_to_n_times(1)
            .with_priority(OVERRIDE),
    );
    h.expect_stderr("reason rateLimitExceeded");
    let (report, calls, _) = h.run_to(&["run", "--json", "--region", "US"], 0, "complete");
    assert_eq!(shorts(&calls), ["US p1", "US p1", "US p2", "US categories"]);
    assert_report_matches_calls(&h, &report, &calls);
    assert_eq!(trending_rows(&h.db(), "US").len(), 10);
    assert_budget_matches_requests(&h);
}

#[test]
fn a_call_that_keeps_failing_fails_its_region_after_three_charged_attempts() {
    let h = Harness::new(None);
    let html = crate::common::upstream::fixture("error_bad_gateway.html");
    h.fake.answer_instead(
        page1("GB"),
        wiremock::ResponseTemplate::new(502).set_body_raw(html, "text/html"),
    );
    h.expect_stderr("HTTP 502").expect_ended("failed");
    let (report, calls, _) = h.run_to(&["run", "--json"], 1, "failed");
    let regions = regions_of(&report);
    let gb = &regions["GB"];
    assert_eq!(gb["status"], "failed");
    let error = gb["error"].as_str().expect("an error");
    assert!(
        error.contains("HTTP 502") && error.contains("gave up after 3 attempts"),
        "{error}"
    );
    let gb_calls: Vec<_> = calls
        .iter()
        .filter(|c| c.region.as_deref() == Some("GB"))
        .cloned()
        .collect();
    assert_eq!(shorts(&gb_calls), ["GB p1", "GB p1", "GB p1"]);
    for code in REGIONS.iter().filter(|c| **c != "GB") {
        assert_eq!(regions[*code]["status"], "complete", "{code}");
    }
    assert_report_matches_calls(&h, &report, &calls);
    assert_budget_matches_requests(&h);
}

// 6. An unusable answer fails its region only.
#[test]
fn malformed_answers_fail_their_region_and_the_others_complete() {
    let h = Harness::new(None);
    h.fake
        .answer_instead(page1("GB"), answer(200, r#"{"items": ["#));
    let mut bad_count = fixture_json("videos_last_page.json");
    bad_count["items"][1]["statistics"]["viewCount"] = "12a".into();
    h.fake
        .answer_instead(page2("DE"), answer(200, &bad_count.to_string()));
    h.expect_stderr("malformed HTTP 200 response")
        .expect_ended("failed")
        .stderr(contains("12a"));
    let (report, calls, _) = h.run_to(&["run", "--json"], 1, "failed");
    let regions = regions_of(&report);
    let (gb, de) = (&regions["GB"], &regions["DE"]);
    assert_eq!((&gb["status"], &gb["pages"]), (&"failed".into(), &0.into()));
    let gb_error = gb["error"].as_str().expect("GB's error");
    assert!(
        gb_error.contains("malformed") && gb_error.contains("GB"),
        "{gb_error}"
    );
    assert_eq!(
        (&de["status"], &de["pages"], &de["videos"]),
        (&"failed".into(), &1.into(), &7.into())
    );
    let de_error = de["error"].as_str().expect("DE's error");
    assert!(
        de_error.contains("Nb3vC6xZ8aS") && de_error.contains("12a"),
        "{de_error}"
    );
    for code in REGIONS.iter().filter(|c| !["GB", "DE"].contains(c)) {
        assert_eq!(regions[*code]["status"], "complete", "{code}");
        assert!(regions[*code]["error"].is_null());
    }
    // Not retried, and nothing more for those regions.
    let of = |code: &str| {
        let mine: Vec<_> = calls
            .iter()
            .filter(|c| c.region.as_deref() == Some(code))
            .cloned()
            .collect();
        shorts(&mine)
    };
    assert_eq!(of("GB"), ["GB p1"]);
    assert_eq!(of("DE"), ["DE p1", "DE p2"]);
    assert_eq!(calls.len(), 6 * 3 + 1 + 2);
    assert_report_matches_calls(&h, &report, &calls);
    let db = h.db();
    assert_eq!(trending_rows(&db, "GB").len(), 0);
    assert_eq!(trending_rows(&db, "DE").len(), 7, "DE's page 1 is kept");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM region_state WHERE region IN ('GB', 'DE')
             AND last_complete_at IS NULL AND last_status = 'failed'"
        ),
        2
    );
    assert_budget_matches_requests(&h);
}

// 7. The key is refused: the whole run fails, and the key shows up nowhere.
fn an_invalid_key_fails_the_run_and_never_leaks(redis: Option<&RedisServer>) {
    let fake = FakeUpstream::empty();
    fake.mount(Mock::given(any()).respond_with(answer_fixture(400, "error_key_invalid.json")));
    let h = Harness::with(fake, redis);
    h.expect_stderr("API_KEY_INVALID")
        .expect_ended("failed")
        .stderr(contains("API key not valid"))
        .stderr(contains("check the key in YOUTUBE_API_KEY"));
    let (report, calls, ran) = h.run_to(&["run", "--json"], 1, "failed");
    // At most the calls already under way when the first answer came back.
    assert!(
        (1..=4).contains(&calls.len()),
        "the run stops at once: {calls:?}"
    );
    assert_report_matches_calls(&h, &report, &calls);
    // The JSON says why too: each region whose call was refused carries the error.
    for (code, region) in regions_of(&report) {
        if region["units"] != 0 {
            assert_eq!(region["status"], "failed", "{code}");
            let error = region["error"].as_str().unwrap_or_default();
            assert!(error.contains("API key not valid"), "{code}: {region}");
        } else {
            // Regions the run never reached before it stopped.
            assert_eq!(region["status"], "not_attempted", "{code}");
        }
    }
    // The most verbose logging the binary has, too.
    let (traced, _) = {
        let before = h.fake.calls().len();
        let ran = h
            .cmd()
            .env("RUST_LOG", "trace")
            .args(["run"])
            .expect_stderr("API_KEY_INVALID")
            .expect_ended("failed")
            .status(1)
            .run();
        (ran, h.fake.calls().split_off(before))
    };
    for (what, text) in [
        ("stdout", &ran.stdout),
        ("stderr", &ran.stderr),
        ("traced stderr", &traced.stderr),
    ] {
        assert!(!text.contains(API_KEY), "the key is in {what}: {text}");
    }
    for (name, bytes) in snapshot(h.scratch.path()) {
        assert!(!bytes_contain(&bytes, API_KEY), "the key is in {name}");
    }
    if let Some(server) = redis {
        let contents = server.contents();
        assert!(!contents.is_empty(), "the budget is in Redis");
        for (key, values) in contents {
            assert!(!key.contains(API_KEY), "{key}");
            for v in values {
                assert!(
                    !bytes_contain(&v, API_KEY),
                    "the key is in Redis under {key}"
                );
            }
        }
    }
    assert_budget_matches_requests(&h);
}

#[test]
fn an_upstream_that_echoes_the_key_does_not_make_it_leak() {
    let fake = FakeUpstream::empty();
    let mut body = fixture_json("error_key_invalid.json");
    let echoed = format!("API key not valid. Please pass a valid API key. Got: {API_KEY}");
    body["error"]["message"] = echoed.clone().into();
    body["error"]["errors"][0]["message"] = echoed.into();
    fake.mount(Mock::given(any()).respond_with(answer(400, &body.to_string())));
    let h = Harness::with(fake, None);
    h.expect_stderr("API_KEY_INVALID").expect_ended("failed");
    let (_, calls) = h
        .status(1)
        .stderr(contains("API key not valid"))
        .stderr(lacks(API_KEY))
        .stdout(lacks(API_KEY))
        .run(&["-v", "run", "--json", "--region", "US"]);
    assert_eq!(calls.len(), 1);
    for (name, bytes) in snapshot(h.scratch.path()) {
        assert!(!bytes_contain(&bytes, API_KEY), "the key is in {name}");
    }
    assert_budget_matches_requests(&h);
}

// 8.
#[test]
fn without_a_key_the_run_exits_78_and_calls_nothing() {
    let h = Harness::new(None);
    for empty in [None, Some("  ")] {
        let mut cmd = h.bare().args(["--api-base", &h.fake.uri()]);
        if let Some(value) = empty {
            cmd = cmd.env("YOUTUBE_API_KEY", value);
        }
        cmd.args(["run", "--json"])
            .expect_stderr("no API key")
            .status(78)
            .stderr(contains("YOUTUBE_API_KEY"))
            .stderr(contains("--api-key-file"))
            .run();
    }
    assert!(h.fake.calls().is_empty());
    assert_budget_matches_requests(&h);
}

#[test]
fn the_key_may_come_from_a_file() {
    let h = Harness::new(None);
    let key_file = h.scratch.write("key", &format!("{API_KEY}\n"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    // The fake answers only requests that carry the key in its header.
    h.bare()
        .args(["--api-base", &h.fake.uri()])
        .arg("--api-key-file")
        .arg(&key_file)
        .args(["run", "--json", "--region", "US"])
        .stderr(lacks("can be read by other users"))
        .run();
    assert_eq!(shorts(&h.fake.calls()), complete_calls(&["US"]));
    assert_budget_matches_requests(&h);
}

// 9.
#[test]
fn a_dry_run_calls_nothing_charges_nothing_and_writes_nothing() {
    let h = Harness::new(None);
    h.run(&["run", "--region", "US"]);
    let before = snapshot(h.scratch.path());
    let listing = h.scratch.listing();
    let used = h.budget()["used"].clone();

    for kind in ["run", "backfill"] {
        let (dry, calls) = h.run(&[kind, "--dry-run", "--json"]);
        assert!(calls.is_empty(), "{kind}: {calls:?}");
        let plan = dry.json();
        assert_eq!(plan["dry_run"], true);
        assert_eq!(plan["units_charged"], 0);
        // US is fresh: last, and without category names; the others in full.
        let expected_units = if kind == "run" { 7 * 5 + 4 } else { 7 * 5 };
        assert_eq!(plan["units_planned"], expected_units, "{kind}: {plan}");
        assert_eq!(h.scratch.listing(), listing, "{kind}");
        assert!(
            snapshot(h.scratch.path()) == before,
            "{kind}: bytes changed"
        );
    }
    assert_eq!(h.budget()["used"], used);
    assert_budget_matches_requests(&h);
}

/// Every lock a run takes (each region's, the maintenance lock, the run's own) is a
/// byte of one hidden file beside the database: nothing for `ls` to show or for shell
/// completion to offer as a `--region`, and nothing left by a run that was killed.
#[test]
fn a_run_leaves_one_hidden_lock_file_beside_the_database() {
    let h = Harness::new(None);
    h.run(&["run", "--json"]);
    let locks: Vec<String> = h
        .scratch
        .listing()
        .into_iter()
        .filter(|n| n.contains("lock"))
        .collect();
    assert_eq!(locks, [".trendsync.db.lock"]);
    let lock = h.scratch.file(".trendsync.db.lock");
    assert_eq!(std::fs::metadata(lock).expect("the lock file").len(), 0);
}

// 10. Another process holds a region.
#[test]
fn a_region_locked_by_another_process_is_skipped() {
    let h = Harness::new(None);
    let lock = hold_lock(&h.db_path(), region_byte("GB"), true);

    let (ran, calls) = h.run(&["run", "--json"]);
    let report = ran.json();
    let regions = regions_of(&report);
    assert_eq!(
        (&regions["GB"]["status"], &regions["GB"]["units"]),
        (&"skipped".into(), &0.into())
    );
    assert!(calls.iter().all(|c| c.region.as_deref() != Some("GB")));
    assert_eq!(calls.len(), 7 * 3);
    assert_eq!(
        lines_with(&ran.stderr, "region GB is being fetched by another process").len(),
        1,
        "{}",
        ran.stderr
    );
    assert_report_matches_calls(&h, &report, &calls);

    h.expect_ended("skipped");
    let (only, calls) = h.status(75).run(&["run", "--json", "--region", "GB"]);
    assert_eq!(only.json()["status"], "skipped");
    assert!(calls.is_empty(), "{calls:?}");

    drop(lock);
    let (_, calls) = h.run(&["run", "--json", "--region", "GB"]);
    assert_eq!(shorts(&calls), complete_calls(&["GB"]));
    assert_budget_matches_requests(&h);
}

#[test]
fn two_runs_racing_for_a_region_fetch_it_once() {
    let h = Harness::new(None);
    h.fake.mount(
        page1("US")
            .respond_with(
                answer_fixture(200, "videos_page1.json").set_delay(Duration::from_millis(1500)),
            )
            .with_priority(OVERRIDE),
    );
    let first = h.cmd().args(["run", "--json", "--region", "US"]).start();
    // Once its first call arrives, the first run holds the region.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while h.fake.calls().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the first run called");
        std::thread::sleep(Duration::from_millis(20));
    }
    h.expect_ended("skipped");
    let (second, calls) = h.status(75).run(&["run", "--json", "--region", "US"]);
    assert_eq!(second.json()["status"], "skipped");
    assert!(calls.is_empty(), "{calls:?}");
    first.finish();
    assert_eq!(shorts(&h.fake.calls()), complete_calls(&["US"]));
    assert_budget_matches_requests(&h);
}

// Backfill: only stale regions, and it may spend the reserve above the ceiling.
#[test]
fn backfill_fills_what_a_cut_run_missed_from_the_reserve() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100).ceiling(5));
    h.expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted");
    let (_, calls) = h.status(75).run(&["run", "--json", "--concurrency", "1"]);
    assert_eq!(calls.len(), 5);

    let (report, calls, _) = h.run_to(&["backfill", "--json", "--concurrency", "1"], 0, "complete");
    // US was completed a moment ago: not stale.
    assert_eq!(shorts(&calls), complete_calls(&REGIONS[1..]));
    assert!(!regions_of(&report).contains_key("US"), "{report}");
    assert_report_matches_calls(&h, &report, &calls);
    assert_eq!(report["remaining"], 100 - 5 - 21, "left to the quota");
    let budget = h.budget();
    assert_eq!(
        (&budget["used"], &budget["remaining"]),
        (&26.into(), &0.into())
    );

    // Nothing is stale any more.
    let (ran, calls) = h.run(&["backfill", "--json"]);
    assert!(calls.is_empty(), "{calls:?}");
    assert_eq!(ran.json()["regions"], Value::Array(vec![]));
    assert_budget_matches_requests(&h);
}

#[test]
fn a_ceiling_cut_with_regions_in_parallel_charges_exactly_what_was_called() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(1000).ceiling(5));
    h.expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted");
    let (report, calls, _) = h.run_to(
        &["run", "--json", "--concurrency", "8"],
        75,
        "budget_exhausted",
    );
    assert_eq!(calls.len(), 5, "{calls:?}");
    assert_report_matches_calls(&h, &report, &calls);
    // Whatever raced, each page that was called was stored whole.
    let p1 = calls.iter().filter(|c| c.short().ends_with(" p1")).count();
    let p2 = calls.iter().filter(|c| c.short().ends_with(" p2")).count();
    assert_eq!(
        count(&h.db(), "SELECT count(*) FROM trending") as usize,
        7 * p1 + 3 * p2
    );
    let pages: u64 = regions_of(&report)
        .values()
        .map(|r| r["pages"].as_u64().expect("pages"))
        .sum();
    assert_eq!(pages as usize, p1 + p2);
    assert_budget_matches_requests(&h);
}

#[test]
fn a_retry_is_charged_like_any_call_and_stops_at_the_ceiling() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(1000).ceiling(2));
    h.fake
        .answer_instead(page1("US"), answer_fixture(500, "error_backend.json"));
    h.expect_stderr("HTTP 500")
        .expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted");
    let (report, calls, _) = h.run_to(&["run", "--json", "--region", "US"], 75, "budget_exhausted");
    assert_eq!(
        shorts(&calls),
        ["US p1", "US p1"],
        "the third attempt is denied"
    );
    assert_report_matches_calls(&h, &report, &calls);
    assert_budget_matches_requests(&h);
}

#[test]
fn a_missing_chart_or_an_oversized_answer_fails_only_its_region() {
    let h = Harness::new(None);
    h.fake.answer_instead(
        page1("IN"),
        answer_fixture(404, "error_video_chart_not_found.json"),
    );
    // Above the client's 8 MiB limit for a successful answer.
    let mut huge = fixture_json("videos_last_page.json");
    huge["items"][0]["snippet"]["description"] = "x".repeat(9 * 1024 * 1024).into();
    h.fake
        .answer_instead(page2("BR"), answer(200, &huge.to_string()));
    h.expect_stderr("videoChartNotFound")
        .expect_stderr("larger than the")
        .expect_ended("failed");
    let (report, calls, _) = h.run_to(&["run", "--json"], 1, "failed");
    let regions = regions_of(&report);
    assert_eq!(regions["IN"]["status"], "failed");
    assert_error_mentions(&regions["IN"], "videoChartNotFound");
    assert_eq!(
        (&regions["BR"]["status"], &regions["BR"]["pages"]),
        (&"failed".into(), &1.into())
    );
    assert_error_mentions(&regions["BR"], "larger than");
    for code in REGIONS.iter().filter(|c| !["IN", "BR"].contains(c)) {
        assert_eq!(regions[*code]["status"], "complete", "{code}");
    }
    assert_eq!(calls.len(), 6 * 3 + 1 + 2, "neither is retried");
    assert_report_matches_calls(&h, &report, &calls);
    assert_budget_matches_requests(&h);
}

#[test]
fn a_project_the_upstream_refuses_fails_the_whole_run_with_advice() {
    for (fixture, advice) in [
        (
            "error_access_not_configured.json",
            "enable the YouTube Data API v3",
        ),
        ("error_forbidden.json", "check the key's restrictions"),
    ] {
        let fake = FakeUpstream::empty();
        fake.mount(Mock::given(any()).respond_with(answer_fixture(403, fixture)));
        let h = Harness::with(fake, None);
        h.expect_stderr(advice).expect_ended("failed");
        let (ran, calls) =
            h.status(1)
                .stderr(contains(advice))
                .run(&["run", "--json", "--concurrency", "1"]);
        assert_eq!(ran.json()["status"], "failed");
        assert_eq!(shorts(&calls), ["US p1"], "{fixture}: stops at once");
        assert_report_matches_calls(&h, &ran.json(), &calls);
        assert_budget_matches_requests(&h);
    }
}

// Hostile answers: a 200 that breaks the protocol stops only its region, keeps what
// was stored, and never stores a rank twice or past 200 (docs/upstream.md).

#[test]
fn pages_that_break_the_protocol_stop_only_their_region() {
    let h = Harness::new(None);
    // US: the second page hands back the token that led to it.
    let mut looping = fixture_json("videos_last_page.json");
    looping["nextPageToken"] = PAGE2_TOKEN.into();
    h.fake
        .answer_instead(page2("US"), answer(200, &looping.to_string()));
    // GB: 56 items on a page of at most 50, each id distinct.
    let mut oversized = fixture_json("videos_page1.json");
    let items = oversized["items"].as_array().expect("items").clone();
    let many: Vec<Value> = (0..56)
        .map(|i| {
            let mut v = items[i % items.len()].clone();
            v["id"] = format!("over{i:07}").into();
            v
        })
        .collect();
    oversized["items"] = many.into();
    h.fake
        .answer_instead(page1("GB"), answer(200, &oversized.to_string()));
    // DE: one video twice on its first page.
    let mut twice = fixture_json("videos_page1.json");
    twice["items"][3]["id"] = twice["items"][1]["id"].clone();
    h.fake
        .answer_instead(page1("DE"), answer(200, &twice.to_string()));
    h.expect_stderr("malformed HTTP 200 response")
        .expect_stderr("already followed in this fetch")
        .expect_ended("failed");
    let (report, calls, _) = h.run_to(&["run", "--json"], 1, "failed");
    let regions = regions_of(&report);
    assert_eq!(
        (&regions["US"]["status"], &regions["US"]["pages"]),
        (&"failed".into(), &2.into())
    );
    assert_error_mentions(&regions["US"], "again");
    assert_eq!(
        (&regions["GB"]["status"], &regions["GB"]["pages"]),
        (&"failed".into(), &0.into())
    );
    assert_error_mentions(&regions["GB"], "56 items");
    assert_eq!(regions["DE"]["status"], "failed");
    assert_error_mentions(&regions["DE"], "twice");
    for code in &REGIONS[3..] {
        assert_eq!(regions[*code]["status"], "complete", "{code}");
    }
    let db = h.db();
    // US keeps its two pages, each video at one rank, ranks 1..=10 in order.
    let us = trending_rows(&db, "US");
    assert_eq!(
        us.iter().map(|(rank, _)| *rank).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<i64>>()
    );
    let mut ids: Vec<&String> = us.iter().map(|(_, id)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10, "{us:?}");
    assert!(trending_rows(&db, "GB").is_empty());
    assert!(trending_rows(&db, "DE").is_empty());
    assert!(count(&db, "SELECT max(rank) FROM trending") <= 200);
    // Not retried, nothing more for those regions; the others made every call.
    let of = |code: &str| {
        let mine: Vec<_> = calls
            .iter()
            .filter(|c| c.region.as_deref() == Some(code))
            .cloned()
            .collect();
        shorts(&mine)
    };
    assert_eq!(of("US"), ["US p1", "US p2"]);
    assert_eq!(of("GB"), ["GB p1"]);
    assert_eq!(of("DE"), ["DE p1"]);
    assert_report_matches_calls(&h, &report, &calls);
    assert_budget_matches_requests(&h);
}

/// Two regions, each with one search; two pages of chart each.
const TWO_SEARCHING_REGIONS: &str = r#"
[defaults]
pages = 2

[[region]]
code = "US"
offset = 0

[[region.search]]
name = "fresh"
q = ""
order = "viewCount"

[[region]]
code = "GB"
offset = 7

[[region.search]]
name = "fresh"
q = ""
order = "viewCount"
"#;

fn search_for(region: &str) -> wiremock::MockBuilder {
    Mock::given(wiremock::matchers::path("/search"))
        .and(wiremock::matchers::query_param("regionCode", region))
        .and(wiremock::matchers::header("X-Goog-Api-Key", API_KEY))
}

/// A search answer listing `ids`, shaped like the upstream's.
fn search_answer(ids: &[String]) -> String {
    let items: Vec<Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({
                "kind": "youtube#searchResult",
                "id": {"kind": "youtube#video", "videoId": id},
            })
        })
        .collect();
    serde_json::json!({"kind": "youtube#searchListResponse", "items": items}).to_string()
}

#[test]
fn a_bad_search_answer_fails_only_its_region_and_is_counted_once() {
    let too_many: Vec<String> = (0..51).map(|i| format!("many{i:07}")).collect();
    let with_comma: Vec<String> = vec!["Wf5gH2jKl8E".into(), "abc,defghij".into()];
    for (bad, says) in [(too_many, "51 items"), (with_comma, "\"abc,defghij\"")] {
        let mut h = Harness::new(None);
        h.regions(TWO_SEARCHING_REGIONS);
        h.fake
            .mount(search_for("US").respond_with(answer(200, &search_answer(&bad))));
        h.fake
            .mount(search_for("GB").respond_with(answer_fixture(200, "search.json")));
        h.fake.mount(
            Mock::given(wiremock::matchers::path("/videos"))
                .and(|r: &wiremock::Request| r.url.query_pairs().any(|(k, _)| k == "id"))
                .respond_with(answer_fixture(200, "videos_by_id.json")),
        );
        h.expect_stderr(says).expect_ended("failed");
        let (ran, calls) = h.status(1).stderr(lacks("bug in the caller")).run(&[
            "run",
            "--json",
            "--concurrency",
            "1",
        ]);
        let report = ran.json();
        let regions = regions_of(&report);
        let us_error = regions["US"]["error"].as_str().unwrap_or_default();
        assert_eq!(regions["US"]["status"], "failed", "{report}");
        assert!(us_error.contains(says), "{us_error}");
        assert_eq!(regions["GB"]["status"], "complete", "{report}");
        // US: its chart, then the one search, and no details for what it found.
        let methods: Vec<String> = calls.iter().map(|c| c.method.clone()).collect();
        assert_eq!(
            methods.iter().filter(|m| *m == "search.list").count(),
            2,
            "{methods:?}"
        );
        assert_eq!(
            calls
                .iter()
                .filter(|c| c.method == "videos.list" && c.region.is_none())
                .count(),
            1,
            "only GB's search gets its details: {calls:?}"
        );
        // Each call counted once: the report and the budget hold what was sent.
        let units: u64 = h.units_sent(&calls).values().sum();
        assert_eq!(
            report["calls"].as_u64(),
            Some(calls.len() as u64),
            "{report}"
        );
        assert_eq!(report["units_charged"].as_u64(), Some(units), "{report}");
        assert_budget_matches_requests(&h);
    }
}

#[test]
fn regions_a_stopped_run_never_reached_are_not_attempted() {
    let fake = FakeUpstream::empty();
    fake.mount(Mock::given(any()).respond_with(answer_fixture(400, "error_key_invalid.json")));
    let h = Harness::with(fake, None);
    h.expect_stderr("API_KEY_INVALID").expect_ended("failed");
    let (ran, calls) = h.status(1).run(&["run", "--json", "--concurrency", "1"]);
    assert_eq!(shorts(&calls), ["US p1"]);
    let report = ran.json();
    let regions = regions_of(&report);
    assert_eq!(regions["US"]["status"], "failed", "{report}");
    assert!(regions["US"]["error"].is_string(), "{report}");
    let us_error = regions["US"]["error"].as_str().expect("US's error");
    for code in &REGIONS[1..] {
        assert_eq!(
            regions[*code]["status"], "not_attempted",
            "{code}: {report}"
        );
        assert_eq!(regions[*code]["units"], 0, "{code}");
        // Why it was not attempted, never US's error as its own.
        assert_eq!(
            regions[*code]["error"], "not attempted: the run stopped before it, after US's error",
            "{code}: {report}"
        );
    }
    assert_report_matches_calls(&h, &report, &calls);

    // The history says the same: `runs` and `status`, in JSON and in text.
    let runs = h.bare().args(["runs", "--json"]).run().json();
    for run in runs["runs"].as_array().expect("runs") {
        let reason = run["reason"].as_str().unwrap_or_default();
        if run["region"] == "US" {
            assert_eq!(reason, us_error, "{run}");
        } else {
            assert!(
                reason.starts_with("not attempted: ") && !reason.contains("API_KEY_INVALID"),
                "{run}"
            );
        }
    }
    let text = h.bare().arg("runs").env("COLUMNS", "400").run().stdout;
    let said = text.matches("API_KEY_INVALID").count();
    assert_eq!(said, 1, "US's error once, on US's line:\n{text}");
    let status = h.bare().args(["status", "--json"]).run().json();
    for region in status["regions"].as_array().expect("regions") {
        let reason = region["last_reason"].as_str().unwrap_or_default();
        assert_eq!(
            reason.contains("API_KEY_INVALID"),
            region["code"] == "US",
            "{region}"
        );
    }
}

#[test]
fn terminal_controls_from_the_upstream_are_shown_escaped() {
    let h = Harness::new(None);
    const TITLE: &str = "Quokkaville \u{1b}[2J\u{1b}]0;owned\u{7}night\r\u{202e}cod.exe";
    let mut page = fixture_json("videos_page1.json");
    page["items"][0]["snippet"]["title"] = TITLE.into();
    page["items"][0]["snippet"]["channelTitle"] = "chan\u{9b}31m\u{2066}nel".into();
    h.fake
        .answer_instead(page1("US"), answer(200, &page.to_string()));
    // A bad value with controls in it ends up quoted in an error message.
    let mut bad = fixture_json("videos_last_page.json");
    bad["items"][0]["statistics"]["viewCount"] = "1\u{1b}]0;pwned\u{7}\u{202e}".into();
    h.fake
        .answer_instead(page2("US"), answer(200, &bad.to_string()));
    // One region: another's copy of the same video would update its title.
    h.expect_stderr("malformed HTTP 200 response")
        .expect_ended("failed");
    let (ran, _) = h
        .status(1)
        .stderr(contains("\\u{1b}]0;pwned"))
        .run(&["run", "--json", "--region", "US"]);
    let (text, _) = h
        .stdout(contains(
            "Quokkaville \\u{1b}[2J\\u{1b}]0;owned\\u{7}night\\r\\u{202e}cod.exe",
        ))
        .stdout(contains("chan\\u{9b}31m\\u{2066}nel"))
        .run(&["search", "Quokkaville"]);
    let (json, _) = h.run(&["search", "Quokkaville", "--json"]);
    // The JSON carries the title exactly, as escapes.
    assert_eq!(json.json()["results"][0]["title"], TITLE);
    for (what, out) in [
        ("search", &text.stdout),
        ("search --json", &json.stdout),
        ("run stdout", &ran.stdout),
        ("run stderr", &ran.stderr),
    ] {
        for c in ['\u{1b}', '\u{7}', '\r', '\u{9b}', '\u{202e}', '\u{2066}'] {
            assert!(!out.contains(c), "{what} holds {c:?} raw: {out:?}");
        }
    }
}

/// A `categoryId` that is not a number in a string is stored as NULL, with one warning
/// naming the region and the video (docs/upstream.md: an id is never free text); the rest
/// of the video, and of the run, is kept.
#[test]
fn a_category_id_that_is_not_a_number_is_stored_as_null_with_a_warning() {
    let h = Harness::new(None);
    let mut page = fixture_json("videos_last_page.json");
    let video = page["items"][0]["id"]
        .as_str()
        .expect("the first video's id")
        .to_owned();
    page["items"][0]["snippet"]["categoryId"] = "=1+1".into();
    h.fake
        .answer_instead(page2("DE"), answer(200, &page.to_string()));
    h.expect_stderr(&format!(
        "video {video} has categoryId \"=1+1\", which is not a number"
    ));
    h.run(&["run", "--region", "DE"]);
    let (category, title): (Option<String>, String) = h
        .db()
        .query_row(
            "SELECT category_id, title FROM videos WHERE id = ?1",
            [&video],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the video is stored");
    assert_eq!(category, None);
    assert!(!title.is_empty());
    let others: i64 = h
        .db()
        .query_row(
            "SELECT count(*) FROM videos WHERE category_id IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .expect("counting");
    assert!(others > 0, "the other videos keep their categories");
}

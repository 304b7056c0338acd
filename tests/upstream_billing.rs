//! The tests' own fake of the upstream's billing (docs/budget.md, "Buckets"): one daily pool per
//! bucket, a call billed to its method's pool while the pool has room, and beyond it
//! the upstream's own 403 quotaExceeded, unbilled. Plain HTTP/1.1 requests, no binary.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;

use crate::common::upstream::{
    API_KEY, Billing, FakeUpstream, PAGE2_TOKEN, answer, fixture, page1,
};

const PAGE1: &str = "/videos?part=snippet&chart=mostPopular&regionCode=US&maxResults=50";
const SEARCH: &str = "/search?part=snippet&type=video&regionCode=US&q=bread";
const CATEGORIES: &str = "/videoCategories?part=snippet&regionCode=US";
const BY_ID: &str = "/videos?part=snippet,statistics&id=Wf5gH2jKl8E";
const STATS: &str = "/videos:batchGetStats?ids=Wf5gH2jKl8E";

/// GET `path_and_query` from the fake, with the key or without; status and body.
fn get_as(fake: &FakeUpstream, path_and_query: &str, key: bool) -> (u16, String) {
    let host = fake
        .uri()
        .strip_prefix("http://")
        .expect("an http:// address")
        .to_owned();
    let mut stream = TcpStream::connect(&host).expect("connecting to the fake upstream");
    let key_header = if key {
        format!("X-Goog-Api-Key: {API_KEY}\r\n")
    } else {
        String::new()
    };
    write!(
        stream,
        "GET {path_and_query} HTTP/1.1\r\nHost: {host}\r\n{key_header}Connection: close\r\n\r\n"
    )
    .expect("sending a request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("reading the answer");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("an HTTP answer: {response:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head:?}"));
    (status, body.to_owned())
}

fn get(fake: &FakeUpstream, path_and_query: &str) -> (u16, String) {
    get_as(fake, path_and_query, true)
}

/// The call is answered 200 with the fixture `name`.
fn assert_answers(fake: &FakeUpstream, path_and_query: &str, name: &str) {
    let (status, body) = get(fake, path_and_query);
    assert_eq!(status, 200, "{path_and_query}: {body}");
    assert_eq!(body, fixture(name), "{path_and_query}");
}

/// The call is answered as the upstream answers a spent pool.
fn assert_quota_exceeded(fake: &FakeUpstream, path_and_query: &str) {
    let (status, body) = get(fake, path_and_query);
    assert_eq!(status, 403, "{path_and_query}: {body}");
    assert_eq!(
        body,
        fixture("error_quota_exceeded.json"),
        "{path_and_query}"
    );
}

fn buckets(budget: u64, search: u64, stats: u64) -> BTreeMap<String, u64> {
    BTreeMap::from([
        ("budget".to_owned(), budget),
        ("search".to_owned(), search),
        ("stats".to_owned(), stats),
    ])
}

#[test]
fn each_method_answers_its_fixture_and_is_billed_to_its_bucket() {
    let fake = FakeUpstream::billing(Billing::granular(10_000, 100, 10_000));
    assert_answers(&fake, PAGE1, "videos_page1.json");
    assert_answers(
        &fake,
        &format!("{PAGE1}&pageToken={PAGE2_TOKEN}"),
        "videos_last_page.json",
    );
    assert_answers(&fake, CATEGORIES, "categories.json");
    assert_answers(&fake, BY_ID, "videos_by_id.json");
    assert_answers(&fake, SEARCH, "search.json");
    let (status, _) = get(&fake, STATS);
    assert_eq!(status, 200);
    assert_eq!(fake.billed(), buckets(4, 1, 1));
    assert_eq!(fake.billed_total(), buckets(4, 1, 1));
    assert_eq!(fake.denied(), buckets(0, 0, 0));
    assert_eq!(fake.remaining(), buckets(9_996, 99, 9_999));
    let methods: Vec<String> = fake.calls().into_iter().map(|c| c.method).collect();
    assert_eq!(
        methods,
        [
            "videos.list",
            "videos.list",
            "videoCategories.list",
            "videos.list",
            "search.list",
            "videos.batchGetStats"
        ]
    );
}

#[test]
fn pools_fill_independently() {
    let fake = FakeUpstream::billing(Billing::granular(3, 2, 1));
    for _ in 0..2 {
        assert_answers(&fake, SEARCH, "search.json");
    }
    assert_quota_exceeded(&fake, SEARCH);
    // The spent search pool stops no other bucket's call.
    for _ in 0..3 {
        assert_answers(&fake, PAGE1, "videos_page1.json");
    }
    assert_eq!(get(&fake, STATS).0, 200);
    assert_quota_exceeded(&fake, PAGE1);
    assert_quota_exceeded(&fake, CATEGORIES);
    assert_quota_exceeded(&fake, STATS);
    assert_quota_exceeded(&fake, SEARCH);
    assert_eq!(fake.billed(), buckets(3, 2, 1));
    assert_eq!(fake.denied(), buckets(2, 2, 1));
    assert_eq!(fake.remaining(), buckets(0, 0, 0));
    // Every request was received, the denied ones too.
    assert_eq!(fake.received(), 2 + 1 + 3 + 1 + 4);
}

#[test]
fn a_spent_search_pool_answers_quota_exceeded_and_trending_still_answers() {
    let fake = FakeUpstream::billing(Billing::granular(10_000, 100, 10_000));
    assert_eq!(fake.spend("search", 100), 100);
    assert_quota_exceeded(&fake, SEARCH);
    assert_answers(&fake, PAGE1, "videos_page1.json");
    assert_answers(&fake, BY_ID, "videos_by_id.json");
    assert_eq!(fake.billed(), buckets(2, 100, 0));
    assert_eq!(fake.denied(), buckets(0, 1, 0));
}

#[test]
fn spend_counts_and_stops_at_the_quota() {
    let fake = FakeUpstream::billing(Billing::granular(10, 5, 10));
    assert_eq!(fake.spend("budget", 7), 7);
    assert_eq!(fake.spend("search", 3), 3);
    assert_eq!(fake.billed(), buckets(7, 3, 0));
    assert_answers(&fake, PAGE1, "videos_page1.json");
    // Another consumer cannot spend past the quota either.
    assert_eq!(fake.spend("budget", 5), 2);
    assert_eq!(fake.billed(), buckets(10, 3, 0));
    assert_quota_exceeded(&fake, CATEGORIES);
    assert_eq!(fake.billed_total(), buckets(10, 3, 0));
    assert_eq!(fake.denied(), buckets(1, 0, 0));
}

#[test]
fn midnight_refills_every_pool() {
    let fake = FakeUpstream::billing(Billing::granular(1, 1, 1));
    assert_answers(&fake, PAGE1, "videos_page1.json");
    assert_answers(&fake, SEARCH, "search.json");
    fake.spend("stats", 1);
    for call in [PAGE1, SEARCH, STATS] {
        assert_quota_exceeded(&fake, call);
    }
    fake.midnight();
    assert_eq!(fake.billed(), buckets(0, 0, 0));
    assert_eq!(fake.remaining(), buckets(1, 1, 1));
    assert_answers(&fake, PAGE1, "videos_page1.json");
    assert_answers(&fake, SEARCH, "search.json");
    assert_eq!(get(&fake, STATS).0, 200);
    assert_eq!(fake.billed(), buckets(1, 1, 1));
    // The days add up; the denials stay counted.
    assert_eq!(fake.billed_total(), buckets(2, 2, 2));
    assert_eq!(fake.denied(), buckets(1, 1, 1));
}

#[test]
fn the_single_pool_bills_a_search_100_units() {
    let fake = FakeUpstream::billing(Billing::single(250));
    assert_answers(&fake, SEARCH, "search.json");
    assert_answers(&fake, SEARCH, "search.json");
    // 50 units left: no room for a search, room for 50 pages.
    assert_quota_exceeded(&fake, SEARCH);
    for _ in 0..50 {
        assert_answers(&fake, CATEGORIES, "categories.json");
    }
    assert_quota_exceeded(&fake, CATEGORIES);
    let one = BTreeMap::from([("budget".to_owned(), 250)]);
    assert_eq!(fake.billed(), one);
    assert_eq!(fake.denied(), BTreeMap::from([("budget".to_owned(), 2)]));
}

#[test]
fn calls_without_the_key_or_unknown_to_the_fixtures_are_not_billed() {
    let fake = FakeUpstream::billing(Billing::granular(10, 10, 10));
    assert_eq!(get_as(&fake, PAGE1, false).0, 404);
    assert_eq!(get(&fake, &format!("{PAGE1}&pageToken=NOSUCHPAGE")).0, 404);
    assert_eq!(get(&fake, "/videos?part=snippet").0, 404);
    assert_eq!(fake.billed(), buckets(0, 0, 0));
    assert_eq!(fake.denied(), buckets(0, 0, 0));
}

#[test]
fn a_scenarios_own_answer_stands_in_unbilled() {
    let fake = FakeUpstream::billing(Billing::granular(10, 10, 10));
    fake.answer_instead(page1("US"), answer(500, r#"{"error": {"code": 500}}"#));
    let (status, body) = get(&fake, PAGE1);
    assert_eq!(
        (status, body.as_str()),
        (500, r#"{"error": {"code": 500}}"#)
    );
    // Another region's first page is still the billed fixture.
    assert_answers(
        &fake,
        &PAGE1.replace("regionCode=US", "regionCode=GB"),
        "videos_page1.json",
    );
    assert_eq!(fake.billed(), buckets(1, 0, 0));
}

//! A fake YouTube Data API v3 on loopback, answering with the fixtures, and what it
//! received, call by call; optionally billing the key's calls to daily quota pools
//! as the upstream does ([`FakeUpstream::billing`]).
//!
//! The mock server runs on its own thread; the small runtime kept here only drives
//! wiremock's async API (mounting mocks, reading what was received), so the tests
//! themselves stay synchronous and run the binary as a plain child process.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use trendsync::clock::{Clock, SystemClock};

use wiremock::matchers::{header, method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockBuilder, MockServer, Request, Respond, ResponseTemplate};

/// A distinctive fake key: it must never show up anywhere but the request header.
pub const API_KEY: &str = "AIzaTEST-secret-key-123";
/// `nextPageToken` of videos_page1.json.
pub const PAGE2_TOKEN: &str = "CDIQAA";
/// Priority of a scenario's own answers over the defaults (wiremock: lower wins; 5 is
/// the default).
pub const OVERRIDE: u8 = 1;

const KEY_HEADER: &str = "X-Goog-Api-Key";

/// The text of a fixture in tests/fixtures/youtube.
pub fn fixture(name: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/youtube")
        .join(name);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
}

pub fn fixture_json(name: &str) -> serde_json::Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

/// An answer with `status` and `body` as the upstream sends it.
pub fn answer(status: u16, body: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.as_bytes().to_vec(), "application/json")
}

/// An answer with the fixture `name` as its body.
pub fn answer_fixture(status: u16, name: &str) -> ResponseTemplate {
    answer(status, &fixture(name))
}

/// Requests for any region's trending chart, sent with the key.
pub fn trending() -> MockBuilder {
    Mock::given(method("GET"))
        .and(path("/videos"))
        .and(query_param("chart", "mostPopular"))
        .and(header(KEY_HEADER, API_KEY))
}

/// The first page of `region`'s chart.
pub fn page1(region: &str) -> MockBuilder {
    trending()
        .and(query_param("regionCode", region))
        .and(query_param_is_missing("pageToken"))
}

/// The second page of `region`'s chart.
pub fn page2(region: &str) -> MockBuilder {
    trending()
        .and(query_param("regionCode", region))
        .and(query_param("pageToken", PAGE2_TOKEN))
}

/// Any page of the chart of `category` in `region`.
pub fn category_chart(region: &str, category: &str) -> MockBuilder {
    trending()
        .and(query_param("regionCode", region))
        .and(query_param("videoCategoryId", category))
}

/// `region`'s category names.
pub fn categories(region: &str) -> MockBuilder {
    Mock::given(method("GET"))
        .and(path("/videoCategories"))
        .and(query_param("regionCode", region))
        .and(header(KEY_HEADER, API_KEY))
}

/// Whether `req` carries the key header, as every billed call does.
fn keyed(req: &Request) -> bool {
    req.headers.contains_key(KEY_HEADER)
}

/// Requests for `videoCategories` that carry no key at all: a run's check of the
/// clocks when the budget allows no call, which the upstream refuses unbilled.
pub fn without_key() -> MockBuilder {
    Mock::given(method("GET"))
        .and(path("/videoCategories"))
        .and(|req: &Request| !keyed(req))
}

/// The upstream's answer to a request without a key: refused before any project is
/// known, so billed to none.
pub fn unregistered_caller() -> ResponseTemplate {
    answer_fixture(403, "error_unregistered_caller.json")
}

/// One request the fake received, as the quota sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The quota method: `videos.list`, `videoCategories.list`, `search.list`,
    /// `channels.list`, `videos.batchGetStats`.
    pub method: String,
    pub region: Option<String>,
    pub page_token: Option<String>,
    /// `videoCategoryId`: the chart of a category.
    pub category: Option<String>,
    /// `id`: the videos asked for, comma-separated.
    pub ids: Option<String>,
}

impl Call {
    fn from_request(req: &Request) -> Call {
        let param = |name: &str| {
            req.url
                .query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        let method = match req.url.path() {
            "/videos" => "videos.list",
            "/search" => "search.list",
            "/videoCategories" => "videoCategories.list",
            "/channels" => "channels.list",
            "/videos:batchGetStats" => "videos.batchGetStats",
            other => panic!("the fake received a request for {other}, no upstream method"),
        };
        Call {
            method: method.to_owned(),
            region: param("regionCode"),
            page_token: param("pageToken"),
            category: param("videoCategoryId"),
            ids: param("id"),
        }
    }

    /// `US p1`, `US p2`, `US categories`, `US c17 p1` (the chart of category 17):
    /// short enough to compare whole sequences.
    pub fn short(&self) -> String {
        let region = self.region.as_deref().unwrap_or("-");
        if let Some(category) = &self.category {
            let page = if self.page_token.is_some() {
                "p2"
            } else {
                "p1"
            };
            return format!("{region} c{category} {page}");
        }
        match (self.method.as_str(), self.page_token.as_deref()) {
            ("videos.list", None) => format!("{region} p1"),
            ("videos.list", Some(PAGE2_TOKEN)) => format!("{region} p2"),
            ("videoCategories.list", _) => format!("{region} categories"),
            (m, t) => format!("{region} {m} {t:?}"),
        }
    }
}

/// The short form of every call of `regions` in the order a complete run of the
/// fixtures makes them: both pages, then the category names.
pub fn complete_calls(regions: &[&str]) -> Vec<String> {
    regions
        .iter()
        .flat_map(|r| {
            [
                format!("{r} p1"),
                format!("{r} p2"),
                format!("{r} categories"),
            ]
        })
        .collect()
}

/// How the upstream bills one key's calls: daily quota pools (*buckets*), and the
/// bucket and units of each method's call.
#[derive(Clone, Debug)]
pub struct Billing {
    /// Each bucket's daily quota.
    quotas: BTreeMap<String, u64>,
    /// Each method's bucket, and the units one call costs.
    costs: BTreeMap<String, (String, u64)>,
}

impl Billing {
    /// The upstream's scheme since June 2026 (docs/budget.md, "Buckets"), with the quotas the test
    /// chooses: `budget` (videos.list, videoCategories.list, channels.list), `search`
    /// (search.list) and `stats` (videos.batchGetStats), 1 unit a call in each.
    pub fn granular(budget: u64, search: u64, stats: u64) -> Billing {
        Billing {
            quotas: BTreeMap::from([
                ("budget".to_owned(), budget),
                ("search".to_owned(), search),
                ("stats".to_owned(), stats),
            ]),
            costs: [
                ("videos.list", "budget"),
                ("videoCategories.list", "budget"),
                ("channels.list", "budget"),
                ("search.list", "search"),
                ("videos.batchGetStats", "stats"),
            ]
            .into_iter()
            .map(|(m, bucket)| (m.to_owned(), (bucket.to_owned(), 1)))
            .collect(),
        }
    }

    /// The scheme until May 2026, which the default cost file still follows: one pool,
    /// `budget`, of `quota` units; a search.list call costs 100, any other call 1.
    pub fn single(quota: u64) -> Billing {
        Billing {
            quotas: BTreeMap::from([("budget".to_owned(), quota)]),
            costs: [
                ("videos.list", 1),
                ("videoCategories.list", 1),
                ("channels.list", 1),
                ("search.list", 100),
                ("videos.batchGetStats", 1),
            ]
            .into_iter()
            .map(|(m, units)| (m.to_owned(), ("budget".to_owned(), units)))
            .collect(),
        }
    }

    /// The bucket a call of `method` is billed to, and its units.
    pub fn cost(&self, method: &str) -> Option<(&str, u64)> {
        self.costs
            .get(method)
            .map(|(bucket, units)| (bucket.as_str(), *units))
    }

    /// Every bucket, with a zero.
    fn zeros(&self) -> BTreeMap<String, u64> {
        self.quotas.keys().map(|b| (b.clone(), 0)).collect()
    }
}

/// What the upstream billed, bucket by bucket.
#[derive(Debug)]
struct Ledger {
    billing: Billing,
    /// Since the upstream's last midnight ([`FakeUpstream::midnight`]).
    today: BTreeMap<String, u64>,
    /// Since the fake started.
    total: BTreeMap<String, u64>,
    /// Calls answered quotaExceeded, since the fake started.
    denied: BTreeMap<String, u64>,
}

impl Ledger {
    fn new(billing: Billing) -> Ledger {
        Ledger {
            today: billing.zeros(),
            total: billing.zeros(),
            denied: billing.zeros(),
            billing,
        }
    }

    fn room(&self, bucket: &str) -> u64 {
        let quota = self.billing.quotas.get(bucket).unwrap_or_else(|| {
            panic!(
                "the upstream bills no bucket {bucket:?}, only {:?}",
                self.billing.quotas.keys()
            )
        });
        quota.saturating_sub(self.today[bucket])
    }

    fn add(&mut self, bucket: &str, units: u64) {
        *self.today.entry(bucket.to_owned()).or_default() += units;
        *self.total.entry(bucket.to_owned()).or_default() += units;
    }

    /// Bills one call of `method` if its bucket has room for it, as the upstream does;
    /// false (and counted as a denial) if not.
    fn bill(&mut self, method: &str) -> bool {
        let (bucket, units) = self
            .billing
            .cost(method)
            .map(|(b, u)| (b.to_owned(), u))
            .unwrap_or_else(|| panic!("the billing scheme has no cost for {method}"));
        if self.room(&bucket) < units {
            *self.denied.entry(bucket).or_default() += 1;
            return false;
        }
        self.add(&bucket, units);
        true
    }
}

/// The fixtures' YouTube, billing every call with the key to its method's bucket and
/// answering quotaExceeded, unbilled, once that bucket has no room for it.
struct BilledYoutube {
    ledger: Arc<Mutex<Ledger>>,
    /// Follow-ups' answers leave out some videos that exist ([`fixture_answer`]).
    partial: bool,
}

impl Respond for BilledYoutube {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let Some((method, body)) = fixture_answer(req, self.partial) else {
            // As the fixtures' YouTube does for what it does not know; nothing billed.
            return ResponseTemplate::new(404);
        };
        if !lock(&self.ledger).bill(method) {
            return answer_fixture(403, "error_quota_exceeded.json");
        }
        answer(200, &body)
    }
}

/// The quota method of a request and the fixtures' answer to it, if they have one;
/// `partial`: a `videos:batchGetStats` that leaves out videos that still exist, as the
/// upstream documents it may.
fn fixture_answer(req: &Request, partial: bool) -> Option<(&'static str, String)> {
    let param = |name: &str| {
        req.url
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let get = req.method == wiremock::http::Method::GET;
    match req.url.path() {
        "/videos" if get && param("chart").as_deref() == Some("mostPopular") => {
            match param("pageToken").as_deref() {
                None => Some(("videos.list", fixture("videos_page1.json"))),
                Some(PAGE2_TOKEN) => Some(("videos.list", fixture("videos_last_page.json"))),
                Some(_) => None,
            }
        }
        "/videos" if get && param("id").is_some() => Some((
            "videos.list",
            videos_by_id(&param("id").unwrap_or_default()),
        )),
        "/videoCategories" if get => Some(("videoCategories.list", fixture("categories.json"))),
        "/search" if get => Some(("search.list", fixture("search.json"))),
        // No fixture holds this yet: an empty answer of the right kind.
        "/channels" if get => Some((
            "channels.list",
            r#"{"kind": "youtube#channelListResponse", "items": []}"#.to_owned(),
        )),
        "/videos:batchGetStats" if get => {
            let mut answer = video_stats(&param("id").unwrap_or_default());
            if partial {
                // Not atomic: every third video it would show is left out.
                if let Some(items) = answer["items"].as_array_mut() {
                    let mut i = 0;
                    items.retain(|_| {
                        i += 1;
                        i % 3 != 1
                    });
                }
            }
            Some(("videos.batchGetStats", answer.to_string()))
        }
        _ => None,
    }
}

/// Ids a follow-up's answer leaves out, as the upstream does for a video gone or
/// private: those starting with this.
pub const GONE_PREFIX: &str = "gone";

/// `videos:batchGetStats`' answer for the comma-separated `ids`, in their order:
/// video_stats.json's item for each fixture video it holds (it leaves one chart video
/// out, gone since), a made-up item of the same shape for any other id, and nothing
/// for ids starting with [`GONE_PREFIX`].
pub fn video_stats(ids: &str) -> serde_json::Value {
    let mut answer = fixture_json("video_stats.json");
    let known: Vec<serde_json::Value> = answer["items"].as_array().cloned().unwrap_or_default();
    let charted: Vec<String> = ["videos_page1.json", "videos_last_page.json"]
        .iter()
        .flat_map(|f| {
            fixture_json(f)["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect();
    let items: Vec<serde_json::Value> = ids
        .split(',')
        .filter(|id| !id.is_empty() && !id.starts_with(GONE_PREFIX))
        .filter_map(|id| match known.iter().find(|v| v["id"] == id) {
            Some(item) => Some(item.clone()),
            None if charted.iter().any(|c| c == id) => None,
            None => Some(serde_json::json!({
                "kind": "youtube#videoStats",
                "etag": format!("made-up-{id}"),
                "id": id,
                "statistics": {
                    "viewCount": (id.len() * 1000).to_string(),
                    "likeCount": "7",
                    "commentCount": "3"
                }
            })),
        })
        .collect();
    answer["items"] = serde_json::Value::Array(items);
    answer
}

/// `videos?id=…`'s answer for the comma-separated `ids`: videos_by_id.json as it is
/// when they name one of its videos (the details of a search), else a made-up item of
/// its shape for each id [`video_stats`] would show, and nothing for a video gone
/// ([`GONE_PREFIX`], or the chart video video_stats.json leaves out).
pub fn videos_by_id(ids: &str) -> String {
    let fixed = fixture("videos_by_id.json");
    let mut answer = fixture_json("videos_by_id.json");
    let known: Vec<serde_json::Value> = answer["items"].as_array().cloned().unwrap_or_default();
    if ids.split(',').any(|id| known.iter().any(|v| v["id"] == id)) {
        return fixed;
    }
    let shown = video_stats(ids);
    let shown: Vec<&str> = shown["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|v| v["id"].as_str()).collect())
        .unwrap_or_default();
    let items: Vec<serde_json::Value> = ids
        .split(',')
        .filter(|id| shown.contains(id))
        .filter_map(|id| {
            let mut made_up = known.first().cloned()?;
            made_up["id"] = serde_json::Value::from(id);
            made_up["etag"] = serde_json::Value::from(format!("made-up-{id}"));
            Some(made_up)
        })
        .collect();
    answer["items"] = serde_json::Value::Array(items);
    answer.to_string()
}

/// The ledger, even if a test thread panicked while holding it.
fn lock(ledger: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The upstream's clock as its answers' `Date` says it: the test's own clock, moved
/// by a shift that a scenario may change while the fake runs (seconds; 0 with the
/// usual form leaves the header to the HTTP server, which dates answers by the real
/// clock), written in one of the forms a proxy may send ([`DateForm`]).
#[derive(Clone, Default)]
struct DateShift(Arc<AtomicI64>, Arc<AtomicU8>);

/// How the fake writes its answers' `Date`. The HTTP server it runs on adds a `Date`
/// of its own to an answer that has none, so "none" is written as an empty one:
/// the client reads both alike, as no date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DateForm {
    /// RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`.
    ImfFixdate = 0,
    /// The obsolete RFC 850 form, `Sunday, 06-Nov-94 08:49:37 GMT`.
    Rfc850 = 1,
    /// C's asctime, `Sun Nov  6 08:49:37 1994`.
    Asctime = 2,
    /// An empty `Date`.
    Empty = 3,
    /// A `Date` that names no time.
    Unreadable = 4,
    /// The last second HTTP dates can name, `Fri, 31 Dec 9999 23:59:59 GMT`, whatever
    /// the shift: past where jiff's timestamps end.
    LastOf9999 = 5,
}

impl DateShift {
    fn date_header(&self) -> Option<String> {
        let shift = self.0.load(Ordering::SeqCst);
        let form = self.1.load(Ordering::SeqCst);
        if shift == 0 && form == DateForm::ImfFixdate as u8 {
            return None;
        }
        if form == DateForm::LastOf9999 as u8 {
            return Some("Fri, 31 Dec 9999 23:59:59 GMT".to_owned());
        }
        let now = jiff::Timestamp::from_microsecond(SystemClock.now().as_i64())
            .expect("now in range")
            .checked_add(jiff::SignedDuration::from_secs(shift))
            .expect("a shifted time in range");
        let utc = now.to_zoned(jiff::tz::TimeZone::UTC);
        Some(match form {
            0 => jiff::fmt::rfc2822::DateTimePrinter::new()
                .timestamp_to_rfc9110_string(&now)
                .expect("an HTTP date"),
            1 => utc.strftime("%A, %d-%b-%y %H:%M:%S GMT").to_string(),
            2 => utc.strftime("%a %b %e %H:%M:%S %Y").to_string(),
            3 => String::new(),
            _ => "about now".to_owned(),
        })
    }
}

/// `inner`'s answer, dated by `shift`.
struct Dated<R> {
    inner: R,
    shift: DateShift,
}

impl<R: Respond> Respond for Dated<R> {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let answer = self.inner.respond(req);
        match self.shift.date_header() {
            Some(date) => answer.insert_header("Date", date.as_str()),
            None => answer,
        }
    }
}

pub struct FakeUpstream {
    // Declared before the runtime so it is dropped first.
    server: MockServer,
    rt: tokio::runtime::Runtime,
    /// What it billed, when it bills ([`FakeUpstream::billing`]).
    ledger: Option<Arc<Mutex<Ledger>>>,
    /// How its default answers are dated ([`FakeUpstream::shift_dates`]).
    shift: DateShift,
}

impl FakeUpstream {
    /// A server with nothing mounted: every request gets a 404.
    pub fn empty() -> FakeUpstream {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("building a runtime for the fake upstream");
        // A fresh server (not wiremock's pool), bound to 127.0.0.1 on a free port.
        let server = rt.block_on(MockServer::builder().start());
        FakeUpstream {
            server,
            rt,
            ledger: None,
            shift: DateShift::default(),
        }
    }

    /// The YouTube of the fixtures, for every region: page 1 (with a nextPageToken),
    /// then the last page, and the category names. A request for the category names
    /// without the key is refused as the upstream refuses it ([`unregistered_caller`]);
    /// any other request without the key in its header matches nothing and gets a 404.
    pub fn youtube() -> FakeUpstream {
        FakeUpstream::youtube_after(Duration::ZERO)
    }

    /// The YouTube of the fixtures, answering every request `delay` after receiving it
    /// (the request is recorded at once): slow enough to kill a run at a chosen call.
    pub fn youtube_after(delay: Duration) -> FakeUpstream {
        let fake = FakeUpstream::empty();
        let slow = |answer: ResponseTemplate| Dated {
            inner: if delay.is_zero() {
                answer
            } else {
                answer.set_delay(delay)
            },
            shift: fake.shift.clone(),
        };
        fake.mount(
            trending()
                .and(query_param_is_missing("pageToken"))
                .respond_with(slow(answer_fixture(200, "videos_page1.json"))),
        );
        fake.mount(
            trending()
                .and(query_param("pageToken", PAGE2_TOKEN))
                .respond_with(slow(answer_fixture(200, "videos_last_page.json"))),
        );
        fake.mount(
            Mock::given(method("GET"))
                .and(path("/videoCategories"))
                .and(header(KEY_HEADER, API_KEY))
                .respond_with(slow(answer_fixture(200, "categories.json"))),
        );
        fake.refuse_without_key();
        fake
    }

    /// The fixtures' YouTube (as [`FakeUpstream::youtube`], plus `search.json` for any
    /// search, `videos_by_id.json` for `videos?id=…`, [`video_stats`] for
    /// `/videos:batchGetStats` and an empty answer for channels.list), billing as the
    /// upstream does:
    /// every call with the key goes to its method's bucket if the bucket has room for
    /// it today, and is otherwise answered 403 quotaExceeded and not billed; one for
    /// the category names without the key is refused and billed to none. A
    /// scenario's own answers ([`FakeUpstream::answer_instead`]) stand in for the
    /// upstream entirely: their calls are neither billed nor denied.
    pub fn billing(billing: Billing) -> FakeUpstream {
        FakeUpstream::billing_with(billing, false)
    }

    /// [`FakeUpstream::billing`], with a `videos:batchGetStats` that is not atomic: each
    /// answer leaves out a third of the videos it would show (the first of every three),
    /// while `videos?id=…` still shows them.
    pub fn billing_partial_follow_ups(billing: Billing) -> FakeUpstream {
        FakeUpstream::billing_with(billing, true)
    }

    fn billing_with(billing: Billing, partial: bool) -> FakeUpstream {
        let mut fake = FakeUpstream::empty();
        let ledger = Arc::new(Mutex::new(Ledger::new(billing)));
        fake.mount(
            Mock::given(header(KEY_HEADER, API_KEY)).respond_with(Dated {
                inner: BilledYoutube {
                    ledger: Arc::clone(&ledger),
                    partial,
                },
                shift: fake.shift.clone(),
            }),
        );
        fake.refuse_without_key();
        fake.ledger = Some(ledger);
        fake
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(
            self.ledger
                .as_ref()
                .expect("a fake upstream that bills (FakeUpstream::billing)"),
        )
    }

    /// Units billed per bucket since the upstream's last midnight (every bucket).
    pub fn billed(&self) -> BTreeMap<String, u64> {
        self.ledger().today.clone()
    }

    /// Units billed per bucket since the fake started, across midnights.
    pub fn billed_total(&self) -> BTreeMap<String, u64> {
        self.ledger().total.clone()
    }

    /// Calls answered 403 quotaExceeded per bucket since the fake started.
    pub fn denied(&self) -> BTreeMap<String, u64> {
        self.ledger().denied.clone()
    }

    /// Units each bucket has left today.
    pub fn remaining(&self) -> BTreeMap<String, u64> {
        let ledger = self.ledger();
        ledger
            .billing
            .quotas
            .keys()
            .map(|b| (b.clone(), ledger.room(b)))
            .collect()
    }

    /// Another consumer of the key spends `units` of `bucket` today: as many as the
    /// bucket has left, which it returns (the upstream bills nobody past its quota).
    pub fn spend(&self, bucket: &str, units: u64) -> u64 {
        let mut ledger = self.ledger();
        let spent = units.min(ledger.room(bucket));
        ledger.add(bucket, spent);
        spent
    }

    /// The upstream's day turns: every bucket starts again from its whole quota.
    pub fn midnight(&self) {
        let mut ledger = self.ledger();
        ledger.today = ledger.billing.zeros();
    }

    /// From now on, the default answers ([`FakeUpstream::youtube`],
    /// [`FakeUpstream::billing`]) are dated `secs` away from the real clock (ahead
    /// when positive), as an upstream whose clock disagrees with the host's would
    /// date them; 0 dates them by the real clock again.
    pub fn shift_dates(&self, secs: i64) {
        self.shift.0.store(secs, Ordering::SeqCst);
    }

    /// From now on, the default answers write their `Date` in `form` (still
    /// [`FakeUpstream::shift_dates`] away from the real clock, where it names a time).
    pub fn date_form(&self, form: DateForm) {
        self.shift.1.store(form as u8, Ordering::SeqCst);
    }

    /// `http://127.0.0.1:PORT`, for `--api-base`.
    pub fn uri(&self) -> String {
        self.server.uri()
    }

    pub fn mount(&self, mock: Mock) {
        self.rt.block_on(mock.mount(&self.server));
    }

    /// Answers `requests` with `response` from now on, ahead of the defaults.
    pub fn answer_instead(&self, requests: MockBuilder, response: ResponseTemplate) {
        self.mount(requests.respond_with(response).with_priority(OVERRIDE));
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.rt
            .block_on(self.server.received_requests())
            .expect("request recording is on")
    }

    /// Every call received so far, oldest first: the requests with the key, which
    /// the upstream bills ([`FakeUpstream::without_key`] has the others).
    pub fn calls(&self) -> Vec<Call> {
        self.requests()
            .iter()
            .filter(|r| keyed(r))
            .map(Call::from_request)
            .collect()
    }

    /// Every request received so far that carried no key header, oldest first.
    pub fn without_key(&self) -> Vec<Request> {
        self.requests().into_iter().filter(|r| !keyed(r)).collect()
    }

    /// Answers requests without a key as the upstream does ([`unregistered_caller`]),
    /// dated as the default answers are.
    fn refuse_without_key(&self) {
        self.mount(without_key().respond_with(Dated {
            inner: unregistered_caller(),
            shift: self.shift.clone(),
        }));
    }

    /// How many requests were received so far.
    pub fn received(&self) -> usize {
        self.requests().len()
    }

    /// The number of requests received once no more arrive for a while. A process
    /// killed just after writing a request leaves it in the socket's buffer, and the
    /// server may read it a little later.
    pub fn settled(&self) -> usize {
        const QUIET: Duration = Duration::from_millis(60);
        let mut last = self.received();
        let mut since = Instant::now();
        while since.elapsed() < QUIET {
            std::thread::sleep(Duration::from_millis(10));
            let now = self.received();
            if now != last {
                last = now;
                since = Instant::now();
            }
        }
        last
    }
}

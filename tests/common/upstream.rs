//! A fake YouTube Data API v3 on loopback, answering with the fixtures, and what it
//! received, call by call.
//!
//! The mock server runs on its own thread; the small runtime kept here only drives
//! wiremock's async API (mounting mocks, reading what was received), so the tests
//! themselves stay synchronous and run the binary as a plain child process.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wiremock::matchers::{header, method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockBuilder, MockServer, Request, ResponseTemplate};

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

/// `region`'s category names.
pub fn categories(region: &str) -> MockBuilder {
    Mock::given(method("GET"))
        .and(path("/videoCategories"))
        .and(query_param("regionCode", region))
        .and(header(KEY_HEADER, API_KEY))
}

/// One request the fake received, as the quota sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The quota method: `videos.list`, `videoCategories.list`, `search.list`.
    pub method: String,
    pub region: Option<String>,
    pub page_token: Option<String>,
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
            other => panic!("the fake received a request for {other}, no upstream method"),
        };
        Call {
            method: method.to_owned(),
            region: param("regionCode"),
            page_token: param("pageToken"),
        }
    }

    /// `US p1`, `US p2`, `US categories`: short enough to compare whole sequences.
    pub fn short(&self) -> String {
        let region = self.region.as_deref().unwrap_or("-");
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

pub struct FakeUpstream {
    // Declared before the runtime so it is dropped first.
    server: MockServer,
    rt: tokio::runtime::Runtime,
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
        FakeUpstream { server, rt }
    }

    /// The YouTube of the fixtures, for every region: page 1 (with a nextPageToken),
    /// then the last page, and the category names. Requests without the key in its
    /// header match nothing and get a 404.
    pub fn youtube() -> FakeUpstream {
        FakeUpstream::youtube_after(Duration::ZERO)
    }

    /// The YouTube of the fixtures, answering every request `delay` after receiving it
    /// (the request is recorded at once): slow enough to kill a run at a chosen call.
    pub fn youtube_after(delay: Duration) -> FakeUpstream {
        let fake = FakeUpstream::empty();
        let slow = |answer: ResponseTemplate| {
            if delay.is_zero() {
                answer
            } else {
                answer.set_delay(delay)
            }
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
        fake
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

    /// Every call received so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        self.requests().iter().map(Call::from_request).collect()
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

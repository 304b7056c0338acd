//! The HTTP side: one request per method call, never a retry.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, DATE, HeaderValue, LOCATION};
use url::Url;

use super::error::{CallContext, CallError, upstream_detail};
use super::key::ApiKey;
use super::raw::{self, MalformedResponse};
use super::types::{Category, SearchPage, VideoCounts, VideoPage};
use super::{MAX_RESULTS, SEARCH_LIST, VIDEO_CATEGORIES_LIST, VIDEOS_BATCH_GET_STATS, VIDEOS_LIST};
use crate::clock::Secs;
use crate::mask::mask_url;
use crate::output::text::visible;

/// A full page of 50 videos is about 250 KiB; anything near this is not a YouTube answer.
pub const DEFAULT_BODY_LIMIT: usize = 8 * 1024 * 1024;

/// Error bodies are read only for their reason; a huge one is cut here, not refused,
/// because its HTTP status alone already classifies it.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Connecting should take a fraction of a request; a host that does not answer a SYN in
/// this long is down, and waiting for the whole request timeout only delays the retry.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

const VIDEO_PARTS: &str = "snippet,statistics,contentDetails";
const API_KEY_HEADER: &str = "X-Goog-Api-Key";
/// The region named by [`Client::status_without_key`]'s request: any would do, since
/// the upstream refuses the request before reading it.
const KEYLESS_REGION: &str = "US";

/// What one of a [`Client`]'s calls brought back: its result, and the second the
/// answer's `Date` header named, the upstream's own clock for the limiter's to be
/// compared with. A refusal is dated as a success is; `date` is `None` when no answer
/// came (a refused connection, a timeout before the headers), when no request was
/// made, or when the answer's `Date` was missing or unreadable.
#[derive(Debug)]
pub struct Reply<T> {
    pub result: Result<T, CallError>,
    pub date: Option<Secs>,
}

impl<T> Reply<T> {
    /// A result with no answer to date: no request was made, or none was answered.
    fn undated(result: Result<T, CallError>) -> Reply<T> {
        Reply { result, date: None }
    }

    /// The same answer, its value turned by `f`, its date kept.
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Reply<U> {
        Reply {
            result: self.result.map(f),
            date: self.date,
        }
    }
}

impl Reply<(u16, Vec<u8>)> {
    /// The same answer, its body read by `parse`; a body it refuses makes the answer
    /// to `call` malformed.
    fn parsed<U>(
        self,
        call: &CallContext,
        parse: impl FnOnce(&[u8]) -> Result<U, MalformedResponse>,
    ) -> Reply<U> {
        let result = match self.result {
            Ok((status, body)) => parse(&body).map_err(|p| malformed(call.clone(), status, p)),
            Err(e) => Err(e),
        };
        Reply {
            result,
            date: self.date,
        }
    }
}

/// An HTTP date in seconds since the Unix epoch, in any of the three forms RFC 9110
/// (5.6.7) says a recipient must read: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and C's asctime
/// (`Sun Nov  6 08:49:37 1994`). A proxy may rewrite the header into either old
/// form; read only as IMF-fixdate, its answers could confirm no clock. `None` for
/// anything else, an empty value included.
pub fn parse_http_date(text: &str) -> Option<Secs> {
    let at = httpdate::parse_http_date(text.trim()).ok()?;
    let secs = at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok().map(Secs::new)
}

/// Why a [`Client`] could not be built; all of these are configuration mistakes.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("API base URL {base:?} is not usable: {problem}")]
    BaseUrl { base: String, problem: String },
    #[error("the API key is empty; check YOUTUBE_API_KEY / --api-key-file")]
    EmptyKey,
    #[error(
        "the API key contains characters an HTTP header cannot carry (control characters or \
         non-ASCII); check YOUTUBE_API_KEY / --api-key-file"
    )]
    KeyNotHeaderSafe,
    #[error("building the HTTP client: {0}")]
    Http(reqwest::Error),
}

/// Whether a `categoryId` is what the upstream documents: a number in a string.
fn is_category_id(text: &str) -> bool {
    !text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit())
}

/// How `search.list` orders its results; the names are the upstream's, so configuration
/// files can use them as documented by YouTube.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SearchOrder {
    Date,
    Rating,
    #[default]
    Relevance,
    Title,
    VideoCount,
    ViewCount,
}

impl SearchOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchOrder::Date => "date",
            SearchOrder::Rating => "rating",
            SearchOrder::Relevance => "relevance",
            SearchOrder::Title => "title",
            SearchOrder::VideoCount => "videoCount",
            SearchOrder::ViewCount => "viewCount",
        }
    }
}

impl fmt::Display for SearchOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown search order {0:?}; expected one of date, rating, relevance, title, videoCount, viewCount"
)]
pub struct UnknownSearchOrder(pub String);

impl FromStr for SearchOrder {
    type Err = UnknownSearchOrder;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "date" => SearchOrder::Date,
            "rating" => SearchOrder::Rating,
            "relevance" => SearchOrder::Relevance,
            "title" => SearchOrder::Title,
            "videoCount" => SearchOrder::VideoCount,
            "viewCount" => SearchOrder::ViewCount,
            other => return Err(UnknownSearchOrder(other.to_owned())),
        })
    }
}

/// One `search.list` page request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchRequest<'a> {
    pub region: &'a str,
    /// Sent even when empty: an empty `q` searches everything in the region.
    pub q: &'a str,
    pub order: SearchOrder,
    /// Sent to the second (the upstream takes RFC 3339 with a `Z`); `None` omits it.
    pub published_after: Option<jiff::Timestamp>,
}

/// A YouTube Data API v3 client.
///
/// Every method makes exactly one HTTP request and never retries: the runner charges
/// the quota budget before each attempt and owns the retry loop, deciding from
/// [`CallError::class`]. Redirects are not followed, so the key header is never sent to
/// a host other than `base`.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    key: ApiKey,
    key_header: HeaderValue,
    timeout: Duration,
    connect_timeout: Duration,
    body_limit: usize,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("key", &self.key)
            .field("timeout", &self.timeout)
            .field("body_limit", &self.body_limit)
            .finish()
    }
}

impl Client {
    /// `base` like `https://www.googleapis.com/youtube/v3`, or a loopback address for a
    /// fake upstream in tests. `timeout` bounds each whole request, body included.
    pub fn new(base: &str, key: ApiKey, timeout: Duration) -> Result<Client, ClientError> {
        let parsed = parse_api_base(base).map_err(|e| match e {
            // The key itself may have been pasted into the base (a path segment).
            ClientError::BaseUrl { base, problem } => ClientError::BaseUrl {
                base: key.scrub(&base),
                problem,
            },
            other => other,
        })?;
        if key.is_empty() {
            return Err(ClientError::EmptyKey);
        }
        let key_header = key.header_value().ok_or(ClientError::KeyNotHeaderSafe)?;
        let connect_timeout = timeout.min(MAX_CONNECT_TIMEOUT);

        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(connect_timeout)
            .gzip(true)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!(
                env!("CARGO_PKG_NAME"),
                "/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .map_err(ClientError::Http)?;
        Ok(Client {
            http,
            base: parsed,
            key,
            key_header,
            timeout,
            connect_timeout,
            body_limit: DEFAULT_BODY_LIMIT,
        })
    }

    /// Upstream text (anything an answer carried, error messages that quote it) made
    /// fit for a log line or `--json`: the key removed wherever a proxy or the upstream
    /// reflected it, and terminal controls made visible (docs/upstream.md).
    pub fn scrub(&self, text: &str) -> String {
        visible(&self.key.scrub(text)).into_owned()
    }

    /// The page as the store may keep it: the key removed from every text field of its
    /// records before anything stores or prints them (an upstream that reflects the
    /// request's headers into a title must not put the key in the database), and a
    /// `categoryId` that is not a number dropped with a warning naming the region and
    /// the video (docs/upstream.md: an id is never free text).
    fn scrub_page(&self, call: &CallContext, mut page: VideoPage) -> VideoPage {
        let key = &self.key;
        for v in &mut page.items {
            if let Some(category) = &v.category_id
                && !is_category_id(category)
            {
                tracing::warn!(
                    region = call.region_code().unwrap_or("-"),
                    video = %v.id,
                    "{call}: video {} has categoryId \"{}\", which is not a number; stored without a category",
                    visible(&v.id),
                    visible(&key.scrub(category))
                );
                v.category_id = None;
            }
            for field in [
                &mut v.title,
                &mut v.description,
                &mut v.channel_title,
                &mut v.channel_id,
            ] {
                *field = key.scrub(field);
            }
            for tag in v.tags.iter_mut().flatten() {
                *tag = key.scrub(tag);
            }
            if let Some(url) = &mut v.thumbnail_url {
                *url = key.scrub(url);
            }
        }
        page
    }

    /// Overrides [`DEFAULT_BODY_LIMIT`], the most bytes a successful answer may have
    /// (after decompression).
    #[cfg(test)]
    pub fn with_body_limit(mut self, bytes: usize) -> Client {
        self.body_limit = bytes;
        self
    }

    /// One page of the region's `mostPopular` chart; the items are in rank order.
    #[cfg(test)]
    pub async fn trending_page(
        &self,
        region: &str,
        hl: Option<&str>,
        page_token: Option<&str>,
    ) -> Reply<VideoPage> {
        self.chart_page(region, None, hl, page_token).await
    }

    /// One page of one of the region's `mostPopular` charts: the overall one
    /// (`category` none) or a category's (`videoCategoryId`). Items in rank order.
    pub async fn chart_page(
        &self,
        region: &str,
        category: Option<u32>,
        hl: Option<&str>,
        page_token: Option<&str>,
    ) -> Reply<VideoPage> {
        let call = CallContext::new(VIDEOS_LIST)
            .region(region)
            .page_token(page_token);
        let mut url = self.endpoint("videos");
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("part", VIDEO_PARTS)
                .append_pair("chart", "mostPopular")
                .append_pair("regionCode", region)
                .append_pair("maxResults", "50");
            if let Some(category) = category {
                query.append_pair("videoCategoryId", &category.to_string());
            }
            if let Some(token) = page_token {
                query.append_pair("pageToken", token);
            }
            if let Some(hl) = hl {
                query.append_pair("hl", hl);
            }
        }
        self.fetch(&call, url)
            .await
            .parsed(&call, raw::video_page)
            .map(|page| self.scrub_page(&call, page))
    }

    /// One page of search results: ids only, in rank order; their details come from
    /// [`Client::videos_by_id`].
    pub async fn search_page(&self, req: &SearchRequest<'_>) -> Reply<SearchPage> {
        let call = CallContext::new(SEARCH_LIST)
            .region(req.region)
            .query(req.q);
        let mut url = self.endpoint("search");
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("part", "snippet")
                .append_pair("type", "video")
                .append_pair("regionCode", req.region)
                .append_pair("maxResults", "50")
                .append_pair("order", req.order.as_str());
            if let Some(after) = req.published_after {
                query.append_pair("publishedAfter", &rfc3339_seconds(after));
            }
            query.append_pair("q", req.q);
        }
        self.fetch(&call, url).await.parsed(&call, raw::search_page)
    }

    /// Details of up to [`MAX_RESULTS`] videos, in the upstream's order (which need not
    /// be the order of `ids`; videos that no longer exist are simply missing).
    ///
    /// No ids means no request and an empty page. More than 50, or an id that could not
    /// be a video id (it would corrupt the comma-separated list), is a caller bug and an
    /// error before any request.
    pub async fn videos_by_id(&self, ids: &[String], hl: Option<&str>) -> Reply<VideoPage> {
        let call = CallContext::new(VIDEOS_LIST).id_count(ids.len());
        if let Some(problem) = id_problem(ids) {
            return Reply::undated(Err(CallError::InvalidArgument { call, problem }));
        }
        if ids.is_empty() {
            return Reply::undated(Ok(VideoPage {
                items: Vec::new(),
                next_page_token: None,
            }));
        }
        let mut url = self.endpoint("videos");
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("id", &ids.join(","))
                .append_pair("part", VIDEO_PARTS);
            if let Some(hl) = hl {
                query.append_pair("hl", hl);
            }
        }
        self.fetch(&call, url)
            .await
            .parsed(&call, raw::video_page)
            .map(|page| self.scrub_page(&call, page))
    }

    /// The counts of up to [`MAX_RESULTS`] videos (`videos.batchGetStats`), in the
    /// upstream's order; a video it no longer shows is missing. Ids are checked as in
    /// [`Client::videos_by_id`]; no ids means no request.
    pub async fn video_counts(&self, ids: &[String]) -> Reply<Vec<VideoCounts>> {
        let call = CallContext::new(VIDEOS_BATCH_GET_STATS).id_count(ids.len());
        if let Some(problem) = id_problem(ids) {
            return Reply::undated(Err(CallError::InvalidArgument { call, problem }));
        }
        if ids.is_empty() {
            return Reply::undated(Ok(Vec::new()));
        }
        let mut url = self.endpoint("videos:batchGetStats");
        url.query_pairs_mut()
            .append_pair("part", "statistics")
            .append_pair("id", &ids.join(","));
        self.fetch(&call, url)
            .await
            .parsed(&call, raw::video_counts)
    }

    /// The region's video categories, localized by `hl` when given.
    pub async fn categories(&self, region: &str, hl: Option<&str>) -> Reply<Vec<Category>> {
        let call = CallContext::new(VIDEO_CATEGORIES_LIST).region(region);
        let mut url = self.endpoint("videoCategories");
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("part", "snippet")
                .append_pair("regionCode", region);
            if let Some(hl) = hl {
                query.append_pair("hl", hl);
            }
        }
        self.fetch(&call, url)
            .await
            .parsed(&call, raw::categories)
            .map(|categories| {
                categories
                    .into_iter()
                    .map(|c| Category {
                        title: self.key.scrub(&c.title),
                        ..c
                    })
                    .collect()
            })
    }

    /// One request that carries no key, for its answer's `Date` alone: the upstream's
    /// clock read while the budget allows no call (the README's "Clocks"). The upstream
    /// bills a call to the project of the key it carries; a request without one is
    /// refused (HTTP 403, "unregistered callers") before any project is known, so it
    /// bills none. It is `videoCategories.list` for one region, the cheapest answer
    /// there is, with neither the key header nor a `key` parameter. Whatever answered,
    /// its HTTP status is returned; only getting no answer is an error.
    pub async fn status_without_key(&self) -> Reply<u16> {
        let call = CallContext::new(VIDEO_CATEGORIES_LIST).region(KEYLESS_REGION);
        let mut url = self.endpoint("videoCategories");
        url.query_pairs_mut()
            .append_pair("part", "snippet")
            .append_pair("regionCode", KEYLESS_REGION);
        let sent = self
            .http
            .get(url)
            .header(ACCEPT, "application/json")
            .send()
            .await;
        match sent {
            Ok(response) => Reply {
                result: Ok(response.status().as_u16()),
                date: date_of(&response),
            },
            Err(cause) => Reply::undated(Err(self.transport(&call, cause))),
        }
    }

    fn endpoint(&self, resource: &str) -> Url {
        let mut url = self.base.clone();
        // Cannot fail: `new` refused bases that cannot have paths appended.
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(resource);
        }
        url
    }

    /// Makes the one request and returns a 2xx status with its complete body; every
    /// other outcome becomes a classified [`CallError`]. Any answer is dated, a
    /// refusal or one whose body did not arrive whole too.
    async fn fetch(&self, call: &CallContext, url: Url) -> Reply<(u16, Vec<u8>)> {
        let started = Instant::now();
        let sent = self
            .http
            .get(url)
            .header(API_KEY_HEADER, self.key_header.clone())
            .header(ACCEPT, "application/json")
            .send()
            .await;
        match sent {
            Ok(response) => Reply {
                date: date_of(&response),
                result: self.read(call, response, started).await,
            },
            Err(cause) => Reply::undated(Err(self.transport(call, cause))),
        }
    }

    fn transport(&self, call: &CallContext, cause: reqwest::Error) -> CallError {
        CallError::from_transport(call.clone(), cause, (self.timeout, self.connect_timeout))
    }

    /// Reads the answer to the request [`Client::fetch`] sent, `started` then.
    async fn read(
        &self,
        call: &CallContext,
        mut response: reqwest::Response,
        started: Instant,
    ) -> Result<(u16, Vec<u8>), CallError> {
        let status = response.status().as_u16();

        if response.status().is_redirection() {
            // Not followed (the key header would go along); where it pointed is the
            // clue to a wrong --api-base, shown masked like any URL we print.
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(|l| {
                    let target = response.url().join(l).map_or(l.to_owned(), String::from);
                    self.scrub(&mask_url(&target))
                });
            return Err(CallError::Redirected {
                call: call.clone(),
                status,
                location,
            });
        }
        if !response.status().is_success() {
            // The status decides the class even when the body cannot be read.
            let body = read_prefix(&mut response, ERROR_BODY_LIMIT)
                .await
                .unwrap_or_default();
            let upstream = upstream_detail(&body, |text| self.scrub(text));
            tracing::debug!(
                method = call.method(),
                region = call.region_code(),
                status,
                reason = upstream.reason(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "upstream refused the call"
            );
            return Err(CallError::from_status(call.clone(), status, upstream));
        }

        let body = read_capped(&mut response, self.body_limit)
            .await
            .map_err(|cause| self.transport(call, cause))?
            .ok_or_else(|| CallError::BodyTooLarge {
                call: call.clone(),
                status,
                limit: self.body_limit,
            })?;
        tracing::debug!(
            method = call.method(),
            region = call.region_code(),
            status,
            bytes = body.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "upstream answered"
        );
        Ok((status, body))
    }
}

/// The second `response`'s `Date` names, when it names one.
fn date_of(response: &reqwest::Response) -> Option<Secs> {
    response
        .headers()
        .get(DATE)
        .and_then(|d| d.to_str().ok())
        .and_then(parse_http_date)
}

/// Checks an `--api-base` without building a client (so without a key): an http(s)
/// URL that paths can be appended to, with no query, fragment or credentials. The
/// error shows the base masked, since a refused one may carry a key or a password.
pub fn parse_api_base(base: &str) -> Result<Url, ClientError> {
    let base_error = |problem: &str| ClientError::BaseUrl {
        base: mask_url(base),
        problem: problem.to_owned(),
    };
    let parsed = Url::parse(base).map_err(|e| match e {
        // A host and path without a scheme, e.g. www.googleapis.com/youtube/v3.
        url::ParseError::RelativeUrlWithoutBase => base_error(
            "it has no scheme; write it in full, starting with https:// (e.g. https://www.googleapis.com/youtube/v3)",
        ),
        e => base_error(&e.to_string()),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(base_error("the scheme must be http or https"));
    }
    if parsed.cannot_be_a_base() {
        return Err(base_error("it cannot have paths appended"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(base_error("it must not have a query or fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // URLs end up in logs; credentials belong elsewhere.
        return Err(base_error("it must not carry a user name or password"));
    }
    Ok(parsed)
}

fn malformed(call: CallContext, status: u16, problem: MalformedResponse) -> CallError {
    CallError::Malformed {
        call,
        status,
        problem,
    }
}

/// The whole body, or `None` as soon as it exceeds `limit`. Content-Length only
/// short-cuts the refusal; the count of bytes actually received is what enforces it
/// (chunked bodies have no length, and a gzip body's length is the compressed one).
async fn read_capped(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len().saturating_add(chunk.len()) > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// At most the first `limit` bytes of the body; the rest is never read.
async fn read_prefix(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= limit {
            break;
        }
    }
    Ok(body)
}

fn rfc3339_seconds(at: jiff::Timestamp) -> String {
    match jiff::Timestamp::from_second(at.as_second()) {
        Ok(truncated) => truncated.to_string(),
        Err(_) => at.to_string(),
    }
}

/// Why `ids` cannot go in one request: more than [`MAX_RESULTS`], or one that could
/// not be a video id (it would corrupt the comma-separated list). A caller bug, refused
/// before any request.
fn id_problem(ids: &[String]) -> Option<String> {
    if ids.len() > MAX_RESULTS {
        return Some(format!(
            "{} ids in one call, but the upstream takes at most {MAX_RESULTS}",
            ids.len()
        ));
    }
    let bad = ids.iter().find(|id| !raw::is_plausible_video_id(id))?;
    let shown: String = bad.chars().take(32).collect();
    Some(format!("{shown:?} is not a video id"))
}

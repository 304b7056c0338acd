//! What went wrong with one upstream call, classified for the runner's retry loop.
//!
//! The client never retries: the runner charges the budget before every attempt, so only
//! it may decide to make another one. It decides from [`CallError::class`], which follows
//! the table in docs/upstream.md.

use std::fmt;
use std::time::Duration;

use super::raw::MalformedResponse;

/// What the runner does about a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The upstream says the key's quota is spent: stop the run (exit 75) and block the
    /// budget until the upstream's reset.
    QuotaExhausted,
    /// Throttling, a server hiccup, a timeout or a dropped connection: another attempt
    /// (charged like the first) after a backoff may well succeed.
    Transient,
    /// The key or its project is refused, or trendsync built a request the upstream
    /// rejects: every further call would fail the same way, so the whole run fails.
    Fatal,
    /// This region's answer is unusable (chart not found, malformed, oversized); other
    /// regions may still work.
    RegionFailed,
}

/// What was being attempted when a call failed; every [`CallError`] names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    method: &'static str,
    region: Option<String>,
    page_token: Option<String>,
    id_count: Option<usize>,
    query: Option<String>,
}

impl CallContext {
    pub(crate) fn new(method: &'static str) -> Self {
        CallContext {
            method,
            region: None,
            page_token: None,
            id_count: None,
            query: None,
        }
    }

    pub(crate) fn region(mut self, region: &str) -> Self {
        self.region = Some(region.to_owned());
        self
    }

    pub(crate) fn page_token(mut self, token: Option<&str>) -> Self {
        self.page_token = token.map(str::to_owned);
        self
    }

    pub(crate) fn id_count(mut self, count: usize) -> Self {
        self.id_count = Some(count);
        self
    }

    pub(crate) fn query(mut self, q: &str) -> Self {
        self.query = Some(q.to_owned());
        self
    }

    /// The quota method name, e.g. `videos.list`.
    pub fn method(&self) -> &'static str {
        self.method
    }

    pub fn region_code(&self) -> Option<&str> {
        self.region.as_deref()
    }
}

impl fmt::Display for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.method)?;
        if let Some(region) = &self.region {
            write!(f, " for region {region}")?;
        }
        match self.id_count {
            Some(1) => f.write_str(" for 1 video id")?,
            Some(count) => write!(f, " for {count} video ids")?,
            None => {}
        }
        if let Some(q) = &self.query {
            write!(f, ", q {q:?}")?;
        }
        if let Some(token) = &self.page_token {
            write!(f, ", page token {token:?}")?;
        }
        Ok(())
    }
}

/// What the upstream said about an error, taken from Google's error body
/// (`{"error":{"code":..,"message":..,"errors":[{"reason":..}],"details":[..]}}`), or an
/// excerpt of whatever else it sent (an HTML page from a load balancer, say).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamDetail {
    /// `errors[0].reason`, e.g. `quotaExceeded`.
    pub reason: Option<String>,
    /// `errors[0].domain`, e.g. `youtube.quota`.
    pub domain: Option<String>,
    /// `error.message`, HTML tags removed (the quota message links to the docs).
    pub message: Option<String>,
    /// `error.status`, e.g. `PERMISSION_DENIED`.
    pub status: Option<String>,
    /// The `google.rpc.ErrorInfo` reason in `details`, e.g. `API_KEY_INVALID`; newer
    /// error bodies may carry only this.
    pub info_reason: Option<String>,
    /// The start of a body that is not a Google error, for a person to recognise.
    pub body_excerpt: Option<String>,
}

impl UpstreamDetail {
    /// The most specific reason the upstream gave, if any.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref().or(self.info_reason.as_deref())
    }
}

impl fmt::Display for UpstreamDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.reason, &self.info_reason) {
            (Some(reason), Some(info)) => write!(f, "reason {reason} ({info})")?,
            (Some(reason), None) => write!(f, "reason {reason}")?,
            (None, Some(info)) => write!(f, "reason {info}")?,
            (None, None) => f.write_str("no reason given")?,
        }
        if let Some(message) = &self.message {
            write!(f, ": {message:?}")?;
        } else if let Some(excerpt) = &self.body_excerpt {
            write!(f, "; body starts {excerpt:?}")?;
        } else {
            f.write_str("; empty body")?;
        }
        Ok(())
    }
}

/// One failed call. Display says what was attempted (method, region, page), what the
/// upstream answered (HTTP status, reason, message) and, where a person must act, what
/// to do. The API key appears in none of them.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(
        "{call}: the upstream says the API key's quota is spent (HTTP {status}, {upstream}); \
         no further calls until its daily reset at midnight America/Los_Angeles"
    )]
    QuotaExhausted {
        call: CallContext,
        status: u16,
        upstream: UpstreamDetail,
    },

    #[error(
        "{call}: the upstream is throttling or briefly failing (HTTP {status}, {upstream}); \
         another attempt after a backoff may succeed"
    )]
    Throttled {
        call: CallContext,
        status: u16,
        upstream: UpstreamDetail,
    },

    #[error("{call}: the upstream refused the request (HTTP {status}, {upstream}); {action}")]
    Rejected {
        call: CallContext,
        status: u16,
        upstream: UpstreamDetail,
        action: &'static str,
    },

    #[error("{call}: the upstream answered HTTP {status} ({upstream}); giving up on this call")]
    Refused {
        call: CallContext,
        status: u16,
        upstream: UpstreamDetail,
    },

    #[error(
        "{call}: {} within {}; another attempt may succeed",
        if *connecting { "could not connect" } else { "no complete answer" },
        crate::output::human::duration(*timeout)
    )]
    Timeout {
        call: CallContext,
        /// The limit that ran out: the connect timeout when `connecting`, else the
        /// whole-request timeout.
        timeout: Duration,
        connecting: bool,
    },

    /// Said with reqwest's whole chain: its own words stop at "error sending request",
    /// and the useful part ("Connection refused") is further down.
    #[error(
        "{call}: the connection failed ({}); another attempt may succeed",
        crate::error::chain(cause)
    )]
    Connection {
        call: CallContext,
        cause: reqwest::Error,
    },

    #[error("{call}: the HTTP {status} body is larger than the {limit}-byte limit; refused")]
    BodyTooLarge {
        call: CallContext,
        status: u16,
        limit: usize,
    },

    #[error("{call}: malformed HTTP {status} response: {problem}")]
    Malformed {
        call: CallContext,
        status: u16,
        problem: MalformedResponse,
    },

    #[error(
        "{call}: the upstream answered HTTP {status}, a redirect to {}; redirects are not followed, so that the key goes nowhere else: check --api-base",
        location.as_deref().unwrap_or("nowhere (no Location header)")
    )]
    Redirected {
        call: CallContext,
        status: u16,
        location: Option<String>,
    },

    #[error("{call}: {problem}; this is a bug in the caller, no request was made")]
    InvalidArgument { call: CallContext, problem: String },
}

impl CallError {
    /// What the runner should do next.
    pub fn class(&self) -> ErrorClass {
        match self {
            CallError::QuotaExhausted { .. } => ErrorClass::QuotaExhausted,
            CallError::Throttled { .. }
            | CallError::Timeout { .. }
            | CallError::Connection { .. } => ErrorClass::Transient,
            CallError::Rejected { .. } | CallError::InvalidArgument { .. } => ErrorClass::Fatal,
            CallError::Refused { .. }
            | CallError::Redirected { .. }
            | CallError::BodyTooLarge { .. }
            | CallError::Malformed { .. } => ErrorClass::RegionFailed,
        }
    }

    /// The upstream's reason (`quotaExceeded`, `API_KEY_INVALID`, ...), when it gave one.
    pub fn reason(&self) -> Option<&str> {
        match self {
            CallError::QuotaExhausted { upstream, .. }
            | CallError::Throttled { upstream, .. }
            | CallError::Rejected { upstream, .. }
            | CallError::Refused { upstream, .. } => upstream.reason(),
            _ => None,
        }
    }

    /// The upstream has no such chart (`videoChartNotFound`): for a category's chart,
    /// that chart alone fails (docs/upstream.md).
    pub fn is_chart_not_found(&self) -> bool {
        self.class() == ErrorClass::RegionFailed && self.reason() == Some("videoChartNotFound")
    }

    /// The HTTP status, when the upstream answered at all.
    pub fn status(&self) -> Option<u16> {
        match self {
            CallError::QuotaExhausted { status, .. }
            | CallError::Throttled { status, .. }
            | CallError::Rejected { status, .. }
            | CallError::Refused { status, .. }
            | CallError::Redirected { status, .. }
            | CallError::BodyTooLarge { status, .. }
            | CallError::Malformed { status, .. } => Some(*status),
            CallError::Timeout { .. }
            | CallError::Connection { .. }
            | CallError::InvalidArgument { .. } => None,
        }
    }

    /// What was being attempted.
    #[cfg(test)]
    pub fn call(&self) -> &CallContext {
        match self {
            CallError::QuotaExhausted { call, .. }
            | CallError::Throttled { call, .. }
            | CallError::Rejected { call, .. }
            | CallError::Refused { call, .. }
            | CallError::Redirected { call, .. }
            | CallError::Timeout { call, .. }
            | CallError::Connection { call, .. }
            | CallError::BodyTooLarge { call, .. }
            | CallError::Malformed { call, .. }
            | CallError::InvalidArgument { call, .. } => call,
        }
    }

    /// Builds the error for a non-2xx answer, following docs/upstream.md.
    pub(crate) fn from_status(call: CallContext, status: u16, upstream: UpstreamDetail) -> Self {
        match verdict(status, &upstream) {
            Verdict::Quota => CallError::QuotaExhausted {
                call,
                status,
                upstream,
            },
            Verdict::Transient => CallError::Throttled {
                call,
                status,
                upstream,
            },
            Verdict::Fatal(action) => CallError::Rejected {
                call,
                status,
                upstream,
                action,
            },
            Verdict::RegionFailed => CallError::Refused {
                call,
                status,
                upstream,
            },
        }
    }

    /// `timeouts` is (request, connect), so the message names the one that ran out.
    pub(crate) fn from_transport(
        call: CallContext,
        cause: reqwest::Error,
        timeouts: (Duration, Duration),
    ) -> Self {
        if cause.is_timeout() {
            let connecting = cause.is_connect();
            CallError::Timeout {
                call,
                timeout: if connecting { timeouts.1 } else { timeouts.0 },
                connecting,
            }
        } else {
            // Connection refused, reset or closed early, or a body cut off mid-way: the
            // upstream never gave a complete answer, so nothing says a retry would fail.
            CallError::Connection {
                call,
                cause: cause.without_url(),
            }
        }
    }
}

const CHECK_KEY: &str =
    "check the key in YOUTUBE_API_KEY / --api-key-file (a valid, unexpired YouTube Data API key)";
const ENABLE_API: &str = "enable the YouTube Data API v3 for this key's project in the Google \
     Cloud console (APIs & Services > Library), then wait a few minutes";
const KEY_RESTRICTIONS: &str = "check the key's restrictions in the Google Cloud console: its API \
     restrictions must allow the YouTube Data API v3";
const APPLICATION_RESTRICTIONS: &str = "check the key's application restrictions in the Google \
     Cloud console: they must allow requests from this host (IP address or referrer)";
const REQUEST_BUG: &str = "the upstream rejects the request itself, so every call would fail the \
     same way; this is likely a trendsync bug, please report it with this message";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Quota,
    Transient,
    Fatal(&'static str),
    RegionFailed,
}

/// The classification table of docs/upstream.md, as a pure function of the answer.
fn verdict(status: u16, upstream: &UpstreamDetail) -> Verdict {
    let reason = upstream.reason.as_deref();
    let info = upstream.info_reason.as_deref();
    let client_error = (400..500).contains(&status);

    if client_error && matches!(reason, Some("quotaExceeded" | "dailyLimitExceeded")) {
        return Verdict::Quota;
    }
    if status == 429
        || matches!(status, 500 | 502 | 503 | 504)
        || (status == 403 && matches!(reason, Some("rateLimitExceeded" | "userRateLimitExceeded")))
    {
        return Verdict::Transient;
    }
    // Checked before the generic 400 rule: a missing chart is this region's problem.
    if reason == Some("videoChartNotFound") {
        return Verdict::RegionFailed;
    }
    let key_problem = matches!(reason, Some("keyInvalid" | "keyExpired"))
        || matches!(info, Some("API_KEY_INVALID" | "API_KEY_EXPIRED"))
        || upstream
            .message
            .as_deref()
            .is_some_and(|message| message.starts_with("API key"));
    match status {
        400 if key_problem => Verdict::Fatal(CHECK_KEY),
        400 if reason == Some("badRequest") => Verdict::Fatal(REQUEST_BUG),
        403 if key_problem => Verdict::Fatal(CHECK_KEY),
        403 if reason == Some("accessNotConfigured") || info == Some("SERVICE_DISABLED") => {
            Verdict::Fatal(ENABLE_API)
        }
        403 if reason == Some("ipRefererBlocked")
            || matches!(
                info,
                Some("API_KEY_IP_ADDRESS_BLOCKED" | "API_KEY_HTTP_REFERRER_BLOCKED")
            ) =>
        {
            Verdict::Fatal(APPLICATION_RESTRICTIONS)
        }
        403 if reason == Some("forbidden") || info == Some("API_KEY_SERVICE_BLOCKED") => {
            Verdict::Fatal(KEY_RESTRICTIONS)
        }
        _ => Verdict::RegionFailed,
    }
}

/// Reads a Google error body, or keeps an excerpt of whatever else arrived.
///
/// `scrub` removes the API key from any text kept, in case something between us and
/// Google echoes request headers into its error page.
pub(crate) fn upstream_detail(body: &[u8], scrub: impl Fn(&str) -> String) -> UpstreamDetail {
    const EXCERPT_CHARS: usize = 200;
    let text = |value: &serde_json::Value| value.as_str().map(|s| scrub(&tidy(s)));

    let parsed = super::raw::check_depth(body, super::raw::MAX_JSON_DEPTH)
        .ok()
        .and_then(|()| serde_json::from_slice::<serde_json::Value>(body).ok());
    if let Some(error) = parsed
        .as_ref()
        .and_then(|json| json.get("error"))
        .filter(|error| error.is_object())
    {
        let first = error.get("errors").and_then(|errors| errors.get(0));
        let info_reason = error
            .get("details")
            .and_then(|details| details.as_array())
            .and_then(|details| {
                details.iter().find(|detail| {
                    detail.get("@type").and_then(|t| t.as_str())
                        == Some("type.googleapis.com/google.rpc.ErrorInfo")
                })
            })
            .and_then(|detail| detail.get("reason"))
            .and_then(text);
        return UpstreamDetail {
            reason: first.and_then(|e| e.get("reason")).and_then(text),
            domain: first.and_then(|e| e.get("domain")).and_then(text),
            message: error
                .get("message")
                .and_then(text)
                .or_else(|| first.and_then(|e| e.get("message")).and_then(text)),
            status: error.get("status").and_then(text),
            info_reason,
            body_excerpt: None,
        };
    }

    let lossy = String::from_utf8_lossy(body);
    let tidied = tidy(&lossy);
    let excerpt: String = tidied.chars().take(EXCERPT_CHARS).collect();
    UpstreamDetail {
        body_excerpt: (!excerpt.is_empty()).then(|| scrub(&excerpt)),
        ..UpstreamDetail::default()
    }
}

/// Strips HTML tags and folds whitespace and control characters, so upstream text fits
/// on one log line (the quota message embeds a link; a 502 page is all markup).
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    let mut pending_space = false;
    for ch in text.chars() {
        match ch {
            '<' => in_tag = true,
            // Tags add no space: the quota message wraps one word in a link.
            '>' if in_tag => in_tag = false,
            _ if in_tag => {}
            c if c.is_whitespace() || c.is_control() => pending_space = true,
            c => {
                if pending_space && !out.is_empty() && !out.ends_with(' ') {
                    out.push(' ');
                }
                pending_space = false;
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;

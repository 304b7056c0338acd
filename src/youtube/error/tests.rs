//! Unit tests of `youtube/error.rs`.

use super::*;

fn detail(reason: Option<&str>, info: Option<&str>, message: Option<&str>) -> UpstreamDetail {
    UpstreamDetail {
        reason: reason.map(str::to_owned),
        info_reason: info.map(str::to_owned),
        message: message.map(str::to_owned),
        ..UpstreamDetail::default()
    }
}

#[test]
fn classification_table() {
    use Verdict::*;
    // (HTTP status, errors[0].reason, ErrorInfo reason, message, verdict)
    type Case = (
        u16,
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
        Verdict,
    );
    let cases: &[Case] = &[
        (403, Some("quotaExceeded"), None, None, Quota),
        (403, Some("dailyLimitExceeded"), None, None, Quota),
        (429, None, None, None, Transient),
        (429, Some("rateLimitExceeded"), None, None, Transient),
        (403, Some("rateLimitExceeded"), None, None, Transient),
        (403, Some("userRateLimitExceeded"), None, None, Transient),
        (500, Some("backendError"), None, None, Transient),
        (502, None, None, None, Transient),
        (503, None, None, None, Transient),
        (504, None, None, None, Transient),
        (
            400,
            Some("badRequest"),
            Some("API_KEY_INVALID"),
            Some("API key not valid. Please pass a valid API key."),
            Fatal(CHECK_KEY),
        ),
        (400, Some("keyInvalid"), None, None, Fatal(CHECK_KEY)),
        (
            400,
            Some("badRequest"),
            None,
            Some("Bad Request"),
            Fatal(REQUEST_BUG),
        ),
        (400, None, Some("API_KEY_EXPIRED"), None, Fatal(CHECK_KEY)),
        (
            403,
            Some("accessNotConfigured"),
            None,
            None,
            Fatal(ENABLE_API),
        ),
        (403, None, Some("SERVICE_DISABLED"), None, Fatal(ENABLE_API)),
        (403, Some("forbidden"), None, None, Fatal(KEY_RESTRICTIONS)),
        (
            403,
            Some("forbidden"),
            Some("API_KEY_SERVICE_BLOCKED"),
            None,
            Fatal(KEY_RESTRICTIONS),
        ),
        (
            403,
            Some("ipRefererBlocked"),
            None,
            None,
            Fatal(APPLICATION_RESTRICTIONS),
        ),
        (404, Some("videoChartNotFound"), None, None, RegionFailed),
        (400, Some("videoChartNotFound"), None, None, RegionFailed),
        (400, Some("invalidRegionCode"), None, None, RegionFailed),
        (404, None, None, None, RegionFailed),
        (403, None, None, None, RegionFailed),
        (401, Some("authError"), None, None, RegionFailed),
        (302, None, None, None, RegionFailed),
        (501, None, None, None, RegionFailed),
        // A quota reason on a server error is not the upstream's quota verdict.
        (503, Some("quotaExceeded"), None, None, Transient),
    ];
    for (status, reason, info, message, expected) in cases {
        assert_eq!(
            verdict(*status, &detail(*reason, *info, *message)),
            *expected,
            "HTTP {status} reason {reason:?} info {info:?}"
        );
    }
}

#[test]
fn google_error_body_is_read() {
    let body = br#"{"error":{"code":403,"message":"You have exceeded your <a href=\"/q\">quota</a>.","errors":[{"message":"x","domain":"youtube.quota","reason":"quotaExceeded"}],"status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.Help","reason":"NOT_THIS"},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}"#;
    let detail = upstream_detail(body, str::to_owned);
    assert_eq!(detail.reason.as_deref(), Some("quotaExceeded"));
    assert_eq!(detail.domain.as_deref(), Some("youtube.quota"));
    assert_eq!(
        detail.message.as_deref(),
        Some("You have exceeded your quota.")
    );
    assert_eq!(detail.status.as_deref(), Some("PERMISSION_DENIED"));
    assert_eq!(detail.info_reason.as_deref(), Some("RATE_LIMIT_EXCEEDED"));
    assert_eq!(detail.body_excerpt, None);
}

#[test]
fn non_google_bodies_become_an_excerpt() {
    let html = b"<html><head><title>502 Bad Gateway</title></head>\r\n<body><h1>Bad   Gateway</h1></body></html>";
    let detail = upstream_detail(html, str::to_owned);
    assert_eq!(detail.reason(), None);
    assert_eq!(
        detail.body_excerpt.as_deref(),
        Some("502 Bad Gateway Bad Gateway")
    );
    for body in [&b"{\"error\":\"invalid_grant\"}"[..], b"[1,2]", b"null"] {
        let detail = upstream_detail(body, str::to_owned);
        assert_eq!(detail.reason(), None, "{body:?}");
        assert!(detail.body_excerpt.is_some(), "{body:?}");
    }
    assert_eq!(
        upstream_detail(b"", str::to_owned),
        UpstreamDetail::default()
    );
    assert_eq!(
        upstream_detail(b"", str::to_owned).to_string(),
        "no reason given; empty body"
    );
}

#[test]
fn upstream_text_is_scrubbed() {
    let body =
        br#"{"error":{"message":"key SECRET-KEY is bad","errors":[{"reason":"badRequest"}]}}"#;
    let detail = upstream_detail(body, |text| text.replace("SECRET-KEY", "[redacted]"));
    assert_eq!(detail.message.as_deref(), Some("key [redacted] is bad"));
}

//! The YouTube Data API v3 client: requests, response types, error classification.
//!
//! Each client method is one upstream call with one quota charge; the method names
//! below are the keys of `[costs]` in quota-costs.toml, so the runner can charge the
//! right amount before calling.

mod client;
mod duration;
mod error;
mod key;
mod raw;
mod types;

#[cfg(test)]
mod tests;

pub use client::{
    Client, ClientError, DEFAULT_BODY_LIMIT, SearchOrder, SearchRequest, UnknownSearchOrder, dated,
    parse_api_base, parse_http_date,
};
pub use duration::parse_duration_secs;
pub use error::{CallContext, CallError, ErrorClass, UpstreamDetail};
pub use key::ApiKey;
pub use raw::MalformedResponse;
pub use types::{Category, SearchPage, VideoCounts, VideoPage, VideoRecord};

use crate::clock::Micros;

/// The upstream's page size limit, and the most ids one `videos.list` call takes. Here,
/// not in the client, because the response parser bounds a page by it too.
pub const MAX_RESULTS: usize = 50;

/// Quota method of [`Client::trending_page`] and [`Client::videos_by_id`].
pub const VIDEOS_LIST: &str = "videos.list";
/// Quota method of [`Client::search_page`].
pub const SEARCH_LIST: &str = "search.list";
/// Quota method of [`Client::categories`].
pub const VIDEO_CATEGORIES_LIST: &str = "videoCategories.list";
/// Quota method of [`Client::video_counts`].
pub const VIDEOS_BATCH_GET_STATS: &str = "videos.batchGetStats";

/// When the upstream's daily quota resets after `now`: the next midnight in
/// America/Los_Angeles.
pub fn quota_reset_after(now: Micros) -> Micros {
    let next = || -> Result<Micros, jiff::Error> {
        let tz = jiff::tz::TimeZone::get("America/Los_Angeles")?;
        let today = jiff::Timestamp::from_microsecond(now.as_i64())?
            .to_zoned(tz.clone())
            .date();
        let midnight = today.tomorrow()?.to_zoned(tz)?;
        Ok(Micros::new(midnight.timestamp().as_microsecond()))
    };
    // Without a time zone database, a day from now is the safe side of the reset.
    next().unwrap_or_else(|_| now.after(std::time::Duration::from_secs(86_400)))
}

#[cfg(test)]
mod reset_tests {
    use super::quota_reset_after;
    use crate::clock::Micros;

    fn at(s: &str) -> Micros {
        Micros::new(
            s.parse::<jiff::Timestamp>()
                .map(|t| t.as_microsecond())
                .unwrap_or_default(),
        )
    }

    #[test]
    fn the_quota_resets_at_the_next_pacific_midnight() {
        // 2026-07-01 10:00 UTC is 03:00 PDT (UTC-7): reset at 07:00 UTC on July 2.
        assert_eq!(
            quota_reset_after(at("2026-07-01T10:00:00Z")),
            at("2026-07-02T07:00:00Z")
        );
        // In winter (PST, UTC-8).
        assert_eq!(
            quota_reset_after(at("2026-01-15T07:59:59Z")),
            at("2026-01-15T08:00:00Z")
        );
        // Across the spring-forward day the reset is still a local midnight.
        assert_eq!(
            quota_reset_after(at("2026-03-08T12:00:00Z")),
            at("2026-03-09T07:00:00Z")
        );
    }
}

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

pub(crate) use client::{Client, ClientError, Reply, SearchOrder, SearchRequest, parse_api_base};
#[cfg(test)]
pub(crate) use error::CallError;
pub(crate) use error::ErrorClass;
pub(crate) use key::ApiKey;
pub(crate) use types::{Category, SearchPage, VideoCounts, VideoPage, VideoRecord};
// What the tests reach through the room.
#[cfg(test)]
pub(crate) use {
    client::{DEFAULT_BODY_LIMIT, parse_http_date},
    error::{CallContext, UpstreamDetail},
    raw::MalformedResponse,
};

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

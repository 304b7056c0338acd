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
    Client, ClientError, DEFAULT_BODY_LIMIT, MAX_RESULTS, SearchOrder, SearchRequest,
    UnknownSearchOrder,
};
pub use duration::parse_duration_secs;
pub use error::{CallContext, CallError, ErrorClass, UpstreamDetail};
pub use key::ApiKey;
pub use raw::MalformedResponse;
pub use types::{Category, SearchPage, VideoPage, VideoRecord};

/// Quota method of [`Client::trending_page`] and [`Client::videos_by_id`].
pub const VIDEOS_LIST: &str = "videos.list";
/// Quota method of [`Client::search_page`].
pub const SEARCH_LIST: &str = "search.list";
/// Quota method of [`Client::categories`].
pub const VIDEO_CATEGORIES_LIST: &str = "videoCategories.list";

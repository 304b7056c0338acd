//! The YouTube Data API v3 client: requests, response types, error classification.

/// The upstream methods, as the quota table and `[costs]` name them.
pub const VIDEOS_LIST: &str = "videos.list";
pub const SEARCH_LIST: &str = "search.list";
pub const VIDEO_CATEGORIES_LIST: &str = "videoCategories.list";

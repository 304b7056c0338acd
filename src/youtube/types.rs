//! Plain data handed to the rest of trendsync: no serde, no HTTP, nothing that ties the
//! store to the shape of the upstream's JSON.

pub use crate::video::VideoRecord;

/// One page of `videos.list`, in the upstream's order (for the chart, that order is the
/// trending rank).
#[derive(Debug, Clone, PartialEq)]
pub struct VideoPage {
    pub items: Vec<VideoRecord>,
    /// Absent on the last page.
    pub next_page_token: Option<String>,
}

/// One page of `search.list`: only ids, because search snippets lack statistics and
/// content details; the caller fetches those with `videos_by_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPage {
    /// In the upstream's rank order.
    pub video_ids: Vec<String>,
    pub next_page_token: Option<String>,
}

/// A video category of one region, e.g. id "10", title "Music".
#[derive(Debug, Clone, PartialEq)]
pub struct Category {
    pub id: String,
    pub title: String,
}

/// One video's counts from `videos.batchGetStats` (`None`: hidden or absent upstream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoCounts {
    pub id: String,
    pub view_count: Option<i64>,
    pub like_count: Option<i64>,
    pub comment_count: Option<i64>,
}

//! The seam between a run and the upstream: the calls a run makes, as a trait that the
//! real client implements here and an in-process fake implements for the runner's
//! tests. The client knows nothing of the runner; the runner decides what to do about
//! each answer (charge, retry, stop) from what this trait hands back.

use std::future::Future;
use std::pin::Pin;

use crate::youtube::{
    Category, Client, Reply, SEARCH_LIST, SearchPage, SearchRequest, VIDEO_CATEGORIES_LIST,
    VIDEOS_LIST, VideoCounts, VideoPage,
};

/// The upstream methods a run calls.
pub const METHODS: [&str; 3] = [VIDEOS_LIST, VIDEO_CATEGORIES_LIST, SEARCH_LIST];

/// One call under way; its [`Reply`] carries the answer's `Date`, the upstream's clock
/// that the limiter's is checked against. Boxed so that a run can hold its upstream as
/// a trait object: one allocation per call is nothing next to a network round trip.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Reply<T>> + Send + 'a>>;

/// The calls a run makes, each exactly one request that is never retried here: the
/// run charges the budget before every attempt, so only it may decide on another.
pub trait Upstream: Send + Sync {
    /// One page of one of the region's `mostPopular` charts: the overall one
    /// (`category` none) or a category's. Items in rank order.
    fn chart_page<'a>(
        &'a self,
        region: &'a str,
        category: Option<u32>,
        hl: Option<&'a str>,
        page_token: Option<&'a str>,
    ) -> Call<'a, VideoPage>;

    /// The region's video categories, localized by `hl` when given.
    fn categories<'a>(&'a self, region: &'a str, hl: Option<&'a str>) -> Call<'a, Vec<Category>>;

    /// One page of search results: ids only, in rank order.
    fn search_page<'a>(&'a self, req: SearchRequest<'a>) -> Call<'a, SearchPage>;

    /// The details of up to 50 videos, in the upstream's order.
    fn videos_by_id<'a>(&'a self, ids: &'a [String], hl: Option<&'a str>) -> Call<'a, VideoPage>;

    /// The counts of up to 50 videos (the follow-ups).
    fn video_counts<'a>(&'a self, ids: &'a [String]) -> Call<'a, Vec<VideoCounts>>;

    /// One request that carries no key, so bills no project, for its answer's `Date`:
    /// the upstream's clock when the budget allows no call. The HTTP status of
    /// whatever answered (403 from the upstream itself).
    fn without_key(&self) -> Call<'_, u16>;

    /// Upstream text made fit for a log line or `--json` (no key, no raw terminal
    /// control), before a run quotes it.
    fn scrub(&self, text: &str) -> String;
}

impl Upstream for Client {
    fn chart_page<'a>(
        &'a self,
        region: &'a str,
        category: Option<u32>,
        hl: Option<&'a str>,
        page_token: Option<&'a str>,
    ) -> Call<'a, VideoPage> {
        Box::pin(Client::chart_page(self, region, category, hl, page_token))
    }

    fn categories<'a>(&'a self, region: &'a str, hl: Option<&'a str>) -> Call<'a, Vec<Category>> {
        Box::pin(Client::categories(self, region, hl))
    }

    fn search_page<'a>(&'a self, req: SearchRequest<'a>) -> Call<'a, SearchPage> {
        Box::pin(async move { Client::search_page(self, &req).await })
    }

    fn videos_by_id<'a>(&'a self, ids: &'a [String], hl: Option<&'a str>) -> Call<'a, VideoPage> {
        Box::pin(Client::videos_by_id(self, ids, hl))
    }

    fn video_counts<'a>(&'a self, ids: &'a [String]) -> Call<'a, Vec<VideoCounts>> {
        Box::pin(Client::video_counts(self, ids))
    }

    fn without_key(&self) -> Call<'_, u16> {
        Box::pin(Client::status_without_key(self))
    }

    fn scrub(&self, text: &str) -> String {
        Client::scrub(self, text)
    }
}

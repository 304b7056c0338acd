//! The runner's test doubles: an upstream in the process that answers from a script,
//! and runs over a scratch database, so that the run's decisions (stops, buckets,
//! retries) are tested as tables, fast, with no HTTP server.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::backoff::Jitter;
use super::run::{Run, RunDeps, RunSettings};
use super::upstream::{Call, Upstream};
use crate::clock::{Clock, ManualClock, Secs};
use crate::config::{Follow, Region, Search, SourceText};
use crate::quota::{Allowance, Budget, EmbeddedLimiter, Limiter};
use crate::store::{RunKind, Store};
use crate::youtube::{
    CallContext, CallError, Category, SEARCH_LIST, SearchOrder, SearchPage, SearchRequest,
    UpstreamDetail, VIDEO_CATEGORIES_LIST, VIDEOS_BATCH_GET_STATS, VIDEOS_LIST, VideoCounts,
    VideoPage, VideoRecord,
};

/// 2026-01-01T00:00:00Z: the fake runs' time, which no test needs to move.
pub(crate) const AT_2026_US: i64 = 1_767_225_600_000_000;

/// What [`FakeUpstream::calls`] writes for a request made without the key.
pub(crate) const WITHOUT_KEY: &str = "(without the key)";

/// How the fake answers one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A good answer: a page of two videos (with no next page), one category, a
    /// search that finds two videos, the details or counts of the videos asked for.
    Ok,
    /// An error answer: the HTTP status and the reason Google's error body names,
    /// classified as the real client classifies it.
    Error(u16, &'static str),
}

/// An upstream in the process. Each method answers from its own queue of replies, in
/// order, then [`Reply::Ok`] once the queue is empty; every call is written down.
#[derive(Debug, Default)]
pub(crate) struct FakeUpstream {
    script: Mutex<BTreeMap<&'static str, VecDeque<Reply>>>,
    made: Mutex<Vec<&'static str>>,
    /// The `Date` of every answer; none leaves the clock unchecked.
    date: Option<Secs>,
}

impl FakeUpstream {
    pub(crate) fn new() -> FakeUpstream {
        FakeUpstream::default()
    }

    /// `method`'s next answers, in order.
    pub(crate) fn answering(self, method: &'static str, replies: &[Reply]) -> FakeUpstream {
        if let Ok(mut script) = self.script.lock() {
            script.entry(method).or_default().extend(replies);
        }
        self
    }

    /// Every answer says it was made at `date_s` (unix seconds).
    pub(crate) fn dated(self, date_s: i64) -> FakeUpstream {
        FakeUpstream {
            date: Some(Secs::new(date_s)),
            ..self
        }
    }

    /// The methods called, in order.
    pub(crate) fn calls(&self) -> Vec<&'static str> {
        self.made.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Writes the call down and takes its reply.
    fn reply(&self, method: &'static str) -> Reply {
        if let Ok(mut made) = self.made.lock() {
            made.push(method);
        }
        self.script
            .lock()
            .ok()
            .and_then(|mut s| s.get_mut(method).and_then(VecDeque::pop_front))
            .unwrap_or(Reply::Ok)
    }

    /// The answer to a call of `method` for `region`, `ok` making its good result.
    fn answer<'a, T: Send + 'a>(
        &self,
        method: &'static str,
        region: Option<&str>,
        ok: impl FnOnce() -> T,
    ) -> Call<'a, T> {
        let result = match self.reply(method) {
            Reply::Ok => Ok(ok()),
            Reply::Error(status, reason) => {
                let call = match region {
                    Some(r) => CallContext::new(method).region(r),
                    None => CallContext::new(method),
                };
                let upstream = UpstreamDetail {
                    reason: Some(reason.to_owned()),
                    ..UpstreamDetail::default()
                };
                Err(CallError::from_status(call, status, upstream))
            }
        };
        let date = self.date;
        Box::pin(async move { crate::youtube::Reply { result, date } })
    }
}

fn records(ids: &[String]) -> Vec<VideoRecord> {
    ids.iter().map(|id| VideoRecord::bare(id)).collect()
}

impl Upstream for FakeUpstream {
    fn chart_page<'a>(
        &'a self,
        region: &'a str,
        category: Option<u32>,
        _hl: Option<&'a str>,
        _page_token: Option<&'a str>,
    ) -> Call<'a, VideoPage> {
        self.answer(VIDEOS_LIST, Some(region), || {
            let chart = category.map_or_else(|| "all".to_owned(), |c| c.to_string());
            let ids: Vec<String> = (1..=2).map(|i| format!("{region}-{chart}-{i}")).collect();
            VideoPage {
                items: records(&ids),
                next_page_token: None,
            }
        })
    }

    fn categories<'a>(&'a self, region: &'a str, _hl: Option<&'a str>) -> Call<'a, Vec<Category>> {
        self.answer(VIDEO_CATEGORIES_LIST, Some(region), || {
            vec![Category {
                id: "10".into(),
                title: "Music".into(),
            }]
        })
    }

    fn search_page<'a>(&'a self, req: SearchRequest<'a>) -> Call<'a, SearchPage> {
        self.answer(SEARCH_LIST, Some(req.region), || SearchPage {
            video_ids: (1..=2)
                .map(|i| format!("{}-found-{i}", req.region))
                .collect(),
            next_page_token: None,
        })
    }

    fn videos_by_id<'a>(&'a self, ids: &'a [String], _hl: Option<&'a str>) -> Call<'a, VideoPage> {
        self.answer(VIDEOS_LIST, None, || VideoPage {
            items: records(ids),
            next_page_token: None,
        })
    }

    fn video_counts<'a>(&'a self, ids: &'a [String]) -> Call<'a, Vec<VideoCounts>> {
        self.answer(VIDEOS_BATCH_GET_STATS, None, || {
            ids.iter()
                .map(|id| VideoCounts {
                    id: id.clone(),
                    view_count: Some(1),
                    like_count: None,
                    comment_count: None,
                })
                .collect()
        })
    }

    fn without_key(&self) -> Call<'_, u16> {
        if let Ok(mut made) = self.made.lock() {
            made.push(WITHOUT_KEY);
        }
        let date = self.date;
        Box::pin(async move {
            crate::youtube::Reply {
                result: Ok(403),
                date,
            }
        })
    }

    fn scrub(&self, text: &str) -> String {
        crate::output::text::visible(text).into_owned()
    }
}

/// A budget from the text of a costs file.
pub(crate) fn budget(costs: &str) -> Budget {
    crate::config::parse_costs(&SourceText {
        name: "quota-costs.toml".into(),
        text: costs,
    })
    .expect("the test's costs parse")
}

/// A region of one trending page, with `searches` (each a search of its name).
pub(crate) fn region(code: &str, searches: &[&str]) -> Region {
    Region {
        code: code.into(),
        offset: 0,
        hl: None,
        pages: 1,
        categories: Vec::new(),
        searches: searches
            .iter()
            .map(|name| Search {
                name: (*name).into(),
                q: (*name).into(),
                order: SearchOrder::Relevance,
                published_within: None,
            })
            .collect(),
    }
}

/// How a scratch run is set up; [`Scratch::default`] is the shipped costs, a working
/// limiter, one region at a time, no follow-ups, a clock standing at
/// [`AT_2026_US`], and no wait between attempts.
pub(crate) struct Scratch {
    pub costs: String,
    pub limiter_down: bool,
    pub clock: Arc<dyn Clock>,
    pub concurrency: usize,
    pub follow: Option<Follow>,
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch {
            costs: crate::config::BUILTIN_COSTS.to_owned(),
            limiter_down: false,
            clock: Arc::new(ManualClock::starting_at(crate::clock::Micros::new(
                AT_2026_US,
            ))),
            concurrency: 1,
            follow: None,
        }
    }
}

impl Scratch {
    /// A run over a database in `dir` against `upstream`.
    pub(crate) fn run(self, dir: &Path, upstream: Arc<dyn Upstream>) -> Arc<Run> {
        let db = dir.join("t.db");
        let budget = budget(&self.costs);
        let limiter = if self.limiter_down {
            Limiter::Down {
                endpoint: "redis://127.0.0.1:9".into(),
                reason: "connection refused".into(),
            }
        } else {
            Limiter::Embedded(
                EmbeddedLimiter::open(&db, &budget.key, Arc::clone(&self.clock), None)
                    .expect("the embedded limiter"),
            )
        };
        let settings = RunSettings {
            run_id: "r1".into(),
            kind: RunKind::Run,
            budget,
            allowance: Allowance::Ceiling,
            concurrency: self.concurrency,
            follow: self.follow,
            limiter: None,
            sink_slot_secs: None,
        };
        let deps = RunDeps {
            limiter,
            upstream,
            store: Store::open(&db).expect("the store"),
            db: crate::sqlite::Db::open_for_writing(&db).expect("the database"),
            clock: self.clock,
            jitter: Jitter::Fixed(0.0),
        };
        Arc::new(Run::new(settings, deps))
    }
}

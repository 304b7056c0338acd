//! The runner's test doubles: an upstream in the process that answers from a script,
//! and runs over a scratch database, so that the run's decisions (stops, buckets,
//! retries) are tested as tables, fast, with no HTTP server.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::backoff::Jitter;
use super::run::{Run, RunDeps, RunSettings};
use super::slots::{GateCall, SlotGate};
use super::upstream::{Call, Upstream};
use crate::clock::{Clock, ManualClock, Secs};
use crate::config::{Follow, Region, Search, SourceText};
use crate::quota::{
    Allowance, Budget, Claim, EmbeddedLimiter, Finish, Holder, Limiter, LimiterError, SlotRef,
};
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
        slot_secs: 3600,
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
    /// The fleet's slots, when the run is to claim them.
    pub gate: Option<Arc<dyn SlotGate>>,
    /// The host the run claims as.
    pub host: String,
    /// The run's id: a second run on one database needs its own.
    pub run_id: String,
    pub lease: Duration,
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
            gate: None,
            host: "host-a".into(),
            run_id: "r1".into(),
            lease: Duration::from_secs(120),
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
            run_id: self.run_id,
            kind: RunKind::Run,
            budget,
            allowance: Allowance::Ceiling,
            concurrency: self.concurrency,
            follow: self.follow,
            limiter: None,
            host: self.host,
            lease: self.lease,
            slot_poll: Duration::ZERO,
            sink: false,
        };
        let deps = RunDeps {
            limiter,
            upstream,
            store: Store::open(&db).expect("the store"),
            db: crate::sqlite::Db::open_for_writing(&db).expect("the database"),
            clock: self.clock,
            jitter: Jitter::Fixed(0.0),
            gate: self.gate,
        };
        Arc::new(Run::new(settings, deps))
    }
}

/// One slot's record in the [`FakeGate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FakeRecord {
    Held { holder: Holder, until_us: i64 },
    Done { by: Holder, at_us: i64 },
    Missed { outcome: String, token: i64 },
}

/// The fleet's slots in the process, keeping the records as the Redis limiter does
/// (docs/commands.md, "Several hosts"), on a clock that moves `step_us` at every
/// request, so that a wait ends without the test sleeping.
pub(crate) struct FakeGate {
    now_us: Mutex<i64>,
    step_us: i64,
    next_token: Mutex<i64>,
    pub(crate) records: Mutex<BTreeMap<(String, i64), FakeRecord>>,
    /// Every request, in order: `claim US`, `renew US 7`, `finish US 7 complete`.
    pub(crate) made: Mutex<Vec<String>>,
    /// Answers every request with an unreachable limiter.
    pub(crate) down: std::sync::atomic::AtomicBool,
    /// Gives a region's slot to host `thief` at the first renewal of it.
    pub(crate) steal_at_renewal: Mutex<Option<String>>,
    /// Holds every finish until as many as the barrier counts have arrived: finishes
    /// sent one after another never get past it.
    pub(crate) finish_barrier: Mutex<Option<Arc<tokio::sync::Barrier>>>,
}

impl FakeGate {
    /// A gate whose clock stands at `now_us` and moves `step_us` at every request.
    pub(crate) fn new(now_us: i64, step_us: i64) -> FakeGate {
        FakeGate {
            now_us: Mutex::new(now_us),
            step_us,
            next_token: Mutex::new(100),
            records: Mutex::new(BTreeMap::new()),
            made: Mutex::new(Vec::new()),
            down: std::sync::atomic::AtomicBool::new(false),
            steal_at_renewal: Mutex::new(None),
            finish_barrier: Mutex::new(None),
        }
    }

    /// Sets `region`'s slot starting at `start_s` to `record`.
    pub(crate) fn set(&self, region: &str, start_s: i64, record: FakeRecord) {
        if let Ok(mut r) = self.records.lock() {
            r.insert((region.to_owned(), start_s), record);
        }
    }

    pub(crate) fn record(&self, region: &str, start_s: i64) -> Option<FakeRecord> {
        self.records
            .lock()
            .ok()?
            .get(&(region.to_owned(), start_s))
            .cloned()
    }

    pub(crate) fn made(&self) -> Vec<String> {
        self.made.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// The clock's reading, moved one step on.
    fn tick(&self, what: String) -> Result<i64, LimiterError> {
        if let Ok(mut m) = self.made.lock() {
            m.push(what);
        }
        if self.down.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(LimiterError::Unavailable {
                endpoint: "redis://127.0.0.1:9".into(),
                source: crate::quota::Reason("connection refused".into()).into(),
            });
        }
        let mut now = self.now_us.lock().map_err(|_| LimiterError::Unavailable {
            endpoint: "fake".into(),
            source: crate::quota::Reason("poisoned".into()).into(),
        })?;
        *now += self.step_us;
        Ok(*now)
    }

    fn token(&self) -> i64 {
        let mut t = self.next_token.lock().expect("the fake's token");
        *t += 1;
        *t
    }
}

fn lease_us(lease: Duration) -> i64 {
    i64::try_from(lease.as_micros()).unwrap_or(i64::MAX)
}

impl SlotGate for FakeGate {
    fn now_us(&self) -> GateCall<'_, i64> {
        let now = self.tick("time".into());
        Box::pin(async move { now })
    }

    fn claim<'a>(
        &'a self,
        slot: &'a SlotRef,
        host: &'a str,
        run_id: &'a str,
        lease: Duration,
        floor_token: i64,
    ) -> GateCall<'a, Claim> {
        Box::pin(async move {
            let now = self.tick(format!("claim {} floor {floor_token}", slot.region))?;
            if now >= slot.end_s() * 1_000_000 {
                return Ok(Claim::Ended);
            }
            let key = (slot.region.clone(), slot.start_s);
            let found = self.records.lock().expect("records").get(&key).cloned();
            let took_over = match found {
                Some(FakeRecord::Done { by, at_us }) => return Ok(Claim::Done { by, at_us }),
                Some(FakeRecord::Held { holder, until_us }) if until_us >= now => {
                    return Ok(Claim::Held { holder, until_us });
                }
                Some(FakeRecord::Held { holder, .. }) => Some(holder),
                Some(FakeRecord::Missed { .. }) | None => None,
            };
            let token = self.token().max(floor_token + 1);
            let holder = Holder {
                host: host.to_owned(),
                run_id: run_id.to_owned(),
                token,
            };
            self.set(
                &slot.region,
                slot.start_s,
                FakeRecord::Held {
                    holder,
                    until_us: now + lease_us(lease),
                },
            );
            Ok(Claim::Claimed { token, took_over })
        })
    }

    fn renew<'a>(&'a self, slot: &'a SlotRef, token: i64, lease: Duration) -> GateCall<'a, bool> {
        Box::pin(async move {
            let now = self.tick(format!("renew {} {token}", slot.region))?;
            if let Some(thief) = self.steal_at_renewal.lock().expect("thief").take() {
                let holder = Holder {
                    host: thief,
                    run_id: "r-thief".into(),
                    token: self.token(),
                };
                self.set(
                    &slot.region,
                    slot.start_s,
                    FakeRecord::Held {
                        holder,
                        until_us: now + lease_us(lease),
                    },
                );
                return Ok(false);
            }
            match self.record(&slot.region, slot.start_s) {
                Some(FakeRecord::Held { holder, .. }) if holder.token == token => {
                    self.set(
                        &slot.region,
                        slot.start_s,
                        FakeRecord::Held {
                            holder,
                            until_us: now + lease_us(lease),
                        },
                    );
                    Ok(true)
                }
                _ => Ok(false),
            }
        })
    }

    fn finish<'a>(
        &'a self,
        slot: &'a SlotRef,
        token: i64,
        host: &'a str,
        run_id: &'a str,
        outcome: &'a str,
    ) -> GateCall<'a, Finish> {
        Box::pin(async move {
            let barrier = self.finish_barrier.lock().ok().and_then(|b| b.clone());
            if let Some(barrier) = barrier {
                barrier.wait().await;
            }
            let now = self.tick(format!("finish {} {token} {outcome}", slot.region))?;
            let ours = match self.record(&slot.region, slot.start_s) {
                None => true,
                Some(FakeRecord::Held { holder, .. }) if holder.token == token => true,
                Some(FakeRecord::Held { holder, .. })
                | Some(FakeRecord::Done { by: holder, .. }) => {
                    return Ok(Finish::Fenced { by: Some(holder) });
                }
                Some(FakeRecord::Missed { .. }) => return Ok(Finish::Fenced { by: None }),
            };
            debug_assert!(ours);
            let by = Holder {
                host: host.to_owned(),
                run_id: run_id.to_owned(),
                token,
            };
            let record = if outcome == "complete" {
                FakeRecord::Done { by, at_us: now }
            } else {
                FakeRecord::Missed {
                    outcome: outcome.to_owned(),
                    token,
                }
            };
            self.set(&slot.region, slot.start_s, record);
            Ok(Finish::Recorded)
        })
    }
}

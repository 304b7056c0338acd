//! The shared limiter in Redis: one Lua script decides a charge atomically, on Redis's
//! clock, for every host and cron job that spends from one API key.
//!
//! This file sends each request and waits out failovers. Beside it, `url.rs` reads a
//! `--redis-url`, `conn.rs` connects in each deployment form, `diagnose.rs` says what
//! a failure means, and `script.rs` builds what the Lua scripts are sent and reads
//! their replies. What is replayed after Redis lost the window is the ledger's policy
//! ([`super::ledger`]), which this limiter serves as its store.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use redis::RedisResult;

mod conn;
mod diagnose;
mod script;
pub(crate) mod slots;
mod url;

pub use conn::TlsFiles;
pub use diagnose::RedisCause;
pub(crate) use script::Decided;
pub use url::RedisConfigError;

use super::drift::{self, SpentDay};
use super::journal::{Epoch, Journal};
use super::ledger::{Ledger, LedgerStore};
use super::recount::{self, Logged};
use super::skew::ClocksApart;
use super::{
    BUDGET_POLICY, Budget, Charge, Counting, Decision, Kind, LimiterError, Part, PolicyRef, Reason,
    RecordPast, Status,
};
use crate::clock::{Clock, Micros};
use crate::error::chain;
use conn::{Conn, Connector};
use diagnose::{classify, clocks_apart_at, is_failover, worth_once_more};
use script::{Keys, Scripts, Stamp};
use url::masked_detail;

/// How long a failover may take before the limiter counts as down (docs/budget.md, "When
/// the limiter is down"): long enough for a Sentinel or Cluster election with short
/// timeouts, short enough that a run does not stall for long on a deployment that is really
/// gone.
const FAILOVER_PATIENCE: Duration = Duration::from_secs(10);
/// The first pause between attempts during a failover; it doubles up to the maximum.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_millis(1_000);

pub struct RedisLimiter {
    conn: Conn,
    /// Whether the deployment elects a new primary (Sentinel, Cluster), so that a
    /// refused connection is worth waiting out.
    elects: bool,
    endpoint: String,
    keys: Keys,
    /// Boxed: four scripts' text and hashes need not make every `Limiter` larger.
    scripts: Box<Scripts>,
    /// This host's record of its grants, replayed when Redis loses the window (3.7).
    /// Boxed: one per process, it need not make every `Limiter` larger.
    ledger: Option<Box<Ledger>>,
    /// This host's clock, read only for the local midnights a calendar-day window
    /// sends along (3.9): Redis's own TIME decides.
    clock: Arc<dyn Clock>,
    /// The budget charged, fixed when the limiter is built, whose stamp the scripts
    /// compare with the window's, and which counts the window again when they differ
    /// (3.8). Without one (a tool that charges prepared charges), the window is charged
    /// as it stands. Behind an `Arc`: one per process, it need not make every
    /// `Limiter` larger.
    counting: Option<Arc<Counting>>,
    /// When the upstream last confirmed Redis `TIME` (the upstream's own time of
    /// that answer, us): no entry the window would hold by then is dropped, however
    /// far `TIME` has run ahead since (docs/budget.md, "The clock").
    confirmed_us: Option<i64>,
}

/// How many times a recount is tried while other hosts keep changing the window.
const RECOUNT_TRIES: usize = 5;

impl RecordPast for RedisLimiter {
    async fn record_past(&self, charge: &Charge, age: Duration) -> Result<Decision, LimiterError> {
        self.decide(charge, Some(age)).await.map(|d| d.decision)
    }
}

impl LedgerStore for RedisLimiter {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn epoch(&self) -> Result<Option<Epoch>, LimiterError> {
        let mut get = redis::cmd("GET");
        get.arg(self.keys.epoch());
        let get = &get;
        let epoch: Option<i64> = self
            .through_failover("reading the window's epoch", |mut conn| async move {
                get.query_async(&mut conn).await
            })
            .await?;
        Ok(epoch.map(Epoch))
    }

    async fn holds(&self, charge: &Charge, part: &Part) -> Result<bool, LimiterError> {
        // A window counted again under today's costs holds the charge as today's
        // file charges it: in its bucket (which keeps it 31 days), at
        // today's units; or, for a method no bucket charges, in the main one at 0.
        let today = self.budget().and_then(|b| recount::today(b, charge));
        let (set, member) = match &today {
            Some(c) => match c.parts.iter().find(|p| p.kind == Kind::Bucket) {
                Some(p) => (self.keys.policy(p.kind, &p.policy), script::member(c, p)),
                None => (
                    self.keys.policy(Kind::Bucket, BUDGET_POLICY),
                    recount::member(0, &c.method, &c.id, c.calls),
                ),
            },
            None => (
                self.keys.policy(part.kind, &part.policy),
                script::member(charge, part),
            ),
        };
        let [set, ..] = set;
        let mut score = redis::cmd("ZSCORE");
        score.arg(set).arg(member);
        let score = &score;
        let found: Option<f64> = self
            .through_failover(
                "looking for a charge in the window",
                |mut conn| async move { score.query_async(&mut conn).await },
            )
            .await?;
        Ok(found.is_some())
    }
}

impl std::fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("endpoint", &self.endpoint)
            .field("prefix", &self.keys.prefix())
            .finish()
    }
}

impl RedisLimiter {
    /// Connects to the limiter for the budget named `budget_key`, TLS with the
    /// system's trust store; `clock` is this host's, `budget` the one charged under
    /// (see [`RedisLimiter::connect_with_tls`]).
    pub async fn connect(
        url: &str,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
    ) -> Result<RedisLimiter, LimiterError> {
        RedisLimiter::connect_with_tls(url, &TlsFiles::default(), budget_key, clock, budget).await
    }

    /// Connects to the limiter for the budget named `budget_key` in any form of
    /// the README, "Redis deployments". A configuration that cannot work is
    /// [`LimiterError::Config`]; a deployment in the middle of a failover is waited
    /// for, within [`FAILOVER_PATIENCE`]; one that does not answer is unavailable.
    /// Redis's own TIME decides; this host's `clock` is read only for the midnights
    /// of calendar-day windows. The window is charged and read under `budget`: one last
    /// charged under another is counted again at its costs first (docs/budget.md, "When
    /// the costs file changes"); without one (a tool that charges prepared charges), it
    /// is charged as it stands.
    pub async fn connect_with_tls(
        url: &str,
        tls: &TlsFiles,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
    ) -> Result<RedisLimiter, LimiterError> {
        let keys = Keys::new(budget_key);
        let [budget_set, ..] = keys.policy(Kind::Bucket, BUDGET_POLICY);
        let connector = Connector::new(url, tls, budget_set)?;
        let endpoint = connector.endpoint().to_owned();
        let elects = connector.elects();
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        let conn = loop {
            match connector.connect().await {
                Ok(conn) => break conn,
                Err(e) => {
                    if let Some(config) = diagnose::connect_failure(&connector, &e).await {
                        return Err(config.into());
                    }
                    if !is_failover(&e, elects) || started.elapsed() + pause > FAILOVER_PATIENCE {
                        return Err(classify(&endpoint, "connecting", &e));
                    }
                    tracing::debug!(
                        "connecting to {endpoint} failed ({}); waiting {} for a failover to finish",
                        masked_detail(&e),
                        crate::output::human::duration(pause)
                    );
                    pause = wait(pause).await;
                }
            }
        };
        Ok(RedisLimiter {
            conn,
            elects,
            endpoint,
            keys,
            scripts: Box::new(Scripts::new()),
            ledger: None,
            clock,
            counting: Counting::of(budget),
            confirmed_us: None,
        })
    }

    /// Drops no entry that a window would still hold at `confirmed_us`, when the
    /// upstream last confirmed Redis `TIME` (the skew record's time): a `TIME` that
    /// jumped ahead may evict entries, which are counted again once it is set right,
    /// but it does not lose them. `None` (no answer ever confirmed it): nothing newer than
    /// the script's margin of a week before `TIME` is dropped.
    #[must_use = "the limiter that knows the confirmed time is the one returned"]
    pub fn confirmed_at(mut self, confirmed_us: Option<i64>) -> RedisLimiter {
        self.confirmed_us = confirmed_us;
        self
    }

    /// The budget charged under, if one was given.
    fn budget(&self) -> Option<&Budget> {
        self.counting.as_deref().map(|c| c.budget.as_ref())
    }

    /// Its stamp, or '' without one.
    fn stamp_text(&self) -> &str {
        self.counting.as_deref().map_or("", |c| c.stamp.as_str())
    }

    fn stamp(&self) -> Stamp<'_> {
        Stamp {
            stamp: self.stamp_text(),
            held: super::KEEP,
            confirmed_us: self.confirmed_us,
        }
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Keeps this host's ledger of grants in `journal` from now on (docs/budget.md, "When
    /// Redis loses the window"), replays it if Redis no longer holds the window this host
    /// last charged into, and prunes what every window has let go.
    #[must_use = "the limiter that keeps the ledger is the one returned"]
    pub async fn keep_ledger(mut self, journal: Arc<Journal>, budget_key: &str) -> RedisLimiter {
        // The ledger looks for its newest grant where today's costs file puts it: a
        // window charged under another file is counted again first. With no grant to
        // look for, the first charge does it.
        let has_grants = journal.has_ledger(budget_key).unwrap_or(false);
        if has_grants && let Err(e) = self.recount().await {
            tracing::debug!(
                "counting the window again before reading the ledger: {}",
                chain(&e)
            );
        }
        if let Some(ledger) = Ledger::keep(journal, budget_key, &self).await {
            self.ledger = Some(Box::new(ledger));
        }
        self
    }

    /// Whether this host's grants are kept in a ledger.
    pub(super) fn keeps_ledger(&self) -> bool {
        self.ledger.is_some()
    }

    /// [`Limiter::charge`](super::Limiter::charge): decides `charge`, records a grant
    /// in the ledger, and restores the ledger when the reply shows Redis lost the
    /// window; returns Redis's clock at the decision with it, for the clock check
    /// ([`super::skew`]).
    pub(super) async fn charge_keeping_ledger(
        &self,
        charge: &Charge,
    ) -> Result<(Decision, Micros), LimiterError> {
        let Decided {
            decision,
            epoch,
            now_us,
        } = self.decide(charge, None).await?;
        if let Some(ledger) = self.ledger.as_deref() {
            ledger.charged(self, charge, &decision, epoch).await;
        }
        Ok((decision, Micros::new(now_us)))
    }

    /// [`Limiter::charge`](super::Limiter::charge) (or, with `age`,
    /// [`Limiter::record_past`](super::Limiter::record_past)) on this Redis alone, with
    /// the Redis time it was decided at, for comparing with
    /// [`Model`](super::model::Model). Keeps no ledger.
    pub async fn decide(
        &self,
        charge: &Charge,
        age: Option<Duration>,
    ) -> Result<Decided, LimiterError> {
        // A replay is counted at today's costs, as the window it joins.
        let rebuilt = age
            .and(self.budget())
            .and_then(|b| recount::today(b, charge));
        let charge = rebuilt.as_ref().unwrap_or(charge);
        for _ in 0..RECOUNT_TRIES {
            // A calendar day goes as the midnights around this host's clock; the
            // script takes the day that Redis's own clock falls in.
            let inv = self.scripts.charge(
                &self.keys,
                self.stamp(),
                charge,
                self.clock.now().as_i64(),
                age,
            );
            let inv = &inv;
            let reply: redis::Value = self
                .through_failover("charging the budget", |mut conn| async move {
                    inv.invoke_async(&mut conn).await
                })
                .await?;
            if script::is_recount(&reply) {
                self.recount().await?;
                continue;
            }
            return script::charge_reply(&self.endpoint, charge, &reply);
        }
        Err(self.kept_changing())
    }

    fn kept_changing(&self) -> LimiterError {
        LimiterError::Failed {
            endpoint: self.endpoint.clone(),
            doing: "counting the window again under this costs file",
            source: Reason(format!(
                "other hosts changed it {RECOUNT_TRIES} times meanwhile, likely under another costs file; every host charging one budget.key must use the same costs"
            ))
            .into(),
        }
    }

    /// Counts every entry the window keeps again under this limiter's budget, at its costs,
    /// in its buckets and limits (docs/budget.md, "When the costs file changes"), and
    /// stamps the window with it. A window stamped by another budget is named in a warning;
    /// a window with no stamp (new, lost, or of an older layout) is counted as the budget
    /// in force says, silently.
    async fn recount(&self) -> Result<(), LimiterError> {
        let Some(budget) = self.budget() else {
            return Ok(());
        };
        for _ in 0..RECOUNT_TRIES {
            let mut get = redis::cmd("GET");
            get.arg(self.keys.stamp());
            let get = &get;
            let was: Option<String> = self
                .through_failover("reading the window's stamp", |mut conn| async move {
                    get.query_async(&mut conn).await
                })
                .await?;
            if was.as_deref() == Some(self.stamp_text()) {
                return Ok(());
            }
            // The sets that hold the entries: the stamp's buckets, or, before there was
            // a stamp, this budget's own.
            let buckets: Vec<String> = match &was {
                Some(stamp) => stamp.split(' ').skip(1).map(str::to_owned).collect(),
                None => budget.buckets().iter().map(|b| b.name.to_owned()).collect(),
            };
            let inv = self.scripts.entries(&self.keys, &buckets);
            let inv = &inv;
            let (seen, token, sets): (String, String, Vec<Vec<String>>) = self
                .through_failover("reading the window's entries", |mut conn| async move {
                    inv.invoke_async(&mut conn).await
                })
                .await?;
            if seen != was.clone().unwrap_or_default() {
                continue;
            }
            let logged: Vec<Logged> = sets
                .iter()
                .flat_map(|set| set.chunks_exact(2))
                .filter_map(|pair| {
                    let at = pair[1].parse::<f64>().ok()? as i64;
                    recount::parse_member(&pair[0], at, budget)
                })
                .collect();
            let rebuilt = recount::rebuild(budget, &logged);
            let legacy = match &was {
                Some(_) => Vec::new(),
                None => self.adopt_legacy_blocks(budget).await?,
            };
            let inv = self.scripts.recount(
                &self.keys,
                self.stamp(),
                (&buckets, &seen, &token),
                &legacy,
                &rebuilt,
                self.clock.now().as_i64(),
            );
            let inv = &inv;
            let done: String = self
                .through_failover("counting the window again", |mut conn| async move {
                    inv.invoke_async(&mut conn).await
                })
                .await?;
            if done != "DONE" {
                continue;
            }
            if let Some(fingerprint) = was.as_deref().and_then(|s| s.split(' ').next())
                && fingerprint != budget.fingerprint()
            {
                recount::warn_changed(
                    &budget.key,
                    budget,
                    &format!("on {}", self.endpoint),
                    "host",
                    fingerprint,
                    logged.len(),
                );
            }
            return Ok(());
        }
        Err(self.kept_changing())
    }

    /// Moves the blocks of the layout before per-method blocks (one per bucket) to
    /// the methods of those buckets in `budget`, the file the window is first
    /// stamped with; returns the old keys and the legacy keys of the limits, for the
    /// recount to delete.
    async fn adopt_legacy_blocks(&self, budget: &Budget) -> Result<Vec<String>, LimiterError> {
        let mut legacy = Vec::new();
        for b in budget.buckets() {
            let key = self.keys.legacy_blocked(&b.name);
            let mut get = redis::cmd("GET");
            get.arg(&key);
            let get = &get;
            let until: Option<i64> = self
                .through_failover("reading the budget's block", |mut conn| async move {
                    get.query_async(&mut conn).await
                })
                .await?;
            if let Some(until) = until {
                self.block_until(&b.methods(), Micros::new(until)).await?;
            }
            legacy.push(key);
        }
        for l in &budget.limits {
            if budget.bucket(&l.name).is_none() {
                legacy.extend(self.keys.legacy_limit(&l.name));
            }
        }
        Ok(legacy)
    }

    pub(super) async fn status(
        &self,
        policies: &[PolicyRef],
        with_entries: &[&str],
    ) -> Result<Status, LimiterError> {
        for _ in 0..RECOUNT_TRIES {
            let inv = self.scripts.status(
                &self.keys,
                self.stamp_text(),
                policies,
                with_entries,
                self.clock.now().as_i64(),
            );
            let inv = &inv;
            let reply: redis::Value = self
                .through_failover("reading the budget", |mut conn| async move {
                    inv.invoke_async(&mut conn).await
                })
                .await?;
            if script::is_recount(&reply) {
                self.recount().await?;
                continue;
            }
            let reply: script::StatusReply =
                redis::from_redis_value_ref(&reply).map_err(|e| LimiterError::Failed {
                    endpoint: self.endpoint.clone(),
                    doing: "reading the status script's answer",
                    source: Reason(e.to_string()).into(),
                })?;
            return Ok(script::status_reply(policies, with_entries, reply));
        }
        Err(self.kept_changing())
    }

    pub(super) async fn block_until(
        &self,
        methods: &[String],
        until: Micros,
    ) -> Result<(), LimiterError> {
        let until_us = until.as_i64();
        let until_ms = u64::try_from(until_us / 1000).unwrap_or(0);
        let mut pipe = redis::pipe();
        for method in methods {
            pipe.cmd("SET")
                .arg(self.keys.blocked(method))
                .arg(until_us)
                .arg("PXAT")
                .arg(until_ms)
                .ignore();
        }
        let pipe = &pipe;
        self.through_failover("blocking the budget", |mut conn| async move {
            pipe.query_async::<()>(&mut conn).await
        })
        .await
    }

    /// [`Limiter::note_upstream_refusal`](super::Limiter::note_upstream_refusal): one
    /// script, on Redis's clock, so that the first refusal of a day on any host
    /// records it and the others find it recorded.
    pub(super) async fn note_upstream_refusal(
        &self,
        bucket: &str,
        quota: u64,
        at: Micros,
    ) -> Result<Option<SpentDay>, LimiterError> {
        let Some(day) = drift::upstream_day() else {
            return Ok(None);
        };
        let inv = self
            .scripts
            .upstream_spent(&self.keys, bucket, quota, &day, at.as_i64());
        let inv = &inv;
        let (recorded, units, day_us): (i64, i64, i64) = self
            .through_failover(
                "recording what the upstream's refusal measured",
                |mut conn| async move { inv.invoke_async(&mut conn).await },
            )
            .await?;
        Ok((recorded == 1).then(|| SpentDay {
            bucket: bucket.to_owned(),
            day_us,
            units: u64::try_from(units).unwrap_or(0),
        }))
    }

    /// [`Limiter::upstream_spent`](super::Limiter::upstream_spent).
    pub(super) async fn upstream_spent(&self) -> Result<Vec<SpentDay>, LimiterError> {
        let mut hgetall = redis::cmd("HGETALL");
        hgetall.arg(self.keys.upstream_spent());
        let hgetall = &hgetall;
        let fields: Vec<(String, String)> = self
            .through_failover(
                "reading what the upstream's refusals measured",
                |mut conn| async move { hgetall.query_async(&mut conn).await },
            )
            .await?;
        Ok(fields
            .iter()
            .filter_map(|(field, units)| script::spent_day(field, units))
            .collect())
    }

    pub(super) async fn unblock(&self, methods: &[String]) -> Result<Option<Micros>, LimiterError> {
        let mut pipe = redis::pipe();
        for method in methods {
            pipe.cmd("GETDEL").arg(self.keys.blocked(method));
        }
        let pipe = &pipe;
        let until: Vec<Option<i64>> = self
            .through_failover("lifting the budget's block", |mut conn| async move {
                pipe.query_async::<Vec<Option<i64>>>(&mut conn).await
            })
            .await?;
        Ok(until.into_iter().flatten().max().map(Micros::new))
    }

    /// Sends `op`, and sends the same `op` again while the answer says a failover is under
    /// way (docs/budget.md, "When the limiter is down"): MOVED/ASK (which the cluster
    /// client follows itself first), READONLY, LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN,
    /// and, where the deployment elects a primary, a refused or dropped connection; with
    /// growing pauses, for at most [`FAILOVER_PATIENCE`]. A lone server whose connection
    /// dropped gets one more try on a fresh connection (it restarted, or an idle connection
    /// was cut). Every command here is safe to repeat: a charge carries its id, so a copy
    /// of one that did land counts once. A timeout is not retried: a Redis too slow to
    /// answer in time is down, and waiting twice would double what a run pays for it.
    async fn through_failover<T, F, Fut>(
        &self,
        doing: &'static str,
        op: F,
    ) -> Result<T, LimiterError>
    where
        F: Fn(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        let mut tried_fresh = false;
        loop {
            let e = match op(self.conn.clone()).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if let Some(limiter_at) = clocks_apart_at(&e) {
                return Err(LimiterError::ClocksApart {
                    endpoint: self.endpoint.clone(),
                    apart: ClocksApart {
                        host_at: self.clock.now(),
                        limiter_at,
                    },
                });
            }
            let failover = is_failover(&e, self.elects);
            let again = if failover {
                started.elapsed() + pause <= FAILOVER_PATIENCE
            } else {
                !self.elects && !tried_fresh && worth_once_more(&e)
            };
            if !again {
                return Err(classify(&self.endpoint, doing, &e));
            }
            tracing::debug!(
                "{} answered {} while {doing}; sending it again with the same charge id",
                self.endpoint,
                masked_detail(&e)
            );
            if failover {
                pause = wait(pause).await;
            } else {
                tried_fresh = true;
            }
        }
    }
}

/// Sleeps about `pause` (with jitter, so that many hosts do not come back at once)
/// and returns the next pause.
async fn wait(pause: Duration) -> Duration {
    let jittered = pause.mul_f64(rand::rng().random_range(0.5..1.0));
    tokio::time::sleep(jittered).await;
    (pause * 2).min(MAX_PAUSE)
}

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
mod url;

pub use conn::TlsFiles;
pub use diagnose::RedisCause;
pub use script::Decided;
pub use url::RedisConfigError;

use super::drift::{self, SpentDay};
use super::journal::{Epoch, Journal};
use super::ledger::{Ledger, LedgerStore};
use super::{BUDGET_POLICY, Charge, Decision, LimiterError, Part, PolicyRef, RecordPast, Status};
use crate::clock::{Clock, Micros};
use conn::{Conn, Connector};
use diagnose::{classify, is_failover, worth_once_more};
use script::{Keys, Scripts};
use url::masked_detail;

/// How long a failover may take before the limiter counts as down (DESIGN.md 3.6):
/// long enough for a Sentinel or Cluster election with short timeouts, short enough
/// that a run does not stall for long on a deployment that is really gone.
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
    scripts: Scripts,
    /// This host's record of its grants, replayed when Redis loses the window (3.7).
    /// Boxed: one per process, it need not make every `Limiter` larger.
    ledger: Option<Box<Ledger>>,
    /// This host's clock, read only for the local midnights a calendar-day window
    /// sends along (3.9): Redis's own TIME decides.
    clock: Arc<dyn Clock>,
}

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
        let [set, ..] = self.keys.policy(&part.policy);
        let mut score = redis::cmd("ZSCORE");
        score.arg(set).arg(script::member(charge, part));
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
    /// system's trust store; `clock` is this host's (see [`RedisLimiter::connect_with_tls`]).
    pub async fn connect(
        url: &str,
        budget_key: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<RedisLimiter, LimiterError> {
        RedisLimiter::connect_with_tls(url, &TlsFiles::default(), budget_key, clock).await
    }

    /// Connects to the limiter for the budget named `budget_key` in any form of
    /// DESIGN.md section 8. A configuration that cannot work is
    /// [`LimiterError::Config`]; a deployment in the middle of a failover is waited
    /// for, within [`FAILOVER_PATIENCE`]; one that does not answer is unavailable.
    /// Redis's own TIME decides; this host's `clock` is read only for the midnights
    /// of calendar-day windows.
    pub async fn connect_with_tls(
        url: &str,
        tls: &TlsFiles,
        budget_key: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<RedisLimiter, LimiterError> {
        let keys = Keys::new(budget_key);
        let [budget_set, ..] = keys.policy(BUDGET_POLICY);
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
            scripts: Scripts::new(),
            ledger: None,
            clock,
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Keeps this host's ledger of grants in `journal` from now on (DESIGN.md 3.7),
    /// replays it if Redis no longer holds the window this host last charged into, and
    /// prunes what every window has let go.
    #[must_use = "the limiter that keeps the ledger is the one returned"]
    pub async fn keep_ledger(mut self, journal: Arc<Journal>, budget_key: &str) -> RedisLimiter {
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
        // A calendar day goes as the midnights around this host's clock; the script
        // takes the day that Redis's own clock falls in.
        let inv = self
            .scripts
            .charge(&self.keys, charge, self.clock.now().as_i64(), age);
        let inv = &inv;
        let reply: redis::Value = self
            .through_failover("charging the budget", |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await?;
        script::charge_reply(&self.endpoint, charge, &reply)
    }

    pub(super) async fn status(
        &self,
        policies: &[PolicyRef],
        with_entries: &[&str],
    ) -> Result<Status, LimiterError> {
        let inv = self.scripts.status(
            &self.keys,
            policies,
            with_entries,
            self.clock.now().as_i64(),
        );
        let inv = &inv;
        let reply: script::StatusReply = self
            .through_failover("reading the budget", |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await?;
        Ok(script::status_reply(policies, with_entries, reply))
    }

    pub(super) async fn block_until(
        &self,
        bucket: &str,
        until: Micros,
    ) -> Result<(), LimiterError> {
        let until_us = until.as_i64();
        let until_ms = u64::try_from(until_us / 1000).unwrap_or(0);
        let mut set = redis::cmd("SET");
        set.arg(self.keys.blocked(bucket))
            .arg(until_us)
            .arg("PXAT")
            .arg(until_ms);
        let set = &set;
        self.through_failover("blocking the budget", |mut conn| async move {
            set.query_async::<()>(&mut conn).await
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

    pub(super) async fn unblock(&self, bucket: &str) -> Result<Option<Micros>, LimiterError> {
        let mut getdel = redis::cmd("GETDEL");
        getdel.arg(self.keys.blocked(bucket));
        let getdel = &getdel;
        let until: Option<i64> = self
            .through_failover("lifting the budget's block", |mut conn| async move {
                getdel.query_async::<Option<i64>>(&mut conn).await
            })
            .await?;
        Ok(until.map(Micros::new))
    }

    /// Sends `op`, and sends the same `op` again while the answer says a failover
    /// is under way (DESIGN.md 3.6): MOVED/ASK (which the cluster client follows
    /// itself first), READONLY, LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, and, where
    /// the deployment elects a primary, a refused or dropped connection; with growing
    /// pauses, for at most [`FAILOVER_PATIENCE`]. A lone server whose connection
    /// dropped gets one more try on a fresh connection (it restarted, or an idle
    /// connection was cut). Every command here is safe to repeat: a charge carries
    /// its id, so a copy of one that did land counts once. A timeout is not retried:
    /// a Redis too slow to answer in time is down, and waiting twice would double
    /// what a run pays for it.
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

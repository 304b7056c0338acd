//! The shared budget: an exact, weighted sliding-window log per policy, charged
//! before every upstream call (DESIGN.md section 3).
//!
//! [`Budget`] is the configuration; it turns "N calls of method M" into a [`Charge`]
//! whose parts say, per policy, how many units go to which window under which maximum.
//! A [`Limiter`] (Redis or the embedded SQLite one) decides a charge atomically and
//! returns a [`Decision`]. The window arithmetic itself lives in [`model`], apart from
//! any store and any clock. This module knows nothing of YouTube.

mod embedded;
mod journal;
pub mod model;
mod redis;
mod redis_connect;
pub(crate) mod schema;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use embedded::EmbeddedLimiter;
pub use journal::{Epoch, Journal, JournalError, Journalled, Ledger, Replayed};
pub use model::{Fit, PartOutcome};
pub use redis::{Decided, RedisLimiter};
pub use redis_connect::{RedisConfigError, TlsFiles, mask_url};

/// The name of the main policy: the budget's own window. Limits may not use it.
pub const BUDGET_POLICY: &str = "budget";

/// Names a `[[limit]]` may not take because the budget's own keys use them.
pub const RESERVED_POLICY_NAMES: &[&str] = &[BUDGET_POLICY, "blocked", "journal", "epoch"];

/// The policy that denies while the upstream has said its quota is spent (3.5).
pub const UPSTREAM_POLICY: &str = "upstream";

/// How a `[[limit]]` counts a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// Each call counts its cost in units.
    Unit,
    /// Each call counts 1, whatever its cost.
    Call,
}

/// What to do with a method's calls while the limiter cannot be reached (3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownPolicy {
    Allow,
    Deny,
}

/// How far into the budget a caller may go: scheduled runs stop at the ceiling;
/// backfill and `budget charge --reserve` may use the reserve up to the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    Ceiling,
    Quota,
}

impl Allowance {
    /// The budget's own word for the limit: `ceiling` or `quota`.
    pub fn as_str(self) -> &'static str {
        match self {
            Allowance::Ceiling => "ceiling",
            Allowance::Quota => "quota",
        }
    }
}

/// A narrower policy charged atomically with the budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub name: String,
    pub methods: Vec<String>,
    pub max: u64,
    pub window: Duration,
    pub per: Per,
}

/// One upstream credential's quota pool and the narrower limits inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Names the shared pool (not the API key itself).
    pub key: String,
    pub quota: u64,
    pub ceiling: u64,
    pub window: Duration,
    pub costs: BTreeMap<String, u64>,
    pub when_limiter_down: BTreeMap<String, DownPolicy>,
    pub limits: Vec<Limit>,
}

/// The most units a quota, ceiling, cost, limit maximum or single charge may be.
/// Redis carries units as Lua numbers (doubles, exact to 2^53) and a window's total
/// adds charges to them, so values stay well below that: 2^50 leaves room for the
/// window to hold the maximum several times over (calls replayed from the journal are
/// counted even into a full window) before any sum loses a unit.
pub const MAX_UNITS: u64 = 1 << 50;

/// A method the budget has no cost for: a programming or configuration mistake, never
/// a throttle.
#[derive(Debug, thiserror::Error)]
#[error("no cost is configured for method \"{0}\"; add it to [costs] in quota-costs.toml")]
pub struct UnknownMethod(pub String);

/// Why a charge could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ChargeError {
    #[error(transparent)]
    UnknownMethod(#[from] UnknownMethod),
    /// More units than the limiter can count exactly: refused rather than rounded or
    /// wrapped, either of which could let calls through uncounted.
    #[error(
        "{count} × \"{method}\" at {cost} units each is more than a charge may hold ({MAX_UNITS} units); charge fewer calls at once"
    )]
    TooLarge {
        method: String,
        count: u64,
        cost: u64,
    },
}

impl Budget {
    pub fn cost(&self, method: &str) -> Result<u64, UnknownMethod> {
        self.costs
            .get(method)
            .copied()
            .ok_or_else(|| UnknownMethod(method.to_owned()))
    }

    /// The maximum of the budget's own window for a caller.
    pub fn max_for(&self, allowance: Allowance) -> u64 {
        match allowance {
            Allowance::Ceiling => self.ceiling,
            Allowance::Quota => self.quota,
        }
    }

    /// Unlisted methods are denied while the limiter is down.
    pub fn when_down(&self, method: &str) -> DownPolicy {
        self.when_limiter_down
            .get(method)
            .copied()
            .unwrap_or(DownPolicy::Deny)
    }

    /// Every policy of this budget, the budget's own window first.
    pub fn policies(&self) -> Vec<PolicyRef> {
        std::iter::once(PolicyRef {
            name: BUDGET_POLICY.to_owned(),
            window: self.window,
        })
        .chain(self.limits.iter().map(|l| PolicyRef {
            name: l.name.clone(),
            window: l.window,
        }))
        .collect()
    }

    /// The charge for `count` calls of `method` as one all-or-nothing step: the
    /// budget's window gets `count × cost` units (unless the cost is 0), and so does
    /// every limit that lists the method (`count` for a per-call limit).
    pub fn charge(
        &self,
        id: &str,
        method: &str,
        count: u64,
        allowance: Allowance,
    ) -> Result<Charge, ChargeError> {
        let cost = self.cost(method)?;
        let units = cost
            .checked_mul(count)
            .filter(|u| *u <= MAX_UNITS && count <= MAX_UNITS)
            .ok_or_else(|| ChargeError::TooLarge {
                method: method.to_owned(),
                count,
                cost,
            })?;
        let mut parts = Vec::with_capacity(1 + self.limits.len());
        if units > 0 {
            parts.push(Part {
                policy: BUDGET_POLICY.to_owned(),
                window: self.window,
                max: self.max_for(allowance),
                units,
            });
        }
        for limit in self
            .limits
            .iter()
            .filter(|l| l.methods.iter().any(|m| m == method))
        {
            let units = match limit.per {
                Per::Unit => units,
                Per::Call => count,
            };
            if units > 0 {
                parts.push(Part {
                    policy: limit.name.clone(),
                    window: limit.window,
                    max: limit.max,
                    units,
                });
            }
        }
        Ok(Charge {
            id: id.to_owned(),
            method: method.to_owned(),
            units,
            parts,
        })
    }
}

/// A policy's name and window, enough to read its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRef {
    pub name: String,
    pub window: Duration,
}

/// What one charge asks of one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub policy: String,
    pub window: Duration,
    pub max: u64,
    pub units: u64,
}

/// One all-or-nothing request to the limiter, for one upstream call (or `count` calls
/// charged together). `id` is unique to the call: sending the same charge twice
/// records it once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub id: String,
    pub method: String,
    /// Units charged to the budget's own window.
    pub units: u64,
    pub parts: Vec<Part>,
}

/// The limiter's answer to a charge.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub granted: bool,
    /// The same charge id had already been recorded; nothing was charged again.
    pub duplicate: bool,
    pub units: u64,
    /// Each part's state after the decision, in the charge's order.
    pub parts: Vec<PartOutcome>,
    /// The policy that said no (the one with the longest wait), or `upstream` while
    /// the budget is blocked.
    pub denied_by: Option<String>,
    /// When this charge would fit; `None` when granted, or when it can never fit.
    pub retry_after: Option<Duration>,
}

impl Decision {
    /// The policy the numbers refer to: the one that denied, or else the one with the
    /// least room left (the next to deny).
    pub fn applied(&self) -> Option<&PartOutcome> {
        match &self.denied_by {
            Some(name) => self.parts.iter().find(|p| &p.policy == name),
            None => self.parts.iter().min_by_key(|p| p.remaining()),
        }
    }

    pub fn used(&self) -> u64 {
        self.applied().map_or(0, |p| p.used)
    }

    pub fn remaining(&self) -> u64 {
        self.applied().map_or(0, |p| p.remaining())
    }
}

/// One accepted entry of a window, as status reports show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Microseconds since the Unix epoch, on the limiter's clock.
    pub at_us: i64,
    pub units: u64,
    pub method: String,
}

/// The state of one policy's window.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyStatus {
    pub name: String,
    pub window: Duration,
    pub used: u64,
    /// When the oldest entry leaves the window.
    pub next_free: Option<Duration>,
    /// When the newest entry leaves the window, emptying it.
    pub empty_in: Option<Duration>,
    /// Present only when asked for.
    pub entries: Option<Vec<Entry>>,
}

/// The budget as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// The limiter's clock, microseconds since the Unix epoch.
    pub now_us: i64,
    pub policies: Vec<PolicyStatus>,
    /// Microseconds since the Unix epoch until which the upstream said no (3.5).
    pub blocked_until_us: Option<i64>,
}

/// The limiter could not decide.
#[derive(Debug, thiserror::Error)]
pub enum LimiterError {
    /// The limiter could not be reached or did not answer in time: the
    /// `[when_limiter_down]` policy applies.
    #[error("the limiter at {endpoint} is unreachable: {reason}")]
    Unavailable { endpoint: String, reason: String },
    /// The limiter answered, but not as expected: not retried blindly.
    #[error("the limiter at {endpoint} failed while {doing}: {reason}")]
    Failed {
        endpoint: String,
        doing: &'static str,
        reason: String,
    },
    /// The limiter is configured in a way no retry can fix (exit 78).
    #[error(transparent)]
    Config(#[from] RedisConfigError),
}

impl LimiterError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, LimiterError::Unavailable { .. })
    }
}

impl crate::error::Exit for LimiterError {
    /// A limiter configured so that no retry can help is a configuration error (78);
    /// one that is down or misbehaving is a failure (1) (a run applies
    /// `[when_limiter_down]` before it gets this far).
    fn exit_code(&self) -> crate::error::ExitCode {
        match self {
            LimiterError::Config(_) => crate::error::ExitCode::Config,
            LimiterError::Unavailable { .. } | LimiterError::Failed { .. } => {
                crate::error::ExitCode::Failed
            }
        }
    }
}

/// Either backend, with the same promises; or a Redis that could not be reached when
/// the command started, which answers every request as unavailable so that the
/// `[when_limiter_down]` policy applies to the command's calls as it would had Redis
/// gone away mid-run.
pub enum Limiter {
    Redis(RedisLimiter),
    Embedded(EmbeddedLimiter),
    Down { endpoint: String, reason: String },
}

fn unavailable(endpoint: &str, reason: &str) -> LimiterError {
    LimiterError::Unavailable {
        endpoint: endpoint.to_owned(),
        reason: reason.to_owned(),
    }
}

impl Limiter {
    /// What to use when opening the limiter failed: a limiter that could not be
    /// reached is [`Limiter::Down`]; any other failure stays an error.
    pub fn or_down(opened: Result<Limiter, LimiterError>) -> Result<Limiter, LimiterError> {
        match opened {
            Err(LimiterError::Unavailable { endpoint, reason }) => {
                Ok(Limiter::Down { endpoint, reason })
            }
            other => other,
        }
    }

    pub fn is_down(&self) -> bool {
        matches!(self, Limiter::Down { .. })
    }

    pub async fn charge(&self, charge: &Charge) -> Result<Decision, LimiterError> {
        match self {
            Limiter::Redis(l) => {
                let (decision, epoch) = l.charge(charge, None).await?;
                if let Some(ledger) = l.ledger() {
                    if decision.granted
                        && let Err(e) = ledger.granted(charge).await
                    {
                        tracing::warn!(
                            "{e}; charge {} is counted in the window, but cannot be restored should Redis lose it",
                            charge.id
                        );
                    }
                    self.watch_epoch(ledger, Some(epoch)).await;
                }
                Ok(decision)
            }
            Limiter::Embedded(l) => l.charge(charge, None).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Records a charge that already happened `age` ago (a call made while the
    /// limiter was down), whatever the window holds: the call was made, so the
    /// window must count it. Recording the same id twice counts it once.
    pub async fn record_past(
        &self,
        charge: &Charge,
        age: Duration,
    ) -> Result<Decision, LimiterError> {
        match self {
            Limiter::Redis(l) => l.charge(charge, Some(age)).await.map(|(d, _)| d),
            Limiter::Embedded(l) => l.charge(charge, Some(age)).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// The state of `policies`; entries are listed for those whose name is in
    /// `with_entries`. Charges nothing.
    pub async fn status(
        &self,
        policies: &[PolicyRef],
        with_entries: &[&str],
    ) -> Result<Status, LimiterError> {
        match self {
            Limiter::Redis(l) => l.status(policies, with_entries).await,
            Limiter::Embedded(l) => l.status(policies, with_entries).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Denies every charge until `until_us` (microseconds since the Unix epoch), for
    /// every process sharing this limiter.
    pub async fn block_until(&self, until_us: i64) -> Result<(), LimiterError> {
        match self {
            Limiter::Redis(l) => l.block_until(until_us).await,
            Limiter::Embedded(l) => l.block_until(until_us).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Lifts a block set by [`Limiter::block_until`] before it ends. Returns when it
    /// would have ended, or `None` when the budget was not blocked.
    pub async fn unblock(&self) -> Result<Option<i64>, LimiterError> {
        match self {
            Limiter::Redis(l) => l.unblock().await,
            Limiter::Embedded(l) => l.unblock().await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Whether calls counted in this limiter stay in the local ledger: only Redis can
    /// lose a window while this host's database keeps it.
    pub fn keeps_ledger(&self) -> bool {
        matches!(self, Limiter::Redis(l) if l.ledger().is_some())
    }

    /// Keeps a ledger of this host's grants in `journal` from now on, replays it if
    /// Redis no longer holds the window this host last charged into, and prunes what
    /// every window has let go. Only Redis needs one; the others ignore it.
    pub async fn keep_ledger(&self, journal: Arc<Journal>, budget_key: &str) {
        let Limiter::Redis(l) = self else { return };
        match Ledger::new(journal, budget_key) {
            Ok(ledger) => l.keep_ledger(ledger),
            Err(e) => {
                tracing::warn!(
                    "{e}; going on without a ledger: should Redis lose the window, this host cannot restore its share"
                );
                return;
            }
        }
        let Some(ledger) = l.ledger() else { return };
        match l.epoch().await {
            Ok(epoch) => self.watch_epoch(ledger, epoch).await,
            // A Redis that stopped answering: the charges will say so.
            Err(e) => tracing::debug!("reading the window's epoch failed: {e}"),
        }
        self.probe_newest_grant(ledger).await;
        if let Err(e) = ledger.journal().prune(budget_key, crate::clock::now_us()) {
            tracing::warn!("{e}; the ledger's old rows stay for next time");
        }
    }

    /// Compares the epoch a reply carried with the one this host last saw; when it
    /// moved, Redis lost the window: replays this host's ledger into it.
    async fn watch_epoch(&self, ledger: &Ledger, seen: Option<Epoch>) {
        let known = ledger.known();
        if known == seen {
            return;
        }
        if known.is_none() {
            if let Err(e) = ledger.remember(seen) {
                tracing::warn!("{e}");
            }
            return;
        }
        let _one_at_a_time = ledger.restoring().await;
        if ledger.known() != known {
            return; // restored meanwhile by another task of this process
        }
        let now = match seen {
            Some(e) => format!("epoch {e}"),
            None => "none".to_owned(),
        };
        let then = known.map_or_else(String::new, |e| e.to_string());
        self.restore(
            ledger,
            &format!(
                "the window is not the one this host charged into (epoch {then} then, {now} now)"
            ),
        )
        .await;
    }

    /// Whether Redis still holds this host's newest grant, when it should: a failover
    /// to a replica that missed the latest writes keeps the epoch but loses them.
    async fn probe_newest_grant(&self, ledger: &Ledger) {
        let Limiter::Redis(l) = self else { return };
        let newest = match ledger.journal().ledger(ledger.budget_key()) {
            Ok((rows, _)) => rows.into_iter().next_back(),
            Err(e) => {
                tracing::warn!("{e}");
                return;
            }
        };
        let Some(newest) = newest else { return };
        // A part whose window still counts it, by a margin no clock step undoes.
        let age = crate::clock::now_us() - newest.made_at_us;
        let Some(part) = newest
            .charge
            .parts
            .iter()
            .find(|p| micros(p.window) > age + 60_000_000)
        else {
            return;
        };
        match l.holds(&newest.charge, part).await {
            Ok(true) => {}
            Ok(false) => {
                let _one_at_a_time = ledger.restoring().await;
                self.restore(
                    ledger,
                    &format!(
                        "the window no longer holds this host's newest charge ({})",
                        newest.charge.id
                    ),
                )
                .await;
            }
            Err(e) => tracing::debug!("looking for this host's newest charge failed: {e}"),
        }
    }

    /// Replays this host's ledger into a window Redis lost (`why` says how it shows),
    /// then remembers the window's epoch.
    async fn restore(&self, ledger: &Ledger, why: &str) {
        let Limiter::Redis(l) = self else { return };
        tracing::warn!(
            "budget \"{}\" on {}: {why}; Redis lost it (a restart without persistence, or a failover to a replica that missed writes). Replaying this host's ledger at the original times; the window is whole again once every host that charged within it has run",
            ledger.budget_key(),
            l.endpoint(),
        );
        let done = match ledger.journal().restore(ledger.budget_key(), self).await {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!("{e}; the ledger is replayed again next time");
                return;
            }
        };
        tracing::info!(
            "restored {} call{} ({} units) of this host into budget \"{}\" on {}",
            done.calls,
            if done.calls == 1 { "" } else { "s" },
            done.units,
            ledger.budget_key(),
            l.endpoint()
        );
        if let Some(e) = done.interrupted {
            tracing::warn!("restoring the ledger stopped: {e}; it is replayed again next time");
            return;
        }
        // The replay itself created the epoch if none was there.
        match l.epoch().await {
            Ok(epoch) => {
                if let Err(e) = ledger.remember(epoch) {
                    tracing::warn!("{e}");
                }
            }
            Err(e) => tracing::warn!("{e}; the ledger is replayed again next time"),
        }
    }

    /// Where the limiter is, for messages (no password).
    pub fn describe(&self) -> String {
        match self {
            Limiter::Redis(l) => l.endpoint().to_owned(),
            Limiter::Embedded(l) => l.endpoint(),
            Limiter::Down { endpoint, .. } => endpoint.clone(),
        }
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Limiter({})", self.describe())
    }
}

/// Microseconds in a duration, saturating.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A non-negative microsecond count as a duration.
pub(crate) fn from_micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

#[cfg(test)]
mod tests;

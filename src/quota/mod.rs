//! The shared budget: an exact, weighted sliding-window log per policy, charged
//! before every upstream call (docs/budget.md, "How the budget counts").
//!
//! [`Budget`] is the configuration; it turns "N calls of method M" into a [`Charge`]
//! whose parts say, per policy, how many units go to which window under which maximum.
//! A [`Limiter`] (Redis or the embedded SQLite one) decides a charge atomically and
//! returns a [`Decision`]. The window arithmetic itself lives in [`model`], apart from
//! any store and any clock. This module knows nothing of YouTube.

mod counting;
pub(crate) mod drift;
mod embedded;
pub(crate) mod figures;
mod fingerprint;
mod journal;
mod ledger;
mod limiter;
pub mod model;
pub(crate) mod recount;
mod redis;
pub(crate) mod schema;
pub mod skew;
mod window;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Micros;
use crate::region_status::LimiterKind;
use crate::sqlite::Db;
use counting::Counting;

pub use embedded::EmbeddedLimiter;
pub use figures::{BucketFigures, FiguresError, LastKnown};
pub use journal::{
    Epoch, Journal, JournalError, Journalled, Replayed, Unreplayed, pending_calls, unreplayed,
};
pub use limiter::{Limiter, RecordPast, charged_on};
pub use model::{Fit, PartOutcome};
pub use redis::slots::{Claim, Finish, Holder, SlotRef};
pub use redis::{RedisCause, RedisConfigError, RedisLimiter, TlsFiles};
pub use window::{Span, Window, Zone};

/// The fleet's slot leases and records, kept by the Redis limiter beside the budget
/// (docs/budget.md, "A fleet: slot leases"); [`RedisLimiter`] claims, renews,
/// finishes and reads them.
pub mod slots {
    pub use super::redis::slots::{
        COMPLETE, Claim, Finish, Holder, MissedReason, RECORD_KEPT, SlotRecord, SlotRef, SlotState,
        Verdict, slot_starts,
    };
}

/// The name of the main policy: the budget's own window, the main bucket. Limits and
/// other buckets may not use it.
pub const BUDGET_POLICY: &str = "budget";

/// Names a `[[limit]]` or `[[bucket]]` may not take because the budget's own keys use
/// them (`upstream_spent`: the record of the upstream's early refusals, 3.5; `limit`
/// heads the keys of every `[[limit]]`; `slot` heads the fleet's slot records and
/// `fence` is their token counter).
pub(crate) const RESERVED_POLICY_NAMES: &[&str] = &[
    BUDGET_POLICY,
    "blocked",
    "journal",
    "epoch",
    "upstream_spent",
    "limit",
    "slot",
    "fence",
];

/// The longest window a policy may have: 31 days. Longer ones would only grow what is
/// kept (below), and a window of years overflowed the expiry arithmetic.
pub(crate) const LONGEST_WINDOW: Duration = Duration::from_secs(31 * 86_400);

/// How long every entry is kept, whatever the window of the policy that holds it and
/// whatever the costs file in force (docs/budget.md): as long as any window that
/// could come back could count it. The file in force cannot decide this, since the
/// file that comes back may have the longer window (a week's, after a day's), so it
/// is the longest window allowed, which also holds a local day of any length (26
/// hours in `Antarctica/Troll`) whole.
pub const KEEP: Duration = LONGEST_WINDOW;

/// Whether a policy is a bucket (the main one included) or a `[[limit]]`: the two
/// never share state, even under one name (docs/budget.md, "When the costs file changes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Bucket,
    Limit,
}

/// The policy that denies while the upstream has said a bucket's quota is spent (3.5).
pub(crate) const UPSTREAM_POLICY: &str = "upstream";

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
    pub(crate) fn as_str(self) -> &'static str {
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
    pub window: Window,
    pub per: Per,
}

/// A bucket (docs/budget.md, "Buckets"): a window the upstream bills some methods
/// from, with its own quota. The main one (`[budget]` with `[costs]`) is named
/// [`BUDGET_POLICY`]; each `[[bucket]]` is another.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// The bucket's policy name: [`BUDGET_POLICY`] for the main one.
    pub name: String,
    pub quota: u64,
    pub ceiling: u64,
    pub window: Window,
    /// Units per call of each of its methods.
    pub costs: BTreeMap<String, u64>,
}

impl Bucket {
    /// The most a caller may fill this bucket to.
    pub(crate) fn max_for(&self, allowance: Allowance) -> u64 {
        match allowance {
            Allowance::Ceiling => self.ceiling,
            Allowance::Quota => self.quota,
        }
    }

    pub(crate) fn is_main(&self) -> bool {
        self.name == BUDGET_POLICY
    }

    /// The bucket's policy, enough to read its state.
    pub(crate) fn policy(&self) -> PolicyRef {
        PolicyRef {
            name: self.name.clone(),
            kind: Kind::Bucket,
            window: self.window.clone(),
            methods: self.methods(),
        }
    }

    /// The bucket's methods.
    pub(crate) fn methods(&self) -> Vec<String> {
        self.costs.keys().cloned().collect()
    }
}

/// One upstream credential's quota: its buckets, the main one first, and the narrower
/// limits across them.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Names the shared pool (not the API key itself).
    pub key: String,
    /// Every bucket, the main one first (so never empty); every method is in exactly
    /// one. Private, so that no budget lacks its main bucket.
    buckets: Vec<Bucket>,
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
    /// The budget of `key` with its main bucket `main`, named [`BUDGET_POLICY`]
    /// whatever it was given, and the `others` after it; no limits, and every method
    /// denied while the limiter is down, until those are set.
    pub fn new(key: impl Into<String>, main: Bucket, others: Vec<Bucket>) -> Budget {
        let main = Bucket {
            name: BUDGET_POLICY.to_owned(),
            ..main
        };
        Budget {
            key: key.into(),
            buckets: std::iter::once(main).chain(others).collect(),
            when_limiter_down: BTreeMap::new(),
            limits: Vec::new(),
        }
    }

    pub fn cost(&self, method: &str) -> Result<u64, UnknownMethod> {
        self.bucket_of(method)
            .and_then(|b| b.costs.get(method).copied())
            .ok_or_else(|| UnknownMethod(method.to_owned()))
    }

    /// The main bucket.
    pub fn main(&self) -> &Bucket {
        &self.buckets[0]
    }

    #[cfg(test)]
    /// The main bucket, to change its figures (its name must stay [`BUDGET_POLICY`]).
    pub(crate) fn main_mut(&mut self) -> &mut Bucket {
        &mut self.buckets[0]
    }

    /// Every bucket, the main one first.
    pub(crate) fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The bucket `name`, the main one as [`BUDGET_POLICY`].
    pub fn bucket(&self, name: &str) -> Option<&Bucket> {
        self.buckets.iter().find(|b| b.name == name)
    }

    /// The bucket `method` is charged to.
    pub(crate) fn bucket_of(&self, method: &str) -> Option<&Bucket> {
        self.buckets.iter().find(|b| b.costs.contains_key(method))
    }

    /// Every method of every bucket, with its cost.
    pub(crate) fn all_costs(&self) -> BTreeMap<&str, u64> {
        self.buckets
            .iter()
            .flat_map(|b| b.costs.iter().map(|(m, c)| (m.as_str(), *c)))
            .collect()
    }

    /// Unlisted methods are denied while the limiter is down.
    pub(crate) fn when_down(&self, method: &str) -> DownPolicy {
        self.when_limiter_down
            .get(method)
            .copied()
            .unwrap_or(DownPolicy::Deny)
    }

    /// Every policy of this budget: the main bucket's window first, then the other
    /// buckets', then the limits'.
    pub fn policies(&self) -> Vec<PolicyRef> {
        self.buckets()
            .iter()
            .map(Bucket::policy)
            .chain(self.limits.iter().map(|l| PolicyRef {
                name: l.name.clone(),
                kind: Kind::Limit,
                window: l.window.clone(),
                methods: l.methods.clone(),
            }))
            .collect()
    }

    /// The charge for `count` calls of `method` as one all-or-nothing step: the
    /// window of the method's bucket gets `count × cost` units (unless the cost is 0),
    /// and so does every limit that lists the method (`count` for a per-call limit).
    pub fn charge(
        &self,
        id: &str,
        method: &str,
        count: u64,
        allowance: Allowance,
    ) -> Result<Charge, ChargeError> {
        let bucket = self
            .bucket_of(method)
            .ok_or_else(|| UnknownMethod(method.to_owned()))?;
        let cost = bucket.costs.get(method).copied().unwrap_or(0);
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
                policy: bucket.name.to_owned(),
                kind: Kind::Bucket,
                window: bucket.window.clone(),
                max: bucket.max_for(allowance),
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
                    kind: Kind::Limit,
                    window: limit.window.clone(),
                    max: limit.max,
                    units,
                });
            }
        }
        Ok(Charge {
            id: id.to_owned(),
            method: method.to_owned(),
            bucket: bucket.name.to_owned(),
            calls: count,
            units,
            parts,
        })
    }
}

/// A policy's name and window, enough to read its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRef {
    pub name: String,
    pub kind: Kind,
    pub window: Window,
    /// A bucket's methods (whose blocks make the bucket's), or a limit's.
    pub methods: Vec<String>,
}

impl Part {
    /// The policy's kind and name: what tells its window from every other's.
    pub fn key(&self) -> (Kind, String) {
        (self.kind, self.policy.clone())
    }
}

/// What one charge asks of one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub policy: String,
    pub kind: Kind,
    pub window: Window,
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
    /// The bucket the method belongs to: while the upstream has blocked it, the
    /// charge is denied (3.5).
    pub bucket: String,
    /// How many calls of `method` it pays for: with the method, what the charge is counted
    /// again from when the costs change (docs/budget.md, "When the costs file changes"). 0
    /// for a charge journalled before calls were kept, whose parts are then taken as
    /// written.
    pub calls: u64,
    /// Units charged to the bucket's window.
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
    /// the charge's bucket is blocked.
    pub denied_by: Option<String>,
    /// When this charge would fit; `None` when granted, or when it can never fit.
    pub retry_after: Option<Duration>,
}

impl Decision {
    /// The policy the numbers refer to: the one that denied, or else the one with the
    /// least room left (the next to deny).
    pub(crate) fn applied(&self) -> Option<&PartOutcome> {
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
    pub kind: Kind,
    pub window: Window,
    pub used: u64,
    /// When the oldest entry leaves the window.
    pub next_free: Option<Duration>,
    /// When the newest entry leaves the window, emptying it.
    pub empty_in: Option<Duration>,
    /// Present only when asked for.
    pub entries: Option<Vec<Entry>>,
}

impl PolicyStatus {
    /// The policy's kind and name.
    pub fn key(&self) -> (Kind, String) {
        (self.kind, self.name.clone())
    }
}

/// The budget as it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// Now, on the limiter's clock.
    pub now: Micros,
    pub policies: Vec<PolicyStatus>,
    /// Per bucket among the policies asked for, until when the upstream said no
    /// (3.5); only buckets whose every method is blocked now.
    pub blocked: BTreeMap<String, Micros>,
    /// Per method of those buckets, until when it is blocked: a block stays with the
    /// methods of the bucket that was refused, whatever the costs file (3.8).
    pub blocked_methods: BTreeMap<String, Micros>,
}

impl Status {
    /// The state of `refs` (read as `policies`), with the blocks of their methods.
    pub fn new(
        now: Micros,
        refs: &[PolicyRef],
        policies: Vec<PolicyStatus>,
        blocked_methods: BTreeMap<String, Micros>,
    ) -> Status {
        let blocked = refs
            .iter()
            .filter(|p| p.kind == Kind::Bucket && !p.methods.is_empty())
            .filter_map(|p| {
                let until = p
                    .methods
                    .iter()
                    .map(|m| blocked_methods.get(m).copied())
                    .collect::<Option<Vec<_>>>()?;
                Some((p.name.clone(), until.into_iter().min()?))
            })
            .collect();
        Status {
            now,
            policies,
            blocked,
            blocked_methods,
        }
    }

    /// Until when the upstream blocked `bucket`, if it still does.
    pub fn blocked_until(&self, bucket: &str) -> Option<Micros> {
        self.blocked.get(bucket).copied()
    }

    /// Until when the upstream blocked the main bucket, if it still does.
    pub fn blocked_until_us(&self) -> Option<Micros> {
        self.blocked_until(BUDGET_POLICY)
    }

    /// The state of the policy `name`, when it was asked for.
    pub(crate) fn policy(&self, name: &str) -> Option<&PolicyStatus> {
        self.policies.iter().find(|p| p.name == name)
    }
}

/// Why the limiter failed: what its store said (a [`SqliteCause`], a [`RedisCause`]),
/// so that a caller can tell "database is locked" from "disk full", or a timeout from a
/// refused command, without reading words; or only words (a [`Reason`]). It is the
/// error's `source`, and the error's own words do not repeat it.
pub(crate) type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// SQLite's error under a [`LimiterError`]: `.0.sqlite_error_code()` tells "database
/// is locked" from "disk full". Its words are its own and it has no source, so that a
/// report says them once, as before it was kept (rusqlite's own source repeats them
/// with the bare error code).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SqliteCause(pub rusqlite::Error);

impl From<rusqlite::Error> for SqliteCause {
    fn from(e: rusqlite::Error) -> SqliteCause {
        SqliteCause(e)
    }
}

/// Why the limiter failed, in words, where no error of another kind says it: a reply
/// the script does not give, a limiter found down when the command began.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Reason(pub String);

/// The limiter could not decide. Each variant says what was being done; why travels
/// as `source`.
#[derive(Debug, thiserror::Error)]
pub enum LimiterError {
    /// The limiter could not be reached or did not answer in time: the
    /// `[when_limiter_down]` policy applies.
    #[error("the limiter at {endpoint} is unreachable")]
    Unavailable {
        endpoint: String,
        #[source]
        source: Cause,
    },
    /// The limiter answered, but not as expected: not retried blindly.
    #[error("the limiter at {endpoint} failed while {doing}")]
    Failed {
        endpoint: String,
        doing: &'static str,
        #[source]
        source: Cause,
    },
    /// The limiter's clock and this host's are too far apart for it to count a
    /// calendar-day window (docs/alerts.md): it answered, and decided nothing. A clock
    /// stop (75), as a skew the upstream's answers show.
    #[error("the limiter at {endpoint} decided nothing: {apart}; {}", .apart.advice(&[]))]
    ClocksApart {
        endpoint: String,
        apart: skew::ClocksApart,
    },
    /// The limiter is configured in a way no retry can fix (exit 78).
    #[error(transparent)]
    Config(#[from] RedisConfigError),
}

impl LimiterError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, LimiterError::Unavailable { .. })
    }

    /// The limiter answered, though it decided nothing: its clock and this host's
    /// are too far apart (`trendsync_limiter_up` is 1 for it).
    pub fn clocks_apart(&self) -> Option<skew::ClocksApart> {
        match self {
            LimiterError::ClocksApart { apart, .. } => Some(*apart),
            _ => None,
        }
    }

    /// The limiter could not have counted the charge this error answers: it was never
    /// reached (it refused the connection, or was found down before any charge). A
    /// timeout or a dropped connection may come after the store took the charge.
    pub(crate) fn surely_uncounted(&self) -> bool {
        match self {
            LimiterError::Unavailable { source, .. } => match source.downcast_ref::<RedisCause>() {
                Some(redis) => redis.refused,
                // Said in words only by a limiter found down when the command began,
                // which sends nothing.
                None => source.is::<Reason>(),
            },
            _ => false,
        }
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

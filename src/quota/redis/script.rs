//! The Lua scripts and what passes between them and the limiter: where a budget's keys
//! are (as `prelude.lua` lays them out), what each script is sent, and what its reply
//! says. The scripts themselves sit beside this file; the `redis` crate sends each by
//! its hash, and whole only when the server does not hold it yet.

use std::time::Duration;

use redis::{Script, ScriptInvocation};

use crate::clock::Micros;

use crate::quota::drift::{self, SpentDay};
use crate::quota::journal::Epoch;
use crate::quota::model::{self, Fit, PartOutcome};
use crate::quota::recount::Counted;
use crate::quota::skew::{self, LimiterClock};
use crate::quota::{
    BUDGET_POLICY, Charge, Decision, Entry, Kind, LimiterError, Part, PolicyRef, PolicyStatus,
    Reason, Status, Window, from_micros, micros,
};

/// A charge script's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    pub decision: Decision,
    /// The epoch of the window it was decided in (docs/budget.md, "When Redis loses the window").
    pub epoch: Epoch,
    /// Redis's clock when it decided, microseconds since the Unix epoch.
    pub now_us: i64,
}

/// Every script begins with the helpers and reply codes they share.
const CHARGE_LUA: &str = concat!(include_str!("prelude.lua"), include_str!("charge.lua"));
const STATUS_LUA: &str = concat!(include_str!("prelude.lua"), include_str!("status.lua"));
const UPSTREAM_SPENT_LUA: &str = concat!(
    include_str!("prelude.lua"),
    include_str!("upstream_spent.lua")
);
const ENTRIES_LUA: &str = concat!(include_str!("prelude.lua"), include_str!("entries.lua"));
const RECOUNT_LUA: &str = concat!(include_str!("prelude.lua"), include_str!("recount.lua"));

/// The scripts, with the hashes they are called by.
pub(super) struct Scripts {
    charge: Script,
    status: Script,
    upstream_spent: Script,
    entries: Script,
    recount: Script,
}

/// What the client's budget is, as the scripts compare it with the stamp the window
/// was last charged under: `stamp` is '' for a client that charges whatever it is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stamp<'a> {
    pub(crate) stamp: &'a str,
    /// How long every entry is kept, whatever its window.
    pub(crate) held: Duration,
    /// When the upstream last confirmed Redis `TIME`, if it did.
    pub(crate) confirmed_us: Option<i64>,
}

impl Stamp<'_> {
    /// The scripts' keeping argument, "<held>:<confirmed>" (`holding` in
    /// prelude.lua). A `TIME` no answer ever confirmed is sent as confirmed at 0, so
    /// that the script drops nothing by it that a clock jumped ahead by less than its
    /// margin (a week) would still need (docs/budget.md).
    fn keeping(&self) -> String {
        format!("{}:{}", micros(self.held), self.confirmed_us.unwrap_or(0))
    }
}

impl Scripts {
    pub(super) fn new() -> Scripts {
        Scripts {
            charge: Script::new(CHARGE_LUA),
            status: Script::new(STATUS_LUA),
            upstream_spent: Script::new(UPSTREAM_SPENT_LUA),
            entries: Script::new(ENTRIES_LUA),
            recount: Script::new(RECOUNT_LUA),
        }
    }

    /// The charge script's call for `charge` (with `age`, a replay of a call made
    /// that long ago), at `now_us` on this host's clock.
    pub(super) fn charge(
        &self,
        keys: &Keys,
        stamp: Stamp<'_>,
        charge: &Charge,
        now_us: i64,
        age: Option<Duration>,
    ) -> ScriptInvocation<'_> {
        let mut inv = self.charge.prepare_invoke();
        inv.key(keys.blocked(&charge.method))
            .key(keys.epoch())
            .key(keys.stamp());
        // Totals, then oldest times, then sets: the script reads the first two kinds
        // with the block, the epoch and the stamp in one MGET.
        let policy_keys: Vec<[String; 3]> = charge
            .parts
            .iter()
            .map(|p| keys.policy(p.kind, &p.policy))
            .collect();
        for column in [1, 2, 0] {
            for k in &policy_keys {
                inv.key(k[column].as_str());
            }
        }
        inv.arg(stamp.stamp).arg(stamp.keeping());
        for part in &charge.parts {
            // The room, the most the total may be for the charge to fit: negative
            // when the units alone exceed the maximum.
            let room = i128::from(part.max) - i128::from(part.units);
            inv.arg(part.window.script_arg(now_us))
                .arg(room.to_string())
                .arg(part.units)
                .arg(member(charge, part));
        }
        // Only a replay carries an age: a live charge spares the script an argument.
        if let Some(age) = age {
            inv.arg(micros(age));
        }
        inv
    }

    /// The status script's call for `policies`, listing the entries of those named
    /// in `with_entries`, at `now_us` on this host's clock.
    pub(super) fn status(
        &self,
        keys: &Keys,
        stamp: &str,
        policies: &[PolicyRef],
        with_entries: &[&str],
        now_us: i64,
    ) -> ScriptInvocation<'_> {
        let mut inv = self.status.prepare_invoke();
        inv.key(keys.stamp()).arg(stamp).arg(policies.len());
        for p in policies {
            for key in keys.policy(p.kind, &p.name) {
                inv.key(key);
            }
            inv.arg(p.window.script_arg(now_us))
                .arg(u8::from(with_entries.contains(&p.name.as_str())));
        }
        for method in blockable(policies) {
            inv.key(keys.blocked(method));
        }
        inv
    }

    /// The call of `upstream_spent.lua` for a refusal of `bucket` (docs/budget.md, "When
    /// the upstream refuses"): `day` is the upstream's day as a window, sent as the
    /// midnights around `at_us` (a recent time of Redis's own), of which the script takes
    /// the one Redis TIME falls in.
    pub(super) fn upstream_spent(
        &self,
        keys: &Keys,
        bucket: &str,
        quota: u64,
        day: &Window,
        at_us: i64,
    ) -> ScriptInvocation<'_> {
        let [set, ..] = keys.policy(Kind::Bucket, bucket);
        let mut inv = self.upstream_spent.prepare_invoke();
        inv.key(keys.upstream_spent())
            .key(set)
            .arg(bucket)
            .arg(day.script_arg(at_us))
            .arg(quota)
            .arg(micros(drift::KEEP));
        inv
    }

    /// The entries script's call: every entry in the sets of `buckets`.
    pub(super) fn entries(&self, keys: &Keys, buckets: &[String]) -> ScriptInvocation<'_> {
        let mut inv = self.entries.prepare_invoke();
        inv.key(keys.stamp());
        for b in buckets {
            let [set, ..] = keys.policy(Kind::Bucket, b);
            inv.key(set);
        }
        inv
    }

    /// The recount script's call: `read` (the buckets whose sets the entries script
    /// read, with the stamp and token it gave) replaced by `rebuilt`, under `stamp`.
    /// `legacy` names more keys to delete (an older layout's).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn recount(
        &self,
        keys: &Keys,
        stamp: Stamp<'_>,
        read: (&[String], &str, &str),
        legacy: &[String],
        rebuilt: &[(PolicyRef, Vec<Counted>)],
        now_us: i64,
    ) -> ScriptInvocation<'_> {
        let (buckets, was, token) = read;
        let mut inv = self.recount.prepare_invoke();
        inv.key(keys.stamp());
        let old: Vec<[String; 3]> = buckets
            .iter()
            .map(|b| keys.policy(Kind::Bucket, b))
            .collect();
        for [set, ..] in &old {
            inv.key(set.as_str());
        }
        let deleted: Vec<&String> = old.iter().flatten().chain(legacy).collect();
        for k in &deleted {
            inv.key(k.as_str());
        }
        for (p, _) in rebuilt {
            for key in keys.policy(p.kind, &p.name) {
                inv.key(key);
            }
        }
        inv.arg(was)
            .arg(token)
            .arg(stamp.stamp)
            .arg(stamp.keeping())
            .arg(old.len())
            .arg(deleted.len())
            .arg(rebuilt.len());
        for (p, entries) in rebuilt {
            inv.arg(p.window.script_arg(now_us)).arg(entries.len());
            for e in entries {
                inv.arg(e.at_us).arg(e.member());
            }
        }
        inv
    }
}

/// The field of the budget's record of early refusals for `bucket` and the upstream
/// day starting at `day_us`, as `upstream_spent.lua` writes it, read back.
pub(super) fn spent_day(field: &str, units: &str) -> Option<SpentDay> {
    let (bucket, day) = field.rsplit_once('|')?;
    Some(SpentDay {
        bucket: bucket.to_owned(),
        day_us: day.parse().ok()?,
        units: units.parse().ok()?,
    })
}

/// The methods whose blocks a status reads: those of the buckets among `policies`,
/// in order.
fn blockable(policies: &[PolicyRef]) -> impl Iterator<Item = &str> {
    policies
        .iter()
        .filter(|p| p.kind == Kind::Bucket)
        .flat_map(|p| p.methods.iter().map(String::as_str))
}

/// Where one budget's state lives in Redis (`prelude.lua`).
#[derive(Debug)]
pub(super) struct Keys {
    /// `trendsync:{<budget.key>}`: the hash tag keeps every key of one budget in one
    /// Redis Cluster slot, so the script may touch several policies at once.
    prefix: String,
}

impl Keys {
    pub(super) fn new(budget_key: &str) -> Keys {
        Keys {
            prefix: format!("trendsync:{{{budget_key}}}"),
        }
    }

    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Where the upstream's block of `method`'s bucket is kept: with the method, so that it
    /// stops the same calls under any costs file (docs/budget.md, "When the costs file
    /// changes").
    pub(super) fn blocked(&self, method: &str) -> String {
        format!("{}:blocked:{method}", self.prefix)
    }

    /// Where the layout before per-method blocks kept the block of `bucket`.
    pub(super) fn legacy_blocked(&self, bucket: &str) -> String {
        if bucket == BUDGET_POLICY {
            format!("{}:blocked", self.prefix)
        } else {
            format!("{}:{bucket}:blocked", self.prefix)
        }
    }

    /// A policy's sorted set of entries, its running total, and its oldest entry's time
    /// with the keys' expiry. A bucket's keys are named by the bucket alone (the main
    /// one's `:budget`), as they always were; a limit's carry `:limit:`, so that a
    /// limit and a bucket of one name never share a key.
    pub(super) fn policy(&self, kind: Kind, policy: &str) -> [String; 3] {
        let set = match kind {
            Kind::Bucket => format!("{}:{policy}", self.prefix),
            Kind::Limit => format!("{}:limit:{policy}", self.prefix),
        };
        [set.clone(), format!("{set}:total"), format!("{set}:oldest")]
    }

    /// Where a limit was kept before limits had keys of their own.
    pub(super) fn legacy_limit(&self, limit: &str) -> [String; 3] {
        self.policy(Kind::Bucket, limit)
    }

    /// The stamp: the fingerprint of the budget the window was last charged under,
    /// and the buckets whose sets hold its entries.
    pub(super) fn stamp(&self) -> String {
        format!("{}:budget:stamp", self.prefix)
    }

    /// The budget's records of what the upstream's early refusals measured, per bucket and
    /// upstream day (docs/budget.md, "When the upstream refuses"): one hash beside the
    /// budget's other keys.
    pub(super) fn upstream_spent(&self) -> String {
        format!("{}:upstream_spent", self.prefix)
    }

    /// The window's epoch marker (docs/budget.md, "When Redis loses the window").
    pub(super) fn epoch(&self) -> String {
        format!("{}:epoch", self.prefix)
    }

    /// The record of `region`'s slot starting at `start_s` (`slots.lua`).
    pub(super) fn slot(&self, region: &str, start_s: i64) -> String {
        format!("{}:slot:{region}:{start_s}", self.prefix)
    }

    /// The counter the slots' fencing tokens are taken from (`slots.lua`).
    pub(super) fn fence(&self) -> String {
        format!("{}:fence", self.prefix)
    }
}

/// `part`'s entry for `charge` in its policy's set, as the charge script writes it.
pub(super) fn member(charge: &Charge, part: &Part) -> String {
    crate::quota::recount::member(part.units, &charge.method, &charge.id, charge.calls)
}

/// The charge script's verdict, as `prelude.lua` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Granted,
    Denied,
    Duplicate,
    Blocked,
    /// Granted, told briefly: a live charge that fitted now in every part.
    GrantedNow,
}

impl Verdict {
    fn from_reply(code: i64) -> Option<Verdict> {
        Some(match code {
            0 => Verdict::Granted,
            1 => Verdict::Denied,
            2 => Verdict::Duplicate,
            3 => Verdict::Blocked,
            4 => Verdict::GrantedNow,
            _ => return None,
        })
    }
}

/// A part's fit, as `prelude.lua` names it (FIT_NOW, FIT_AFTER, FIT_NEVER).
fn fit_from_reply(code: i64, wait_us: i64) -> Option<Fit> {
    Some(match code {
        0 => Fit::Now,
        1 => Fit::After(from_micros(wait_us)),
        2 => Fit::Never,
        _ => return None,
    })
}

/// Values per part in the charge script's reply: used, fit, wait, next_free, empty_in.
const PART_REPLY: usize = 5;
/// Values per part in its brief reply (GRANTED_NOW): total, oldest, expires.
const BRIEF_PART_REPLY: usize = 3;

/// Whether a script's reply says the entries are to be counted again first.
pub(super) fn is_recount(reply: &redis::Value) -> bool {
    match reply {
        redis::Value::BulkString(text) => text.as_slice() == b"RECOUNT",
        redis::Value::SimpleString(text) => text == "RECOUNT",
        _ => false,
    }
}

/// The charge script's reply, read as the decision it says.
pub(super) fn charge_reply(
    endpoint: &str,
    charge: &Charge,
    reply: &redis::Value,
) -> Result<Decided, LimiterError> {
    let numbers = match &reply {
        // The brief answer of the common grant: decimal numbers separated by spaces
        // (and colons, within each part's oldest time and expiry).
        redis::Value::BulkString(text) => std::str::from_utf8(text).ok().and_then(|t| {
            t.split([' ', ':'])
                .map(|n| n.parse().ok())
                .collect::<Option<Vec<i64>>>()
        }),
        other => redis::from_redis_value_ref(other).ok(),
    };
    let numbers = numbers.ok_or_else(|| LimiterError::Failed {
        endpoint: endpoint.to_owned(),
        doing: "reading the charge script's answer",
        source: Reason(format!("unexpected reply {reply:?}")).into(),
    })?;
    decode_charge(endpoint, charge, &numbers)
}

/// The charge script's reply as numbers, read as the decision they say.
fn decode_charge(endpoint: &str, charge: &Charge, reply: &[i64]) -> Result<Decided, LimiterError> {
    let bad = || LimiterError::Failed {
        endpoint: endpoint.to_owned(),
        doing: "reading the charge script's answer",
        source: Reason(format!("unexpected reply {reply:?}")).into(),
    };
    let opt = |us: i64| (us >= 0).then(|| from_micros(us));
    let verdict = reply
        .first()
        .and_then(|&code| Verdict::from_reply(code))
        .ok_or_else(bad)?;
    if verdict == Verdict::GrantedNow {
        // GRANTED_NOW, epoch, TIME's seconds and microseconds, then per part the
        // total and oldest time the script read before adding this charge (and
        // the expiry, not needed here). Every part fitted now, and the new entry,
        // the newest, leaves as one made now does (a window from now, or at the
        // end of the day).
        let ([_, epoch, secs, micros_part], rest) =
            reply.split_first_chunk::<4>().ok_or_else(bad)?;
        if rest.len() != BRIEF_PART_REPLY * charge.parts.len() {
            return Err(bad());
        }
        let now_us = secs
            .checked_mul(1_000_000)
            .and_then(|us| us.checked_add(*micros_part))
            .ok_or_else(bad)?;
        let parts = charge
            .parts
            .iter()
            .zip(rest.chunks_exact(BRIEF_PART_REPLY))
            .map(|(part, v)| {
                let span = part.window.at(now_us);
                let left = |at: i64| span.leaves(at, &part.window).checked_sub(now_us);
                Some(PartOutcome {
                    policy: part.policy.clone(),
                    used: u64::try_from(v[0]).ok()?.checked_add(part.units)?,
                    max: part.max,
                    fit: Fit::Now,
                    next_free: opt(left(v[1])?),
                    empty_in: Some(from_micros(left(now_us)?)),
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?;
        let decision = model::decide(charge, parts, false);
        if !decision.granted {
            return Err(bad());
        }
        return Ok(Decided {
            decision,
            epoch: Epoch(*epoch),
            now_us,
        });
    }
    let ([_, blocked_wait, epoch, now_us], rest) =
        reply.split_first_chunk::<4>().ok_or_else(bad)?;
    if rest.len() != PART_REPLY * charge.parts.len() {
        return Err(bad());
    }
    let parts = charge
        .parts
        .iter()
        .zip(rest.chunks_exact(PART_REPLY))
        .map(|(part, v)| {
            Some(PartOutcome {
                policy: part.policy.clone(),
                used: u64::try_from(v[0]).unwrap_or(0),
                max: part.max,
                fit: fit_from_reply(v[1], v[2])?,
                next_free: opt(v[3]),
                empty_in: opt(v[4]),
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    let decision = match verdict {
        Verdict::Blocked => model::blocked(charge, parts, from_micros(*blocked_wait)),
        Verdict::Duplicate => model::decide(charge, parts, true),
        Verdict::Granted | Verdict::Denied | Verdict::GrantedNow => {
            model::decide(charge, parts, false)
        }
    };
    if matches!(verdict, Verdict::Granted | Verdict::Duplicate) != decision.granted {
        return Err(bad());
    }
    Ok(Decided {
        decision,
        epoch: Epoch(*epoch),
        now_us: *now_us,
    })
}

/// The status script's reply: Redis's clock, then per policy its units, when its
/// oldest and newest entries leave (-1 for none), its entries when asked for, and its
/// newest entry's time; then until when each method is blocked (0 if not).
pub(super) type StatusReply = (i64, Vec<(i64, i64, i64, Vec<String>, i64)>, Vec<i64>);

/// The status script's reply for `policies`, read as the budget's state.
pub(super) fn status_reply(
    policies: &[PolicyRef],
    with_entries: &[&str],
    (now_us, states, blocks): StatusReply,
) -> Status {
    let opt = |us: i64| (us >= 0).then(|| from_micros(us));
    for (p, state) in policies.iter().zip(&states) {
        if state.4 > now_us {
            skew::note_clock_went_back(LimiterClock::Redis, &p.name, state.4, now_us);
        }
    }
    let blocked_methods = blockable(policies)
        .zip(blocks)
        .filter(|(_, until)| *until > 0)
        .map(|(m, until)| (m.to_owned(), Micros::new(until)))
        .collect();
    let states = policies
        .iter()
        .zip(states)
        .map(|(p, (used, next_free, empty_in, raw, _))| PolicyStatus {
            name: p.name.clone(),
            kind: p.kind,
            window: p.window.clone(),
            used: u64::try_from(used).unwrap_or(0),
            next_free: opt(next_free),
            empty_in: opt(empty_in),
            entries: with_entries
                .contains(&p.name.as_str())
                .then(|| decode_entries(&raw)),
        })
        .collect();
    Status::new(Micros::new(now_us), policies, states, blocked_methods)
}

/// Members are "<units>|<method>|<id>|<calls>" (or, from an older layout,
/// "<units>|<method>|<id>"), listed with their scores.
fn decode_entries(raw: &[String]) -> Vec<Entry> {
    raw.chunks_exact(2)
        .filter_map(|pair| {
            let mut fields = pair[0].splitn(3, '|');
            let units = fields.next()?.parse().ok().filter(|u| *u > 0)?;
            let method = fields.next()?.to_owned();
            let at_us = pair[1].parse::<f64>().ok()? as i64;
            Some(Entry {
                at_us,
                units,
                method,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;

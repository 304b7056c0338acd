//! How a run ended: the statuses of docs/commands.md, per region and for the run,
//! the JSON summary, and the one-line text summary.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::clock::Micros;
use crate::quota::skew::{ClocksApart, LimiterClock, Skew};
use crate::quota::{Allowance, BUDGET_POLICY, BucketFigures, Decision, UPSTREAM_POLICY, micros};

/// Why a run, or the calls of one bucket (docs/budget.md, "Buckets"), stopped before the plan was
/// done. The first stop is what the run reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The method's bucket (or a narrower limit) said no.
    Budget {
        method: &'static str,
        units: u64,
        denied_by: String,
        retry_after: Option<Duration>,
        /// Units left in the method's bucket.
        remaining: u64,
        /// The method's bucket: `denied_by` is it, or else a limit.
        bucket: String,
    },
    /// The upstream said a bucket's quota is spent, now or earlier (the bucket is
    /// blocked).
    UpstreamQuota {
        until: Micros,
        reason: String,
        /// The bucket of the refused charge (under the costs file in force).
        bucket: String,
        /// The methods blocked: a block stays with the methods of the bucket that was
        /// refused, so after a costs-file switch it may cover only some of `bucket`'s
        /// (docs/json.md, `bucket`).
        methods: Vec<String>,
    },
    /// The limiter could not be reached and the call's policy is `deny`.
    LimiterDown {
        method: &'static str,
        reason: String,
    },
    /// Something a person must fix; no region can succeed.
    Fatal { message: String },
    /// SIGINT or SIGTERM: no new calls; what was fetched is committed.
    Interrupted { signal: &'static str },
    /// The limiter's clock is too far from the upstream's for its window to be
    /// trusted (docs/schema.md): no further calls until it is fixed.
    ClockSkew { skew: Skew },
    /// A clock found too far by an earlier run, and the answer to the call that was to
    /// check it had no readable `Date` (absent, empty, unparsable) or never came: it cannot
    /// confirm the clock, so the run stops as on a disagreeing one (docs/schema.md: the
    /// check fails closed).
    ClockUnconfirmed { clock: LimiterClock },
    /// This host's clock and the limiter's are too far apart for a calendar-day
    /// window to be counted (docs/alerts.md): the limiter decided nothing, and no call
    /// can be charged until the wrong clock is fixed. `advice` says which to fix, as
    /// far as the skews recorded tell.
    ClocksApart { apart: ClocksApart, advice: String },
}

impl Stop {
    /// The stop a denied charge for `method` (of `bucket`) makes at `now`; while
    /// the upstream's block denies it, `blocked` are the methods of `bucket` blocked
    /// now, as far as known (`method` is named anyway). The real run and the dry run
    /// both stop here, so they name the same policy and the same wait.
    pub fn denied(
        method: &'static str,
        bucket: &str,
        d: &Decision,
        now: Micros,
        blocked: &[String],
    ) -> Stop {
        if d.denied_by.as_deref() == Some(UPSTREAM_POLICY) {
            let mut methods = blocked.to_vec();
            if !methods.iter().any(|m| m == method) {
                methods.push(method.to_owned());
            }
            methods.sort_unstable();
            return Stop::UpstreamQuota {
                until: Micros::new(now.as_i64() + d.retry_after.map_or(0, micros)),
                reason: "the upstream said earlier that the key's quota is spent".into(),
                bucket: bucket.to_owned(),
                methods,
            };
        }
        let remaining = d
            .parts
            .iter()
            .find(|p| p.policy == bucket)
            .map_or(d.remaining(), |p| p.remaining());
        Stop::Budget {
            method,
            units: d.units,
            denied_by: d
                .denied_by
                .clone()
                .unwrap_or_else(|| BUDGET_POLICY.to_owned()),
            retry_after: d.retry_after,
            remaining,
            bucket: bucket.to_owned(),
        }
    }

    /// The bucket whose calls a denial or block stopped (`bucket` in `run --json`).
    pub fn bucket(&self) -> Option<&str> {
        match self {
            Stop::Budget { bucket, .. } | Stop::UpstreamQuota { bucket, .. } => Some(bucket),
            Stop::LimiterDown { .. }
            | Stop::Fatal { .. }
            | Stop::Interrupted { .. }
            | Stop::ClockSkew { .. }
            | Stop::ClockUnconfirmed { .. }
            | Stop::ClocksApart { .. } => None,
        }
    }

    /// The policy that said no, when a policy did (`upstream` while blocked).
    pub fn denied_by(&self) -> Option<&str> {
        match self {
            Stop::Budget { denied_by, .. } => Some(denied_by),
            Stop::UpstreamQuota { .. } => Some(UPSTREAM_POLICY),
            Stop::LimiterDown { .. }
            | Stop::Fatal { .. }
            | Stop::Interrupted { .. }
            | Stop::ClockSkew { .. }
            | Stop::ClockUnconfirmed { .. }
            | Stop::ClocksApart { .. } => None,
        }
    }

    pub fn status(&self) -> Status {
        match self {
            Stop::Budget { .. } => Status::BudgetExhausted,
            // Its own status (docs/budget.md, "When the limiter is down"): nothing says the
            // budget is spent; the limiter did not answer, and the method may not go ahead
            // without it.
            Stop::LimiterDown { .. } => Status::LimiterDown,
            // Its own status, never a spent budget's (docs/schema.md): the budget may be
            // far from spent; the clock it is counted by is what to fix.
            Stop::ClockSkew { .. } | Stop::ClockUnconfirmed { .. } | Stop::ClocksApart { .. } => {
                Status::ClockSkew
            }
            Stop::UpstreamQuota { .. } => Status::UpstreamQuotaExhausted,
            Stop::Fatal { .. } => Status::Failed,
            Stop::Interrupted { .. } => Status::Interrupted,
        }
    }

    /// Why a region the run never reached after this stop was not attempted
    /// (docs/json.md, `regions[].error`): the stop in its own words, except that the
    /// error of the region whose call stopped the run (`failed_region`) is named as
    /// that region's, never given as this one's.
    pub fn not_attempted(&self, now: Micros, failed_region: Option<&str>) -> String {
        match (self, failed_region) {
            (Stop::Fatal { .. }, Some(code)) => {
                format!("not attempted: the run stopped before it, after {code}'s error")
            }
            _ => format!(
                "not attempted: the run stopped before it: {}",
                self.describe(now)
            ),
        }
    }

    /// When trying again may succeed.
    pub fn retry_after(&self, now: Micros) -> Option<Duration> {
        match self {
            Stop::Budget { retry_after, .. } => *retry_after,
            Stop::UpstreamQuota { until, .. } => Some(until.since(now)),
            Stop::LimiterDown { .. }
            | Stop::Fatal { .. }
            | Stop::Interrupted { .. }
            | Stop::ClockSkew { .. }
            | Stop::ClockUnconfirmed { .. }
            | Stop::ClocksApart { .. } => None,
        }
    }

    /// The reason, as a person reads it.
    pub fn describe(&self, now: Micros) -> String {
        let frees = |d: Option<Duration>| match d {
            Some(d) => format!(
                "capacity frees in {} (at {})",
                crate::output::human::duration(d),
                crate::output::human::timestamp(now.as_i64() + crate::quota::micros(d))
            ),
            None => "it can never fit: the call is larger than the maximum that said no".to_owned(),
        };
        match self {
            Stop::Budget {
                method,
                units,
                denied_by,
                retry_after,
                remaining,
                bucket,
            } => format!(
                "budget exhausted: {method} ({units} unit{}) denied by {} with {remaining} units left in its bucket; {}",
                if *units == 1 { "" } else { "s" },
                said_no(denied_by, bucket),
                frees(*retry_after)
            ),
            // The reason is the upstream's answer, which says the quota is spent and
            // when it resets: it is not said again around it. The block is its
            // methods', which may be only some of the bucket's: they are named.
            Stop::UpstreamQuota {
                until,
                reason,
                bucket,
                methods,
            } => {
                let blocked = format!(
                    "{} {} blocked until {}",
                    methods.join(", "),
                    if methods.len() == 1 { "is" } else { "are" },
                    crate::output::human::timestamp(until.as_i64())
                );
                if bucket == BUDGET_POLICY {
                    format!("{reason}; {blocked}")
                } else {
                    format!(
                        "{reason}; the \"{bucket}\" bucket is spent: {blocked}, the other buckets' calls go on"
                    )
                }
            }
            Stop::LimiterDown { method, reason } => format!(
                "the limiter is down and [when_limiter_down] denies {method}: {reason}; start Redis or allow the method"
            ),
            Stop::Fatal { message } => message.clone(),
            Stop::Interrupted { signal } => {
                format!("interrupted by {signal}: no new calls were made after it")
            }
            Stop::ClockSkew { skew } => format!("{}; {}", skew.describe(), skew.clock.fix()),
            Stop::ClockUnconfirmed { clock } => format!(
                "{} was last found too far from the upstream's, and the answer that was to check it had no readable Date, so it cannot be trusted; {}",
                clock.name(),
                clock.fix()
            ),
            Stop::ClocksApart { apart, advice } => {
                format!("{apart}; nothing was charged; {advice}")
            }
        }
    }
}

/// What said no to a charge of `bucket`, in the words people read (budget, bucket,
/// limit): the bucket itself, the upstream's block, or else one of its limits.
pub fn said_no(denied_by: &str, bucket: &str) -> String {
    if denied_by == UPSTREAM_POLICY {
        "the upstream's block".to_owned()
    } else if denied_by == bucket {
        format!("bucket \"{denied_by}\"")
    } else {
        format!("limit \"{denied_by}\"")
    }
}

/// The status of a run or of one of its regions: the one list all layers share.
pub use crate::region_status::RegionStatus as Status;

/// How one charged attempt at an upstream call ended: a word of the run's record,
/// beside the statuses.
pub use crate::region_status::CallOutcome;

/// Attempts made, by upstream method and how each ended.
pub type Attempts = BTreeMap<(&'static str, CallOutcome), u64>;

/// What happened to one region.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionReport {
    pub code: String,
    pub status: Status,
    pub pages: u32,
    pub videos: u64,
    /// Units charged to the budget.
    pub units: u64,
    /// Units of calls made while the limiter was down (journalled, not charged).
    pub units_unmetered: u64,
    pub error: Option<String>,
    /// Why the region is `done_elsewhere`, for the run's history: who fetched its
    /// slot, or holds it.
    #[serde(skip)]
    pub note: Option<String>,
}

impl RegionReport {
    pub fn new(code: &str) -> RegionReport {
        RegionReport {
            code: code.to_owned(),
            status: Status::Complete,
            pages: 0,
            videos: 0,
            units: 0,
            units_unmetered: 0,
            error: None,
            note: None,
        }
    }

    /// Still worth calling the upstream for.
    pub fn going(&self) -> bool {
        self.status == Status::Complete
    }
}

/// What the follow-ups of a run did (`follow` in `run --json`): they belong to no
/// region, so their units are in `units_charged` and here, not in a region's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FollowReport {
    pub status: Status,
    /// Calls made, each of up to 50 videos.
    pub calls: u64,
    /// Videos whose counts were stored.
    pub videos: u64,
    /// Videos a follow-up's answer left out that a `videos.list` of their ids then
    /// confirmed gone or private, marked removed.
    pub removed: u64,
    /// Videos a follow-up's answer left out (the method is not atomic): each is asked
    /// again with `videos.list` before it is marked removed.
    pub missing: u64,
    /// Of those, the ones `videos.list` still showed: counted, not removed.
    pub missing_found: u64,
    pub units: u64,
    pub units_unmetered: u64,
    pub error: Option<String>,
}

/// The JSON object of `run --json` and `backfill --json`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub run_id: String,
    pub status: Status,
    /// The first bucket whose denial, block or limiter outage cut the run short; null
    /// when none did.
    pub bucket: Option<String>,
    /// Units the limiter granted.
    pub units_charged: u64,
    /// Units of the calls made unmetered while the limiter was down: journalled, and
    /// counted in the window when the journal is replayed. `calls` counts them too.
    pub units_unmetered: u64,
    pub calls: u64,
    /// What the run's allowance leaves of the main bucket.
    pub remaining: Option<u64>,
    /// What it leaves of each bucket, the main one first (a JSON object by name);
    /// `None` when the limiter could not say.
    #[serde(serialize_with = "by_name")]
    pub remaining_by_bucket: Option<Vec<(String, u64)>>,
    pub retry_after_s: Option<f64>,
    /// The policy that stopped the run (`upstream` while the budget is blocked).
    pub denied_by: Option<String>,
    pub regions: Vec<RegionReport>,
    /// The follow-ups, when `[follow]` is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow: Option<FollowReport>,
    #[serde(skip)]
    pub stop_reason: Option<String>,
    /// Unix seconds, as recorded in the store's `runs.ended_at`.
    #[serde(skip)]
    pub ended_at: i64,
    /// How long the run took, as measured by the process that ran it.
    #[serde(skip)]
    pub took: Duration,
    /// Every bucket's figures at the end of the run, the main one first: what
    /// `remaining` and the metrics file's bucket figures come from. `None` when the
    /// limiter could not say (or was down, and so not asked).
    #[serde(skip)]
    pub budget: Option<Vec<BucketFigures>>,
    /// Whether the limiter answered at the run's end (`trendsync_limiter_up`): it
    /// gave the window `budget` holds.
    #[serde(skip)]
    pub limiter_up: bool,
    /// Every attempt the run made, by method and outcome (for `--metrics-file`).
    #[serde(skip)]
    pub attempts: Attempts,
}

impl RunReport {
    /// Logs the final one-line summary (the heartbeat a cron log keeps), with the
    /// run's numbers as fields for JSON logs, after the reason the run stopped, when it
    /// did, on a line of its own (a reason is often longer than a line).
    pub fn log_summary(&self, kind: &str, allowance: Allowance) {
        let regions: Vec<&str> = self.regions.iter().map(|r| r.code.as_str()).collect();
        let regions = regions.join(",");
        macro_rules! log {
            ($level:ident, $message:expr) => {
                tracing::$level!(
                    run_id = %self.run_id,
                    kind,
                    status = self.status.as_str(),
                    units = self.units_charged,
                    calls = self.calls,
                    regions = %regions,
                    "{}",
                    $message
                )
            };
        }
        self.log_stop_reason(kind);
        let summary = self.summary(kind, allowance);
        match self.status {
            Status::Complete => log!(info, summary),
            Status::Failed => log!(error, summary),
            _ => log!(warn, summary),
        }
    }

    /// Logs why the run stopped, when it did: before the summary, once.
    fn log_stop_reason(&self, kind: &str) {
        if let Some(reason) = &self.stop_reason {
            tracing::warn!(
                run_id = %self.run_id,
                "{kind} {} stopped: {reason}",
                self.run_id
            );
        }
    }

    /// The final one-line summary, at most [`SUMMARY_MAX`] characters where it can
    /// be: it names every region, grouping those that ended alike ("US GB complete,
    /// DE budget_exhausted, FR IN not_attempted"), and always says the calls, the units,
    /// what is left and the videos (docs/commands.md, "Logs under cron"). When the line
    /// is long (several buckets, follow-ups, a slow run), the words around the numbers
    /// go first, one form at a time: the follow-ups' details, the unmetered units'
    /// explanation, the word "regions", the status of regions that all ended as the run
    /// did, and last the follow-ups' count. Eight regions in one status fit; a line
    /// of several statuses may be longer rather than lose a number.
    fn summary(&self, kind: &str, allowance: Allowance) -> String {
        let plural =
            |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let head = format!(
            "{kind} {} {} in {}: ",
            self.run_id,
            self.status.as_str(),
            crate::output::human::duration(self.took),
        );
        let videos: u64 = self.regions.iter().map(|r| r.videos).sum();
        let mut groups: Vec<(Status, Vec<&str>)> = Vec::new();
        for r in &self.regions {
            match groups.iter_mut().find(|(s, _)| *s == r.status) {
                Some((_, codes)) => codes.push(&r.code),
                None => groups.push((r.status, vec![&r.code])),
            }
        }
        let line = |shorter: usize| {
            let mut numbers = vec![
                plural(self.calls, "call", "calls"),
                plural(self.units_charged, "unit", "units"),
            ];
            numbers.extend(self.left(allowance));
            numbers.push(plural(videos, "video", "videos"));
            let mut follow = String::new();
            if let Some(f) = &self.follow {
                let unusual = (f.status != Status::Complete)
                    .then(|| format!("follow-ups {}", f.status.as_str()));
                match shorter {
                    0 => {
                        follow = format!(
                            "; follow-ups {}: {} in {}",
                            f.status.as_str(),
                            plural(f.videos, "video", "videos"),
                            plural(f.calls, "call", "calls")
                        );
                    }
                    1..=4 => numbers.push(match unusual {
                        Some(said) => format!("{} followed up ({said})", f.videos),
                        None => format!("{} followed up", f.videos),
                    }),
                    _ => numbers.extend(unusual),
                }
            }
            if self.units_unmetered > 0 {
                numbers.push(if shorter < 2 {
                    format!(
                        "{} unmetered (limiter down, journalled)",
                        self.units_unmetered
                    )
                } else {
                    format!("{} unmetered", self.units_unmetered)
                });
            }
            let label = if shorter < 3 { "regions " } else { "" };
            let regions = match groups.as_slice() {
                [] => "; no region to fetch".to_owned(),
                // Every region ended as the run did, which the line has said.
                [(status, codes)] if shorter >= 4 && *status == self.status => {
                    format!("; {label}{}", codes.join(" "))
                }
                groups => {
                    let named: Vec<String> = groups
                        .iter()
                        .map(|(s, codes)| format!("{} {}", codes.join(" "), s.as_str()))
                        .collect();
                    format!("; {label}{}", named.join(", "))
                }
            };
            format!("{head}{}{follow}{regions}", numbers.join(", "))
        };
        let mut shorter = 0;
        loop {
            let said = line(shorter);
            if said.chars().count() <= SUMMARY_MAX || shorter == 5 {
                return said;
            }
            shorter += 1;
        }
    }

    /// What is left, bucket by bucket when there are several (docs/commands.md: `9480
    /// left, search 91, stats 9497`): the main bucket's first, unnamed as it always
    /// was, then each other bucket's by name. No figure adds two buckets together.
    fn left(&self, allowance: Allowance) -> Option<String> {
        let to = match allowance {
            Allowance::Ceiling => "left",
            Allowance::Quota => "left to the quota",
        };
        match self.remaining_by_bucket.as_deref() {
            Some([(_, main), rest @ ..]) if !rest.is_empty() => {
                let mut said = vec![format!("{main} {to}")];
                said.extend(rest.iter().map(|(name, r)| format!("{name} {r}")));
                Some(said.join(", "))
            }
            _ => self.remaining.map(|r| format!("{r} {to}")),
        }
    }
}

/// The buckets' remaining units as one JSON object, by bucket name.
fn by_name<S: serde::Serializer>(
    buckets: &Option<Vec<(String, u64)>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    match buckets {
        None => serializer.serialize_none(),
        Some(buckets) => {
            let mut map = serializer.serialize_map(Some(buckets.len()))?;
            for (name, units) in buckets {
                map.serialize_entry(name, units)?;
            }
            map.end()
        }
    }
}

/// The longest summary line (docs/commands.md, "Logs under cron"), counted without the log's
/// time and level.
pub const SUMMARY_MAX: usize = 160;

/// The run's status from its regions and its stop.
pub fn overall(regions: &[RegionReport], stop: Option<&Stop>) -> Status {
    // The signal decides the exit code (130/143) whatever else happened.
    if matches!(stop, Some(Stop::Interrupted { .. })) {
        return Status::Interrupted;
    }
    if matches!(stop, Some(Stop::Fatal { .. }))
        || regions.iter().any(|r| r.status == Status::Failed)
    {
        return Status::Failed;
    }
    if let Some(stop) = stop {
        return stop.status();
    }
    if !regions.is_empty() && regions.iter().all(|r| r.status == Status::Skipped) {
        return Status::Skipped;
    }
    Status::Complete
}

#[cfg(test)]
mod tests;

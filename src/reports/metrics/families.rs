//! The picture told as metric families (docs/metrics.md): one method per group of
//! series, and the helpers they share. The names, helps and labels here are what the
//! alerts and dashboards read, so they are in one place, apart from the database
//! reads and the text format.

use super::picture::{LastRun, Picture, Refused};
use super::text::{Exposition, MetricType};
use crate::quota::{Allowance, BucketFigures};
use crate::region_status::RegionStatus;
use crate::runner::outcome::{CallOutcome, Status};
use crate::store::{CallCount, HistoryRow, RunKind};

/// How long a run took, in seconds: as its process measured it, or for a run recorded
/// before durations were (schema 7), from its whole-second start and end.
pub(super) fn run_seconds(started_at: i64, ended_at: i64, duration_us: Option<u64>) -> f64 {
    match duration_us {
        Some(us) => us as f64 / 1e6,
        None => (ended_at - started_at).max(0) as f64,
    }
}

impl Picture {
    /// The exposition. `methods` are reported with every outcome even when never
    /// called, so that "none" reads as 0 rather than as a missing series.
    pub fn exposition(&self, methods: &[&str]) -> Exposition {
        let mut exp = Exposition::new();
        build_info(&mut exp);
        self.last_run_families(&mut exp);
        self.last_run_call_families(&mut exp, methods);
        self.last_run_region_families(&mut exp);
        self.region_families(&mut exp);
        self.call_families(&mut exp, methods);
        self.slot_families(&mut exp);
        self.budget_families(&mut exp);
        self.limiter_families(&mut exp);
        self.skew_families(&mut exp);
        self.sink_families(&mut exp);
        exp
    }

    /// What waits for the sink (docs/commands.md, `--sink`): the slots queued and not
    /// shipped, and when the oldest was queued (no sample while none waits, so that
    /// an alert on its age does not read a 0 as 1970).
    fn sink_families(&self, exp: &mut Exposition) {
        let Some(backlog) = self.sink else {
            return;
        };
        exp.gauge(
            "trendsync_sink_backlog",
            "Slots queued in the database's outbox for the sink and not yet shipped; the next run or backfill with --sink ships them.",
        )
        .sample(&[], backlog.slots as f64);
        if let Some(oldest) = backlog.oldest_queued_at {
            exp.gauge(
                "trendsync_sink_oldest_queued_timestamp_seconds",
                "When the oldest slot still waiting for the sink was queued (its run's start), in seconds since the Unix epoch.",
            )
            .sample(&[], oldest as f64);
        }
    }

    /// Whether the limiter answered, and the calls its journal holds for it.
    fn limiter_families(&self, exp: &mut Exposition) {
        if let Some(health) = &self.limiter {
            let key = health.key.as_str();
            if let Some(up) = health.up {
                exp.gauge(
                    "trendsync_limiter_up",
                    "1 when the limiter answered at the end of the run that wrote this file, 0 when it did not: the bucket figures are then the last known ones.",
                )
                .sample(&[("budget", key)], if up { 1.0 } else { 0.0 });
            }
            exp.gauge(
                "trendsync_journal_pending_calls",
                "Calls made while the limiter was down, journalled in the database and not yet counted in the window; the next command that reaches the limiter replays them.",
            )
            .sample(&[("budget", key)], health.pending_calls as f64);
        }
    }

    /// The last run of each kind the file speaks of, `run` first: the one the
    /// database records, unless this process was refused by its configuration.
    fn lasts(&self) -> Vec<Last<'_>> {
        [RunKind::Run, RunKind::Backfill]
            .into_iter()
            .filter_map(|kind| match self.refused {
                Some(refused) if refused.kind == kind => Some(Last::Refused(refused)),
                _ => self
                    .last_runs
                    .iter()
                    .find(|l| l.run.kind == kind)
                    .map(Last::Recorded),
            })
            .collect()
    }

    /// Per kind of run: when the last one ended, how long it took, its status, units and calls.
    fn last_run_families(&self, exp: &mut Exposition) {
        for last in self.lasts() {
            let kind = last.kind().as_str();
            exp.gauge(
                "trendsync_last_run_end_timestamp_seconds",
                "When the last run of this kind ended, in seconds since the Unix epoch.",
            )
            .sample(&[("kind", kind)], last.ended_at() as f64);
            exp.gauge(
                "trendsync_last_run_duration_seconds",
                "How long the last run of this kind took, in seconds.",
            )
            .sample(&[("kind", kind)], last.seconds());
            let status = exp.gauge(
                "trendsync_last_run_status",
                "1 for the status the last run of this kind ended with, 0 for the others; config_error: refused by its configuration (exit 78) before any call.",
            );
            for s in Status::ALL {
                let set = matches!(last, Last::Recorded(l) if l.run.status == s);
                status.sample(
                    &[("kind", kind), ("status", s.as_str())],
                    if set { 1.0 } else { 0.0 },
                );
            }
            let refused = matches!(last, Last::Refused(_));
            status.sample(
                &[("kind", kind), ("status", CONFIG_ERROR)],
                if refused { 1.0 } else { 0.0 },
            );
            let (units, calls) = match last {
                Last::Recorded(l) => (l.run.units.unwrap_or(0), l.run.calls.unwrap_or(0)),
                Last::Refused(_) => (0, 0),
            };
            exp.gauge(
                "trendsync_last_run_charged_units",
                "Quota units the last run of this kind charged to the budget.",
            )
            .sample(&[("kind", kind)], units as f64);
            exp.gauge(
                "trendsync_last_run_calls",
                "Upstream calls the last run of this kind made, every attempt counted.",
            )
            .sample(&[("kind", kind)], calls as f64);
        }
    }

    /// Per kind of run: the last one's call attempts by method and outcome.
    fn last_run_call_families(&self, exp: &mut Exposition, methods: &[&str]) {
        for last in self.lasts() {
            let kind = last.kind().as_str();
            let made = last.calls();
            let family = exp.gauge(
                "trendsync_last_run_method_calls",
                "Upstream call attempts of the last run of this kind, by method and outcome.",
            );
            for method in with_named(methods, made) {
                for outcome in CallOutcome::ALL {
                    family.sample(
                        &[
                            ("kind", kind),
                            ("method", &method),
                            ("outcome", outcome.as_str()),
                        ],
                        count_of(made, &method, outcome) as f64,
                    );
                }
            }
        }
    }

    /// Per kind of run: the videos the last one stored for each region.
    fn last_run_region_families(&self, exp: &mut Exposition) {
        for last in self.lasts() {
            // A refused run stored nothing.
            let Last::Recorded(last) = last else {
                continue;
            };
            let kind = last.run.kind.as_str();
            let videos = exp.gauge(
                "trendsync_last_run_region_videos",
                "Videos the last run of this kind stored for the region (trending positions and search results).",
            );
            for r in last
                .regions
                .iter()
                .filter(|r| self.is_configured(&r.region))
            {
                videos.sample(&[("kind", kind), ("region", &r.region)], r.videos as f64);
            }
        }
    }

    /// Call attempts of every recorded run, by method and outcome.
    fn call_families(&self, exp: &mut Exposition, methods: &[&str]) {
        if self.unread {
            return;
        }
        let calls = exp.family(
            "trendsync_upstream_calls_total",
            MetricType::Counter,
            "Upstream call attempts of every run recorded in the database, by method and outcome.",
        );
        for method in with_named(methods, &self.calls) {
            for outcome in CallOutcome::ALL {
                calls.sample(
                    &[("method", &method), ("outcome", outcome.as_str())],
                    count_of(&self.calls, &method, outcome) as f64,
                );
            }
        }
    }

    /// The fleet's missed slots per configured region: 0 where none was seen (and
    /// always with the embedded limiter), so that the first miss is an increase.
    fn slot_families(&self, exp: &mut Exposition) {
        if self.unread {
            return;
        }
        let mut regions: Vec<&str> = self.configured.iter().map(String::as_str).collect();
        regions.sort_unstable();
        regions.dedup();
        let missed = exp.family(
            "trendsync_slots_missed_total",
            MetricType::Counter,
            "Slots of the region's schedule that the fleet missed (no host fetched them), as this host has seen them in the slot records in Redis at the end of its runs.",
        );
        for region in regions {
            let n = self
                .slot_misses
                .iter()
                .find(|(r, _)| r.eq_ignore_ascii_case(region))
                .map_or(0, |(_, n)| *n);
            missed.sample(&[("region", region)], n as f64);
        }
    }

    /// The budget's use, what is left of it and any upstream block, then its buckets'.
    fn budget_families(&self, exp: &mut Exposition) {
        if let Some(budget) = &self.budget
            && let Some(b) = budget.buckets.first()
        {
            let key = budget.key.as_str();
            exp.gauge(
                "trendsync_budget_used_units",
                "Units in the budget's sliding window when this file was written.",
            )
            .sample(&[("budget", key)], b.used as f64);
            let remaining = exp.gauge(
                "trendsync_budget_remaining_units",
                "Units left: to the ceiling (scheduled runs) and to the quota (backfill).",
            );
            for to in [Allowance::Ceiling, Allowance::Quota] {
                remaining.sample(
                    &[("budget", key), ("to", to.as_str())],
                    b.remaining(to) as f64,
                );
            }
            exp.gauge(
                "trendsync_budget_blocked_until_timestamp_seconds",
                "Until when the upstream said the key's quota is spent (seconds since the Unix epoch); 0 when not blocked.",
            )
            .sample(
                &[("budget", key)],
                blocked_seconds(b),
            );
            bucket_families(exp, key, &budget.buckets);
        }
    }

    /// The last clock skew seen against the upstream, per clock, and when.
    fn skew_families(&self, exp: &mut Exposition) {
        for skew in &self.skews {
            let clock = skew.clock.as_str();
            exp.gauge(
                "trendsync_clock_skew_seconds",
                "The last skew seen between the limiter's clock (host: the embedded limiter's; redis: Redis TIME) and the upstream's answers' Date, in seconds, positive when the limiter's is ahead. Over 300 either way, runs stop.",
            )
            .sample(&[("clock", clock)], skew.seconds());
            exp.gauge(
                "trendsync_clock_skew_measured_timestamp_seconds",
                "When the skew was last seen, by the upstream's clock, in seconds since the Unix epoch.",
            )
            .sample(&[("clock", clock)], (skew.measured_at_us / 1_000_000) as f64);
        }
    }

    /// Per configured region: its last attempt and its last complete fetch, 0 for one
    /// never fetched completely.
    fn region_families(&self, exp: &mut Exposition) {
        let mut attempts: Vec<&HistoryRow> = self
            .attempts
            .iter()
            .filter(|a| a.region.as_deref().is_some_and(|r| self.is_configured(r)))
            .collect();
        attempts.sort_by(|a, b| a.region.cmp(&b.region));
        for a in &attempts {
            let Some(code) = a.region.as_deref() else {
                continue;
            };
            let status = exp.gauge(
                "trendsync_region_last_run_status",
                "1 for the status of the region's last attempt, 0 for the others.",
            );
            for s in RegionStatus::ALL {
                let value = if a.status == s { 1.0 } else { 0.0 };
                status.sample(&[("region", code), ("status", s.as_str())], value);
            }
        }
        for a in &attempts {
            let Some(code) = a.region.as_deref().filter(|_| !a.charts.is_empty()) else {
                continue;
            };
            let charts = exp.gauge(
                "trendsync_region_last_run_charts",
                "1 for each chart the region's last attempt stored (overall, or a category id).",
            );
            for chart in &a.charts {
                let chart = match chart {
                    0 => "overall".to_owned(),
                    c => c.to_string(),
                };
                charts.sample(&[("region", code), ("chart", &chart)], 1.0);
            }
        }
        let numbers: [RegionNumber; 5] = [
            (
                "trendsync_region_last_run_timestamp_seconds",
                "When the run of the region's last attempt started, in seconds since the Unix epoch.",
                |a| Some(a.started_at as f64),
            ),
            (
                "trendsync_region_last_run_duration_seconds",
                "How long the run of the region's last attempt took, in seconds (absent while it runs).",
                |a| {
                    a.ended_at
                        .map(|e| run_seconds(a.started_at, e, a.run_duration_us))
                },
            ),
            (
                "trendsync_region_last_run_pages",
                "Trending pages the region's last attempt stored.",
                |a| Some(a.pages as f64),
            ),
            (
                "trendsync_region_last_run_videos",
                "Videos the region's last attempt stored (trending positions and search results).",
                |a| Some(a.videos as f64),
            ),
            (
                "trendsync_region_last_run_units",
                "Quota units the region's last attempt charged.",
                |a| Some(a.units as f64),
            ),
        ];
        for (name, help, value) in numbers {
            for a in &attempts {
                if let (Some(code), Some(v)) = (a.region.as_deref(), value(a)) {
                    exp.gauge(name, help).sample(&[("region", code)], v);
                }
            }
        }
        let mut done: Vec<(&str, i64)> = self
            .configured
            .iter()
            .map(|code| {
                let at = self
                    .regions
                    .iter()
                    .filter(|s| s.region.eq_ignore_ascii_case(code))
                    .find_map(|s| s.last_complete_at);
                (code.as_str(), at.unwrap_or(0))
            })
            .collect();
        done.sort_unstable();
        done.dedup_by(|a, b| a.0.eq_ignore_ascii_case(b.0));
        for (code, at) in done {
            exp.gauge(
                "trendsync_region_last_success_timestamp_seconds",
                "When the region was last fetched completely, in seconds since the Unix epoch; 0 when it never was.",
            )
            .sample(&[("region", code)], at as f64);
        }
    }
}

/// The status of a run refused by its configuration (exit 78), beside those a run
/// records (docs/metrics.md).
pub(super) const CONFIG_ERROR: &str = "config_error";

/// The last run of one kind, as the metrics file tells it.
#[derive(Clone, Copy)]
enum Last<'a> {
    /// As the database records it.
    Recorded(&'a LastRun),
    /// Refused by its configuration in this process; the database has no trace of it.
    Refused(Refused),
}

impl<'a> Last<'a> {
    fn kind(self) -> RunKind {
        match self {
            Last::Recorded(l) => l.run.kind,
            Last::Refused(r) => r.kind,
        }
    }

    fn ended_at(self) -> i64 {
        match self {
            Last::Recorded(l) => l.run.ended_at.unwrap_or(l.run.started_at),
            Last::Refused(r) => r.at,
        }
    }

    fn seconds(self) -> f64 {
        match self {
            Last::Recorded(l) => run_seconds(l.run.started_at, self.ended_at(), l.run.duration_us),
            // It stopped before it began.
            Last::Refused(_) => 0.0,
        }
    }

    fn calls(self) -> &'a [CallCount] {
        match self {
            Last::Recorded(l) => &l.calls,
            Last::Refused(_) => &[],
        }
    }
}

/// A per-region family: name, help, and its value for a region's last attempt.
type RegionNumber = (&'static str, &'static str, fn(&HistoryRow) -> Option<f64>);

/// `named` and every method in `calls`, sorted, once each.
fn with_named(named: &[&str], calls: &[CallCount]) -> Vec<String> {
    let mut methods: Vec<String> = named.iter().map(|m| (*m).to_owned()).collect();
    methods.extend(calls.iter().map(|c| c.method.clone()));
    methods.sort_unstable();
    methods.dedup();
    methods
}

fn count_of(calls: &[CallCount], method: &str, outcome: CallOutcome) -> u64 {
    calls
        .iter()
        .filter(|c| c.method == method && c.outcome == outcome)
        .map(|c| c.calls)
        .sum()
}

/// A per-bucket gauge: its name, its help, and its value for a bucket.
type BucketNumber = (&'static str, &'static str, fn(&BucketFigures) -> f64);

/// The end of a bucket's upstream block in whole seconds, 0 when none.
fn blocked_seconds(b: &BucketFigures) -> f64 {
    b.blocked_until
        .map_or(0.0, |u| (u.as_i64() / 1_000_000) as f64)
}

/// The version of trendsync that wrote the file, as a constant 1.
fn build_info(exp: &mut Exposition) {
    exp.gauge(
        "trendsync_build_info",
        "1, with the version of trendsync that wrote this file.",
    )
    .sample(&[("version", env!("CARGO_PKG_VERSION"))], 1.0);
}

/// Per bucket (docs/budget.md, "Buckets"), with a `bucket` label: used, remaining, ceiling,
/// quota and blocked-until, so that an alert on a nearly spent bucket needs no join.
/// The `trendsync_budget_*` families above stay as they were, the main bucket's, so
/// the rules and dashboards built on them keep working.
fn bucket_families(exp: &mut Exposition, key: &str, buckets: &[BucketFigures]) {
    let numbers: [BucketNumber; 4] = [
        (
            "trendsync_bucket_used_units",
            "Units in each bucket's window when this file was written.",
            |b| b.used as f64,
        ),
        (
            "trendsync_bucket_ceiling_units",
            "Each bucket's ceiling: where scheduled runs stop.",
            |b| b.ceiling as f64,
        ),
        (
            "trendsync_bucket_quota_units",
            "Each bucket's quota: what the upstream grants per window.",
            |b| b.quota as f64,
        ),
        (
            "trendsync_bucket_blocked_until_timestamp_seconds",
            "Until when the upstream said the bucket's quota is spent (seconds since the Unix epoch); 0 when not blocked.",
            blocked_seconds,
        ),
    ];
    for (name, help, value) in numbers {
        let family = exp.gauge(name, help);
        for b in buckets {
            family.sample(&[("budget", key), ("bucket", &b.name)], value(b));
        }
    }
    // Only a bucket the upstream refused early today has a series: none is the
    // usual state, and an alert fires on the series being there.
    for b in buckets {
        if let Some(units) = b.upstream_spent_at {
            exp.gauge(
                "trendsync_bucket_upstream_spent_at_units",
                "Units this budget had charged the bucket since midnight America/Los_Angeles when the upstream first said its quota was spent, below the configured quota: another consumer of the key, or a quota lower than configured. No series on a day the upstream has not refused early.",
            )
            .sample(&[("budget", key), ("bucket", &b.name)], units as f64);
        }
    }
    let remaining = exp.gauge(
        "trendsync_bucket_remaining_units",
        "Units left in each bucket: to the ceiling (scheduled runs) and to the quota (backfill).",
    );
    for b in buckets {
        for to in [Allowance::Ceiling, Allowance::Quota] {
            remaining.sample(
                &[("budget", key), ("bucket", &b.name), ("to", to.as_str())],
                b.remaining(to) as f64,
            );
        }
    }
}

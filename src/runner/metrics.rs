//! `--metrics-file` (docs/metrics.md): the whole picture from the database, for
//! node_exporter's textfile collector: the last run of each kind, every region's last
//! attempt and last success, the budget, and the calls by method and outcome.
//!
//! The buckets' figures come from the limiter at the run's end. When it did not
//! answer, `trendsync_limiter_up` is 0 and the figures are the ones the file last had,
//! read back from it, so that the bucket alerts do not go quiet while it is down; the
//! calls journalled meanwhile are counted in `trendsync_journal_pending_calls`.
//!
//! The regions are the configured ones, not the ones the database knows: a region that
//! never completed has its last success at 0, so an alert sees it, and a region taken
//! out of regions.toml has no series, so its alerts clear (its history stays in the
//! database).
//!
//! The format is the classic Prometheus text exposition (0.0.4), not OpenMetrics: no
//! `# EOF`, gauges without a `_total` suffix. Each family's `# HELP` and `# TYPE` come
//! once, followed by all of its samples. It is written by hand: the whole format this
//! needs is a few lines, and a crate would bring a registry this one-shot process has no
//! use for.
//!
//! The file is replaced atomically, so the collector, which reads it at any moment,
//! sees the previous run's file or this one's, never half of one.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::outcome::{BudgetWindow, CallOutcome, RunReport, Status};
use super::upstream::METHODS;
use crate::quota::Budget;
use crate::quota::skew::Skew;
use crate::region_status::RegionStatus;
use crate::store::{
    CallCount, HistoryRow, RegionOutcome, RegionState, RunKind, RunRecord, Store, StoreError,
};

/// The `# TYPE` of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Gauge,
    Counter,
}

impl MetricType {
    fn as_str(self) -> &'static str {
        match self {
            MetricType::Gauge => "gauge",
            MetricType::Counter => "counter",
        }
    }
}

/// One metric family: a name, its help and type, and its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    name: String,
    help: String,
    kind: MetricType,
    samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    labels: Vec<(String, String)>,
    value: f64,
}

impl Family {
    /// Adds one sample with `labels` (name, value).
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) -> &mut Family {
        debug_assert!(
            labels.iter().all(|(name, _)| valid_label_name(name)),
            "bad label name in {labels:?}"
        );
        self.samples.push(Sample {
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
        });
        self
    }
}

/// Metric families in the order they were first named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// The family `name`, created with `kind` and `help` the first time it is named;
    /// naming it again adds to the same family, so its samples stay together under
    /// one `# HELP` and `# TYPE`.
    pub fn family(&mut self, name: &str, kind: MetricType, help: &str) -> &mut Family {
        debug_assert!(valid_metric_name(name), "bad metric name {name:?}");
        let at = match self.families.iter().position(|f| f.name == name) {
            Some(at) => at,
            None => {
                self.families.push(Family {
                    name: name.to_owned(),
                    help: help.to_owned(),
                    kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[at]
    }

    pub fn gauge(&mut self, name: &str, help: &str) -> &mut Family {
        self.family(name, MetricType::Gauge, help)
    }

    /// The text exposition. Families without samples are left out.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for family in self.families.iter().filter(|f| !f.samples.is_empty()) {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(&family.help));
            let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.as_str());
            for sample in &family.samples {
                out.push_str(&family.name);
                if !sample.labels.is_empty() {
                    out.push('{');
                    for (i, (name, value)) in sample.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let _ = write!(out, "{name}=\"{}\"", escape_label_value(value));
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", format_value(sample.value));
            }
        }
        out
    }
}

/// Label values escape backslash, double quote and newline.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text escapes backslash and newline (a double quote is fine there).
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Whole numbers without a fraction, the special values as Prometheus spells them.
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    !name.starts_with("__")
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// How long a run took, in seconds: as its process measured it, or for a run recorded
/// before durations were (schema 7), from its whole-second start and end.
fn run_seconds(started_at: i64, ended_at: i64, duration_us: Option<u64>) -> f64 {
    match duration_us {
        Some(us) => us as f64 / 1e6,
        None => (ended_at - started_at).max(0) as f64,
    }
}

/// The last finished run of one kind, with its regions and its attempts.
#[derive(Debug, Clone)]
pub struct LastRun {
    pub run: RunRecord,
    pub regions: Vec<RegionOutcome>,
    pub calls: Vec<CallCount>,
}

/// The budget's window as the limiter reported it at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetNumbers {
    pub key: String,
    /// Every bucket, the main one first (docs/budget.md, "Buckets").
    pub buckets: Vec<BucketNumbers>,
}

/// One bucket's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketNumbers {
    pub name: String,
    pub used: u64,
    pub ceiling: u64,
    pub quota: u64,
    pub blocked_until_us: Option<i64>,
    /// What the budget had charged the bucket today when the upstream first refused
    /// it early (docs/budget.md, "When the upstream refuses").
    pub upstream_spent_at: Option<u64>,
}

impl BudgetNumbers {
    /// The figures a metrics file written earlier (`previous`, its text) gave for
    /// `budget`, with today's ceilings and quotas: what is last known of the window
    /// while the limiter does not answer. `None` when that file has no figure for the
    /// main bucket of this budget.
    pub fn last_known(budget: &Budget, previous: &str) -> Option<BudgetNumbers> {
        let samples = parse_samples(previous);
        let figure = |name: &str, bucket: Option<&str>| {
            samples.iter().find_map(|(n, labels, value)| {
                let label = |k: &str| labels.iter().find(|(l, _)| l == k).map(|(_, v)| v);
                (n == name
                    && label("budget").is_some_and(|k| *k == budget.key)
                    && label("bucket").map(String::as_str) == bucket)
                    .then_some(*value)
            })
        };
        let mut buckets = Vec::new();
        for b in budget.buckets() {
            let used = figure("trendsync_bucket_used_units", Some(b.name)).or_else(|| {
                // A file from before the buckets' series has the main bucket's alone.
                b.is_main()
                    .then(|| figure("trendsync_budget_used_units", None))
                    .flatten()
            });
            let Some(used) = used else {
                if b.is_main() {
                    return None;
                }
                continue;
            };
            let blocked = figure(
                "trendsync_bucket_blocked_until_timestamp_seconds",
                Some(b.name),
            )
            .filter(|s| *s > 0.0);
            let spent = figure("trendsync_bucket_upstream_spent_at_units", Some(b.name));
            buckets.push(BucketNumbers {
                name: b.name.to_owned(),
                used: used.max(0.0) as u64,
                ceiling: b.ceiling,
                quota: b.quota,
                blocked_until_us: blocked.map(|s| (s as i64).saturating_mul(1_000_000)),
                upstream_spent_at: spent.map(|u| u.max(0.0) as u64),
            });
        }
        Some(BudgetNumbers {
            key: budget.key.clone(),
            buckets,
        })
    }

    /// `budget`'s numbers with its window as a run found it.
    pub fn of(budget: &Budget, window: &BudgetWindow) -> BudgetNumbers {
        let buckets = budget
            .buckets()
            .iter()
            .map(|b| {
                let seen = window.buckets.iter().find(|w| w.name == b.name);
                BucketNumbers {
                    name: b.name.to_owned(),
                    used: seen.map_or(0, |w| w.used),
                    ceiling: b.ceiling,
                    quota: b.quota,
                    blocked_until_us: seen.and_then(|w| w.blocked_until_us),
                    upstream_spent_at: seen.and_then(|w| w.upstream_spent_at),
                }
            })
            .collect();
        BudgetNumbers {
            key: budget.key.clone(),
            buckets,
        }
    }
}

/// Everything the metrics file says, read from the database (and the budget's window from
/// the run's report), so that whichever of the processes sharing one file writes it last,
/// it is whole: every region's last attempt, not only the regions of the run that wrote it.
#[derive(Debug, Clone, Default)]
pub struct Picture {
    /// The last finished run of each kind.
    pub last_runs: Vec<LastRun>,
    /// Each region's last attempt (its line of the newest run that reached it).
    pub attempts: Vec<HistoryRow>,
    /// Every region the store knows, for the last complete fetch.
    pub regions: Vec<RegionState>,
    /// Attempts of every recorded run by method and outcome.
    pub calls: Vec<CallCount>,
    /// `None` when the limiter could not say.
    pub budget: Option<BudgetNumbers>,
    /// The last skew seen on each limiter's clock (docs/schema.md).
    pub skews: Vec<Skew>,
    /// The regions configured in regions.toml, every one of them, not only those
    /// the run fetched: only these have per-region series.
    pub configured: Vec<String>,
    /// The limiter's health at the run's end; `None` leaves its series out.
    pub limiter: Option<LimiterHealth>,
}

/// Whether the limiter answered at the end of a run, and what waits to be counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimiterHealth {
    /// The budget's key, the series' label.
    pub key: String,
    /// The limiter gave the window at the run's end.
    pub up: bool,
    /// Calls made while it was down, in the journal, not yet replayed into the window.
    pub pending_calls: u64,
}

impl Picture {
    /// Reads the picture from `store`; `budget` is the window a run reported.
    pub fn read(
        store: &Store,
        budget: Option<BudgetNumbers>,
        configured: Vec<String>,
    ) -> Result<Picture, StoreError> {
        let mut last_runs = Vec::new();
        for kind in [RunKind::Run, RunKind::Backfill] {
            if let Some(run) = store.last_finished_run(kind)? {
                let regions = store.run_regions(&run.run_id)?;
                let calls = store.call_counts(Some(&run.run_id))?;
                last_runs.push(LastRun {
                    run,
                    regions,
                    calls,
                });
            }
        }
        Ok(Picture {
            last_runs,
            attempts: store.last_attempts()?,
            regions: store.region_states()?,
            calls: store.call_counts(None)?,
            budget,
            skews: Vec::new(),
            configured,
            limiter: None,
        })
    }

    /// Whether `region` is configured, as regions.toml spells codes in any case.
    fn is_configured(&self, region: &str) -> bool {
        self.configured
            .iter()
            .any(|c| c.eq_ignore_ascii_case(region))
    }

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
        self.budget_families(&mut exp);
        self.limiter_families(&mut exp);
        self.skew_families(&mut exp);
        exp
    }

    /// Whether the limiter answered, and the calls its journal holds for it.
    fn limiter_families(&self, exp: &mut Exposition) {
        if let Some(health) = &self.limiter {
            let key = health.key.as_str();
            exp.gauge(
                "trendsync_limiter_up",
                "1 when the limiter answered at the end of the run that wrote this file, 0 when it did not: the bucket figures are then the last known ones.",
            )
            .sample(&[("budget", key)], if health.up { 1.0 } else { 0.0 });
            exp.gauge(
                "trendsync_journal_pending_calls",
                "Calls made while the limiter was down, journalled in the database and not yet counted in the window; the next command that reaches the limiter replays them.",
            )
            .sample(&[("budget", key)], health.pending_calls as f64);
        }
    }

    /// Per kind of run: when the last one ended, how long it took, its status, units and calls.
    fn last_run_families(&self, exp: &mut Exposition) {
        for last in &self.last_runs {
            let run = &last.run;
            let kind = run.kind.as_str();
            let ended_at = run.ended_at.unwrap_or(run.started_at);
            exp.gauge(
                "trendsync_last_run_end_timestamp_seconds",
                "When the last run of this kind ended, in seconds since the Unix epoch.",
            )
            .sample(&[("kind", kind)], ended_at as f64);
            exp.gauge(
                "trendsync_last_run_duration_seconds",
                "How long the last run of this kind took, in seconds.",
            )
            .sample(
                &[("kind", kind)],
                run_seconds(run.started_at, ended_at, run.duration_us),
            );
            let status = exp.gauge(
                "trendsync_last_run_status",
                "1 for the status the last run of this kind ended with, 0 for the others.",
            );
            for s in Status::ALL {
                let value = if run.status == s { 1.0 } else { 0.0 };
                status.sample(&[("kind", kind), ("status", s.as_str())], value);
            }
            exp.gauge(
                "trendsync_last_run_charged_units",
                "Quota units the last run of this kind charged to the budget.",
            )
            .sample(&[("kind", kind)], run.units.unwrap_or(0) as f64);
            exp.gauge(
                "trendsync_last_run_calls",
                "Upstream calls the last run of this kind made, every attempt counted.",
            )
            .sample(&[("kind", kind)], run.calls.unwrap_or(0) as f64);
        }
    }

    /// Per kind of run: the last one's call attempts by method and outcome.
    fn last_run_call_families(&self, exp: &mut Exposition, methods: &[&str]) {
        for last in &self.last_runs {
            let kind = last.run.kind.as_str();
            let family = exp.gauge(
                "trendsync_last_run_method_calls",
                "Upstream call attempts of the last run of this kind, by method and outcome.",
            );
            for method in with_named(methods, &last.calls) {
                for outcome in CallOutcome::ALL {
                    family.sample(
                        &[
                            ("kind", kind),
                            ("method", &method),
                            ("outcome", outcome.as_str()),
                        ],
                        count_of(&last.calls, &method, outcome) as f64,
                    );
                }
            }
        }
    }

    /// Per kind of run: the videos the last one stored for each region.
    fn last_run_region_families(&self, exp: &mut Exposition) {
        for last in &self.last_runs {
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
            for (to, max) in [("ceiling", b.ceiling), ("quota", b.quota)] {
                remaining.sample(
                    &[("budget", key), ("to", to)],
                    max.saturating_sub(b.used) as f64,
                );
            }
            exp.gauge(
                "trendsync_budget_blocked_until_timestamp_seconds",
                "Until when the upstream said the key's quota is spent (seconds since the Unix epoch); 0 when not blocked.",
            )
            .sample(
                &[("budget", key)],
                b.blocked_until_us.map_or(0.0, |us| (us / 1_000_000) as f64),
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

/// Writing `--metrics-file` after a run failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("reading the metrics from {}", .db.display())]
    Read {
        db: PathBuf,
        source: Box<StoreError>,
    },
    #[error("writing the metrics file")]
    Write(#[source] WriteError),
    #[error("reading the metrics")]
    Skew(#[source] crate::quota::skew::SkewError),
    #[error("reading the metrics")]
    Journal(#[source] crate::quota::JournalError),
}

/// A per-bucket gauge: its name, its help, and its value for a bucket.
type BucketNumber = (&'static str, &'static str, fn(&BucketNumbers) -> f64);

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
fn bucket_families(exp: &mut Exposition, key: &str, buckets: &[BucketNumbers]) {
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
            |b| b.blocked_until_us.map_or(0.0, |us| (us / 1_000_000) as f64),
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
        for (to, max) in [("ceiling", b.ceiling), ("quota", b.quota)] {
            remaining.sample(
                &[("budget", key), ("bucket", &b.name), ("to", to)],
                max.saturating_sub(b.used) as f64,
            );
        }
    }
}

/// Writes `--metrics-file` after a run. Every run sharing the file writes the whole
/// picture from the database at `db`, not only its own regions, so the file is right
/// whoever wrote it last; the budget's window is the one `report` carries (none when
/// the limiter could not say). `configured` are the codes of every region in
/// regions.toml, fetched by this run or not: they, and only they, get region series.
pub fn write_after_run(
    path: &Path,
    db: &Path,
    budget: &Budget,
    configured: &[&str],
    report: &RunReport,
) -> Result<(), MetricsError> {
    let configured: Vec<String> = configured.iter().map(|c| (*c).to_owned()).collect();
    // While the limiter does not answer, the buckets' series stay, with the figures
    // the file last had (`trendsync_limiter_up 0` says they are not current): an
    // alert on a nearly spent bucket must not go quiet when the limiter is down.
    let numbers = match &report.budget {
        Some(window) => Some(BudgetNumbers::of(budget, window)),
        None => previous(path).and_then(|text| BudgetNumbers::last_known(budget, &text)),
    };
    let read = |source| MetricsError::Read {
        db: db.to_path_buf(),
        source: Box::new(source),
    };
    let mut picture = match Store::open_read_only(db).map_err(read)? {
        Some(store) => Picture::read(&store, numbers, configured).map_err(read)?,
        None => Picture {
            configured,
            ..Picture::default()
        },
    };
    picture.skews = crate::quota::skew::recorded(db).map_err(MetricsError::Skew)?;
    picture.limiter = Some(LimiterHealth {
        key: budget.key.clone(),
        up: report.limiter_up,
        pending_calls: crate::quota::pending_calls(db, &budget.key)
            .map_err(MetricsError::Journal)?,
    });
    write_atomically(path, &picture.exposition(&METHODS).render()).map_err(MetricsError::Write)?;
    tracing::debug!(path = %path.display(), "metrics written");
    Ok(())
}

/// The metrics file as an earlier run left it; `None` when there is none to read
/// (a first run, or something that is not a file, which the write refuses anyway).
fn previous(path: &Path) -> Option<String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => std::fs::read_to_string(path).ok(),
        _ => None,
    }
}

/// One sample line read back: its name, its labels (name, value) and its value.
type ParsedSample = (String, Vec<(String, String)>, f64);

/// The samples of a text exposition: name, labels and value of each line that is not
/// a comment. A line this cannot read is skipped.
fn parse_samples(text: &str) -> Vec<ParsedSample> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(parse_sample)
        .collect()
}

fn parse_sample(line: &str) -> Option<ParsedSample> {
    let (series, value) = line.trim_end().rsplit_once(' ')?;
    let value: f64 = value.parse().ok()?;
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series.to_owned(), Vec::new(), value));
    };
    let mut labels = Vec::new();
    let mut chars = rest.chars();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let key = key.trim_start_matches(',');
        if key == "}" || key.is_empty() {
            break;
        }
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                c => value.push(c),
            }
        }
        labels.push((key.to_owned(), value));
    }
    Some((name.to_owned(), labels, value))
}

/// Writing the metrics file failed.
pub type WriteError = crate::atomic::AtomicError;

/// Replaces `path` with `text` atomically ([`crate::atomic::write`]): a new file gets
/// mode 0644, since the collector runs as another user and must read it whatever the
/// umask; a file already there keeps its own mode.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), WriteError> {
    crate::atomic::write(path, Some(0o644), |file| {
        file.write_all(text.as_bytes())
            .map_err(|source| WriteError::Io {
                doing: "writing",
                path: path.to_path_buf(),
                source,
            })
    })
}

#[cfg(test)]
mod tests;

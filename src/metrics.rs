//! `--metrics-file` (DESIGN.md section 7): how the last run went, for node_exporter's
//! textfile collector.
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
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use crate::quota::Budget;
use crate::runner::{CallOutcome, RunReport, Status};
use crate::store::{RegionState, RunKind, RunRecord};

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

/// What the metrics file says after a run or backfill.
pub struct Snapshot<'a> {
    /// The kind of the run that just ended.
    pub kind: RunKind,
    pub report: &'a RunReport,
    /// The last finished run of the other kind, from the store, so that a backfill
    /// writing the file does not make the `kind="run"` series vanish (and the reverse).
    pub other: Option<RunRecord>,
    pub budget: &'a Budget,
    /// Every region the store knows.
    pub regions: &'a [RegionState],
    /// Methods reported with every outcome even when not called, so that "none" reads
    /// as 0 rather than as a missing series.
    pub methods: &'a [&'static str],
}

/// How one run ended, whether it is the one that just ended or one from the store.
struct LastRun<'a> {
    kind: RunKind,
    ended_at: i64,
    status: &'a str,
    units: u64,
    calls: u64,
}

impl Snapshot<'_> {
    pub fn exposition(&self) -> Exposition {
        let mut exp = Exposition::new();
        let mut runs = vec![LastRun {
            kind: self.kind,
            ended_at: self.report.ended_at,
            status: self.report.status.as_str(),
            units: self.report.units_charged,
            calls: self.report.calls,
        }];
        if let Some(r) = &self.other
            && r.kind != self.kind
            && let Some(ended_at) = r.ended_at
        {
            runs.push(LastRun {
                kind: r.kind,
                ended_at,
                status: &r.status,
                units: r.units.unwrap_or(0),
                calls: r.calls.unwrap_or(0),
            });
        }
        runs.sort_by_key(|r| r.kind != RunKind::Run);

        for run in &runs {
            let kind = run.kind.as_str();
            exp.gauge(
                "trendsync_last_run_end_timestamp_seconds",
                "When the last run of this kind ended, in seconds since the Unix epoch.",
            )
            .sample(&[("kind", kind)], run.ended_at as f64);
            let status = exp.gauge(
                "trendsync_last_run_status",
                "1 for the status the last run of this kind ended with, 0 for the others.",
            );
            for s in Status::ALL {
                let value = if s.as_str() == run.status { 1.0 } else { 0.0 };
                status.sample(&[("kind", kind), ("status", s.as_str())], value);
            }
            exp.gauge(
                "trendsync_last_run_units_charged",
                "Quota units the last run of this kind charged to the budget.",
            )
            .sample(&[("kind", kind)], run.units as f64);
            exp.gauge(
                "trendsync_last_run_calls",
                "Upstream calls the last run of this kind made, every attempt counted.",
            )
            .sample(&[("kind", kind)], run.calls as f64);
        }

        let kind = self.kind.as_str();
        let mut methods: Vec<&str> = self.methods.to_vec();
        for (method, _) in self.report.attempts.keys() {
            if !methods.contains(method) {
                methods.push(method);
            }
        }
        methods.sort_unstable();
        let calls = exp.gauge(
            "trendsync_last_run_method_calls",
            "Upstream call attempts of the last run of the kind that wrote this file, by method and outcome.",
        );
        for method in methods {
            for outcome in CallOutcome::ALL {
                let n = self
                    .report
                    .attempts
                    .iter()
                    .find(|((m, o), _)| *m == method && *o == outcome)
                    .map_or(0, |(_, n)| *n);
                calls.sample(
                    &[
                        ("kind", kind),
                        ("method", method),
                        ("outcome", outcome.as_str()),
                    ],
                    n as f64,
                );
            }
        }

        let mut regions: Vec<(&str, u64)> = self
            .report
            .regions
            .iter()
            .map(|r| (r.code.as_str(), r.videos))
            .collect();
        regions.sort_unstable();
        let videos = exp.gauge(
            "trendsync_last_run_region_videos",
            "Videos the last run of the kind that wrote this file stored for the region (trending positions and search results).",
        );
        for (code, n) in regions {
            videos.sample(&[("kind", kind), ("region", code)], n as f64);
        }

        let key = self.budget.key.as_str();
        if let Some(used) = self.report.budget_used {
            exp.gauge(
                "trendsync_budget_used_units",
                "Units in the budget's sliding window after the run.",
            )
            .sample(&[("budget", key)], used as f64);
            let remaining = exp.gauge(
                "trendsync_budget_remaining_units",
                "Units left after the run: to the ceiling (scheduled runs) and to the quota (backfill).",
            );
            for (to, max) in [
                ("ceiling", self.budget.ceiling),
                ("quota", self.budget.quota),
            ] {
                remaining.sample(
                    &[("budget", key), ("to", to)],
                    max.saturating_sub(used) as f64,
                );
            }
        }

        let mut done: Vec<(&str, i64)> = self
            .regions
            .iter()
            .filter_map(|s| s.last_complete_at.map(|at| (s.region.as_str(), at)))
            .collect();
        done.sort_unstable();
        let last = exp.gauge(
            "trendsync_region_last_success_timestamp_seconds",
            "When the region was last fetched completely, in seconds since the Unix epoch.",
        );
        for (code, at) in done {
            last.sample(&[("region", code)], at as f64);
        }
        exp
    }
}

/// Writing the metrics file failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{} names no file", .0.display())]
    NoFileName(PathBuf),
    #[error("{doing} {}: {source}", .path.display())]
    Io {
        doing: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// Replaces `path` with `text` atomically: a temporary file in the same directory
/// (so the rename cannot cross file systems), synced, mode 0644, renamed over `path`.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), WriteError> {
    let name = path
        .file_name()
        .ok_or_else(|| WriteError::NoFileName(path.to_path_buf()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // A leading dot and no `.prom` ending: the textfile collector reads only `*.prom`,
    // so it never picks up a half-written file. The random part keeps two writers (and
    // a file left by one that was killed) apart.
    let tmp = dir.join(format!(
        ".{}.{}-{:08x}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        rand::random::<u32>()
    ));
    let io_err = |doing: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError::Io {
            doing,
            path,
            source,
        }
    };
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err("creating", &tmp))?;
        // The umask decides the mode a file is created with; the collector runs as
        // another user and must be able to read the file whatever the umask is.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(fs::Permissions::from_mode(0o644))
                .map_err(io_err("setting the mode of", &tmp))?;
        }
        file.write_all(text.as_bytes())
            .map_err(io_err("writing", &tmp))?;
        // Without it, a crash after the rename may leave an empty file in its place.
        file.sync_all().map_err(io_err("syncing", &tmp))?;
        drop(file);
        fs::rename(&tmp, path).map_err(io_err("renaming the new metrics file over", path))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
        return written;
    }
    // Makes the rename itself durable; the file is already complete either way, so a
    // directory that cannot be synced is no reason to fail.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! `trendsync config [--json]`: the configuration in force and where each part came
//! from, so that a shell, a cron line and a systemd unit can be compared. The files
//! are read as `run` reads them, and their mistakes are reported the same way (78).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use super::identity::LimiterJson;
use super::{Ctx, load_config, shown};
use crate::cli::{ConfigArgs, Global};
use crate::config::{Found, Origin};
use crate::output::human;
use crate::output::json::print_json;
use crate::output::table;
use crate::quota::{Bucket, Per};

/// A configuration file: its path (`built-in` for the copy in the binary) and why it
/// was chosen.
#[derive(Debug, Serialize)]
struct FileJson {
    path: String,
    source: &'static str,
    /// A different file of the same name further down the configuration directories,
    /// which this one hides.
    shadows: Option<String>,
}

#[derive(Debug, Serialize)]
struct CostsJson {
    #[serde(flatten)]
    file: FileJson,
    /// The parsed budget's fingerprint, as each run records it.
    fingerprint: String,
}

/// One bucket as the costs file configures it (its figures are `budget`'s).
#[derive(Debug, Serialize)]
struct BucketConfigJson {
    name: String,
    quota: u64,
    ceiling: u64,
    window: String,
    /// Units per call of each of its methods.
    methods: BTreeMap<String, u64>,
}

impl BucketConfigJson {
    fn of(bucket: &Bucket) -> BucketConfigJson {
        BucketConfigJson {
            name: bucket.name.clone(),
            quota: bucket.quota,
            ceiling: bucket.ceiling,
            window: bucket.window.to_string(),
            methods: bucket.costs.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
struct LimitJson {
    name: String,
    methods: Vec<String>,
    max: u64,
    window: String,
    /// `unit`: each call counts its cost; `call`: each call counts 1.
    per: &'static str,
}

#[derive(Debug, Serialize)]
struct SearchJson {
    name: String,
    q: String,
    order: String,
    published_within_s: Option<u64>,
}

#[derive(Debug, Serialize)]
struct RegionJson {
    code: String,
    offset: u32,
    pages: u32,
    hl: Option<String>,
    /// The category charts fetched beside the overall one.
    categories: Vec<String>,
    searches: Vec<SearchJson>,
}

#[derive(Debug, Serialize)]
struct FollowJson {
    days: u32,
    every_s: u64,
}

#[derive(Debug, Serialize)]
struct ConfigJson {
    costs: CostsJson,
    regions: FileJson,
    db: String,
    /// `--db`, `TRENDSYNC_DB`, or `default`.
    db_source: &'static str,
    limiter: LimiterJson,
    /// `--redis-url`, `TRENDSYNC_REDIS_URL`, or `default` (the embedded limiter).
    limiter_source: &'static str,
    api_base: String,
    /// `--api-base`, `TRENDSYNC_API_BASE`, or `default`.
    api_base_source: &'static str,
    /// `YOUTUBE_API_KEY`, `--api-key-file PATH`, or null when neither is set. Never
    /// the key.
    key_source: Option<String>,
    budget_key: String,
    buckets: Vec<BucketConfigJson>,
    limits: Vec<LimitJson>,
    regions_configured: Vec<RegionJson>,
    follow: Option<FollowJson>,
}

fn file_json(found: &Found) -> FileJson {
    FileJson {
        path: match &found.origin {
            Origin::Given(path) => shown(path),
            Origin::BuiltIn => "built-in".to_owned(),
        },
        source: found.source.as_str(),
        shadows: found.shadows.as_ref().map(|(path, _)| shown(path)),
    }
}

/// Where a setting's value came from: its variable when that is set to this value,
/// `default` when the value is the default, else its flag. (A flag given the
/// variable's own value reads as the variable, which says the same.)
fn setting_source(
    value: &OsStr,
    default: &OsStr,
    flag: &'static str,
    variable: &'static str,
) -> &'static str {
    if std::env::var_os(variable).is_some_and(|set| set == value) {
        variable
    } else if value == default {
        "default"
    } else {
        flag
    }
}

fn key_source(global: &Global) -> Option<String> {
    match &global.api_key_file {
        Some(path) => Some(format!("--api-key-file {}", shown(path))),
        None => std::env::var("YOUTUBE_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty())
            .map(|_| "YOUTUBE_API_KEY".to_owned()),
    }
}

pub fn run(ctx: &Ctx<'_>, args: &ConfigArgs) -> Result<()> {
    let global = ctx.global;
    let config = load_config(ctx)?;
    // What a run would refuse (78) is not the configuration in force.
    crate::youtube::parse_api_base(&global.api_base)?;
    let costs = ctx.config.costs()?;
    let regions = ctx.config.regions()?;
    let budget = &config.budget;
    let report = ConfigJson {
        costs: CostsJson {
            file: file_json(costs),
            fingerprint: budget.fingerprint(),
        },
        regions: file_json(regions),
        db: shown(&global.db),
        db_source: setting_source(
            global.db.as_os_str(),
            OsStr::new(crate::cli::DEFAULT_DB),
            "--db",
            "TRENDSYNC_DB",
        ),
        limiter: LimiterJson::configured(global),
        limiter_source: match &global.redis_url {
            Some(url) => setting_source(
                OsStr::new(url),
                OsStr::new(""),
                "--redis-url",
                "TRENDSYNC_REDIS_URL",
            ),
            None => "default",
        },
        api_base: super::key::shown_url(global, &global.api_base),
        api_base_source: setting_source(
            OsStr::new(&global.api_base),
            OsStr::new(crate::cli::DEFAULT_API_BASE),
            "--api-base",
            "TRENDSYNC_API_BASE",
        ),
        key_source: key_source(global),
        budget_key: budget.key.clone(),
        buckets: budget.buckets().iter().map(BucketConfigJson::of).collect(),
        limits: budget
            .limits
            .iter()
            .map(|l| LimitJson {
                name: l.name.clone(),
                methods: l.methods.clone(),
                max: l.max,
                window: l.window.to_string(),
                per: match l.per {
                    Per::Unit => "unit",
                    Per::Call => "call",
                },
            })
            .collect(),
        regions_configured: config
            .regions
            .regions
            .iter()
            .map(|r| RegionJson {
                code: r.code.clone(),
                offset: r.offset,
                pages: r.pages,
                hl: r.hl.clone(),
                categories: r.categories.iter().map(u32::to_string).collect(),
                searches: r
                    .searches
                    .iter()
                    .map(|s| SearchJson {
                        name: s.name.clone(),
                        q: s.q.clone(),
                        order: s.order.to_string(),
                        published_within_s: s.published_within.map(|d| d.as_secs()),
                    })
                    .collect(),
            })
            .collect(),
        follow: config.regions.follow.map(|f| FollowJson {
            days: f.days,
            every_s: f.every.as_secs(),
        }),
    };
    if args.json {
        return print_json(&report);
    }
    print_text(&report)
}

fn print_text(c: &ConfigJson) -> Result<()> {
    let mut out = Fitted {
        out: std::io::stdout().lock(),
        width: table::width(),
    };
    // What a file hides on a line of its own, so that cutting either path to fit
    // keeps the other.
    for (label, f) in [("costs", &c.costs.file), ("regions", &c.regions)] {
        out.line(
            Cut::Middle,
            &format!("{label:<9} {} ({})", f.path, f.source),
        )?;
        if let Some(other) = &f.shadows {
            out.line(Cut::Middle, &format!("          hides a different {other}"))?;
        }
    }
    out.line(
        Cut::Middle,
        &format!("database  {} ({})", c.db, c.db_source),
    )?;
    out.line(
        Cut::Middle,
        &format!("limiter   {} ({})", c.limiter.describe(), c.limiter_source),
    )?;
    out.line(
        Cut::Middle,
        &format!("api base  {} ({})", c.api_base, c.api_base_source),
    )?;
    out.line(
        Cut::Middle,
        &format!(
            "key       {}",
            c.key_source
                .as_deref()
                .unwrap_or("none (set YOUTUBE_API_KEY or pass --api-key-file)")
        ),
    )?;
    out.line(
        Cut::End,
        &format!(
            "budget    \"{}\", fingerprint {}",
            c.budget_key, c.costs.fingerprint
        ),
    )?;
    for b in &c.buckets {
        let methods: Vec<String> = b.methods.iter().map(|(m, u)| format!("{m} {u}")).collect();
        out.line(
            Cut::End,
            &format!(
                "  bucket {}: quota {}, ceiling {}, window {}; {}",
                b.name,
                b.quota,
                b.ceiling,
                b.window,
                methods.join(", ")
            ),
        )?;
    }
    for l in &c.limits {
        out.line(
            Cut::End,
            &format!(
                "  limit {}: {} {}{} per {}; {}",
                l.name,
                l.max,
                l.per,
                if l.max == 1 { "" } else { "s" },
                l.window,
                l.methods.join(", ")
            ),
        )?;
    }
    for r in &c.regions_configured {
        let mut charts = vec!["overall".to_owned()];
        charts.extend(r.categories.iter().cloned());
        let searches: Vec<&str> = r.searches.iter().map(|s| s.name.as_str()).collect();
        out.line(
            Cut::End,
            &format!(
                "region    {} at minute {}: {} page{} of {}{}",
                r.code,
                r.offset,
                r.pages,
                if r.pages == 1 { "" } else { "s" },
                charts.join("+"),
                if searches.is_empty() {
                    String::new()
                } else {
                    format!("; searches {}", searches.join(", "))
                }
            ),
        )?;
    }
    match &c.follow {
        Some(f) => out.line(
            Cut::End,
            &format!(
                "follow    videos charted in the last {} days, every {}",
                f.days,
                human::duration(std::time::Duration::from_secs(f.every_s))
            ),
        )?,
        None => out.line(Cut::End, "follow    none")?,
    }
    Ok(())
}

/// How a line too wide for the terminal is cut: its label always stays.
#[derive(Clone, Copy)]
enum Cut {
    /// In the middle, keeping the end: a path's file name and why it was chosen.
    Middle,
    /// At the end: a list.
    End,
}

/// stdout, each line cut with `…` to the width the tables use (docs/commands.md,
/// "Text output"); `--json` has all of it.
struct Fitted<W: Write> {
    out: W,
    width: Option<usize>,
}

impl<W: Write> Fitted<W> {
    fn line(&mut self, cut: Cut, text: &str) -> std::io::Result<()> {
        let Some(width) = self.width.filter(|w| table::columns(text) > *w) else {
            return writeln!(self.out, "{text}");
        };
        // The label: up to the value's start (two blanks, or ": " in a bucket line).
        let label_end = text
            .find(": ")
            .map(|i| i + 2)
            .filter(|_| text.starts_with("  "))
            .or_else(|| {
                let word = text.find(' ')?;
                let value = text[word..].find(|c| c != ' ')?;
                Some(word + value)
            })
            .unwrap_or(0);
        let (label, value) = text.split_at(label_end);
        let room = width.saturating_sub(table::columns(label));
        if room < 8 {
            return writeln!(self.out, "{}", table::cut(text, width));
        }
        let value = match cut {
            Cut::Middle => table::cut_middle(value, room),
            Cut::End => table::cut(value, room),
        };
        writeln!(self.out, "{label}{value}")
    }
}

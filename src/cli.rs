//! The command line: every flag of docs/commands.md, each global option also an
//! environment variable. All clap definitions live here.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::config::When;
pub use crate::logging::LogFormat;
use crate::region_status::RegionStatus;

pub const DEFAULT_API_BASE: &str = "https://www.googleapis.com/youtube/v3";

/// The database when neither `--db` nor `TRENDSYNC_DB` names one.
pub const DEFAULT_DB: &str = "trendsync.db";

#[derive(Debug, Parser)]
#[command(
    name = "trendsync",
    version,
    about = "Fetch YouTube trending charts into SQLite under a shared quota budget",
    long_about = "Fetch YouTube trending charts into SQLite under a shared quota budget.\n\n\
        Every upstream call is charged to a shared, exact sliding-window budget before it is made. \
        When the budget is spent the run stops cleanly and exits 75; the next run resumes.\n\n\
        Exit codes: 0 done, 1 failed, 2 usage error, 75 stopped (try later), 78 configuration error, \
        130/143 interrupted by SIGINT/SIGTERM.\n\
        The API key comes from YOUTUBE_API_KEY or --api-key-file.",
    after_help = EXAMPLES
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "\
Examples:
  # The cron line of one region (print them all with `trendsync crontab`); cron's PATH
  # is /usr/bin:/bin, so the line names the binary by its full path
  7 * * * * cd /var/lib/trendsync && /usr/local/bin/trendsync run --region GB >> trendsync.log 2>&1

  # What a run would call and where the budget would stop it; calls nothing
  trendsync run --dry-run

  # Fill regions not fetched completely for 6 hours, from the reserve
  trendsync backfill --stale-after 6h

  # Health check: exit 1 when a region's last complete fetch is older than 3 hours
  trendsync status --stale-after 3h

  # Which region failed last night, and why
  trendsync runs --since 12h --status failed";

#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// quota-costs.toml [default: the first found in $TRENDSYNC_CONFIG_DIR, the current
    /// directory, $XDG_CONFIG_HOME/trendsync, /etc/trendsync; else the built-in copy]
    #[arg(long, env = "TRENDSYNC_COSTS", global = true, value_name = "PATH")]
    pub costs: Option<PathBuf>,

    /// regions.toml [default: the first found in $TRENDSYNC_CONFIG_DIR, the current
    /// directory, $XDG_CONFIG_HOME/trendsync, /etc/trendsync; else the built-in copy]
    #[arg(long, env = "TRENDSYNC_REGIONS", global = true, value_name = "PATH")]
    pub regions: Option<PathBuf>,

    /// The SQLite database (also the embedded limiter's, without --redis-url)
    #[arg(
        long,
        env = "TRENDSYNC_DB",
        global = true,
        value_name = "PATH",
        default_value = DEFAULT_DB
    )]
    pub db: PathBuf,

    /// The shared limiter, e.g. redis://127.0.0.1:6379/0 [default: the embedded limiter in --db]
    #[arg(
        long,
        env = "TRENDSYNC_REDIS_URL",
        global = true,
        value_name = "URL",
        hide_env_values = true
    )]
    pub redis_url: Option<String>,

    /// A PEM file of the CA that signed the Redis server's certificate, for rediss:// URLs
    /// [default: the system's trust store]
    #[arg(
        long,
        env = "TRENDSYNC_REDIS_CA_FILE",
        global = true,
        value_name = "PATH"
    )]
    pub redis_ca_file: Option<PathBuf>,

    /// A PEM client certificate for mutual TLS with Redis (with --redis-client-key)
    #[arg(
        long,
        env = "TRENDSYNC_REDIS_CLIENT_CERT",
        global = true,
        value_name = "PATH"
    )]
    pub redis_client_cert: Option<PathBuf>,

    /// The PEM private key of --redis-client-cert
    #[arg(
        long,
        env = "TRENDSYNC_REDIS_CLIENT_KEY",
        global = true,
        value_name = "PATH"
    )]
    pub redis_client_key: Option<PathBuf>,

    /// The YouTube Data API v3 base URL
    #[arg(long, env = "TRENDSYNC_API_BASE", global = true, value_name = "URL", default_value = DEFAULT_API_BASE)]
    pub api_base: String,

    /// A file holding the API key [default: the YOUTUBE_API_KEY environment variable]
    #[arg(long, global = true, value_name = "PATH")]
    pub api_key_file: Option<PathBuf>,

    /// Log format on stderr; RUST_LOG filters
    #[arg(long, env = "TRENDSYNC_LOG_FORMAT", global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Write Prometheus textfile-collector metrics here after a run
    #[arg(
        long,
        env = "TRENDSYNC_METRICS_FILE",
        global = true,
        value_name = "PATH"
    )]
    pub metrics_file: Option<PathBuf>,

    /// More log output (repeat for more)
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,

    /// Less log output (repeat for less)
    #[arg(short, long, global = true, action = ArgAction::Count, conflicts_with = "verbose")]
    pub quiet: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Fetch trending pages (and configured searches) for the regions, within the ceiling
    Run(RunArgs),
    /// Like run, for regions whose last complete fetch is stale; may spend the reserve up
    /// to the quota
    Backfill(BackfillArgs),
    /// Show the budget's window as it stands, or charge it by hand
    Budget(BudgetArgs),
    /// Full-text search of the ingested videos (local; never calls the upstream)
    Search(SearchArgs),
    /// Everything known about one video: its metadata, its places per chart, its counts over time
    Video(VideoArgs),
    /// Per region the last attempt, its reason and the age of the last complete fetch; runs
    /// in progress or abandoned; the budget
    Status(StatusArgs),
    /// The run history, one line per run and region: which region failed, and why
    Runs(RunsArgs),
    /// Delete chart and search snapshots and follow-up counts older than a cutoff, then
    /// videos nothing refers to
    Prune(PruneArgs),
    /// Write the trending snapshots out as CSV, JSON lines or Parquet, one row per (fetch,
    /// region, chart, rank)
    Export(ExportArgs),
    /// Print one crontab line per region at its offset minute
    Crontab(CrontabArgs),
    /// Show the configuration in force and where each part came from (files, database,
    /// limiter, key)
    Config(ConfigArgs),
    /// Print shell completions
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), made from the same definitions as --help
    Man {
        /// A command's own page, e.g. `run` or `budget charge` (the pages the main one
        /// lists under SUBCOMMANDS); without it, the main page
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// What a command does with `--db`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbUse {
    /// Nothing: the command never opens it.
    None,
    /// Reads it, and creates nothing: a missing file is no file.
    Read,
    /// Writes it, creating it when missing.
    Write,
    /// Writes it when it exists; a missing file is not created.
    Change,
}

impl Command {
    /// What the command does with `--db`: the front end opens it once, accordingly.
    pub fn db_use(&self) -> DbUse {
        match self {
            Command::Run(args) => Self::writes_unless(args.fetch.dry_run),
            Command::Backfill(args) => Self::writes_unless(args.fetch.dry_run),
            Command::Prune(args) if args.dry_run => DbUse::Read,
            Command::Prune(_) => DbUse::Change,
            Command::Budget(args) => match args.action {
                Some(BudgetAction::Charge { .. } | BudgetAction::Unblock { .. }) => DbUse::Write,
                None => DbUse::Read,
            },
            Command::Search(_)
            | Command::Video(_)
            | Command::Status(_)
            | Command::Runs(_)
            | Command::Export(_) => DbUse::Read,
            Command::Completions { .. }
            | Command::Man { .. }
            | Command::Crontab(_)
            | Command::Config(_) => DbUse::None,
        }
    }

    /// Whether the command warns that a configuration file it found hides a different
    /// one further down the lookup (docs/commands.md, "Configuration files"): `config`,
    /// the dry run and the commands that charge or change the budget do, once; the
    /// readers, run from shells and dashboards all day, do not.
    pub fn warns_shadow(&self) -> bool {
        match self {
            Command::Run(_) | Command::Backfill(_) | Command::Config(_) => true,
            Command::Budget(args) => args.action.is_some(),
            Command::Search(_)
            | Command::Video(_)
            | Command::Status(_)
            | Command::Runs(_)
            | Command::Prune(_)
            | Command::Export(_)
            | Command::Crontab(_)
            | Command::Completions { .. }
            | Command::Man { .. } => false,
        }
    }

    fn writes_unless(dry_run: bool) -> DbUse {
        if dry_run { DbUse::Read } else { DbUse::Write }
    }

    /// Whether the command was asked for one JSON object on stdout.
    pub fn wants_json(&self) -> bool {
        match self {
            Command::Run(args) => args.fetch.json,
            Command::Backfill(args) => args.fetch.json,
            Command::Budget(args) => match &args.action {
                None => args.json,
                Some(BudgetAction::Charge { json, .. } | BudgetAction::Unblock { json, .. }) => {
                    *json
                }
            },
            Command::Search(args) => args.json,
            Command::Video(args) => args.json,
            Command::Status(args) => args.json,
            Command::Runs(args) => args.json,
            Command::Prune(args) => args.json,
            Command::Config(args) => args.json,
            Command::Completions { .. }
            | Command::Man { .. }
            | Command::Crontab(_)
            | Command::Export(_) => false,
        }
    }
}

/// What `run` and `backfill` share.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Only this region (repeatable) [default: every region in regions.toml]
    #[arg(long = "region", id = "region", value_name = "CC")]
    pub regions: Vec<String>,

    /// Print the plan against the budget as it stands; call nothing, charge nothing, write nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Regions fetched in parallel (pages within a region stay in order)
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,

    /// Print one JSON object with the outcome on stdout
    #[arg(long)]
    pub json: bool,

    /// Charge this limiter although the database's latest run charged the other kind
    /// (embedded or Redis): the one step that moves a database between them on purpose
    #[arg(long)]
    pub switch_limiter: bool,

    /// Ship each finished slot's charts as Parquet to this object store, after the run:
    /// s3://BUCKET/PREFIX (credentials from the AWS environment variables) or
    /// file:///ABSOLUTE/PATH
    #[arg(
        long,
        env = "TRENDSYNC_SINK",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub sink: Option<String>,
    /// The name this host's runs carry in the fleet's slot records (on Redis): who
    /// fetched a slot [default: the system's host name]
    #[arg(long, env = "TRENDSYNC_HOST_NAME", value_parser = parse_host_name, value_name = "NAME")]
    pub host_name: Option<String>,
}

/// The longest host name, in bytes: it is written into every slot record.
pub const HOST_NAME_MAX: usize = 64;

/// A host name for the slot records: 1 to [`HOST_NAME_MAX`] bytes of printable
/// characters, no spaces (a log line or a JSON field shows it as it is).
pub fn parse_host_name(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("the host name is empty; expected a name such as \"host-a\"".to_owned());
    }
    if s.len() > HOST_NAME_MAX {
        return Err(format!(
            "the host name is {} bytes long; expected at most {HOST_NAME_MAX}",
            s.len()
        ));
    }
    if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "the host name {:?} holds {c:?}; expected printable characters and no spaces, such as \"host-a\"",
            s
        ));
    }
    Ok(s.to_owned())
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub fetch: FetchArgs,
}

#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    pub fetch: FetchArgs,

    /// Regions whose last complete fetch is older than this
    #[arg(long, default_value = "2h", value_parser = parse_duration_arg, value_name = "DURATION")]
    pub stale_after: Duration,
}

#[derive(Debug, Args)]
pub struct BudgetArgs {
    #[command(subcommand)]
    pub action: Option<BudgetAction>,

    /// Print one JSON object on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BudgetAction {
    /// Ask the budget for N calls of METHOD, all or nothing: exit 0 granted, 75 denied
    Charge {
        /// The upstream method, as named in [costs], e.g. search.list
        method: String,

        /// Number of calls, charged together as N × cost units
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        count: u64,

        /// Allow the reserve: up to the quota instead of the ceiling
        #[arg(long)]
        reserve: bool,

        /// Print one JSON object on stdout
        #[arg(long)]
        json: bool,
    },
    /// Lift an upstream block (quotaExceeded) before its reset, once the key's quota was
    /// raised or reset
    Unblock {
        /// The bucket to unblock (`budget` for the main one); every bucket when none is named
        #[arg(value_name = "BUCKET")]
        bucket: Option<String>,
        /// Print one JSON object on stdout
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Exit 1 when any region's last complete fetch is older than this (a health check);
    /// without it, regions older than 2h are shown stale and the exit code stays 0
    #[arg(long, value_parser = parse_duration_arg, value_name = "DURATION")]
    pub stale_after: Option<Duration>,

    /// Instead of the dashboard, per region the slots of its schedule that ended: how many
    /// were fetched, by which hosts, and which were missed and why (a fleet's slot records,
    /// read from Redis: needs --redis-url)
    #[arg(long, conflicts_with = "stale_after")]
    pub coverage: bool,

    /// With --coverage, the slots that start at or after WHEN: a duration back from now
    /// (12h), a UTC date (2026-11-01, from its start) or an RFC 3339 time [default: 7d]
    #[arg(long, requires = "coverage", value_parser = crate::config::parse_when, value_name = "WHEN")]
    pub since: Option<When>,

    /// Print one JSON object on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs started at or after WHEN: a duration back from now (12h), a UTC date
    /// (2026-11-01, from its start) or an RFC 3339 time
    #[arg(long, value_parser = crate::config::parse_when, value_name = "WHEN")]
    pub since: Option<When>,

    /// Only this region (repeatable)
    #[arg(long = "region", id = "region", value_name = "CC")]
    pub regions: Vec<String>,

    /// Only lines with this status
    #[arg(long, value_parser = region_status_arg())]
    pub status: Option<RegionStatus>,

    /// At most this many lines, newest first
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: u32,

    /// Print one JSON object on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// FTS5 query: words, "exact phrases", OR, NOT, prefix*
    pub query: String,

    /// Only videos that trended in this region
    #[arg(long, value_name = "CC")]
    pub region: Option<String>,

    /// At most this many results
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,

    /// Print one JSON object on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VideoArgs {
    /// The video's id (dQw4w9WgXcQ), or its watch, share or Shorts URL as `search` prints it
    #[arg(value_name = "VIDEO")]
    pub video_id: String,

    /// Print one JSON object on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Delete snapshots whose fetch began, and follow-up counts taken, longer ago than
    /// this: 90d, 52w, ...
    #[arg(long, value_parser = parse_older_than_arg, value_name = "DURATION")]
    pub older_than: Duration,

    /// Say what would be deleted; delete nothing
    #[arg(long)]
    pub dry_run: bool,

    /// Give the freed space back to the file system afterwards (writers wait meanwhile)
    #[arg(long, conflicts_with = "dry_run")]
    pub vacuum: bool,

    /// Print one JSON object on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    Csv,
    Jsonl,
    /// Typed columns (integers, UTC timestamps, text; nulls kept), to a file or a pipe
    Parquet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportPer {
    Fetch,
    Day,
    /// One row per (video, region, chart): its time on the chart and its best rank
    Video,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Only this region (repeatable) [default: every region stored]
    #[arg(long = "region", id = "region", value_name = "CC")]
    pub regions: Vec<String>,

    /// Only fetches at or after WHEN: a duration back from now (7d), a UTC date
    /// (2026-11-01, from its start) or an RFC 3339 time
    #[arg(long, value_parser = crate::config::parse_when, value_name = "WHEN")]
    pub since: Option<When>,

    /// Only fetches at or before WHEN: a duration back from now, a UTC date (2026-11-30,
    /// to its end) or an RFC 3339 time
    #[arg(long, value_parser = crate::config::parse_when, value_name = "WHEN")]
    pub until: Option<When>,

    /// Only this chart (repeatable): a category id, "overall", or "all" for every chart
    /// [default: overall]
    #[arg(long = "chart", id = "chart", value_parser = parse_chart_arg, value_name = "ID")]
    pub charts: Vec<ChartChoice>,

    /// One row per fetch; per (video, region, chart, UTC day), that day's last fetch; or
    /// per (video, region, chart), the chart history: days on chart, entries, best rank
    #[arg(long, value_enum, default_value_t = ExportPer::Fetch)]
    pub per: ExportPer,

    /// The counts time series instead, one row per (video, time, source): video_id,
    /// counted_at, views, likes, comment_count, source, methodology
    #[arg(long, conflicts_with_all = ["chart", "per"])]
    pub counts: bool,

    /// Output format
    #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
    pub format: ExportFormat,

    /// Write here (replaced whole when done) instead of stdout
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print one JSON object on stdout
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CrontabArgs {
    /// How often each region runs: 1h, 3h, 1d, ...
    #[arg(long, default_value = "1h", value_parser = parse_duration_arg, value_name = "DURATION")]
    pub every: Duration,

    /// The trendsync binary the lines run [default: this one]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
}

/// `--status`: one of [`RegionStatus::ALL`], listed in `--help` and in the error.
fn region_status_arg() -> impl clap::builder::TypedValueParser<Value = RegionStatus> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(RegionStatus::ALL.map(RegionStatus::as_str))
        .try_map(|s| s.parse::<RegionStatus>())
}

fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    crate::config::parse_duration(s)
}

/// The longest `--older-than`: a hundred years. A cutoff further back deletes nothing
/// any longer one would keep, and one far enough back is before any time that can be
/// written (docs/commands.md, `prune`).
pub const OLDER_THAN_MAX: Duration = Duration::from_secs(36_500 * 86_400);

/// `--older-than`: a duration up to [`OLDER_THAN_MAX`].
fn parse_older_than_arg(s: &str) -> Result<Duration, String> {
    let d = crate::config::parse_duration(s)?;
    if d > OLDER_THAN_MAX {
        return Err(format!(
            "\"{}\" is longer than the longest accepted, 36500d (a hundred years); to keep \
             every snapshot, do not prune",
            s.trim()
        ));
    }
    Ok(d)
}

/// A chart as `--chart` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartChoice {
    /// Every chart of the regions exported.
    All,
    /// One chart: 0 for the overall chart, else its category id.
    Id(u32),
}

/// A chart as `--chart` takes it: "overall" (0), a category id from 1, or "all".
fn parse_chart_arg(s: &str) -> Result<ChartChoice, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("overall") {
        return Ok(ChartChoice::Id(0));
    }
    if s.eq_ignore_ascii_case("all") {
        return Ok(ChartChoice::All);
    }
    s.parse::<u32>()
        .ok()
        .filter(|n| *n >= 1 && s.bytes().all(|b| b.is_ascii_digit()))
        .map(ChartChoice::Id)
        .ok_or_else(|| {
            format!("\"{s}\" is not a chart; expected a category id such as 17, overall, or all")
        })
}

#[cfg(test)]
mod tests;

//! Which limiter and which costs file a command reads or charges, against the ones
//! the database's latest run recorded. A shell that lacks cron's `TRENDSYNC_REDIS_URL`
//! would otherwise read an empty embedded window as the budget, or charge it and spend
//! the key's quota a second time.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::Ctx;
use crate::cli::Global;
use crate::error::MissingConfig;
use crate::mask::mask_url;
use crate::quota::Budget;
use crate::region_status::{LimiterKind, Recorded};
use crate::sqlite::Db;
use crate::store::{LastRunLimiter, RunLimiter, Store};

use LimiterKind::{Embedded, Redis};

/// A limiter as the JSON of `status`, `budget` and `config` names it: its kind, and the
/// Redis URL (password masked) or the embedded limiter's database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LimiterJson {
    /// As the runs table records it: a word of another trendsync's is said as it is.
    pub kind: Recorded<LimiterKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl LimiterJson {
    /// The limiter this command is configured with.
    pub fn configured(global: &Global) -> LimiterJson {
        match &global.redis_url {
            Some(url) => LimiterJson {
                kind: Redis.into(),
                url: Some(mask_url(url)),
                path: None,
            },
            None => LimiterJson {
                kind: Embedded.into(),
                url: None,
                path: Some(global.db.display().to_string()),
            },
        }
    }

    /// The limiter a run recorded in the database at `db`.
    pub fn recorded(limiter: &RunLimiter, db: &Path) -> LimiterJson {
        LimiterJson {
            kind: limiter.kind.clone(),
            url: limiter.url.clone(),
            path: (limiter.kind == Embedded).then(|| db.display().to_string()),
        }
    }

    /// For people: `Redis at redis://…` or `the embedded limiter in trendsync.db`.
    pub fn describe(&self) -> String {
        match (self.kind.known(), &self.url, &self.path) {
            (Some(Redis), Some(url), _) => format!("Redis at {url}"),
            (Some(Redis), None, _) => "Redis".to_owned(),
            (Some(Embedded), _, Some(path)) => format!("the embedded limiter in {path}"),
            _ => format!("the {} limiter", self.kind),
        }
    }

    /// Whether the two are the same limiter: the same kind and, for Redis, the same
    /// (masked) URL where both know it (calls recorded without a run know the kind
    /// alone).
    fn same(&self, other: &LimiterJson) -> bool {
        self.kind == other.kind
            && (self.kind != Redis
                || self.url.is_none()
                || other.url.is_none()
                || self.url == other.url)
    }
}

/// What a run records of the limiter it charges and the budget it charges under.
pub(crate) fn run_record(global: &Global, budget: &Budget) -> RunLimiter {
    let configured = LimiterJson::configured(global);
    RunLimiter {
        kind: configured.kind,
        url: configured.url,
        costs_fingerprint: budget.fingerprint(),
    }
}

/// The latest run's record in the database at `db`, read without writing; none when
/// there is no database, no run recorded one, or it cannot be read (the command's own
/// open says why).
pub(crate) fn last_run(db: Option<&Db>) -> Option<LastRunLimiter> {
    let store = match db.map(Store::read_on).transpose().map(Option::flatten) {
        Ok(Some(store)) => store,
        Ok(None) => return None,
        Err(e) => {
            tracing::debug!("the latest run's limiter cannot be read: {e}");
            return None;
        }
    };
    store.last_run_limiter().unwrap_or_else(|e| {
        tracing::debug!("{e}");
        None
    })
}

/// What the database says charged its budget last.
enum Charged {
    /// The latest run's record.
    Run(LastRunLimiter),
    /// No run recorded a limiter, but the database records calls charged on these
    /// kinds (`budget charge` leaves no run behind): one, or both where nothing but
    /// their clocks could say which came last ([`crate::quota::charged_on`]).
    Calls(Vec<LimiterJson>),
}

impl Charged {
    /// The latest run's record, or else the kinds the records of `budget_key`'s calls
    /// show.
    ///
    /// Latest by the order the runs were recorded, never by a clock
    /// ([`Store::last_run_limiter`]). The calls decide only before any run: a charge
    /// after a run charges the kind that run recorded (any other is refused below, and
    /// only a run switches), so the latest run's kind is the latest charges' kind.
    fn read(ctx: &Ctx<'_>, budget_key: &str) -> Option<Charged> {
        if let Some(last) = last_run(ctx.db()) {
            return Some(Charged::Run(last));
        }
        let db = ctx.global.db.as_path();
        let kinds: Vec<LimiterJson> = crate::quota::charged_on(ctx.db(), budget_key)
            .into_iter()
            .map(|kind| LimiterJson {
                kind: kind.into(),
                url: None,
                path: (kind == Embedded).then(|| db.display().to_string()),
            })
            .collect();
        (!kinds.is_empty()).then_some(Charged::Calls(kinds))
    }

    /// The limiters that charged: the latest run's, or every kind the calls show.
    fn limiters(&self, db: &Path) -> Vec<LimiterJson> {
        match self {
            Charged::Run(last) => vec![LimiterJson::recorded(&last.limiter, db)],
            Charged::Calls(limiters) => limiters.clone(),
        }
    }

    /// Who charged, for people: `the latest run (<id>) of <db>`, or the calls `db`
    /// records.
    fn who(&self, db: &Path) -> String {
        match self {
            Charged::Run(last) => format!("the latest run ({}) of {}", last.run_id, db.display()),
            Charged::Calls(_) => format!(
                "the calls {} records (no run yet; `budget charge`)",
                db.display()
            ),
        }
    }
}

/// `limiters` for people: `Redis at redis://…`, or both kinds joined by `and`.
fn describe_all(limiters: &[LimiterJson]) -> String {
    limiters
        .iter()
        .map(LimiterJson::describe)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// What a read command (`status`, `budget`, the dry run) read, against the latest run.
pub(crate) struct Reading {
    /// The limiter this command reads.
    pub limiter: LimiterJson,
    /// The one the latest run used, when one recorded it.
    pub last_run: Option<LimiterJson>,
}

/// Warns first when this command reads another limiter than the latest run used, or
/// the budget of another costs file, naming both; returns what it compared.
pub(crate) fn check_reading(ctx: &Ctx<'_>, budget: &Budget, costs_file: &str) -> Reading {
    let global = ctx.global;
    let limiter = LimiterJson::configured(global);
    let charged = Charged::read(ctx, &budget.key);
    if let Some(charged) = &charged {
        let recorded = charged.limiters(&global.db);
        if recorded.iter().any(|r| !limiter.same(r)) {
            tracing::warn!(
                "this command reads {}, but {} charged {}: the figures below are what {} holds, not the budget those calls were charged against{}",
                limiter.describe(),
                charged.who(&global.db),
                describe_all(&recorded),
                limiter.describe(),
                hint(&limiter, &recorded)
            );
        }
    }
    let last = match charged {
        Some(Charged::Run(last)) => Some(last),
        _ => None,
    };
    let last_run = last
        .as_ref()
        .map(|l| LimiterJson::recorded(&l.limiter, &global.db));
    if let Some(last) = &last {
        let fingerprint = budget.fingerprint();
        if !last.limiter.costs_fingerprint.is_empty()
            && last.limiter.costs_fingerprint != fingerprint
        {
            tracing::warn!(
                "this command reads the budget of {costs_file} (fingerprint {fingerprint}), but the latest run ({}) charged under another costs file (fingerprint {}); give every process the same file (`trendsync config` shows which one it reads)",
                last.run_id,
                last.limiter.costs_fingerprint
            );
        }
    }
    Reading { limiter, last_run }
}

/// How to read the limiter the runs use; nothing to say when the calls show both kinds.
fn hint(reads: &LimiterJson, charged: &[LimiterJson]) -> &'static str {
    let [runs] = charged else {
        return "";
    };
    match (reads.kind.known(), runs.kind.known()) {
        (Some(Embedded), Some(Redis)) => {
            "; set TRENDSYNC_REDIS_URL (or --redis-url) as the runs have it"
        }
        (Some(Redis), Some(Embedded)) => {
            "; leave out TRENDSYNC_REDIS_URL (and --redis-url) as the runs do"
        }
        _ => "; give --redis-url the URL the runs have",
    }
}

/// The flag that moves a database to the other kind of limiter on purpose.
pub(crate) const SWITCH_FLAG: &str = "--switch-limiter";

/// Refuses (78) to charge the other kind of limiter than the database's latest run
/// charged (before any run, than its recorded calls show; both kinds, when they show
/// both), naming both: an empty embedded window, or a Redis that never saw the
/// embedded one's charges, would let this process spend the key's quota a second
/// time. Another Redis URL is not refused: the ledger restores this host's share of
/// a window that is not the one it charged. `switch` is the operator's explicit
/// step, `--switch-limiter`.
pub(crate) fn refuse_other_kind(
    ctx: &Ctx<'_>,
    budget_key: &str,
    switch: bool,
    what: &str,
) -> Result<()> {
    let global = ctx.global;
    let Some(charged) = Charged::read(ctx, budget_key) else {
        return Ok(());
    };
    let limiter = LimiterJson::configured(global);
    let recorded = charged.limiters(&global.db);
    let others: Vec<LimiterJson> = recorded
        .iter()
        .filter(|r| r.kind != limiter.kind)
        .cloned()
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    if switch {
        tracing::warn!(
            "{SWITCH_FLAG}: {what} charges {} from now on, where {} charged {}; what {} holds is not counted here",
            limiter.describe(),
            charged.who(&global.db),
            describe_all(&recorded),
            describe_all(&others)
        );
        return Ok(());
    }
    let twice = if recorded.len() == others.len() {
        "The other kind of limiter holds none of those charges, so the key's quota would be spent twice"
    } else {
        "Each kind holds only its own charges, and which of them charged last is not recorded, so the key's quota could be spent twice"
    };
    Err(MissingConfig(format!(
        "{what} would charge {}, but {} charged {}; nothing was charged. \
         {twice}{}. \
         To move this database to {} on purpose, run `trendsync run {SWITCH_FLAG}` once with it",
        limiter.describe(),
        charged.who(&global.db),
        describe_all(&recorded),
        hint(&limiter, &recorded),
        limiter.describe()
    ))
    .into())
}

/// What `budget`, `status` and the dry run read, against the database's latest run.
#[derive(Debug, Serialize)]
pub(crate) struct ReadJson {
    pub limiter: LimiterJson,
    pub last_run_limiter: Option<LimiterJson>,
    /// The costs file read: its path (or `built-in quota-costs.toml`) and the parsed
    /// budget's fingerprint.
    pub costs: CostsReadJson,
}

#[derive(Debug, Serialize)]
pub(crate) struct CostsReadJson {
    pub path: String,
    pub fingerprint: String,
}

impl ReadJson {
    /// Warns first when this command reads another limiter or costs file than the
    /// latest run (see [`check_reading`]).
    pub(crate) fn check(ctx: &Ctx<'_>, budget: &Budget) -> ReadJson {
        // The budget was loaded from this lookup's answer, so it has one.
        let path = ctx.config.costs().map_or_else(
            |e| e.file.clone(),
            |found| found.origin.describe(super::COSTS_FILE),
        );
        let reading = check_reading(ctx, budget, &path);
        ReadJson {
            limiter: reading.limiter,
            last_run_limiter: reading.last_run,
            costs: CostsReadJson {
                path,
                fingerprint: budget.fingerprint(),
            },
        }
    }
}

//! Which limiter and which costs file a command reads or charges, against the ones
//! the database's latest run recorded. A shell that lacks cron's `TRENDSYNC_REDIS_URL`
//! would otherwise read an empty embedded window as the budget, or charge it and spend
//! the key's quota a second time.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::cli::Global;
use crate::error::MissingConfig;
use crate::mask::mask_url;
use crate::quota::Budget;
use crate::store::{LastRunLimiter, RunLimiter, Store};

/// `embedded` or `redis`, as the runs table records it.
const EMBEDDED: &str = "embedded";
const REDIS: &str = "redis";

/// A limiter as the JSON of `status`, `budget` and `config` names it: its kind, and the
/// Redis URL (password masked) or the embedded limiter's database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LimiterJson {
    pub kind: String,
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
                kind: REDIS.to_owned(),
                url: Some(mask_url(url)),
                path: None,
            },
            None => LimiterJson {
                kind: EMBEDDED.to_owned(),
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
            path: (limiter.kind == EMBEDDED).then(|| db.display().to_string()),
        }
    }

    /// For people: `Redis at redis://…` or `the embedded limiter in trendsync.db`.
    pub fn describe(&self) -> String {
        match (self.kind.as_str(), &self.url, &self.path) {
            (REDIS, Some(url), _) => format!("Redis at {url}"),
            (REDIS, None, _) => "Redis".to_owned(),
            (EMBEDDED, _, Some(path)) => format!("the embedded limiter in {path}"),
            (kind, _, _) => format!("the {kind} limiter"),
        }
    }

    /// Whether the two are the same limiter: the same kind and, for Redis, the same
    /// (masked) URL where both know it (calls recorded without a run know the kind
    /// alone).
    fn same(&self, other: &LimiterJson) -> bool {
        self.kind == other.kind
            && (self.kind != REDIS
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
pub(crate) fn last_run(db: &Path) -> Option<LastRunLimiter> {
    let store = match Store::open_read_only(db) {
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
    /// No run recorded a limiter, but the database records calls charged on this kind
    /// (`budget charge` leaves no run behind).
    Calls(LimiterJson),
}

impl Charged {
    /// The latest run's record, or else the kind the records of `budget_key`'s calls
    /// show.
    fn read(db: &Path, budget_key: &str) -> Option<Charged> {
        if let Some(last) = last_run(db) {
            return Some(Charged::Run(last));
        }
        let kind = match crate::quota::charged_on(db, budget_key)? {
            crate::quota::ChargedOn::Embedded => EMBEDDED,
            crate::quota::ChargedOn::Redis => REDIS,
        };
        Some(Charged::Calls(LimiterJson {
            kind: kind.to_owned(),
            url: None,
            path: (kind == EMBEDDED).then(|| db.display().to_string()),
        }))
    }

    fn limiter(&self, db: &Path) -> LimiterJson {
        match self {
            Charged::Run(last) => LimiterJson::recorded(&last.limiter, db),
            Charged::Calls(limiter) => limiter.clone(),
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

/// What a read command (`status`, `budget`, the dry run) read, against the latest run.
pub(crate) struct Reading {
    /// The limiter this command reads.
    pub limiter: LimiterJson,
    /// The one the latest run used, when one recorded it.
    pub last_run: Option<LimiterJson>,
}

/// Warns first when this command reads another limiter than the latest run used, or
/// the budget of another costs file, naming both; returns what it compared.
pub(crate) fn check_reading(global: &Global, budget: &Budget, costs_file: &str) -> Reading {
    let limiter = LimiterJson::configured(global);
    let charged = Charged::read(&global.db, &budget.key);
    if let Some(charged) = &charged {
        let recorded = charged.limiter(&global.db);
        if !limiter.same(&recorded) {
            tracing::warn!(
                "this command reads {}, but {} charged {}: the figures below are what {} holds, not the budget those calls were charged against{}",
                limiter.describe(),
                charged.who(&global.db),
                recorded.describe(),
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

/// How to read the limiter the runs use.
fn hint(reads: &LimiterJson, runs: &LimiterJson) -> &'static str {
    match (reads.kind.as_str(), runs.kind.as_str()) {
        (EMBEDDED, REDIS) => "; set TRENDSYNC_REDIS_URL (or --redis-url) as the runs have it",
        (REDIS, EMBEDDED) => "; leave out TRENDSYNC_REDIS_URL (and --redis-url) as the runs do",
        _ => "; give --redis-url the URL the runs have",
    }
}

/// The flag that moves a database to the other kind of limiter on purpose.
pub(crate) const SWITCH_FLAG: &str = "--switch-limiter";

/// Refuses (78) to charge the other kind of limiter than the database's latest run
/// charged, naming both: an empty embedded window, or a Redis that never saw the
/// embedded one's charges, would let this process spend the key's quota a second
/// time. Another Redis URL is not refused: the ledger restores this host's share of
/// a window that is not the one it charged. `switch` is the operator's explicit
/// step, `--switch-limiter`.
pub(crate) fn refuse_other_kind(
    global: &Global,
    budget_key: &str,
    switch: bool,
    what: &str,
) -> Result<()> {
    let Some(charged) = Charged::read(&global.db, budget_key) else {
        return Ok(());
    };
    let limiter = LimiterJson::configured(global);
    let recorded = charged.limiter(&global.db);
    if limiter.kind == recorded.kind {
        return Ok(());
    }
    if switch {
        tracing::warn!(
            "{SWITCH_FLAG}: {what} charges {} from now on, where {} charged {}; what {} holds is not counted here",
            limiter.describe(),
            charged.who(&global.db),
            recorded.describe(),
            recorded.describe()
        );
        return Ok(());
    }
    Err(MissingConfig(format!(
        "{what} would charge {}, but {} charged {}; nothing was charged. \
         The other kind of limiter holds none of those charges, so the key's quota would be spent twice{}. \
         To move this database to {} on purpose, run `trendsync run {SWITCH_FLAG}` once with it",
        limiter.describe(),
        charged.who(&global.db),
        recorded.describe(),
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
    pub(crate) fn check(global: &Global, budget: &Budget) -> ReadJson {
        let path = super::costs_file(global).origin.describe(super::COSTS_FILE);
        let reading = check_reading(global, budget, &path);
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

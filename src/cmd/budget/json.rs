//! What `budget --json`, `budget charge --json` and `budget unblock --json` print
//! (docs/json.md): the shapes the scripts read, in one place, so that a change to one
//! is seen beside the others. The text forms are told from the same values.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cmd::shared::BucketJson;

/// The JSON of `budget unblock --json`.
#[derive(Debug, Serialize)]
pub(super) struct UnblockJson {
    /// Whether a block was in force and was lifted, in any bucket asked for.
    pub(super) unblocked: bool,
    /// When the lifted block would have ended (the latest, when several were).
    pub(super) was_blocked_until: Option<String>,
    /// Each bucket asked for.
    pub(super) buckets: Vec<UnblockedJson>,
}

#[derive(Debug, Serialize)]
pub(super) struct UnblockedJson {
    pub(super) name: String,
    pub(super) unblocked: bool,
    pub(super) was_blocked_until: Option<String>,
}

#[derive(Debug, Serialize)]
pub(super) struct LimitJson {
    pub(super) name: String,
    pub(super) used: u64,
    pub(super) max: u64,
    pub(super) window_s: f64,
    pub(super) next_free_s: Option<f64>,
}

/// One bucket in `budget --json` (docs/json.md): its figures, and its window's own.
#[derive(Debug, Serialize)]
pub(super) struct BudgetBucketJson {
    #[serde(flatten)]
    pub(super) bucket: BucketJson,
    pub(super) quota: u64,
    pub(super) remaining_to_quota: u64,
    /// As configured: `"24h"` or `"day@America/Los_Angeles"`.
    pub(super) window: String,
    /// The window's length now; a calendar day's is that day's (82,800 to 90,000).
    pub(super) window_s: f64,
    pub(super) next_free_s: Option<f64>,
    pub(super) empty_in_s: Option<f64>,
    pub(super) by_method: BTreeMap<String, u64>,
    /// The quota and ceiling to configure after two upstream days in a row spent
    /// early; only for a bucket over the upstream's own day.
    pub(super) suggested: Option<SuggestedJson>,
}

/// What `budget` suggests configuring for a bucket the upstream spent early.
#[derive(Debug, Serialize)]
pub(super) struct SuggestedJson {
    pub(super) quota: u64,
    pub(super) ceiling: u64,
    /// The two upstream days (when each started: midnight America/Los_Angeles) and
    /// their figures, the earlier first.
    pub(super) days: Vec<SpentDayJson>,
}

#[derive(Debug, Serialize)]
pub(super) struct SpentDayJson {
    pub(super) day_start: String,
    pub(super) upstream_spent_at: u64,
    /// The same moment for the text.
    #[serde(skip)]
    pub(super) day_start_us: i64,
}

/// The JSON of `budget --json` (docs/json.md): the main bucket's numbers at
/// the top, as before there were other buckets, and every bucket in `buckets`.
#[derive(Debug, Serialize)]
pub(super) struct BudgetJson {
    pub(super) used: u64,
    pub(super) ceiling: u64,
    pub(super) quota: u64,
    pub(super) remaining: u64,
    pub(super) remaining_to_quota: u64,
    pub(super) window_s: f64,
    pub(super) next_free_s: Option<f64>,
    pub(super) empty_in_s: Option<f64>,
    pub(super) by_method: BTreeMap<String, u64>,
    pub(super) limits: Vec<LimitJson>,
    pub(super) blocked_until: Option<String>,
    pub(super) buckets: Vec<BudgetBucketJson>,
    /// The limiter these figures came from, and the one the latest run charged.
    #[serde(flatten)]
    pub(super) read: Option<super::identity::ReadJson>,
}

/// The JSON of `budget charge --json`.
#[derive(Debug, Serialize)]
pub(super) struct ChargeJson<'a> {
    pub(super) granted: bool,
    pub(super) units: u64,
    /// Unknown (null) while the limiter is down.
    pub(super) used: Option<u64>,
    pub(super) remaining: Option<u64>,
    pub(super) retry_after_s: Option<f64>,
    pub(super) denied_by: Option<&'a str>,
    /// What `used` and `remaining` describe: METHOD's bucket, unless a limit said
    /// no (a JSON field name kept from before buckets and limits had their words).
    pub(super) policy: Option<&'a str>,
    /// Every bucket and limit the charge went to, its bucket first.
    pub(super) parts: Vec<PartJson<'a>>,
}

/// One bucket or limit a charge went to, after the decision.
#[derive(Debug, Serialize)]
pub(super) struct PartJson<'a> {
    pub(super) name: &'a str,
    /// `bucket` or `limit`.
    pub(super) kind: &'static str,
    pub(super) used: u64,
    pub(super) remaining: u64,
}

/// The JSON of `budget --json` while the limiter cannot be read (docs/json.md): the
/// object of a failed command, with what is still known.
#[derive(Debug, Serialize)]
pub(super) struct UnreadJson {
    /// `failed`, as for every command that could not do what it was asked.
    pub(super) status: &'static str,
    /// 75: the next try may read the limiter.
    pub(super) exit_code: u8,
    pub(super) error: String,
    /// The figures the latest run that read the limiter recorded, and when; null when
    /// none did.
    pub(super) last_known: Option<crate::cmd::figures::LastKnownJson>,
    pub(super) journal: crate::cmd::figures::JournalJson,
    /// The limiter this command tried, and the one the latest run charged.
    #[serde(flatten)]
    pub(super) read: super::identity::ReadJson,
}

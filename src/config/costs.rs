//! `quota-costs.toml`: the budget, what each method costs, any buckets of their own
//! (docs/budget.md, "Buckets"), what to do while the limiter is down, and the narrower limits.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, SourceText, parse_duration};
use crate::quota::{
    BUDGET_POLICY, Bucket, Budget, DownPolicy, Limit, MAX_UNITS, Per, RESERVED_POLICY_NAMES,
    Window, Zone,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    budget: RawBudget,
    costs: Spanned<BTreeMap<String, Spanned<u64>>>,
    #[serde(default)]
    when_limiter_down: BTreeMap<Spanned<String>, RawDown>,
    #[serde(default, rename = "limit")]
    limits: Vec<RawLimit>,
    #[serde(default, rename = "bucket")]
    buckets: Vec<RawBucket>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBucket {
    name: Spanned<String>,
    quota: Spanned<u64>,
    ceiling: Spanned<u64>,
    window: Spanned<String>,
    costs: Spanned<BTreeMap<String, Spanned<u64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    key: Spanned<String>,
    quota: Spanned<u64>,
    ceiling: Spanned<u64>,
    window: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawDown {
    Allow,
    Deny,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "lowercase")]
enum RawPer {
    #[default]
    Unit,
    Call,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimit {
    name: Spanned<String>,
    methods: Vec<Spanned<String>>,
    max: Spanned<u64>,
    window: Spanned<String>,
    #[serde(default)]
    per: RawPer,
}

/// The shortest window a policy may have: the limiters count in microseconds, but a
/// window much shorter than a call's round trip counts nothing (and "1ns" acted as no
/// window at all).
pub(crate) const MIN_WINDOW: Duration = Duration::from_secs(1);
/// The longest window: the limiter's, which keeps every entry that long.
pub(crate) const MAX_WINDOW: Duration = crate::quota::LONGEST_WINDOW;

/// A policy's window: a duration within [`MIN_WINDOW`]..=[`MAX_WINDOW`], or the
/// calendar day of a time zone, `day@America/Los_Angeles`.
fn window_of(
    src: &SourceText<'_>,
    value: &Spanned<String>,
    what: &str,
) -> Result<Window, ConfigError> {
    if let Some(zone) = value.get_ref().trim().strip_prefix(Window::DAY_PREFIX) {
        return Zone::get(zone)
            .map(Window::Day)
            .map_err(|e| src.error_at(Some(value.span()), format!("{what}: {e}")));
    }
    let d = parse_duration(value.get_ref())
        .map_err(|e| src.error_at(Some(value.span()), format!("{what}: {e}")))?;
    if d < MIN_WINDOW || d > MAX_WINDOW {
        return Err(src.error_at(
            Some(value.span()),
            format!(
                "{what} \"{}\" is outside 1s to 31d; the limiter keeps windows from one second to 31 days, e.g. \"24h\"",
                value.get_ref()
            ),
        ));
    }
    Ok(Window::Sliding(d))
}

/// A unit count, at most [`MAX_UNITS`]: the limiter could not count more exactly.
fn units(src: &SourceText<'_>, value: &Spanned<u64>, what: &str) -> Result<u64, ConfigError> {
    let n = *value.get_ref();
    if n > MAX_UNITS {
        return Err(src.error_at(
            Some(value.span()),
            format!(
                "{what} ({n}) is above {MAX_UNITS}, the most units the limiter counts exactly (they travel as Lua numbers)"
            ),
        ));
    }
    Ok(n)
}

/// Names go into Redis keys and metric labels: keep them plain.
fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// A bucket's quota and ceiling: both at least 1, the ceiling at most the quota.
/// `what` names the table (`budget`, `bucket "search"`).
fn quota_and_ceiling(
    src: &SourceText<'_>,
    quota: &Spanned<u64>,
    ceiling: &Spanned<u64>,
    what: &str,
) -> Result<(u64, u64), ConfigError> {
    let q = units(src, quota, &format!("{what}.quota"))?;
    let c = units(src, ceiling, &format!("{what}.ceiling"))?;
    if q == 0 {
        return Err(src.error_at(
            Some(quota.span()),
            format!("{what}.quota must be at least 1"),
        ));
    }
    if c == 0 {
        return Err(src.error_at(
            Some(ceiling.span()),
            format!("{what}.ceiling must be at least 1"),
        ));
    }
    if c > q {
        return Err(src.error_at(
            Some(ceiling.span()),
            format!("{what}.ceiling ({c}) is above {what}.quota ({q}); the ceiling must leave the reserve below the quota"),
        ));
    }
    Ok((q, c))
}

/// A bucket's `costs`: not empty, each cost at most the bucket's ceiling, and no
/// method already in another bucket (`taken`, which this adds to).
fn bucket_costs(
    src: &SourceText<'_>,
    raw: &Spanned<BTreeMap<String, Spanned<u64>>>,
    (ceiling, ceiling_name): (u64, &str),
    what: &str,
    taken: &mut BTreeMap<String, String>,
) -> Result<BTreeMap<String, u64>, ConfigError> {
    if raw.get_ref().is_empty() {
        return Err(src.error_at(
            Some(raw.span()),
            format!("{what} is empty; list every method it bills, e.g. \"videos.list\" = 1"),
        ));
    }
    let mut costs = BTreeMap::new();
    for (method, cost) in raw.get_ref() {
        if *cost.get_ref() > ceiling {
            return Err(src.error_at(
                Some(cost.span()),
                format!(
                    "the cost of \"{method}\" ({}) is above {ceiling_name} ({ceiling}): such a call could never be made",
                    cost.get_ref()
                ),
            ));
        }
        if let Some(other) = taken.get(method) {
            return Err(src.error_at(
                Some(cost.span()),
                format!(
                    "\"{method}\" is in {other} already; every method belongs to exactly one bucket, so list it in one place only"
                ),
            ));
        }
        taken.insert(method.clone(), what.to_owned());
        costs.insert(method.clone(), *cost.get_ref());
    }
    Ok(costs)
}

/// A `[[limit]]` or `[[bucket]]` name: plain, not reserved, not used before.
fn policy_name(
    src: &SourceText<'_>,
    name: &Spanned<String>,
    kind: &str,
    used: &mut Vec<String>,
) -> Result<String, ConfigError> {
    let n = name.get_ref();
    if !plain_name(n) || RESERVED_POLICY_NAMES.contains(&n.as_str()) {
        return Err(src.error_at(
            Some(name.span()),
            format!(
                "{kind} name \"{n}\" must be 1 to 64 letters, digits, '_', '-' or '.', and not one of {}",
                RESERVED_POLICY_NAMES.join(", ")
            ),
        ));
    }
    if used.contains(n) {
        return Err(src.error_at(
            Some(name.span()),
            format!("a second [[limit]] or [[bucket]] is named \"{n}\"; names must be unique"),
        ));
    }
    used.push(n.clone());
    Ok(n.clone())
}

/// Parses and validates `quota-costs.toml`.
pub fn parse_costs(src: &SourceText<'_>) -> Result<Budget, ConfigError> {
    let raw: RawFile = src.parse()?;
    let b = &raw.budget;
    let key = pool_key(src, &b.key)?;
    let (quota, ceiling) = quota_and_ceiling(src, &b.quota, &b.ceiling, "budget")?;
    let window = window_of(src, &b.window, "budget.window")?;
    // Which bucket holds each method, to refuse one in two.
    let mut taken = BTreeMap::new();
    let costs = main_costs(src, &raw.costs, ceiling, &mut taken)?;
    // [[bucket]] and [[limit]] names share one namespace.
    let mut names = Vec::new();
    let buckets = extra_buckets(src, &raw.buckets, &mut names, &mut taken)?;
    let all_costs = every_cost(&costs, &buckets);
    let when_limiter_down = down_policies(src, &raw.when_limiter_down, &all_costs)?;
    let limits = limits_of(src, &raw.limits, &mut names, &all_costs)?;
    let main = Bucket {
        name: BUDGET_POLICY.to_owned(),
        quota,
        ceiling,
        window,
        costs,
    };
    let mut budget = Budget::new(key, main, buckets);
    budget.when_limiter_down = when_limiter_down;
    budget.limits = limits;
    Ok(budget)
}

/// `budget.key`: a plain name for the shared pool, never the API key itself.
fn pool_key(src: &SourceText<'_>, key: &Spanned<String>) -> Result<String, ConfigError> {
    let k = key.get_ref();
    if !plain_name(k) {
        return Err(src.error_at(
            Some(key.span()),
            format!("budget.key \"{k}\" must be 1 to 64 letters, digits, '_', '-' or '.'; it names the shared pool, e.g. \"key1\""),
        ));
    }
    if k.starts_with("AIza") && k.len() >= 35 {
        return Err(src.error_at(
            Some(key.span()),
            "budget.key looks like an API key; it must only name the pool (e.g. \"key1\"): the key itself goes in YOUTUBE_API_KEY",
        ));
    }
    Ok(k.clone())
}

/// The main budget's `[costs]`: not empty, then checked as any bucket's costs.
fn main_costs(
    src: &SourceText<'_>,
    raw: &Spanned<BTreeMap<String, Spanned<u64>>>,
    ceiling: u64,
    taken: &mut BTreeMap<String, String>,
) -> Result<BTreeMap<String, u64>, ConfigError> {
    if raw.get_ref().is_empty() {
        return Err(src.error_at(
            Some(raw.span()),
            "[costs] is empty; list every method trendsync calls, e.g. \"videos.list\" = 1",
        ));
    }
    bucket_costs(src, raw, (ceiling, "budget.ceiling"), "[costs]", taken)
}

/// The `[[bucket]]`s, each validated like the main budget, in file order.
fn extra_buckets(
    src: &SourceText<'_>,
    raw: &[RawBucket],
    names: &mut Vec<String>,
    taken: &mut BTreeMap<String, String>,
) -> Result<Vec<Bucket>, ConfigError> {
    let mut buckets = Vec::new();
    for rb in raw {
        let name = policy_name(src, &rb.name, "bucket", names)?;
        let what = format!("bucket \"{name}\"");
        let (quota, ceiling) = quota_and_ceiling(src, &rb.quota, &rb.ceiling, &what)?;
        let window = window_of(src, &rb.window, &format!("{what} window"))?;
        let costs = bucket_costs(
            src,
            &rb.costs,
            (ceiling, &format!("{what}.ceiling")),
            &format!("{what} costs"),
            taken,
        )?;
        buckets.push(Bucket {
            name,
            quota,
            ceiling,
            window,
            costs,
        });
    }
    Ok(buckets)
}

/// Every method's cost, whichever bucket bills it.
fn every_cost<'a>(
    costs: &'a BTreeMap<String, u64>,
    buckets: &'a [Bucket],
) -> BTreeMap<&'a str, u64> {
    costs
        .iter()
        .chain(buckets.iter().flat_map(|b| b.costs.iter()))
        .map(|(m, c)| (m.as_str(), *c))
        .collect()
}

/// Refuses a method that no bucket prices: `what` names the table that lists it.
fn known_method(
    src: &SourceText<'_>,
    all_costs: &BTreeMap<&str, u64>,
    m: &Spanned<String>,
    what: &str,
) -> Result<(), ConfigError> {
    if all_costs.contains_key(m.get_ref().as_str()) {
        Ok(())
    } else {
        Err(src.error_at(
            Some(m.span()),
            format!(
                "{what} names \"{}\", which has no entry in [costs] or in any [[bucket]]; add its cost there",
                m.get_ref()
            ),
        ))
    }
}

/// `[when_limiter_down]`: what each listed (and priced) method does without a limiter.
fn down_policies(
    src: &SourceText<'_>,
    raw: &BTreeMap<Spanned<String>, RawDown>,
    all_costs: &BTreeMap<&str, u64>,
) -> Result<BTreeMap<String, DownPolicy>, ConfigError> {
    let mut when_limiter_down = BTreeMap::new();
    for (method, policy) in raw {
        known_method(src, all_costs, method, "[when_limiter_down]")?;
        let policy = match policy {
            RawDown::Allow => DownPolicy::Allow,
            RawDown::Deny => DownPolicy::Deny,
        };
        when_limiter_down.insert(method.get_ref().clone(), policy);
    }
    Ok(when_limiter_down)
}

/// The `[[limit]]`s, in file order.
fn limits_of(
    src: &SourceText<'_>,
    raw: &[RawLimit],
    names: &mut Vec<String>,
    all_costs: &BTreeMap<&str, u64>,
) -> Result<Vec<Limit>, ConfigError> {
    raw.iter()
        .map(|raw_limit| limit(src, raw_limit, names, all_costs))
        .collect()
}

/// One `[[limit]]`: a fresh name, some priced methods, and a max that lets each one call.
fn limit(
    src: &SourceText<'_>,
    raw_limit: &RawLimit,
    names: &mut Vec<String>,
    all_costs: &BTreeMap<&str, u64>,
) -> Result<Limit, ConfigError> {
    let name = &policy_name(src, &raw_limit.name, "limit", names)?;
    if raw_limit.methods.is_empty() {
        return Err(src.error_at(
            Some(raw_limit.name.span()),
            format!("limit \"{name}\" lists no methods"),
        ));
    }
    let max = units(src, &raw_limit.max, &format!("limit \"{name}\" max"))?;
    let per = match raw_limit.per {
        RawPer::Unit => Per::Unit,
        RawPer::Call => Per::Call,
    };
    for method in &raw_limit.methods {
        known_method(src, all_costs, method, &format!("limit \"{name}\""))?;
        let charged = match per {
            Per::Unit => all_costs
                .get(method.get_ref().as_str())
                .copied()
                .unwrap_or(0),
            Per::Call => 1,
        };
        if charged > max {
            return Err(src.error_at(
                Some(raw_limit.max.span()),
                format!(
                    "limit \"{name}\" has max {max}, below one call of \"{}\" ({charged}); such a call could never be made",
                    method.get_ref()
                ),
            ));
        }
    }
    Ok(Limit {
        name: name.clone(),
        methods: raw_limit
            .methods
            .iter()
            .map(|m| m.get_ref().clone())
            .collect(),
        max,
        window: window_of(src, &raw_limit.window, &format!("limit \"{name}\" window"))?,
        per,
    })
}

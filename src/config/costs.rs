//! `quota-costs.toml`: the budget, what each method costs, what to do while the
//! limiter is down, and the narrower limits.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, SourceText, parse_duration};
use crate::quota::{Budget, DownPolicy, Limit, MAX_UNITS, Per, RESERVED_POLICY_NAMES};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    budget: RawBudget,
    costs: Spanned<BTreeMap<String, Spanned<u64>>>,
    #[serde(default)]
    when_limiter_down: BTreeMap<Spanned<String>, RawDown>,
    #[serde(default, rename = "limit")]
    limits: Vec<RawLimit>,
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
pub const MIN_WINDOW: Duration = Duration::from_secs(1);
/// The longest window: 31 days. Longer ones only grow the stored log, and a window of
/// years overflowed the expiry arithmetic.
pub const MAX_WINDOW: Duration = Duration::from_secs(31 * 86_400);

/// A policy's window, within [`MIN_WINDOW`]..=[`MAX_WINDOW`].
fn window_of(
    src: &SourceText<'_>,
    value: &Spanned<String>,
    what: &str,
) -> Result<Duration, ConfigError> {
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
    Ok(d)
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

/// Parses and validates `quota-costs.toml`.
pub fn parse_costs(src: &SourceText<'_>) -> Result<Budget, ConfigError> {
    let raw: RawFile = src.parse()?;
    let b = &raw.budget;

    let key = b.key.get_ref();
    if !plain_name(key) {
        return Err(src.error_at(
            Some(b.key.span()),
            format!("budget.key \"{key}\" must be 1 to 64 letters, digits, '_', '-' or '.'; it names the shared pool, e.g. \"key1\""),
        ));
    }
    if key.starts_with("AIza") && key.len() >= 35 {
        return Err(src.error_at(
            Some(b.key.span()),
            "budget.key looks like an API key; it must only name the pool (e.g. \"key1\"): the key itself goes in YOUTUBE_API_KEY",
        ));
    }
    let quota = units(src, &b.quota, "budget.quota")?;
    let ceiling = units(src, &b.ceiling, "budget.ceiling")?;
    if quota == 0 {
        return Err(src.error_at(Some(b.quota.span()), "budget.quota must be at least 1"));
    }
    if ceiling == 0 {
        return Err(src.error_at(Some(b.ceiling.span()), "budget.ceiling must be at least 1"));
    }
    if ceiling > quota {
        return Err(src.error_at(
            Some(b.ceiling.span()),
            format!("budget.ceiling ({ceiling}) is above budget.quota ({quota}); the ceiling must leave the reserve below the quota"),
        ));
    }
    let window = window_of(src, &b.window, "budget.window")?;

    if raw.costs.get_ref().is_empty() {
        return Err(src.error_at(
            Some(raw.costs.span()),
            "[costs] is empty; list every method trendsync calls, e.g. \"videos.list\" = 1",
        ));
    }
    let mut costs = BTreeMap::new();
    for (method, cost) in raw.costs.get_ref() {
        if *cost.get_ref() > ceiling {
            return Err(src.error_at(
                Some(cost.span()),
                format!(
                    "the cost of \"{method}\" ({}) is above budget.ceiling ({ceiling}): such a call could never be made",
                    cost.get_ref()
                ),
            ));
        }
        costs.insert(method.clone(), *cost.get_ref());
    }

    let known = |m: &Spanned<String>, what: &str| -> Result<(), ConfigError> {
        if costs.contains_key(m.get_ref()) {
            Ok(())
        } else {
            Err(src.error_at(
                Some(m.span()),
                format!(
                    "{what} names \"{}\", which has no entry in [costs]; add its cost there",
                    m.get_ref()
                ),
            ))
        }
    };

    let mut when_limiter_down = BTreeMap::new();
    for (method, policy) in &raw.when_limiter_down {
        known(method, "[when_limiter_down]")?;
        let policy = match policy {
            RawDown::Allow => DownPolicy::Allow,
            RawDown::Deny => DownPolicy::Deny,
        };
        when_limiter_down.insert(method.get_ref().clone(), policy);
    }

    let mut limits: Vec<Limit> = Vec::new();
    for raw_limit in &raw.limits {
        let name = raw_limit.name.get_ref();
        if !plain_name(name) || RESERVED_POLICY_NAMES.contains(&name.as_str()) {
            return Err(src.error_at(
                Some(raw_limit.name.span()),
                format!(
                    "limit name \"{name}\" must be 1 to 64 letters, digits, '_', '-' or '.', and not one of {}",
                    RESERVED_POLICY_NAMES.join(", ")
                ),
            ));
        }
        if limits.iter().any(|l| &l.name == name) {
            return Err(src.error_at(
                Some(raw_limit.name.span()),
                format!("a second [[limit]] is named \"{name}\"; names must be unique"),
            ));
        }
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
            known(method, &format!("limit \"{name}\""))?;
            let charged = match per {
                Per::Unit => costs[method.get_ref()],
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
        limits.push(Limit {
            name: name.clone(),
            methods: raw_limit
                .methods
                .iter()
                .map(|m| m.get_ref().clone())
                .collect(),
            max,
            window: window_of(src, &raw_limit.window, &format!("limit \"{name}\" window"))?,
            per,
        });
    }

    Ok(Budget {
        key: key.clone(),
        quota,
        ceiling,
        window,
        costs,
        when_limiter_down,
        limits,
    })
}

//! Counting a budget's entries again under the costs file in force (docs/budget.md, "When
//! the costs file changes"): what both limiters do when the budget they are asked to charge
//! is not the one the window was last charged under. Each entry keeps its method, its
//! calls, its time and its charge id, so it can be charged again, on paper, to the buckets
//! and limits that hold its method today, at today's costs, as if this file had been in
//! force all along. The limiters then write what this returns in place of their windows.

use std::collections::BTreeSet;

use super::{Allowance, BUDGET_POLICY, Budget, Charge, Kind, Part, PolicyRef};

/// One entry a limiter keeps, as it was charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Logged {
    pub(crate) id: String,
    pub(crate) method: String,
    pub(crate) calls: u64,
    pub(crate) at_us: i64,
}

/// One entry of a policy's window, at today's costs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Counted {
    pub(crate) at_us: i64,
    pub(crate) units: u64,
    pub(crate) method: String,
    pub(crate) id: String,
    pub(crate) calls: u64,
}

impl Counted {
    /// The member of a Redis set that holds it: "<units>|<method>|<id>|<calls>".
    pub(crate) fn member(&self) -> String {
        member(self.units, &self.method, &self.id, self.calls)
    }
}

/// A member of a Redis set: its units first (what a count of the set sums), then what
/// it can be counted again from.
pub(crate) fn member(units: u64, method: &str, id: &str, calls: u64) -> String {
    format!("{units}|{method}|{id}|{calls}")
}

/// A Redis member read back: "<units>|<method>|<id>|<calls>", or the older
/// "<units>|<method>|<id>", whose calls are its units over the method's cost in
/// `budget` (the file it was charged under, when the limiter first meets a budget).
pub(crate) fn parse_member(member: &str, at_us: i64, budget: &Budget) -> Option<Logged> {
    let fields: Vec<&str> = member.split('|').collect();
    let units: u64 = fields.first()?.parse().ok()?;
    let method = (*fields.get(1)?).to_owned();
    let calls = match fields.len() {
        0..=2 => return None,
        3 => None,
        _ => fields.last().and_then(|c| c.parse::<u64>().ok()),
    };
    let (id, calls) = match calls {
        Some(calls) => (fields[2..fields.len() - 1].join("|"), calls),
        None => (
            fields[2..].join("|"),
            calls_of(units, budget.cost(&method).unwrap_or(0)),
        ),
    };
    Some(Logged {
        id,
        method,
        calls,
        at_us,
    })
}

/// The calls an entry of the layout before calls were kept stands for: its units over
/// its method's cost in the file it was charged under (its units when the method cost
/// nothing), and at least one.
pub(crate) fn calls_of(units: u64, cost: u64) -> u64 {
    units.checked_div(cost).unwrap_or(units).max(1)
}

/// The warning of a window of budget `key` last charged under another budget
/// (docs/budget.md, "When the costs file changes"), from the limiter `place` names ("in the
/// embedded limiter", "on <endpoint>"), whose `sharers` ("process", "host") must all use
/// one costs file.
pub(crate) fn warn_changed(
    key: &str,
    budget: &Budget,
    place: &str,
    sharers: &str,
    was: &str,
    entries: usize,
) {
    tracing::warn!(
        "budget \"{key}\" {place} was last charged under costs with fingerprint {was}, and this host's costs have fingerprint {}; its {entries} entr{} of the last {} were counted again at this host's costs. Every {sharers} charging one budget.key must use the same costs file",
        budget.fingerprint(),
        if entries == 1 { "y" } else { "ies" },
        crate::output::human::duration(super::KEEP),
    );
}

/// `charge` as `budget` charges it today: the same calls of the same method, to
/// today's buckets and limits at today's costs; `None` when it cannot say (a charge
/// journalled before calls were kept, or a method it no longer knows), and the
/// charge is then sent as written.
pub(crate) fn today(budget: &Budget, charge: &Charge) -> Option<Charge> {
    let calls = match charge.calls {
        // Journalled before calls were kept: its units at the cost it has today.
        0 => {
            let cost = budget.cost(&charge.method).ok().filter(|c| *c > 0)?;
            charge
                .units
                .is_multiple_of(cost)
                .then_some(charge.units / cost)?
        }
        calls => calls,
    };
    let max = |p: &Part| (p.policy.clone(), p.kind, p.max);
    let maxima: Vec<_> = charge.parts.iter().map(max).collect();
    let mut today = budget
        .charge(&charge.id, &charge.method, calls, Allowance::Quota)
        .ok()?;
    // The caller's own maxima (ceiling or quota) where the policy is the same.
    for p in &mut today.parts {
        if let Some((_, _, m)) = maxima
            .iter()
            .find(|(name, kind, _)| *name == p.policy && *kind == p.kind)
        {
            p.max = *m;
        }
    }
    Some(today)
}

/// Every policy of `budget` with the entries it holds when `logged` is charged to it
/// at today's costs. An entry whose method has no bucket today, or costs nothing, is
/// kept in the main bucket at 0 units: counted nowhere, and there to be counted again
/// under the next file. An entry logged twice (the same charge id and method in two
/// sets) counts once.
pub(crate) fn rebuild(budget: &Budget, logged: &[Logged]) -> Vec<(PolicyRef, Vec<Counted>)> {
    let mut out: Vec<(PolicyRef, Vec<Counted>)> = budget
        .policies()
        .into_iter()
        .map(|p| (p, Vec::new()))
        .collect();
    let mut seen = BTreeSet::new();
    for entry in logged {
        if !seen.insert((entry.method.as_str(), entry.id.as_str())) {
            continue;
        }
        let charge = budget
            .charge(&entry.id, &entry.method, entry.calls, Allowance::Quota)
            .ok();
        let parts: Vec<(Kind, &str, u64)> = charge
            .as_ref()
            .map(|c| {
                c.parts
                    .iter()
                    .map(|p| (p.kind, p.policy.as_str(), p.units))
                    .collect()
            })
            .unwrap_or_default();
        let in_a_bucket = parts.iter().any(|(kind, _, _)| *kind == Kind::Bucket);
        let keeper = (!in_a_bucket).then_some((Kind::Bucket, BUDGET_POLICY, 0));
        for (kind, name, units) in parts.into_iter().chain(keeper) {
            if let Some((_, held)) = out
                .iter_mut()
                .find(|(p, _)| p.kind == kind && p.name == name)
            {
                held.push(Counted {
                    at_us: entry.at_us,
                    units,
                    method: entry.method.clone(),
                    id: entry.id.clone(),
                    calls: entry.calls,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;

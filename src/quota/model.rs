//! The window arithmetic, apart from any store and any clock.
//!
//! Both backends implement the same steps (the Redis one in Lua, the embedded one in
//! SQL), and [`Model`] implements them in memory as the reference: the differential
//! property test (`tests/differential.rs`) runs random charge sequences through the
//! model and each backend and compares their decisions, exactly for the embedded
//! limiter (on an injected clock) and, for Redis, which decides by its own clock,
//! exactly but for retry-afters, which agree within the real time a case takes.
//! Times are microseconds on the limiter's clock.
//!
//! An entry charged at `at` counts while `at > now - window`, and leaves the window at
//! exactly `at + window`; in a calendar-day window it counts while it was made that
//! day, and leaves at the next local midnight ([`Window`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use super::{Charge, Decision, Kind, Span, Status, UPSTREAM_POLICY, Window, from_micros};

/// Whether, and when, a charge fits a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Now,
    /// Enough units will have left the window after this long.
    After(Duration),
    /// Larger than the policy's maximum: it never fits (configuration prevents this).
    Never,
}

/// When `units` more fit under `max`, given the entries of the window (oldest first,
/// expired ones already gone) and the units they add up to.
///
/// A weighted charge must wait until enough *units* have left, not merely the oldest
/// entry: a 100-unit charge behind forty 1-unit entries and a 100-unit entry waits for
/// the 100-unit entry, however soon the small ones expire. The walk stops at the entry
/// that frees enough, so it reads only as much of the window as the answer needs.
#[cfg(test)]
pub(crate) fn fit(
    entries: impl IntoIterator<Item = (i64, u64)>,
    used: u64,
    units: u64,
    max: u64,
    window_us: i64,
    now_us: i64,
) -> Fit {
    let window = Window::Sliding(from_micros(window_us));
    fit_in(entries, used, units, max, &window, now_us)
}

/// [`fit`] in any window: an entry leaves at [`Window::leaves`], so in a calendar
/// day nothing frees before the next local midnight.
pub(crate) fn fit_in(
    entries: impl IntoIterator<Item = (i64, u64)>,
    used: u64,
    units: u64,
    max: u64,
    window: &Window,
    now_us: i64,
) -> Fit {
    let span = window.at(now_us);
    if units > max {
        return Fit::Never;
    }
    let Some(need) = used
        .saturating_add(units)
        .checked_sub(max)
        .filter(|n| *n > 0)
    else {
        return Fit::Now;
    };
    let mut freed = 0u64;
    for (at, entry_units) in entries {
        freed += entry_units;
        if freed >= need {
            return Fit::After(from_micros(span.leaves(at, window) - now_us));
        }
    }
    // The totals say more is used than the entries hold; only a damaged store gets
    // here, and waiting a whole window (or the rest of the day) is the safe answer.
    Fit::After(from_micros(span.leaves(now_us, window) - now_us))
}

/// One policy's state after a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct PartOutcome {
    pub policy: String,
    /// Units in the window after the decision.
    pub used: u64,
    pub max: u64,
    pub fit: Fit,
    /// When the oldest entry leaves the window.
    pub next_free: Option<Duration>,
    /// When the newest entry leaves, emptying the window.
    pub empty_in: Option<Duration>,
}

impl PartOutcome {
    pub fn remaining(&self) -> u64 {
        self.max.saturating_sub(self.used)
    }
}

/// All or nothing, strictest wins: granted only when every part fits; otherwise the
/// part with the longest wait says no, and its wait is the retry-after.
pub fn decide(charge: &Charge, parts: Vec<PartOutcome>, duplicate: bool) -> Decision {
    let strictest = parts
        .iter()
        .filter(|p| p.fit != Fit::Now)
        .max_by_key(|p| match p.fit {
            Fit::Never => Duration::MAX,
            Fit::After(d) => d,
            Fit::Now => Duration::ZERO,
        });
    let (denied_by, retry_after) = match strictest {
        None => (None, None),
        Some(p) => (
            Some(p.policy.clone()),
            match p.fit {
                Fit::After(d) => Some(d),
                _ => None,
            },
        ),
    };
    Decision {
        granted: denied_by.is_none(),
        duplicate,
        units: charge.units,
        parts,
        denied_by,
        retry_after,
    }
}

/// The decision while the upstream has said the charge's bucket is spent.
pub(crate) fn blocked(charge: &Charge, parts: Vec<PartOutcome>, wait: Duration) -> Decision {
    Decision {
        granted: false,
        duplicate: false,
        units: charge.units,
        parts,
        denied_by: Some(UPSTREAM_POLICY.to_owned()),
        retry_after: Some(wait),
    }
}

/// One policy's window in memory.
#[derive(Debug, Default, Clone)]
struct Log {
    /// (at, units, id), oldest first.
    entries: VecDeque<(i64, u64, String)>,
    total: u64,
}

impl Log {
    fn evict(&mut self, span: Span) {
        while let Some((at, units, _)) = self.entries.front() {
            if *at > span.cutoff_us {
                break;
            }
            self.total -= units;
            self.entries.pop_front();
        }
    }

    fn outcome(
        &self,
        policy: &str,
        max: u64,
        fit: Fit,
        now_us: i64,
        window: &Window,
    ) -> PartOutcome {
        let span = window.at(now_us);
        let left = |at: i64| from_micros(span.leaves(at, window) - now_us);
        PartOutcome {
            policy: policy.to_owned(),
            used: self.total,
            max,
            fit,
            next_free: self.entries.front().map(|e| left(e.0)),
            empty_in: self.entries.back().map(|e| left(e.0)),
        }
    }
}

/// The reference limiter: every step of a charge, in memory, with the clock passed
/// in. The backends are tested to decide as this does (`tests/differential.rs`).
#[derive(Debug, Default, Clone)]
pub struct Model {
    /// Per policy, by kind and name: a limit and a bucket of one name are apart.
    windows: BTreeMap<(Kind, String), Log>,
    /// Per method, until when the upstream said no to its bucket.
    blocked: BTreeMap<String, i64>,
}

impl Model {
    pub fn new() -> Model {
        Model::default()
    }

    /// Denies every charge of `method` until `until_us`.
    pub fn block_until(&mut self, method: &str, until_us: i64) {
        self.blocked.insert(method.to_owned(), until_us);
    }

    /// The window a limiter reported: every policy's entries and any block, so that
    /// charges decided at `status.now` get the answers the limiter would give.
    ///
    /// Seeded entries get ids of their own (`seeded-N`). A policy listed without its entries
    /// counts its `used` as one entry made at `status.now`: a wait computed from it
    /// is a whole window, never shorter than the limiter's.
    pub(crate) fn from_status(status: &Status) -> Model {
        let mut model = Model::new();
        for (method, until) in &status.blocked_methods {
            model.block_until(method, until.as_i64());
        }
        for policy in &status.policies {
            let window = model.windows.entry(policy.key()).or_default();
            let entries: Vec<(i64, u64)> = match &policy.entries {
                Some(entries) => entries.iter().map(|e| (e.at_us, e.units)).collect(),
                None if policy.used > 0 => vec![(status.now.as_i64(), policy.used)],
                None => Vec::new(),
            };
            for (i, (at, units)) in entries.into_iter().enumerate() {
                let pos = window
                    .entries
                    .iter()
                    .position(|e| e.0 > at)
                    .unwrap_or(window.entries.len());
                window
                    .entries
                    .insert(pos, (at, units, format!("seeded-{i}")));
                window.total += units;
            }
            window.evict(policy.window.at(status.now.as_i64()));
        }
        model
    }

    /// Units in the window of `policy` (a bucket or a limit, as `kind` says) at
    /// `now_us`.
    pub fn used(&mut self, kind: Kind, policy: &str, window: &Window, now_us: i64) -> u64 {
        let w = self.windows.entry((kind, policy.to_owned())).or_default();
        w.evict(window.at(now_us));
        w.total
    }

    /// Whether `policy`'s window holds an entry of the charge `id`. As a store's own
    /// lookup, it reads no clock: an entry past its window counts until evicted.
    #[cfg(test)]
    pub(crate) fn holds(&self, kind: Kind, policy: &str, id: &str) -> bool {
        self.windows
            .get(&(kind, policy.to_owned()))
            .is_some_and(|w| w.entries.iter().any(|e| e.2 == id))
    }

    /// Decides `charge` at `now_us`; with `age`, records it as made that long ago
    /// whatever the window holds (a journalled call being replayed).
    pub fn charge(&mut self, charge: &Charge, now_us: i64, age: Option<Duration>) -> Decision {
        let forced = age.is_some();
        let at = now_us - age.map_or(0, super::micros);
        for part in &charge.parts {
            self.windows
                .entry(part.key())
                .or_default()
                .evict(part.window.at(now_us));
        }
        let snapshot = |m: &Model, fit: &dyn Fn(&Log, &super::Part) -> Fit| -> Vec<PartOutcome> {
            charge
                .parts
                .iter()
                .map(|p| {
                    let w = m.windows.get(&p.key()).cloned().unwrap_or_default();
                    w.outcome(&p.policy, p.max, fit(&w, p), now_us, &p.window)
                })
                .collect()
        };
        let block = self.blocked.get(&charge.method).copied();
        if let Some(until) = block.filter(|u| *u > now_us && !forced) {
            let parts = snapshot(self, &|_, _| Fit::Now);
            return blocked(charge, parts, from_micros(until - now_us));
        }
        let duplicate = charge.parts.iter().any(|p| {
            self.windows
                .get(&p.key())
                .is_some_and(|w| w.entries.iter().any(|e| e.2 == charge.id))
        });
        if duplicate {
            let parts = snapshot(self, &|_, _| Fit::Now);
            return decide(charge, parts, true);
        }
        let fits = |w: &Log, p: &super::Part| {
            if forced {
                Fit::Now
            } else {
                fit_in(
                    w.entries.iter().map(|e| (e.0, e.1)),
                    w.total,
                    p.units,
                    p.max,
                    &p.window,
                    now_us,
                )
            }
        };
        let probe = snapshot(self, &fits);
        if probe.iter().all(|p| p.fit == Fit::Now) {
            for part in &charge.parts {
                if at <= part.window.at(now_us).cutoff_us {
                    continue; // already out of the window: nothing left to count
                }
                let w = self.windows.entry(part.key()).or_default();
                let pos = w
                    .entries
                    .iter()
                    .position(|e| e.0 > at)
                    .unwrap_or(w.entries.len());
                w.entries.insert(pos, (at, part.units, charge.id.clone()));
                w.total += part.units;
            }
            return decide(charge, snapshot(self, &|_, _| Fit::Now), false);
        }
        decide(charge, probe, false)
    }
}

#[cfg(test)]
mod tests;

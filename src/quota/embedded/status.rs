//! Reading the embedded limiter's windows without writing (`budget`, `status`, the dry
//! run): entries past their window are simply not counted, and a window last counted
//! under another costs file is read as this one counts it, from the log.

use super::log::{logged, stamp_of};
use super::*;

/// Reads without writing: entries past their window are simply not counted. `None`
/// when the limiter's tables do not exist yet (a file below schema version 4 that no
/// older limiter wrote to).
pub(super) fn status_in(
    conn: &Connection,
    budget_key: &str,
    counting: Option<&Counting>,
    refs: &[PolicyRef],
    wanted: &[(PolicyRef, bool)],
    now: i64,
) -> rusqlite::Result<Option<Status>> {
    let exists: bool = conn
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'quota_entry'")?
        .exists([])?;
    if !exists {
        return Ok(None);
    }
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Deferred)?;
    let mut blocked_methods = std::collections::BTreeMap::new();
    for p in refs.iter().filter(|p| p.kind == Kind::Bucket) {
        for m in &p.methods {
            if let Some(until) = blocked_until(&tx, budget_key, m, now)? {
                blocked_methods.insert(m.clone(), Micros::new(until));
            }
        }
    }
    // A window last charged under another budget, or on a clock that has since gone
    // back, is read as this one counts it from the log, without writing (the next
    // charge writes it so).
    if let Some(Counting {
        budget,
        fingerprint,
        ..
    }) = counting
        && has_log(&tx)?
        && let Some(stamp) = stamp_of(&tx, budget_key)?
        && (stamp.fingerprint != *fingerprint || stamp.clock_went_back(now))
    {
        let logged = logged(&tx, budget_key, now - micros(KEEP))?;
        if stamp.fingerprint != *fingerprint {
            recount::warn_changed(
                budget_key,
                budget,
                "in the embedded limiter",
                "process",
                &stamp.fingerprint,
                logged.len(),
            );
        }
        let rebuilt = recount::rebuild(budget, &logged);
        let policies = wanted
            .iter()
            .map(|(p, list)| {
                let counted = rebuilt
                    .iter()
                    .find(|(r, _)| r.kind == p.kind && r.name == p.name)
                    .map(|(_, e)| e.as_slice())
                    .unwrap_or_default();
                counted_status(p, *list, counted, now)
            })
            .collect();
        return Ok(Some(Status::new(
            Micros::new(now),
            refs,
            policies,
            blocked_methods,
        )));
    }
    let policies = wanted
        .iter()
        .map(|(p, list)| stored_status(&tx, budget_key, p, *list, now))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some(Status::new(
        Micros::new(now),
        refs,
        policies,
        blocked_methods,
    )))
}

/// The state of `p` as the window holds it, its entries listed when `list` says so.
fn stored_status(
    tx: &Connection,
    budget_key: &str,
    p: &PolicyRef,
    list: bool,
    now: i64,
) -> rusqlite::Result<PolicyStatus> {
    let id = policy_id(budget_key, p.kind, &p.name);
    let cutoff = p.window.at(now).cutoff_us;
    let used: i64 = tx.query_row(
        "SELECT COALESCE(SUM(units), 0) FROM quota_entry WHERE policy = ?1 AND at_us > ?2",
        params![id, cutoff],
        |r| r.get(0),
    )?;
    let (next_free, empty_in) = edges(tx, &id, &p.window, now)?;
    let entries = if list {
        let mut q = tx.prepare(
            "SELECT at_us, units, method FROM quota_entry WHERE policy = ?1 AND at_us > ?2 ORDER BY at_us, member",
        )?;
        let rows = q.query_map(params![id, cutoff], |r| {
            Ok(Entry {
                at_us: r.get(0)?,
                units: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                method: r.get(2)?,
            })
        })?;
        Some(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    } else {
        None
    };
    Ok(PolicyStatus {
        name: p.name.clone(),
        kind: p.kind,
        window: p.window.clone(),
        used: u64::try_from(used).unwrap_or(0),
        next_free,
        empty_in,
        entries,
    })
}

/// Whether the file has the log (a file the limiter has not brought up to date, read
/// as it is, may not).
fn has_log(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'quota_fingerprint'")?
        .exists([])
}

/// `p`'s state at `now` when it holds `counted`.
fn counted_status(
    p: &PolicyRef,
    list: bool,
    counted: &[recount::Counted],
    now: i64,
) -> PolicyStatus {
    let span = p.window.at(now);
    let mut inside: Vec<&recount::Counted> = counted
        .iter()
        .filter(|e| e.units > 0 && e.at_us > span.cutoff_us)
        .collect();
    inside.sort_by(|a, b| (a.at_us, &a.id).cmp(&(b.at_us, &b.id)));
    let left = |at: i64| from_micros(span.leaves(at, &p.window) - now);
    PolicyStatus {
        name: p.name.clone(),
        kind: p.kind,
        window: p.window.clone(),
        used: inside.iter().map(|e| e.units).sum(),
        next_free: inside.first().map(|e| left(e.at_us)),
        empty_in: inside.iter().map(|e| e.at_us).max().map(left),
        entries: list.then(|| {
            inside
                .iter()
                .map(|e| Entry {
                    at_us: e.at_us,
                    units: e.units,
                    method: e.method.clone(),
                })
                .collect()
        }),
    }
}

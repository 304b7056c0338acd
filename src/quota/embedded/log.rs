//! The embedded limiter's log (docs/budget.md, "When the costs file changes"): every
//! call it counted, with its method, calls and time, kept for the longest window allowed
//! and pruned only by a time an answer confirmed ("The clock"). A window last counted
//! under another costs file, or on a clock that has since gone back, is counted again
//! from it.

use super::*;

/// What the window of a budget was last charged under: the budget's fingerprint, and
/// the host's clock at that charge.
pub(super) struct Stamp {
    pub(super) fingerprint: String,
    seen_us: Option<i64>,
}

impl Stamp {
    /// Whether the host's clock is now well before the one the latest charge read: a
    /// clock that ran ahead and was set right (a minute's slack for a slewing clock).
    /// A clock that ran ahead evicted entries that, back on the right time, are in the
    /// window again; the log still holds them (its pruning waits for a confirmed
    /// clock: [`confirmed_at`]).
    pub(super) fn clock_went_back(&self, now: i64) -> bool {
        self.seen_us.is_some_and(|seen| now + 60_000_000 < seen)
    }
}

/// The stamp of the window of `budget_key`, if it was ever charged under the log.
pub(super) fn stamp_of(conn: &Connection, budget_key: &str) -> rusqlite::Result<Option<Stamp>> {
    conn.prepare_cached("SELECT fingerprint, seen_us FROM quota_fingerprint WHERE budget = ?1")?
        .query_row([budget_key], |r| {
            Ok(Stamp {
                fingerprint: r.get(0)?,
                seen_us: r.get(1)?,
            })
        })
        .optional()
}

/// Whether the log on `conn` holds a call of `budget_key`; false when it holds none,
/// or the file has no log yet. Not when: `at_us` is the limiter's clock, which may have
/// been days ahead (docs/commands.md, `--switch-limiter`).
pub(in crate::quota) fn logs_any(conn: &Connection, budget_key: &str) -> bool {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM quota_log WHERE budget = ?1)",
        [budget_key],
        |r| r.get(0),
    )
    .unwrap_or(false)
}

/// Every entry the log keeps for `budget_key` at `now`.
pub(super) fn logged(
    conn: &Connection,
    budget_key: &str,
    held_after: i64,
) -> rusqlite::Result<Vec<Logged>> {
    let mut q = conn.prepare_cached(
        "SELECT charge_id, method, calls, at_us FROM quota_log
         WHERE budget = ?1 AND at_us > ?2 ORDER BY at_us, charge_id",
    )?;
    let rows = q.query_map(params![budget_key, held_after], |r| {
        Ok(Logged {
            id: r.get(0)?,
            method: r.get(1)?,
            calls: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
            at_us: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// Makes the window of `budget_key` the one `budget` counts from its log (docs/budget.md,
/// "When the costs file changes"), when it was last charged under another budget, or never
/// stamped: a file from before the log first has its buckets' entries logged and its blocks
/// moved to their methods, as `budget` (the file in force) says. Also when the clock went
/// back ([`Stamp::clock_went_back`]), under the same budget.
pub(super) fn recount_if_changed(
    conn: &Connection,
    budget_key: &str,
    counting: &Counting,
    now: i64,
) -> rusqlite::Result<()> {
    let Counting {
        budget,
        fingerprint,
        ..
    } = counting;
    let stamp = stamp_of(conn, budget_key)?;
    let same = stamp
        .as_ref()
        .is_some_and(|s| s.fingerprint == *fingerprint);
    if same && !stamp.as_ref().is_some_and(|s| s.clock_went_back(now)) {
        return Ok(());
    }
    let was = stamp.map(|s| s.fingerprint);
    if was.is_none() {
        adopt(conn, budget_key, budget)?;
    }
    let held_after = now - micros(KEEP);
    let logged = logged(conn, budget_key, held_after)?;
    let rebuilt = recount::rebuild(budget, &logged);
    let (from, to) = (format!("{budget_key}:"), format!("{budget_key};"));
    conn.prepare_cached("DELETE FROM quota_entry WHERE policy >= ?1 AND policy < ?2")?
        .execute(params![from, to])?;
    conn.prepare_cached("DELETE FROM quota_total WHERE policy >= ?1 AND policy < ?2")?
        .execute(params![from, to])?;
    for (p, entries) in &rebuilt {
        let id = policy_id(budget_key, p.kind, &p.name);
        let span = p.window.at(now);
        for e in entries
            .iter()
            .filter(|e| e.units > 0 && e.at_us > span.cutoff_us)
        {
            insert_entry(
                conn,
                &id,
                &e.id,
                e.at_us,
                leaves_own_day(&span, e.at_us, &p.window),
                e.units,
                &e.method,
            )?;
        }
    }
    conn.prepare_cached(
        "INSERT INTO quota_fingerprint (budget, fingerprint) VALUES (?1, ?2)
         ON CONFLICT (budget) DO UPDATE SET fingerprint = excluded.fingerprint",
    )?
    .execute(params![budget_key, fingerprint])?;
    if let Some(was) = was.filter(|_| !same) {
        recount::warn_changed(
            budget_key,
            budget,
            "in the embedded limiter",
            "process",
            &was,
            logged.len(),
        );
    }
    Ok(())
}

/// The newest time the host's clock is known to have been right: when the upstream's
/// `Date` last confirmed it (the skew record's time, which is the upstream's own). A
/// charge on a clock that jumped ahead may evict from the window, which a recount
/// undoes, but may not prune from the log what the window would still hold by this
/// time (docs/budget.md, "The clock"). `None` before any run compared the clocks.
pub(super) fn confirmed_at(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT measured_at_us FROM quota_clock_skew WHERE clock = ?1")?
        .query_row([LimiterClock::Host.as_str()], |r| r.get(0))
        .optional()
}

/// When an entry made at `at_us` leaves `window`, as it stands in `span`: as
/// [`Span::leaves`] says, except that an entry made after the day of `span` ended (the
/// clock that counts it now went back past it) leaves at the end of its own day. A
/// clock that went back a day would otherwise give today's entries yesterday's end,
/// and they would leave the window the moment the clock came right (docs/budget.md).
fn leaves_own_day(span: &Span, at_us: i64, window: &Window) -> i64 {
    match (window, span.end_us) {
        (Window::Day(zone), Some(end)) if at_us >= end => zone.midnight(at_us, 1),
        _ => span.leaves(at_us, window),
    }
}

/// Logs the entries of a window charged before the log, as `budget` would have
/// charged them, and moves its blocks from its buckets to their methods.
fn adopt(conn: &Connection, budget_key: &str, budget: &Budget) -> rusqlite::Result<()> {
    for b in budget.buckets() {
        let id = policy_id(budget_key, Kind::Bucket, &b.name);
        let rows: Vec<(String, String, i64, i64)> = conn
            .prepare_cached(
                "SELECT member, method, units, at_us FROM quota_entry WHERE policy = ?1",
            )?
            .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (charge_id, method, units, at_us) in rows {
            let units = u64::try_from(units).unwrap_or(0);
            let calls = recount::calls_of(units, b.costs.get(&method).copied().unwrap_or(0));
            let calls = i64::try_from(calls).unwrap_or(i64::MAX);
            log_call(conn, budget_key, &charge_id, &method, calls, at_us)?;
        }
        let legacy = legacy_block_id(budget_key, &b.name);
        let until: Option<i64> = conn
            .query_row(
                "DELETE FROM quota_block WHERE budget = ?1 RETURNING until_us",
                [&legacy],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(until) = until {
            block_in(conn, budget_key, &b.methods(), until)?;
        }
    }
    Ok(())
}

/// Keeps a call in the log it is counted again from when the costs change.
pub(super) fn log_call(
    conn: &Connection,
    budget_key: &str,
    charge_id: &str,
    method: &str,
    calls: i64,
    at_us: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO quota_log (budget, charge_id, method, calls, at_us)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (budget, charge_id, method)
         DO UPDATE SET calls = excluded.calls, at_us = excluded.at_us",
    )?
    .execute(params![budget_key, charge_id, method, calls, at_us])?;
    Ok(())
}

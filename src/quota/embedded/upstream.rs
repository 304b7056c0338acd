//! What the upstream's early refusals measured (docs/budget.md, "When the upstream
//! refuses"), kept per bucket and upstream day in the embedded limiter's file.

use super::*;

/// Records, once per bucket and upstream day, the units charged to `bucket` since the
/// upstream's last midnight, when they are fewer than `quota` (docs/budget.md, "When the
/// upstream refuses"): the first refusal of the day decides; later ones read the record and
/// write nothing. Entries are summed whatever the bucket's window, from what the window
/// still holds.
pub(super) fn note_refusal_in(
    conn: &Connection,
    budget_key: &str,
    bucket: &str,
    quota: u64,
    day: &Window,
    clock: &dyn Clock,
) -> rusqlite::Result<Option<SpentDay>> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    let now = clock.now().as_i64();
    let cutoff = day.at(now).cutoff_us;
    let day_us = cutoff + 1;
    let seen = tx
        .prepare_cached(
            "SELECT 1 FROM quota_upstream_spent WHERE budget = ?1 AND bucket = ?2 AND day_us = ?3",
        )?
        .exists(params![budget_key, bucket, day_us])?;
    if seen {
        return Ok(None);
    }
    let units: i64 = tx
        .prepare_cached(
            "SELECT COALESCE(SUM(units), 0) FROM quota_entry WHERE policy = ?1 AND at_us > ?2",
        )?
        .query_row(
            params![policy_id(budget_key, Kind::Bucket, bucket), cutoff],
            |r| r.get(0),
        )?;
    let units = u64::try_from(units).unwrap_or(0);
    if units >= quota {
        return Ok(None);
    }
    tx.prepare_cached(
        "INSERT INTO quota_upstream_spent (budget, bucket, day_us, units) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![
        budget_key,
        bucket,
        day_us,
        i64::try_from(units).unwrap_or(i64::MAX)
    ])?;
    tx.prepare_cached("DELETE FROM quota_upstream_spent WHERE budget = ?1 AND day_us < ?2")?
        .execute(params![budget_key, day_us - micros(drift::KEEP)])?;
    tx.commit()?;
    Ok(Some(SpentDay {
        bucket: bucket.to_owned(),
        day_us,
        units,
    }))
}

/// Every record of [`note_refusal_in`] for the budget; none in a file whose schema
/// predates them.
pub(super) fn upstream_spent_in(
    conn: &Connection,
    budget_key: &str,
) -> rusqlite::Result<Vec<SpentDay>> {
    let exists = conn
        .prepare(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'quota_upstream_spent'",
        )?
        .exists([])?;
    if !exists {
        return Ok(Vec::new());
    }
    let mut q = conn.prepare(
        "SELECT bucket, day_us, units FROM quota_upstream_spent WHERE budget = ?1 ORDER BY day_us, bucket",
    )?;
    let rows = q.query_map([budget_key], |r| {
        Ok(SpentDay {
            bucket: r.get(0)?,
            day_us: r.get(1)?,
            units: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
        })
    })?;
    rows.collect()
}

//! The journal of this host's calls: those made while the limiter was unreachable
//! (docs/budget.md, "When the limiter is down"), and the ledger of those Redis granted (3.7).
//!
//! A method that `[when_limiter_down]` allows goes ahead unmetered, and its charge is
//! written here, in the local database, before the call is made. The next time a
//! command of this host reaches the limiter, [`Journal::replay`] records each charge
//! into the shared window at its original age ([`Limiter::record_past`]). A crash
//! between the two is safe: recording the same charge id twice counts it once.
//!
//! Redis can lose the window (a restart without persistence, a failover to a primary
//! that missed writes), so against Redis a row is not deleted once counted: it stays,
//! `metered`, as the ledger, with every charge Redis granted to this host, until it
//! is older than its longest window. Beside the budget's keys Redis keeps an epoch
//! marker, created with the window; this host remembers the last one it saw
//! ([`Ledger`](super::Ledger)). Seeing another (or none where there was one), it replays the ledger
//! the same way, at original ages, idempotent by charge id. One table, one replay.
//! The tables are prefixed `quota_` and belong to this module; they are defined in
//! `quota/schema.rs`, one step of the file's one schema ([`crate::schema`]), which
//! opening the journal brings the file up to.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{
    BUDGET_POLICY, Charge, Kind, Limiter, LimiterError, Part, RecordPast, Window, Zone,
    from_micros, micros,
};
use crate::clock::{Clock, Micros};
use crate::sqlite::{Db, Durability, Migration, OpenError, SchemaError};

/// A row is the only trace of a call the window has not counted: it must survive a
/// power cut, not only a crash (the store's NORMAL does not).
const DURABILITY: Durability = Durability::Full;

/// The journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("the journal of unmetered calls in {path} failed while {doing}")]
    Sqlite {
        path: PathBuf,
        doing: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// The file cannot be journalled in WAL mode, which every writer of it needs.
    #[error("the journal of unmetered calls in {path} cannot be opened")]
    Open {
        path: PathBuf,
        #[source]
        source: OpenError,
    },
    /// The file's schema is newer than this build's, or could not be brought up to it
    /// (the same error the store and the limiter give for the file).
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A charge's parts could not be written down; a row without them would replay as
    /// 0 units, fewer than the upstream billed.
    #[error("the parts of charge {id} could not be encoded for the journal")]
    Encode {
        id: String,
        #[source]
        source: serde_json::Error,
    },
}

impl JournalError {
    fn opening(path: &Path, e: OpenError) -> JournalError {
        match e {
            OpenError::Sqlite { doing, source } => JournalError::Sqlite {
                path: path.to_path_buf(),
                doing,
                source,
            },
            e @ OpenError::NoWal { .. } => JournalError::Open {
                path: path.to_path_buf(),
                source: e,
            },
        }
    }
}

/// One part of a charge as a journal row stores it.
#[derive(Debug, Serialize, Deserialize)]
struct PartRow {
    policy: String,
    /// A sliding window's length; for a calendar day, the longest day.
    window_us: i64,
    max: u64,
    units: u64,
    /// The time zone of a calendar-day window (rows before them have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    /// `true` for a `[[limit]]`'s part (rows before limits had keys of their own
    /// have none, and are read as buckets).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    limit: bool,
}

impl PartRow {
    fn of(p: &Part) -> PartRow {
        PartRow {
            policy: p.policy.clone(),
            window_us: micros(p.window.longest()),
            max: p.max,
            units: p.units,
            zone: p.window.zone().map(|z| z.name().to_owned()),
            limit: p.kind == Kind::Limit,
        }
    }

    /// The part again; `None` for a zone this build does not know.
    fn part(self) -> Option<Part> {
        let window = match &self.zone {
            None => Window::Sliding(from_micros(self.window_us)),
            Some(name) => Window::Day(Zone::get(name).ok()?),
        };
        Some(Part {
            policy: self.policy,
            kind: if self.limit {
                Kind::Limit
            } else {
                Kind::Bucket
            },
            window,
            max: self.max,
            units: self.units,
        })
    }
}

/// A charge waiting to be replayed, and when its call was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journalled {
    pub charge: Charge,
    /// Microseconds since the Unix epoch on this host's clock. Only differences with
    /// this host's clock are ever taken, so skew between hosts does not matter.
    pub made_at_us: i64,
}

/// What a replay did.
#[derive(Debug, Default)]
pub struct Replayed {
    /// Calls the limiter accepted (and whose rows are gone).
    pub calls: u64,
    /// Their units to the budget's own window, older ones included (the limiter
    /// counts only what is still inside the window).
    pub units: u64,
    /// Rows left for next time because the limiter failed mid-way.
    pub left: u64,
    /// Why the replay stopped early.
    pub interrupted: Option<LimiterError>,
    /// Rows that cannot be read back (edited by hand); left in place.
    pub unreadable: u64,
}

pub struct Journal {
    path: PathBuf,
    /// The command's connection.
    conn: Db,
    /// When a call is made and how old a journalled call is, for the replay: passed
    /// in, so that a test sets the time instead of sleeping.
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.path).finish()
    }
}

impl Journal {
    /// Opens the journal in the database at `path`, laid out by `file`, creating the
    /// file if needed: [`Journal::on`] a connection of its own.
    pub(crate) fn open_in(
        path: &Path,
        file: &[Migration],
        clock: Arc<dyn Clock>,
    ) -> Result<Journal, JournalError> {
        let db = Db::open_for_writing(path).map_err(|e| JournalError::opening(path, e))?;
        Journal::on(&db, file, clock)
    }

    /// The journal on the command's connection `db`, laid out by `file`, bringing the
    /// journal's tables up to date (only those, on a file the store has versioned:
    /// [`crate::sqlite::migrate_own`]). A connection opened to read is let write.
    pub(crate) fn on(
        db: &Db,
        file: &[Migration],
        clock: Arc<dyn Clock>,
    ) -> Result<Journal, JournalError> {
        db.make_writable()
            .map_err(|e| JournalError::opening(db.path(), e))?;
        crate::sqlite::migrate_own(&db.lock(), db.path(), file, super::schema::STEPS)?;
        Ok(Journal {
            path: db.path().to_path_buf(),
            conn: db.clone(),
            clock,
        })
    }

    /// The journal on `db`, only if the database exists and holds any rows of this
    /// host's calls (unmetered or in the ledger); creates nothing otherwise.
    pub(crate) fn if_any(
        db: Option<&Db>,
        file: &[Migration],
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        Journal::on_if(db, "SELECT 1 FROM quota_journal LIMIT 1", file, clock)
    }

    /// The journal on `db`, only if the database exists and holds journalled calls:
    /// creates nothing otherwise, so commands that only read leave no trace.
    pub(crate) fn if_pending(
        db: Option<&Db>,
        file: &[Migration],
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        Journal::on_if(
            db,
            "SELECT 1 FROM quota_journal WHERE metered = 0 LIMIT 1",
            file,
            clock,
        )
    }

    /// [`Journal::if_any`] on a connection of its own, for tools and tests.
    pub(crate) fn open_if_any_in(
        path: &Path,
        file: &[Migration],
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        let db = Journal::reading(path)?;
        Journal::if_any(db.as_ref(), file, clock)
    }

    /// [`Journal::if_pending`] on a connection of its own, for tools and tests.
    pub(crate) fn open_if_pending_in(
        path: &Path,
        file: &[Migration],
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        let db = Journal::reading(path)?;
        Journal::if_pending(db.as_ref(), file, clock)
    }

    /// A connection to read the file at `path`, when it exists.
    fn reading(path: &Path) -> Result<Option<Db>, JournalError> {
        if !path.exists() {
            return Ok(None);
        }
        Db::open_for_reading(path)
            .map(Some)
            .map_err(|source| JournalError::Sqlite {
                path: path.to_path_buf(),
                doing: "opening the database to read",
                source,
            })
    }

    fn on_if(
        db: Option<&Db>,
        rows: &str,
        file: &[Migration],
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        let Some(db) = db else {
            return Ok(None);
        };
        let path = db.path();
        let fail = |doing| {
            move |source| JournalError::Sqlite {
                path: path.to_path_buf(),
                doing,
                source,
            }
        };
        let pending = {
            let conn = db.lock();
            let found = crate::sqlite::user_version(&conn)
                .map_err(fail("reading the database's schema version"))?;
            crate::sqlite::check_readable(path, found, crate::sqlite::version_of(file))?;
            let has_table = conn
                .prepare(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'quota_journal'",
                )
                .and_then(|mut q| q.exists([]))
                .map_err(fail("looking for journalled calls"))?;
            // A file from before the journal's step may hold a journal without the
            // ledger's columns, whose rows are all unmetered: any row is one to open
            // for (opening upgrades the file).
            let rows = if found < crate::sqlite::version_after(file, super::schema::STEPS) {
                "SELECT 1 FROM quota_journal LIMIT 1"
            } else {
                rows
            };
            has_table
                && conn
                    .prepare(rows)
                    .and_then(|mut q| q.exists([]))
                    .map_err(fail("looking for journalled calls"))?
        };
        if !pending {
            return Ok(None);
        }
        Journal::on(db, file, clock).map(Some)
    }

    /// Now, on the clock this journal decides by.
    pub(crate) fn now(&self) -> Micros {
        self.clock.now()
    }

    fn with_conn<T>(
        &self,
        doing: &'static str,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, JournalError> {
        let fail = |source| JournalError::Sqlite {
            path: self.path.clone(),
            doing,
            source,
        };
        // A panic while holding the lock cannot leave a half-written row: every
        // statement is its own transaction.
        let conn = self.conn.lock_durable(DURABILITY).map_err(fail)?;
        work(&conn).map_err(|source| JournalError::Sqlite {
            path: self.path.clone(),
            doing,
            source,
        })
    }

    /// Records that the call of `charge`, for the budget named `budget_key`, is made
    /// now without the limiter. Recording the same charge id again keeps the first.
    pub(crate) fn record(&self, budget_key: &str, charge: &Charge) -> Result<(), JournalError> {
        self.record_at(budget_key, charge, self.now().as_i64())
    }

    pub(crate) fn record_at(
        &self,
        budget_key: &str,
        charge: &Charge,
        made_at_us: i64,
    ) -> Result<(), JournalError> {
        self.insert(budget_key, charge, made_at_us, None)
    }

    /// One row: unmetered, or (`keep_until_us` given) counted and kept as the ledger.
    fn insert(
        &self,
        budget_key: &str,
        charge: &Charge,
        made_at_us: i64,
        keep_until_us: Option<i64>,
    ) -> Result<(), JournalError> {
        let parts: Vec<PartRow> = charge.parts.iter().map(PartRow::of).collect();
        let parts = serde_json::to_string(&parts).map_err(|source| JournalError::Encode {
            id: charge.id.clone(),
            source,
        })?;
        let units = i64::try_from(charge.units).unwrap_or(i64::MAX);
        let calls = i64::try_from(charge.calls).unwrap_or(i64::MAX);
        self.with_conn("journalling a call", |conn| {
            conn.prepare_cached(
                "INSERT INTO quota_journal
                    (charge_id, budget, method, units, parts, made_at_us, metered, keep_until_us, calls)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (charge_id) DO NOTHING",
            )?
            .execute(params![
                charge.id,
                budget_key,
                charge.method,
                units,
                parts,
                made_at_us,
                keep_until_us.is_some(),
                keep_until_us.unwrap_or(0),
                calls
            ])
            .map(|_| ())
        })
    }

    /// The calls journalled for `budget_key`, oldest first; rows that cannot be read
    /// back are counted apart.
    pub(crate) fn pending(&self, budget_key: &str) -> Result<(Vec<Journalled>, u64), JournalError> {
        self.rows(budget_key, false)
    }

    /// Whether the ledger of `budget_key` holds any call: one seek, where
    /// [`Journal::ledger`] reads them all.
    pub(crate) fn has_ledger(&self, budget_key: &str) -> Result<bool, JournalError> {
        self.with_conn("reading journalled calls", |conn| {
            conn.prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM quota_journal WHERE budget = ?1 AND metered = 1)",
            )?
            .query_row(params![budget_key], |r| r.get(0))
        })
    }

    /// Whether the journal on `conn` holds a call of `budget_key` (journalled or in
    /// the ledger: calls charged to, or waiting for, Redis); false when it holds none,
    /// or the file has no journal yet. Not when: `made_at_us` is this host's clock,
    /// which may have been days ahead (docs/commands.md, `--switch-limiter`).
    pub(super) fn holds_any_call(conn: &Connection, budget_key: &str) -> bool {
        conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM quota_journal WHERE budget = ?1)",
            [budget_key],
            |r| r.get(0),
        )
        .unwrap_or(false)
    }

    /// The ledger of `budget_key`: the calls this host made that the window counted,
    /// oldest first (pruned ones gone).
    pub fn ledger(&self, budget_key: &str) -> Result<(Vec<Journalled>, u64), JournalError> {
        self.rows(budget_key, true)
    }

    fn rows(
        &self,
        budget_key: &str,
        metered: bool,
    ) -> Result<(Vec<Journalled>, u64), JournalError> {
        type Row = (String, String, i64, String, i64, Option<i64>);
        let rows: Vec<Row> = self.with_conn("reading journalled calls", |conn| {
            let mut q = conn.prepare_cached(
                "SELECT charge_id, method, units, parts, made_at_us, calls FROM quota_journal
                     WHERE budget = ?1 AND metered = ?2 ORDER BY made_at_us, charge_id",
            )?;
            let rows = q.query_map(params![budget_key, metered], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })?;
            rows.collect()
        })?;
        let mut out = Vec::with_capacity(rows.len());
        let mut unreadable = 0;
        for (id, method, units, parts, made_at_us, calls) in rows {
            // Negative units are a damaged row, not 0 units: left in place and counted;
            // so is a zone this build does not know.
            let parts = serde_json::from_str::<Vec<PartRow>>(&parts)
                .ok()
                .and_then(|rows| {
                    rows.into_iter()
                        .map(PartRow::part)
                        .collect::<Option<Vec<_>>>()
                });
            let (Some(parts), Ok(units)) = (parts, u64::try_from(units)) else {
                unreadable += 1;
                continue;
            };
            out.push(Journalled {
                charge: Charge {
                    id,
                    method,
                    // A replay records the call whatever blocks its bucket, so the
                    // bucket is not kept; the first part names it when it has units.
                    bucket: parts
                        .first()
                        .map_or_else(|| BUDGET_POLICY.to_owned(), |p| p.policy.clone()),
                    // 0 in a row journalled before calls were kept.
                    calls: calls.and_then(|c| u64::try_from(c).ok()).unwrap_or(0),
                    units,
                    parts,
                },
                made_at_us,
            });
        }
        Ok((out, unreadable))
    }

    /// Deletes the row of a replayed charge.
    pub(crate) fn remove(&self, charge_id: &str) -> Result<(), JournalError> {
        self.with_conn("deleting a replayed call", |conn| {
            conn.prepare_cached("DELETE FROM quota_journal WHERE charge_id = ?1")?
                .execute([charge_id])
                .map(|_| ())
        })
    }

    /// Records that Redis granted `charge` (made at `made_at_us` on this host's clock),
    /// into the ledger. The same charge id again keeps the first row.
    pub(crate) fn record_granted_at(
        &self,
        budget_key: &str,
        charge: &Charge,
        made_at_us: i64,
    ) -> Result<(), JournalError> {
        // One statement, one fsync: this runs for every call Redis grants.
        self.insert(budget_key, charge, made_at_us, Some(keep_until(made_at_us)))
    }

    /// Keeps a counted row as the ledger until its longest window has passed.
    fn mark_metered(&self, charge: &Charge, made_at_us: i64) -> Result<(), JournalError> {
        self.with_conn("keeping a call in the ledger", |conn| {
            conn.prepare_cached(
                "UPDATE quota_journal SET metered = 1, keep_until_us = ?2 WHERE charge_id = ?1",
            )?
            .execute(params![charge.id, keep_until(made_at_us)])
            .map(|_| ())
        })
    }

    /// Deletes the ledger rows of `budget_key` that every window has let go by `now_us`.
    pub(crate) fn prune(&self, budget_key: &str, now_us: i64) -> Result<u64, JournalError> {
        self.with_conn("pruning the ledger", |conn| {
            conn.prepare_cached(
                "DELETE FROM quota_journal WHERE budget = ?1 AND metered = 1 AND keep_until_us <= ?2",
            )?
            .execute(params![budget_key, now_us])
            .map(|n| n as u64)
        })
    }

    /// The epoch of `budget_key`'s window this host last charged into.
    pub(crate) fn last_epoch(&self, budget_key: &str) -> Result<Option<Epoch>, JournalError> {
        self.with_conn("reading the last epoch seen", |conn| {
            conn.prepare_cached("SELECT epoch FROM quota_epoch WHERE budget = ?1")?
                .query_row([budget_key], |r| r.get(0))
                .optional()
                .map(|e| e.map(Epoch))
        })
    }

    /// Remembers the epoch of `budget_key`'s window; `None` forgets it.
    pub(crate) fn set_epoch(
        &self,
        budget_key: &str,
        epoch: Option<Epoch>,
    ) -> Result<(), JournalError> {
        self.with_conn("remembering the epoch seen", |conn| {
            match epoch {
                Some(Epoch(e)) => conn
                    .prepare_cached(
                        "INSERT INTO quota_epoch (budget, epoch) VALUES (?1, ?2)
                         ON CONFLICT (budget) DO UPDATE SET epoch = excluded.epoch",
                    )?
                    .execute(params![budget_key, e]),
                None => conn
                    .prepare_cached("DELETE FROM quota_epoch WHERE budget = ?1")?
                    .execute([budget_key]),
            }
            .map(|_| ())
        })
    }

    /// Records every call journalled for `budget_key` into `limiter` at its original
    /// age, oldest first. Once the limiter has accepted a call, its row goes, or, when
    /// the limiter keeps a ledger (Redis), stays there, metered. Calls older than their
    /// windows are recorded as nothing (the limiter skips them). When the limiter fails,
    /// the rest stay for next time.
    ///
    /// The SQLite statements run on the caller's thread: a replay runs once, before a
    /// command does anything else, and each statement takes microseconds.
    pub(crate) async fn replay(
        &self,
        budget_key: &str,
        limiter: &Limiter,
    ) -> Result<Replayed, JournalError> {
        let (pending, unreadable) = self.pending(budget_key)?;
        let keep = limiter.keeps_ledger();
        self.record_all(pending, unreadable, limiter, |j| {
            if keep {
                self.mark_metered(&j.charge, j.made_at_us)
            } else {
                self.remove(&j.charge.id)
            }
        })
        .await
    }

    /// Records the ledger of `budget_key` into `limiter` again, at original ages:
    /// after it lost the window. Rows stay; a charge already there counts once.
    pub(crate) async fn restore(
        &self,
        budget_key: &str,
        limiter: &impl RecordPast,
    ) -> Result<Replayed, JournalError> {
        let (ledger, unreadable) = self.ledger(budget_key)?;
        self.record_all(ledger, unreadable, limiter, |_| Ok(()))
            .await
    }

    async fn record_all(
        &self,
        pending: Vec<Journalled>,
        unreadable: u64,
        limiter: &impl RecordPast,
        accepted: impl Fn(&Journalled) -> Result<(), JournalError>,
    ) -> Result<Replayed, JournalError> {
        let mut done = Replayed {
            unreadable,
            ..Replayed::default()
        };
        let total = pending.len() as u64;
        for j in pending {
            let age = from_micros(self.now().as_i64() - j.made_at_us);
            match limiter.record_past(&j.charge, age).await {
                Ok(_) => {
                    accepted(&j)?;
                    done.calls += 1;
                    done.units += j.charge.units;
                }
                Err(e) => {
                    done.left = total - done.calls;
                    done.interrupted = Some(e);
                    break;
                }
            }
        }
        Ok(done)
    }
}

/// The calls of a budget made while the limiter was down that wait in the journal to
/// be replayed into the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unreplayed {
    pub calls: u64,
    /// When the oldest of them was made, on this host's clock; `None` when there are
    /// none.
    pub oldest_at_us: Option<i64>,
}

/// How many calls of `budget_key` made while the limiter was down wait in the
/// journal of the database at `db` to be replayed into the window: read only, and 0
/// for a database or a journal that does not exist.
pub fn pending_calls(db: Option<&Db>, budget_key: &str) -> Result<u64, JournalError> {
    unreplayed(db, budget_key).map(|u| u.calls)
}

/// [`pending_calls`], and since when they wait.
pub fn unreplayed(db: Option<&Db>, budget_key: &str) -> Result<Unreplayed, JournalError> {
    const DOING: &str = "counting the calls not yet replayed";
    let Some(db) = db else {
        return Ok(Unreplayed::default());
    };
    let read = || -> rusqlite::Result<(i64, Option<i64>)> {
        let conn = db.lock();
        let has = |sql: &str, name: &str| conn.prepare(sql)?.exists([name]);
        if !has(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            "quota_journal",
        )? {
            return Ok((0, None));
        }
        // A journal from before the ledger holds only calls not yet replayed.
        let rows = if has(
            "SELECT 1 FROM pragma_table_info('quota_journal') WHERE name = ?1",
            "metered",
        )? {
            "SELECT COUNT(*), MIN(made_at_us) FROM quota_journal WHERE budget = ?1 AND metered = 0"
        } else {
            "SELECT COUNT(*), MIN(made_at_us) FROM quota_journal WHERE budget = ?1"
        };
        conn.query_row(rows, [budget_key], |r| Ok((r.get(0)?, r.get(1)?)))
    };
    read()
        .map(|(n, oldest)| Unreplayed {
            calls: u64::try_from(n).unwrap_or(0),
            oldest_at_us: oldest,
        })
        .map_err(|source| JournalError::Sqlite {
            path: db.path().to_path_buf(),
            doing: DOING,
            source,
        })
}

/// Until when a call made at `made_at_us` is kept in the ledger: as long as any window
/// that could come back could count it ([`super::KEEP`]), not only the windows it was
/// charged to, so that a Redis that lost its keys under another costs file gets it
/// back too (docs/budget.md).
fn keep_until(made_at_us: i64) -> i64 {
    made_at_us.saturating_add(micros(super::KEEP))
}

/// The epoch marker of a budget's window in Redis: the Redis time, in microseconds,
/// at which the window was created. A window that comes back with another was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch(pub i64);

impl std::fmt::Display for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::output::json::rfc3339(self.0))
    }
}

#[cfg(test)]
mod tests;

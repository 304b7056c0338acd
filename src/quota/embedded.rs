//! The limiter inside the SQLite database, for a single host: the same steps as the
//! Redis script, in one immediate transaction, so any number of processes on the host
//! share one exact window. Its tables are prefixed `quota_` and belong to this module;
//! they are defined in `quota/schema.rs`, one step of the file's one schema
//! ([`crate::schema`]), which opening for charging brings the file up to.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::drift::{self, SpentDay};
use super::model::{self, Fit, PartOutcome};
use super::recount::{self, Logged};
use super::skew::{self, LimiterClock};
use super::{
    BUDGET_POLICY, Budget, Cause, Charge, Counting, Decision, Entry, KEEP, Kind, LimiterError,
    PolicyRef, PolicyStatus, Reason, Span, SqliteCause, Status, Window, from_micros, micros,
};
use crate::clock::{Clock, Micros};
use crate::sqlite::{Db, Durability, Migration, OpenError};

mod log;
mod status;
mod upstream;

pub(super) use log::logs_any;
use log::{confirmed_at, log_call, recount_if_changed};
use status::status_in;
use upstream::{note_refusal_in, upstream_spent_in};

pub struct EmbeddedLimiter {
    path: PathBuf,
    budget_key: String,
    /// The command's connection; `None` when read on a file that does not exist: an
    /// empty window.
    conn: Option<Db>,
    /// Every decision reads the time here, once, and passes it down.
    clock: Arc<dyn Clock>,
    /// The budget charged, fixed when the limiter is built: a window last charged
    /// under another is counted again at its costs (docs/budget.md, "When the costs
    /// file changes"). Without one, the window is charged as it stands.
    counting: Option<Arc<Counting>>,
}

impl std::fmt::Debug for EmbeddedLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedLimiter")
            .field("path", &self.path)
            .field("budget_key", &self.budget_key)
            .finish()
    }
}

impl EmbeddedLimiter {
    /// The limiter on the command's connection `db`, laid out by `file`, for charging
    /// under `budget` (none: the window as it stands), deciding by `clock`. Runs only
    /// the limiter's own steps on a file the store has versioned
    /// ([`crate::sqlite::migrate_own`]).
    pub(crate) fn on(
        db: &Db,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
        file: &[Migration],
    ) -> Result<EmbeddedLimiter, LimiterError> {
        let path = db.path();
        crate::sqlite::migrate_own(&db.lock(), path, file, super::schema::STEPS).map_err(|e| {
            LimiterError::Failed {
                endpoint: path.display().to_string(),
                doing: "bringing the database's schema up to date",
                source: e.into(),
            }
        })?;
        Ok(EmbeddedLimiter::new(
            path,
            budget_key,
            Some(db.clone()),
            clock,
            budget,
        ))
    }

    /// Opens (creating if needed) the database at `path`, laid out by `file`, for
    /// charging: [`EmbeddedLimiter::on`] a connection of its own.
    pub(crate) fn open_in(
        path: &Path,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
        file: &[Migration],
    ) -> Result<EmbeddedLimiter, LimiterError> {
        // FULL, as SQLite's default that the limiter always ran with: a granted charge
        // lost to a power cut would let the window be overspent ([`Self::with_conn`]).
        let db = Db::open_for_writing(path).map_err(|e| match e {
            OpenError::Sqlite { doing, source } => LimiterError::Failed {
                endpoint: path.display().to_string(),
                doing,
                source: SqliteCause(source).into(),
            },
            e @ OpenError::NoWal { .. } => LimiterError::Failed {
                endpoint: path.display().to_string(),
                doing: "switching to WAL journaling",
                source: e.into(),
            },
        })?;
        EmbeddedLimiter::on(&db, budget_key, clock, budget, file)
    }

    /// The limiter on the command's connection `db`, only to read the window: writes
    /// nothing and never migrates. No connection (no file) is an empty window; so is a
    /// file whose schema predates the limiter's tables, and an older file that holds
    /// them is read as it is (their columns never changed). A file newer than `file`,
    /// the file's list of steps, is refused.
    pub(crate) fn reading(
        db: Option<&Db>,
        path: &Path,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
        file: &[Migration],
    ) -> Result<EmbeddedLimiter, LimiterError> {
        if let Some(db) = db {
            let fail = |doing: &'static str, e: Cause| LimiterError::Failed {
                endpoint: path.display().to_string(),
                doing,
                source: e,
            };
            let found = crate::sqlite::user_version(&db.lock()).map_err(|e| {
                fail(
                    "reading the database's schema version",
                    SqliteCause(e).into(),
                )
            })?;
            crate::sqlite::check_readable(path, found, crate::sqlite::version_of(file))
                .map_err(|e| fail("opening the database to read", e.into()))?;
        }
        Ok(EmbeddedLimiter::new(
            path,
            budget_key,
            db.cloned(),
            clock,
            budget,
        ))
    }

    /// Opens `path` only to read the window ([`EmbeddedLimiter::reading`]); a missing
    /// file is an empty window.
    pub(crate) fn open_read_only_in(
        path: &Path,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
        file: &[Migration],
    ) -> Result<EmbeddedLimiter, LimiterError> {
        let db = if path.exists() {
            Some(
                Db::open_for_reading(path).map_err(|e| LimiterError::Failed {
                    endpoint: path.display().to_string(),
                    doing: "opening the database to read",
                    source: SqliteCause(e).into(),
                })?,
            )
        } else {
            None
        };
        EmbeddedLimiter::reading(db.as_ref(), path, budget_key, clock, budget, file)
    }

    fn new(
        path: &Path,
        budget_key: &str,
        conn: Option<Db>,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
    ) -> EmbeddedLimiter {
        EmbeddedLimiter {
            path: path.to_path_buf(),
            budget_key: budget_key.to_owned(),
            conn,
            clock,
            counting: Counting::of(budget),
        }
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("embedded limiter in {}", self.path.display())
    }

    /// Runs `work` on the connection off the async runtime's threads.
    async fn with_conn<T: Send + 'static>(
        &self,
        doing: &'static str,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<Option<T>, LimiterError> {
        let Some(conn) = self.conn.clone() else {
            return Ok(None);
        };
        let endpoint = self.endpoint();
        let fail = move |source: Cause| LimiterError::Failed {
            endpoint: endpoint.clone(),
            doing,
            source,
        };
        let joined = tokio::task::spawn_blocking(move || {
            // FULL, as SQLite's default that the limiter always ran with: a granted
            // charge lost to a power cut would let the window be overspent.
            let held = conn
                .lock_durable(Durability::Full)
                .map_err(|e| Cause::from(SqliteCause(e)))?;
            work(&held).map_err(|e| Cause::from(SqliteCause(e)))
        })
        .await;
        match joined {
            Ok(Ok(v)) => Ok(Some(v)),
            Ok(Err(source)) => Err(fail(source)),
            Err(e) => Err(fail(e.into())),
        }
    }

    /// Decides `charge` (or, with `age`, records a call already made), and says when,
    /// by this limiter's clock.
    pub(super) async fn charge(
        &self,
        charge: &Charge,
        age: Option<Duration>,
    ) -> Result<(Decision, Micros), LimiterError> {
        // A replay is counted at today's costs, as the window it joins.
        let charge_owned = age
            .and(self.counting.as_deref())
            .and_then(|c| recount::today(&c.budget, charge))
            .unwrap_or_else(|| charge.clone());
        let key = self.budget_key.clone();
        let clock = Arc::clone(&self.clock);
        let counting = self.counting.clone();
        let decided = self
            .with_conn("charging the budget", move |conn| {
                charge_in(
                    conn,
                    &key,
                    counting.as_deref(),
                    &charge_owned,
                    age,
                    clock.as_ref(),
                )
            })
            .await?
            .map(|(decision, at)| (decision, Micros::new(at)));
        decided.ok_or_else(|| LimiterError::Failed {
            endpoint: self.endpoint(),
            doing: "charging the budget",
            source: Reason("the database was opened read-only".to_owned()).into(),
        })
    }

    pub(super) async fn status(
        &self,
        policies: &[PolicyRef],
        with_entries: &[&str],
    ) -> Result<Status, LimiterError> {
        let now = self.clock.now();
        let key = self.budget_key.clone();
        let counting = self.counting.clone();
        let refs = policies.to_vec();
        let wanted: Vec<(PolicyRef, bool)> = policies
            .iter()
            .map(|p| (p.clone(), with_entries.contains(&p.name.as_str())))
            .collect();
        let empty = Status {
            now,
            policies: wanted
                .iter()
                .map(|(p, list)| PolicyStatus {
                    name: p.name.clone(),
                    kind: p.kind,
                    window: p.window.clone(),
                    used: 0,
                    next_free: None,
                    empty_in: None,
                    entries: list.then(Vec::new),
                })
                .collect(),
            blocked: Default::default(),
            blocked_methods: Default::default(),
        };
        let read = self
            .with_conn("reading the budget", move |conn| {
                status_in(
                    conn,
                    &key,
                    counting.as_deref(),
                    &refs,
                    &wanted,
                    now.as_i64(),
                )
            })
            .await?;
        // No database, or one the limiter never wrote to: nothing has been charged.
        Ok(read.flatten().unwrap_or(empty))
    }

    pub(super) async fn block_until(
        &self,
        methods: &[String],
        until: Micros,
    ) -> Result<(), LimiterError> {
        let key = self.budget_key.clone();
        let methods = methods.to_vec();
        let until_us = until.as_i64();
        self.with_conn("blocking the budget", move |conn| {
            block_in(conn, &key, &methods, until_us)
        })
        .await
        .map(|_| ())
    }

    /// [`Limiter::note_upstream_refusal`](super::Limiter::note_upstream_refusal), in
    /// one immediate transaction by this host's clock.
    pub(super) async fn note_upstream_refusal(
        &self,
        bucket: &str,
        quota: u64,
    ) -> Result<Option<SpentDay>, LimiterError> {
        let Some(day) = drift::upstream_day() else {
            return Ok(None);
        };
        let (key, bucket) = (self.budget_key.clone(), bucket.to_owned());
        let clock = Arc::clone(&self.clock);
        let noted = self
            .with_conn(
                "recording what the upstream's refusal measured",
                move |conn| note_refusal_in(conn, &key, &bucket, quota, &day, clock.as_ref()),
            )
            .await?;
        Ok(noted.flatten())
    }

    /// [`Limiter::upstream_spent`](super::Limiter::upstream_spent).
    pub(super) async fn upstream_spent(&self) -> Result<Vec<SpentDay>, LimiterError> {
        let key = self.budget_key.clone();
        let read = self
            .with_conn(
                "reading what the upstream's refusals measured",
                move |conn| upstream_spent_in(conn, &key),
            )
            .await?;
        Ok(read.unwrap_or_default())
    }

    pub(super) async fn unblock(&self, methods: &[String]) -> Result<Option<Micros>, LimiterError> {
        let key = self.budget_key.clone();
        let methods = methods.to_vec();
        let now = self.clock.now();
        let until = self
            .with_conn("lifting the budget's block", move |conn| {
                let mut latest = None;
                for m in &methods {
                    let until: Option<i64> = conn
                        .query_row(
                            "DELETE FROM quota_block WHERE budget = ?1 RETURNING until_us",
                            [block_id(&key, m)],
                            |r| r.get::<_, i64>(0),
                        )
                        .optional()?;
                    latest = latest.max(until);
                }
                Ok(latest)
            })
            .await?;
        Ok(until.flatten().map(Micros::new).filter(|u| *u > now))
    }
}

/// Blocks `methods` until `until_us`.
fn block_in(
    conn: &Connection,
    budget_key: &str,
    methods: &[String],
    until_us: i64,
) -> rusqlite::Result<()> {
    for m in methods {
        conn.prepare_cached(
            "INSERT INTO quota_block (budget, until_us) VALUES (?1, ?2)
             ON CONFLICT (budget) DO UPDATE SET until_us = excluded.until_us",
        )?
        .execute(params![block_id(budget_key, m), until_us])?;
    }
    Ok(())
}

/// A policy's rows in `quota_entry` and `quota_total`: a bucket's are named by the
/// bucket alone, as they always were; a limit's carry `limit:`, so that a limit and a
/// bucket of one name never share rows.
fn policy_id(budget_key: &str, kind: Kind, policy: &str) -> String {
    match kind {
        Kind::Bucket => format!("{budget_key}:{policy}"),
        Kind::Limit => format!("{budget_key}:limit:{policy}"),
    }
}

/// The row of `quota_block` that blocks `method`: a block stays with the methods of the
/// bucket the upstream refused, whatever the costs file (docs/budget.md, "When the costs
/// file changes").
fn block_id(budget_key: &str, method: &str) -> String {
    format!("{budget_key}:blocked:{method}")
}

/// The row of the layout before per-method blocks that blocked `bucket`.
fn legacy_block_id(budget_key: &str, bucket: &str) -> String {
    if bucket == BUDGET_POLICY {
        budget_key.to_owned()
    } else {
        format!("{budget_key}:{bucket}")
    }
}

/// Until when `method` is blocked, if it still is at `now`.
fn blocked_until(
    conn: &Connection,
    budget_key: &str,
    method: &str,
    now: i64,
) -> rusqlite::Result<Option<i64>> {
    let until: Option<i64> = conn
        .prepare_cached("SELECT until_us FROM quota_block WHERE budget = ?1")?
        .query_row([block_id(budget_key, method)], |r| r.get(0))
        .optional()?;
    Ok(until.filter(|u| *u > now))
}

fn insert_entry(
    conn: &Connection,
    policy_id: &str,
    charge_id: &str,
    at: i64,
    expires: i64,
    units: u64,
    method: &str,
) -> rusqlite::Result<()> {
    let units = i64::try_from(units).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "INSERT INTO quota_entry (policy, member, at_us, expires_us, units, method) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![policy_id, charge_id, at, expires, units, method])?;
    conn.prepare_cached(
        "INSERT INTO quota_total (policy, total) VALUES (?1, ?2)
         ON CONFLICT (policy) DO UPDATE SET total = total + excluded.total",
    )?
    .execute(params![policy_id, units])?;
    Ok(())
}

/// Drops every entry that has left its window and subtracts it from its total.
fn evict(conn: &Connection, now: i64) -> rusqlite::Result<()> {
    let mut expired = conn.prepare_cached(
        "SELECT policy, SUM(units) FROM quota_entry WHERE expires_us <= ?1 GROUP BY policy",
    )?;
    let gone: Vec<(String, i64)> = expired
        .query_map([now], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    if gone.is_empty() {
        return Ok(());
    }
    for (policy, units) in &gone {
        conn.prepare_cached("UPDATE quota_total SET total = total - ?2 WHERE policy = ?1")?
            .execute(params![policy, units])?;
    }
    conn.prepare_cached("DELETE FROM quota_entry WHERE expires_us <= ?1")?
        .execute([now])?;
    conn.prepare_cached("DELETE FROM quota_total WHERE total <= 0")?
        .execute([])?;
    Ok(())
}

fn total_of(conn: &Connection, policy: &str) -> rusqlite::Result<u64> {
    let total: Option<i64> = conn
        .prepare_cached("SELECT total FROM quota_total WHERE policy = ?1")?
        .query_row([policy], |r| r.get(0))
        .optional()?;
    Ok(u64::try_from(total.unwrap_or(0)).unwrap_or(0))
}

/// Drops the entries of `policy` that have left `window` (the window configured now
/// may be shorter than the one they were charged under).
fn evict_policy(conn: &Connection, policy: &str, cutoff: i64) -> rusqlite::Result<()> {
    let units: i64 = conn
        .prepare_cached(
            "SELECT COALESCE(SUM(units), 0) FROM quota_entry WHERE policy = ?1 AND at_us <= ?2",
        )?
        .query_row(params![policy, cutoff], |r| r.get(0))?;
    if units > 0 {
        conn.prepare_cached("UPDATE quota_total SET total = total - ?2 WHERE policy = ?1")?
            .execute(params![policy, units])?;
        conn.prepare_cached("DELETE FROM quota_entry WHERE policy = ?1 AND at_us <= ?2")?
            .execute(params![policy, cutoff])?;
    }
    Ok(())
}

fn edges(
    conn: &Connection,
    policy: &str,
    window: &Window,
    now: i64,
) -> rusqlite::Result<(Option<Duration>, Option<Duration>)> {
    let span = window.at(now);
    let (oldest, newest): (Option<i64>, Option<i64>) = conn
        .prepare_cached(
            "SELECT MIN(at_us), MAX(at_us) FROM quota_entry WHERE policy = ?1 AND at_us > ?2",
        )?
        .query_row(params![policy, span.cutoff_us], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let left = |at: i64| from_micros(span.leaves(at, window) - now);
    Ok((oldest.map(left), newest.map(left)))
}

fn outcomes(
    conn: &Connection,
    budget_key: &str,
    charge: &Charge,
    fits: &[Fit],
    now: i64,
) -> rusqlite::Result<Vec<PartOutcome>> {
    charge
        .parts
        .iter()
        .zip(fits)
        .map(|(p, fit)| {
            let id = policy_id(budget_key, p.kind, &p.policy);
            let (next_free, empty_in) = edges(conn, &id, &p.window, now)?;
            Ok(PartOutcome {
                policy: p.policy.clone(),
                used: total_of(conn, &id)?,
                max: p.max,
                fit: *fit,
                next_free,
                empty_in,
            })
        })
        .collect()
}

fn charge_in(
    conn: &Connection,
    budget_key: &str,
    counting: Option<&Counting>,
    charge: &Charge,
    age: Option<Duration>,
    clock: &dyn Clock,
) -> rusqlite::Result<(Decision, i64)> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    // Read inside the lock, so entries are written in the order of their times.
    let now = clock.now().as_i64();
    if let Some(counting) = counting {
        recount_if_changed(&tx, budget_key, counting, now)?;
        tx.prepare_cached("UPDATE quota_fingerprint SET seen_us = ?2 WHERE budget = ?1")?
            .execute(params![budget_key, now])?;
    }
    evict(&tx, now)?;
    for p in &charge.parts {
        let id = policy_id(budget_key, p.kind, &p.policy);
        evict_policy(&tx, &id, p.window.at(now).cutoff_us)?;
        if let Some(newest) = newest_entry(&tx, &id)?.filter(|at| *at > now) {
            skew::note_clock_went_back(LimiterClock::Host, &p.policy, newest, now);
        }
    }
    let all_fit = vec![Fit::Now; charge.parts.len()];
    let forced = age.is_some();

    if !forced && let Some(until) = blocked_until(&tx, budget_key, &charge.method, now)? {
        let parts = outcomes(&tx, budget_key, charge, &all_fit, now)?;
        tx.commit()?;
        return Ok((model::blocked(charge, parts, from_micros(until - now)), now));
    }

    let mut seen =
        tx.prepare_cached("SELECT 1 FROM quota_entry WHERE policy = ?1 AND member = ?2")?;
    let mut duplicate = false;
    for p in &charge.parts {
        duplicate |= seen.exists(params![policy_id(budget_key, p.kind, &p.policy), charge.id])?;
    }
    drop(seen);
    if duplicate {
        let parts = outcomes(&tx, budget_key, charge, &all_fit, now)?;
        tx.commit()?;
        return Ok((model::decide(charge, parts, true), now));
    }

    let mut fits = Vec::with_capacity(charge.parts.len());
    for p in &charge.parts {
        if forced {
            fits.push(Fit::Now);
            continue;
        }
        let id = policy_id(budget_key, p.kind, &p.policy);
        let used = total_of(&tx, &id)?;
        let mut oldest_first = tx.prepare_cached(
            "SELECT at_us, units FROM quota_entry WHERE policy = ?1 ORDER BY at_us, member",
        )?;
        let entries =
            oldest_first.query_map([&id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
        let entries = entries
            .map_while(Result::ok)
            .map(|(at, u)| (at, u64::try_from(u).unwrap_or(0)));
        fits.push(model::fit_in(entries, used, p.units, p.max, &p.window, now));
    }

    if fits.iter().all(|f| *f == Fit::Now) {
        let at = now - age.map_or(0, micros);
        for p in &charge.parts {
            let span = p.window.at(now);
            if at <= span.cutoff_us {
                continue; // already out of the window: nothing left to count
            }
            let id = policy_id(budget_key, p.kind, &p.policy);
            let leaves = span.leaves(at, &p.window);
            insert_entry(&tx, &id, &charge.id, at, leaves, p.units, &charge.method)?;
        }
        // Every call is logged with its method and calls, kept for the longest window
        // whatever the file in force, to be counted again when the costs change.
        let held_after = now - micros(KEEP);
        if charge.calls > 0 && at > held_after {
            let calls = i64::try_from(charge.calls).unwrap_or(i64::MAX);
            log_call(&tx, budget_key, &charge.id, &charge.method, calls, at)?;
        }
        // Pruned by the time an answer last confirmed, never by a clock that may have
        // jumped ahead; on a file no answer ever confirmed, not at all.
        if let Some(confirmed) = confirmed_at(&tx)? {
            let pruned_after = confirmed.min(now) - micros(KEEP);
            tx.prepare_cached("DELETE FROM quota_log WHERE budget = ?1 AND at_us <= ?2")?
                .execute(params![budget_key, pruned_after])?;
        }
    }
    let parts = outcomes(&tx, budget_key, charge, &fits, now)?;
    tx.commit()?;
    Ok((model::decide(charge, parts, false), now))
}

/// When the newest entry of `policy` was made.
fn newest_entry(conn: &Connection, policy: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT MAX(at_us) FROM quota_entry WHERE policy = ?1")?
        .query_row([policy], |r| r.get(0))
}

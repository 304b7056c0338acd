//! Keeping the lists current as the file grows (docs/schema.md, "Internal"): how stale
//! they are, the new videos appended to them, and a rebuild in full when the changes
//! are many, each reading in a read transaction and taking the write lock only to
//! write.

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::build::compute;
use super::rank::fresh_counts;
use super::{COMMON, has_counts, has_lists};
use crate::store::{Store, StoreError};

/// How stale the lists are: the videos added since they were built in full (whether
/// appended since or not) and the changes since; `None` on a file without them.
pub(crate) fn staleness(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    if !has_lists(conn)? {
        return Ok(None);
    }
    let through = if has_counts(conn)? {
        "ifnull(rebuilt_through, built_through)"
    } else {
        "built_through"
    };
    conn.query_row(
        &format!(
            "SELECT (SELECT count(*) FROM videos
                     WHERE num > ifnull((SELECT {through} FROM best_matches_state), 0))
                    + (SELECT count(*) FROM best_matches_changed)"
        ),
        [],
        |r| r.get(0),
    )
    .map(Some)
}

/// Rows to append, (term, video, occurrences, tokens); the highest num read; the
/// `built_through` they follow.
type Appended = (Vec<(String, i64, i64, i64)>, i64, i64);

/// The kept matches of the videos added since the lists were built, to append: every
/// listed word's matches above `built_through`, with their counts, read as a search
/// reads them. `None` when there is nothing to append.
fn to_append(conn: &Connection) -> rusqlite::Result<Option<Appended>> {
    if !has_counts(conn)? {
        return Ok(None);
    }
    let Some((built_through, newest)) = conn
        .query_row(
            "SELECT built_through, (SELECT ifnull(max(num), 0) FROM videos)
             FROM best_matches_state",
            [],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
        )
        .optional()?
    else {
        return Ok(None);
    };
    if newest <= built_through {
        return Ok(None);
    }
    let terms: Vec<String> = conn
        .prepare("SELECT DISTINCT term FROM best_matches")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut rows = Vec::new();
    let mut stmt = conn.prepare(super::sql::BEST_MATCHES_FRESH)?;
    for term in terms {
        let mut found = stmt.query(params![term, built_through, newest, i64::MAX])?;
        while let Some(row) = found.next()? {
            let (video, (occurrences, tokens)) = fresh_counts(row)?;
            rows.push((term.clone(), video, occurrences, tokens));
        }
    }
    Ok(Some((rows, newest, built_through)))
}

/// Lists older than this many new or changed videos are rebuilt by `prune`: below it,
/// ranking the videos added since costs a few milliseconds.
pub(crate) const STALE: i64 = COMMON;

impl Store {
    /// Rebuilds the best matches of the words in `common` videos or more (`keep` each)
    /// when at least `min_stale` videos were added or changed since they were built,
    /// and at least a twentieth of the file (a year's file: every few weeks). The index is read in a read
    /// transaction, which writers do not wait for; only the swap of the lists takes
    /// the write lock. Returns whether it rebuilt.
    pub(crate) fn refresh_best_matches(
        &self,
        min_stale: i64,
        common: i64,
        keep: usize,
    ) -> Result<bool, StoreError> {
        let context = "rebuilding the best matches of the common words";
        let stale = staleness(&self.conn).map_err(self.err(context))?;
        let videos = self.videos_count()? as i64;
        match stale {
            Some(n) if n > 0 && n >= min_stale && n >= videos / 20 => {}
            _ => return Ok(false),
        }
        let lists = (|| {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)?;
            let lists = compute(&tx, common, keep)?;
            tx.commit()?;
            Ok(lists)
        })()
        .map_err(self.err(context))?;
        (|| {
            let tx = self.write_tx()?;
            lists.write(&tx)?;
            tx.commit()
        })()
        .map_err(self.err(context))?;
        Ok(true)
    }

    /// Appends the videos added since the lists were built to every listed word's kept
    /// matches, with their counts, so that a search need not count them: a second or
    /// two for a day of a year's file, where a rebuild takes half a minute. The lists
    /// grow by the new matches; [`staleness`] still counts them, so a rebuild in full
    /// comes when they are many. Read in a read transaction; only the insert takes the
    /// write lock. Returns how many rows it appended.
    pub(crate) fn append_best_matches(&self) -> Result<usize, StoreError> {
        let context = "adding the new videos to the best matches of the common words";
        let found = (|| {
            let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred)?;
            let found = to_append(&tx)?;
            tx.commit()?;
            Ok(found)
        })()
        .map_err(self.err(context))?;
        let Some((rows, newest, built_through)) = found else {
            return Ok(0);
        };
        (|| {
            let tx = self.write_tx()?;
            // Another writer may have rebuilt or appended meanwhile: then these rows
            // are not the ones that follow its lists.
            let now: Option<i64> = tx
                .query_row("SELECT built_through FROM best_matches_state", [], |r| {
                    r.get(0)
                })
                .optional()?;
            if now != Some(built_through) {
                return Ok(0);
            }
            {
                let mut insert = tx.prepare(
                    "INSERT OR IGNORE INTO best_matches
                         (term, frontier, video, occurrences, tokens)
                     VALUES (?1, 0, ?2, ?3, ?4)",
                )?;
                for (term, video, occurrences, tokens) in &rows {
                    insert.execute(params![term, video, occurrences, tokens])?;
                }
            }
            tx.execute(
                "UPDATE best_matches_state SET built_through = ?1,
                     rebuilt_through = ifnull(rebuilt_through, ?2)",
                params![newest, built_through],
            )?;
            tx.commit()?;
            Ok(rows.len())
        })()
        .map_err(self.err(context))
    }
}

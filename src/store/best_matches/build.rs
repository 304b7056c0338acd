//! Building the lists from the index (docs/schema.md, "Internal"): every common word's
//! best matches and the frontier of the rest, worked out from FTS5's vocabulary and
//! document sizes, then written in place of the old ones. What a migration step and a
//! rebuild by `prune` both run.

use std::collections::HashMap;

use rusqlite::{Connection, params};

use super::WEIGHTS;
use super::rank::{doc_length, share};

/// The lists as computed from the index, to be written by [`Lists::write`].
pub(crate) struct Lists {
    /// The highest video num the index held.
    built_through: i64,
    /// The last change it had seen (`best_matches_changed.seq`).
    seen_changes: i64,
    /// (term, frontier, video, weighted occurrences, tokens).
    rows: Vec<(String, bool, i64, i64, i64)>,
}

/// Writes the lists afresh: every word in at least `common` videos gets its `keep`
/// best matches and the frontier of the rest. Inside the caller's transaction.
pub(crate) fn rebuild(conn: &Connection, common: i64, keep: usize) -> rusqlite::Result<()> {
    compute(conn, common, keep)?.write(conn)
}

/// Reads the index and works the lists out, writing nothing but temporary tables.
pub(crate) fn compute(conn: &Connection, common: i64, keep: usize) -> rusqlite::Result<Lists> {
    conn.execute_batch(
        "DROP TABLE IF EXISTS temp.best_matches_rows;
         DROP TABLE IF EXISTS temp.best_matches_instances;
         CREATE VIRTUAL TABLE temp.best_matches_rows
             USING fts5vocab(main, videos_fts, 'row');
         CREATE VIRTUAL TABLE temp.best_matches_instances
             USING fts5vocab(main, videos_fts, 'instance');",
    )?;
    let (built_through, seen_changes): (i64, i64) = conn.query_row(
        "SELECT (SELECT ifnull(max(num), 0) FROM videos),
                (SELECT ifnull(max(seq), 0) FROM best_matches_changed)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut out = Vec::new();
    let terms: Vec<String> = conn
        .prepare("SELECT term FROM temp.best_matches_rows WHERE doc >= ?1")?
        .query_map([common], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !terms.is_empty() {
        let mut lengths: HashMap<i64, u64> = HashMap::new();
        let mut stmt = conn.prepare("SELECT id, sz FROM videos_fts_docsize")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let sz: Vec<u8> = row.get(1)?;
            lengths.insert(row.get(0)?, doc_length(&sz));
        }
        let avgdl = (lengths.values().sum::<u64>() as f64 / lengths.len().max(1) as f64).max(1.0);
        let columns: HashMap<String, f64> = ["title", "description", "tags_text", "channel_title"]
            .into_iter()
            .map(str::to_string)
            .zip(WEIGHTS)
            .collect();
        let bar = crate::output::progress::Task::new(
            "the best matches of common words",
            terms.len() as u64,
        );
        let mut instances =
            conn.prepare("SELECT doc, col FROM temp.best_matches_instances WHERE term = ?1")?;
        for term in &terms {
            // Weighted occurrences per video, in doc order.
            let mut f: Vec<(i64, f64)> = Vec::new();
            let mut rows = instances.query([term])?;
            while let Some(row) = rows.next()? {
                let doc: i64 = row.get(0)?;
                let col: String = row.get(1)?;
                let w = columns.get(&col).copied().unwrap_or(1.0);
                match f.last_mut() {
                    Some((last, sum)) if *last == doc => *sum += w,
                    _ => f.push((doc, w)),
                }
            }
            let mut scored: Vec<Match> = f
                .into_iter()
                .map(|(doc, f)| {
                    let d = lengths.get(&doc).copied().unwrap_or(0);
                    (share(f, d as f64, avgdl), f, d, doc)
                })
                .collect();
            // Best first; the order only picks which to keep: correctness is checked
            // against the frontier when searching.
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.3.cmp(&b.3)));
            let rest = scored.split_off(scored.len().min(keep));
            let row =
                |frontier: bool, s: &Match| (term.clone(), frontier, s.3, s.1 as i64, s.2 as i64);
            out.extend(scored.iter().map(|s| row(false, s)));
            out.extend(frontier(rest).iter().map(|s| row(true, s)));
            bar.inc(1);
        }
        bar.finish();
    }
    conn.execute_batch(
        "DROP TABLE temp.best_matches_rows;
         DROP TABLE temp.best_matches_instances;",
    )?;
    Ok(Lists {
        built_through,
        seen_changes,
        rows: out,
    })
}

impl Lists {
    /// Replaces the lists with these, forgetting the changes they saw. Inside the
    /// caller's transaction.
    pub(crate) fn write(&self, conn: &Connection) -> rusqlite::Result<()> {
        self.write_as(conn, true)
    }

    /// [`Lists::write`], into step 16's table (no counts) when `counts` is false.
    pub(super) fn write_as(&self, conn: &Connection, counts: bool) -> rusqlite::Result<()> {
        conn.execute("DELETE FROM best_matches", [])?;
        let mut insert = conn.prepare(if counts {
            "INSERT INTO best_matches (term, frontier, video, occurrences, tokens)
             VALUES (?1, ?2, ?3, ?4, ?5)"
        } else {
            "INSERT INTO best_matches (term, frontier, video) VALUES (?1, ?2, ?3)"
        })?;
        for (term, frontier, video, occurrences, tokens) in &self.rows {
            if counts {
                insert.execute(params![
                    term,
                    i64::from(*frontier),
                    video,
                    occurrences,
                    tokens
                ])?;
            } else {
                insert.execute(params![term, i64::from(*frontier), video])?;
            }
        }
        conn.execute(
            if counts {
                "INSERT INTO best_matches_state (one, built_through, rebuilt_through)
                 VALUES (1, ?1, ?1)
                 ON CONFLICT (one) DO UPDATE SET built_through = excluded.built_through,
                                                 rebuilt_through = excluded.rebuilt_through"
            } else {
                "INSERT INTO best_matches_state (one, built_through) VALUES (1, ?1)
                 ON CONFLICT (one) DO UPDATE SET built_through = excluded.built_through"
            },
            [self.built_through],
        )?;
        conn.execute(
            "DELETE FROM best_matches_changed WHERE seq <= ?1",
            [self.seen_changes],
        )?;
        Ok(())
    }
}

/// A match of a word while building: (score, weighted occurrences, tokens, num).
type Match = (f64, f64, u64, i64);

/// The matches that no other beats on both counts: none has more weighted occurrences
/// and no more tokens, or as many occurrences and fewer tokens. Every match ranks at or
/// below one of them.
pub(super) fn frontier(mut rest: Vec<Match>) -> Vec<Match> {
    // Most occurrences first, then shortest.
    rest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
    let mut shortest = u64::MAX;
    let mut out = Vec::new();
    for m in rest {
        if m.2 < shortest {
            shortest = m.2;
            out.push(m);
        }
    }
    out
}

//! The best matches of the common words (schema step 16), so that `search WORD` ranks a
//! few hundred videos instead of every one that holds the word, and still shows what
//! ranking every match by bm25 shows.
//!
//! FTS5 ranks by computing bm25 for every match and sorting: on a year's file the most
//! common word is in every video, and ranking half a million matches to show 20 takes
//! a quarter of a second. For a word alone, bm25 depends on a video through two
//! numbers only: `f`, the word's occurrences weighted by column (title 10, description
//! 1, tags 4, channel 2), and `D`, the video's length in tokens. It grows with `f` and
//! shrinks with `D`, whatever the file's average length and the word's rarity. So a
//! video with no more occurrences and no fewer tokens than another never ranks above
//! it.
//!
//! For every word in at least [`COMMON`] videos, the step keeps, in `best_matches`:
//! - the [`KEEP`] best matches (by bm25 as the file stood), `frontier = 0`;
//! - the frontier of the rest (`frontier = 1`): the matches that no other match of the
//!   rest beats on both `f` and `D`. Every other match of the rest ranks at or below
//!   one of them, whatever the averages become.
//!
//! A search for one word then ranks the kept matches, the frontier, the videos added
//! since (`num` above `best_matches_state.built_through`) and the videos whose text
//! changed since (`best_matches_changed`, kept by triggers on `videos`). If the
//! `limit`-th best of those (in the region, if one is asked for) ranks strictly above
//! every frontier video as built, no other video can be among the first `limit`: the
//! answer is exactly the full ranking's, ties broken by `num` as FTS5's own order
//! breaks them. Otherwise (too few kept matches in the region, a tie at the edge) the
//! search ranks every match, as before.
//!
//! Since step 17 every listed match keeps its `f` and `D` (`occurrences`, `tokens`),
//! and the ranking is computed here ([`outside`]), with no walk of the word's matches:
//! bm25 of a word alone is the word's rarity (a positive factor, the same for every
//! video, that FTS5 gets by counting the word's matches) times [`share`] of `f`, `D`
//! and the average length, which FTS5's averages record holds. [`share`] is FTS5's
//! expression operation for operation, so the shares are FTS5's to the bit, and their
//! order is bm25's, except where the product by the rarity could round two shares
//! into one bm25: shares that close, or too many videos added or changed since to
//! look up one by one, send the search to ranking the candidates with FTS5's own bm25
//! ([`best_in`]), which needs no such care.
//!
//! The lists are derived from the index alone: the step can be killed at any moment
//! (it is one transaction) and rebuilt at will ([`rebuild`]).

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::{Store, StoreError};
use crate::sqlite::{Migration, StepError};

/// A word gets lists when at least this many videos hold it: below it, ranking every
/// match takes a few milliseconds.
pub(crate) const COMMON: i64 = 5_000;

/// The best matches kept per common word: enough for 20 hits of a region that holds a
/// tenth of the videos, with room.
pub(crate) const KEEP: usize = 600;

/// The weights of title, description, tags and channel title in bm25, as search ranks.
pub(crate) const WEIGHTS: [f64; 4] = [10.0, 1.0, 4.0, 2.0];

/// Step 16.
pub(crate) const STEP: Migration = Migration {
    description: "the best matches of the common words, for searches at a year's scale",
    sql: CREATE,
    data: Some(build),
};

/// Step 17: each listed match with its weighted occurrences and length, so that a
/// search ranks the lists without asking FTS5 (see [`outside`]).
pub(crate) const COUNTS: Migration = Migration {
    description: "the occurrences and length of every listed best match, to rank them at once",
    sql: CREATE_COUNTS,
    data: Some(build_counts),
};

const CREATE: &str = "
-- For each common word: its best matches when built (frontier = 0) and the frontier
-- of the rest (frontier = 1). Derived from videos_fts; rebuilt at will.
CREATE TABLE best_matches (
    term     TEXT NOT NULL,
    frontier INTEGER NOT NULL CHECK (frontier IN (0, 1)),
    video    INTEGER NOT NULL,
    PRIMARY KEY (term, frontier, video)
) STRICT, WITHOUT ROWID;

-- The highest video num when the lists were built: videos above it are ranked by
-- every search of a common word.
CREATE TABLE best_matches_state (
    one           INTEGER PRIMARY KEY CHECK (one = 1),
    built_through INTEGER NOT NULL
) STRICT;

-- Videos whose indexed text changed (or that went) since the lists were built, in
-- the order of the changes: a rebuild forgets the changes it read, not later ones.
CREATE TABLE best_matches_changed (
    seq   INTEGER PRIMARY KEY,
    video INTEGER NOT NULL
) STRICT;

CREATE TRIGGER best_matches_after_insert AFTER INSERT ON videos
WHEN new.num <= (SELECT built_through FROM best_matches_state)
BEGIN
    INSERT INTO best_matches_changed (video) VALUES (new.num);
END;

CREATE TRIGGER best_matches_after_delete AFTER DELETE ON videos BEGIN
    INSERT INTO best_matches_changed (video) VALUES (old.num);
END;

CREATE TRIGGER best_matches_after_update AFTER UPDATE ON videos
WHEN old.num IS NOT new.num
  OR old.title IS NOT new.title
  OR old.description IS NOT new.description
  OR old.tags_text IS NOT new.tags_text
  OR old.channel_title IS NOT new.channel_title
BEGIN
    INSERT INTO best_matches_changed (video) VALUES (old.num);
    INSERT INTO best_matches_changed (video) SELECT new.num WHERE new.num IS NOT old.num;
END;
";

const CREATE_COUNTS: &str = "
-- As step 16 made it, plus each match's weighted occurrences of the word (title 10,
-- description 1, tags 4, channel 2) and the video's length in tokens (all columns):
-- what bm25 knows of a video for a word alone. Rebuilt by the step's code.
DROP TABLE best_matches;
CREATE TABLE best_matches (
    term        TEXT NOT NULL,
    frontier    INTEGER NOT NULL CHECK (frontier IN (0, 1)),
    video       INTEGER NOT NULL,
    occurrences INTEGER NOT NULL,
    tokens      INTEGER NOT NULL,
    PRIMARY KEY (term, frontier, video)
) STRICT, WITHOUT ROWID;

-- The highest video num when the lists were last built in full: `prune` appends the
-- videos added since to the kept matches (moving built_through), and rebuilds in full
-- when those and the changes are many.
ALTER TABLE best_matches_state ADD COLUMN rebuilt_through INTEGER;
";

/// Step 16's data: the lists as step 16 shipped them (no counts: its table has no
/// columns for them). Step 17 builds them again with the counts.
fn build(conn: &Connection) -> Result<(), StepError> {
    compute(conn, COMMON, KEEP)?
        .write_as(conn, false)
        .map_err(StepError::from)
}

/// Step 17's data.
fn build_counts(conn: &Connection) -> Result<(), StepError> {
    rebuild(conn, COMMON, KEEP).map_err(StepError::from)
}

/// Reads an SQLite varint (as FTS5 writes them) at `at`; returns it and its length.
fn varint(blob: &[u8], at: usize) -> (u64, usize) {
    let mut value = 0u64;
    for i in 0..9 {
        let Some(&byte) = blob.get(at + i) else {
            return (value, i);
        };
        if i == 8 {
            return ((value << 8) | u64::from(byte), 9);
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return (value, i + 1);
        }
    }
    (value, 9)
}

/// A video's length in tokens, all columns: the sum of its `videos_fts_docsize` row.
fn doc_length(blob: &[u8]) -> u64 {
    let (mut at, mut total) = (0, 0);
    while at < blob.len() {
        let (n, len) = varint(blob, at);
        if len == 0 {
            break;
        }
        total += n;
        at += len;
    }
    total
}

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
    fn write_as(&self, conn: &Connection, counts: bool) -> rusqlite::Result<()> {
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

/// Whether the file has the lists (schema 16 or later).
fn has_lists(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'best_matches_state')",
    )?
    .query_row([], |r| r.get(0))
}

/// Whether the lists hold each match's counts (schema 17 or later; a file read
/// without being upgraded may be older).
fn has_counts(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'best_matches_state')
            AND EXISTS (SELECT 1 FROM pragma_table_info('best_matches')
                        WHERE name = 'occurrences')",
    )?
    .query_row([], |r| r.get(0))
}

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

/// A row of [`super::sql::BEST_MATCHES_FRESH`]: the video, and its weighted
/// occurrences of the word and its length in tokens.
fn fresh_counts(row: &rusqlite::Row) -> rusqlite::Result<(i64, (i64, i64))> {
    let mut per_column = [0i64; COLUMNS];
    for (i, n) in per_column.iter_mut().enumerate() {
        *n = row.get(i + 1)?;
    }
    let sizes: Option<Vec<u8>> = row.get(COLUMNS + 1)?;
    let tokens = sizes.as_deref().map_or(0, doc_length) as i64;
    Ok((row.get(0)?, (weighted(per_column), tokens)))
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

/// A match of a word while building: (score, weighted occurrences, tokens, num).
type Match = (f64, f64, u64, i64);

/// The matches that no other beats on both counts: none has more weighted occurrences
/// and no more tokens, or as many occurrences and fewer tokens. Every match ranks at or
/// below one of them.
fn frontier(mut rest: Vec<Match>) -> Vec<Match> {
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

/// The single word `query` is, as the index spells it, when it is one: ASCII letters
/// and digits only (the tokenizer lowercases them), not an operator.
pub(crate) fn single_word(query: &str) -> Option<String> {
    let word = query.trim();
    let plain = !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric());
    (plain && !matches!(word, "AND" | "OR" | "NOT" | "NEAR")).then(|| word.to_ascii_lowercase())
}

/// One ranked candidate: bm25 (lower ranks first), num, and whether it is in the region.
type Scored = (f64, i64, bool);

/// The first `limit` matches of `word` by bm25 then num, in the region if one is
/// given, from the lists; `None` when the lists cannot prove it (then rank every
/// match).
pub(crate) fn best(
    conn: &Connection,
    word: &str,
    region: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Option<Vec<i64>>> {
    // One snapshot: the lists, the changes and the index as one writer left them, not
    // a rebuild's lists beside the changes it forgot.
    let tx = conn.unchecked_transaction()?;
    let best = match outside(&tx, word, region, limit)? {
        Outside::Proved(nums) => Some(nums),
        Outside::NotListed => None,
        Outside::Unsure => best_in(&tx, word, region, limit)?,
    };
    tx.commit()?;
    Ok(best)
}

/// What ranking the lists outside FTS5 found.
#[derive(Debug, PartialEq)]
pub(crate) enum Outside {
    /// The answer, exactly the full ranking's.
    Proved(Vec<i64>),
    /// The word has no lists: rank every match.
    NotListed,
    /// The lists could not prove it here (too many new or changed videos, a tie
    /// at the edge, scores too close to order without FTS5's own arithmetic, lists
    /// without counts): ask FTS5 to rank the candidates.
    Unsure,
}

/// Videos added since the lists were built that match the word, above this many,
/// [`outside`] leaves to FTS5: counting each one's occurrences (about 13 us each on a
/// year's file) would cost as much as FTS5's walk of the word's matches.
pub(crate) const FRESH_MOST: usize = 2_000;

/// Videos changed since the lists were built, above this many, [`outside`] leaves to
/// FTS5: each is looked up on its own (about 80 us on a year's file).
pub(crate) const CHANGED_MOST: usize = 250;

/// FTS5's average length of a video in tokens, as bm25 computes it: the tokens of
/// every column over the rows, from the averages record (`videos_fts_data` id 1: a
/// varint of the rows, then one per column). `None` for an empty index.
fn average_length(conn: &Connection) -> rusqlite::Result<Option<f64>> {
    let Some(record) = conn
        .prepare_cached(super::sql::FTS_AVERAGES)?
        .query_row([], |r| r.get::<_, Vec<u8>>(0))
        .optional()?
    else {
        return Ok(None);
    };
    let (rows, mut at) = varint(&record, 0);
    let mut tokens: i64 = 0;
    for _ in 0..COLUMNS {
        if at >= record.len() {
            break;
        }
        let (n, len) = varint(&record, at);
        tokens = tokens.wrapping_add(n as i64);
        at += len;
    }
    let rows = rows as i64;
    Ok((rows > 0).then(|| tokens as f64 / rows as f64))
}

/// The columns of `videos_fts`.
const COLUMNS: usize = 4;

/// bm25 of a word alone in a video, less the word's rarity (a positive factor, the
/// same for every video): FTS5's own expression, operation for operation, so that
/// the value is the one FTS5 multiplies by that factor, bit for bit. `occurrences`
/// is the sum of the column weights of the word's occurrences; `tokens` the video's
/// length.
pub(crate) fn share(occurrences: f64, tokens: f64, avgdl: f64) -> f64 {
    let (k1, b) = (1.2, 0.75);
    (occurrences * (k1 + 1.0)) / (occurrences + k1 * (1.0 - b + b * tokens / avgdl))
}

/// Whether two shares differ by so little that FTS5's multiplication by the word's
/// rarity might round them to one bm25 (which it then ties by num), or that the
/// arithmetic of a video never ranked might land on either side: far wider than any
/// rounding (2^-46 of the larger, about 100 units in the last place).
fn too_close(a: f64, b: f64) -> bool {
    a != b && (a - b).abs() <= a.abs().max(b.abs()) * f64::powi(2.0, -46)
}

/// A word's occurrences weighted by column, from occurrences per column.
fn weighted(per_column: [i64; COLUMNS]) -> i64 {
    per_column
        .iter()
        .zip(WEIGHTS)
        .map(|(n, w)| n * w as i64)
        .sum()
}

/// Ranks the lists of `word` with bm25 computed here, from the counts step 17 stores,
/// the counts of the videos added or changed since (looked up one by one, FTS5
/// computing no bm25, which would count every match of the word first) and the
/// averages FTS5 keeps. For a word alone bm25 is the word's rarity, the same for
/// every video, times [`share`]: the order of the shares is the order of bm25, but
/// for shares so close that the product could round them together.
pub(crate) fn outside(
    conn: &Connection,
    word: &str,
    region: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Outside> {
    if !has_counts(conn)? {
        // A file read without being upgraded may have step 16's lists: FTS5 ranks them.
        return Ok(Outside::Unsure);
    }
    let Some(built_through) = conn
        .prepare_cached("SELECT built_through FROM best_matches_state")?
        .query_row([], |r| r.get::<_, i64>(0))
        .optional()?
    else {
        return Ok(Outside::NotListed);
    };
    // (video, occurrences, tokens) as the lists were built.
    let mut listed: Vec<(i64, i64, i64)> = Vec::new();
    let mut front: Vec<(i64, i64)> = Vec::new();
    {
        let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_COUNTS_OF)?;
        let mut rows = stmt.query([word])?;
        while let Some(row) = rows.next()? {
            let (video, occurrences, tokens) = (row.get(1)?, row.get(2)?, row.get(3)?);
            listed.push((video, occurrences, tokens));
            if row.get::<_, i64>(0)? == 1 {
                front.push((occurrences, tokens));
            }
        }
    }
    if listed.len() == front.len() {
        // Not a common word: ranking every match is quick.
        return Ok(Outside::NotListed);
    }
    let Some(avgdl) = average_length(conn)? else {
        return Ok(Outside::Unsure);
    };
    let changed: HashSet<i64> = conn
        .prepare_cached("SELECT DISTINCT video FROM best_matches_changed")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if changed.len() > CHANGED_MOST {
        return Ok(Outside::Unsure);
    }
    // The candidates: the listed videos as built, unless their text changed since,
    // then the videos added since and the changed ones as they are now.
    let mut candidates: HashMap<i64, (i64, i64)> = listed
        .into_iter()
        .filter(|(video, _, _)| !changed.contains(video))
        .map(|(video, occurrences, tokens)| (video, (occurrences, tokens)))
        .collect();
    let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_FRESH)?;
    {
        let mut rows = stmt.query(params![
            word,
            built_through,
            i64::MAX,
            FRESH_MOST as i64 + 1
        ])?;
        let mut added = 0;
        while let Some(row) = rows.next()? {
            added += 1;
            if added > FRESH_MOST {
                return Ok(Outside::Unsure);
            }
            let (video, counts) = fresh_counts(row)?;
            candidates.insert(video, counts);
        }
    }
    for &video in &changed {
        let now = stmt
            .query_row(params![word, video - 1, video, 1], fresh_counts)
            .optional()?;
        if let Some((video, counts)) = now {
            candidates.insert(video, counts);
        }
    }
    // Every video outside the candidates matched the word when the lists were built,
    // has not changed since, and ranked below the kept ones and at or below a video of
    // the frontier as built: its share is at most the frontier's best.
    let bound = front
        .iter()
        .map(|&(occurrences, tokens)| share(occurrences as f64, tokens as f64, avgdl))
        .max_by(f64::total_cmp);
    let mut ranked: Vec<(f64, i64)> = candidates
        .into_iter()
        .map(|(video, (occurrences, tokens))| {
            (share(occurrences as f64, tokens as f64, avgdl), video)
        })
        .collect();
    // Best first; equal shares make equal bm25, which FTS5 orders by num.
    ranked.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let limit = limit as usize;
    if limit == 0 {
        return Ok(Outside::Proved(Vec::new()));
    }
    // The first `limit` shown and the one after, whose order against the last shown
    // decides the edge.
    let mut shown: Vec<(f64, i64)> = Vec::with_capacity(limit + 1);
    {
        let mut in_region = conn.prepare_cached(super::sql::VIDEO_IN_REGION)?;
        for &(q, video) in &ranked {
            if shown.len() > limit {
                break;
            }
            let seen = match region {
                None => true,
                Some(code) => in_region.query_row(params![video, code], |r| r.get(0))?,
            };
            if seen {
                shown.push((q, video));
            }
        }
    }
    if shown.windows(2).any(|w| too_close(w[0].0, w[1].0)) {
        return Ok(Outside::Unsure);
    }
    if let Some(bound) = bound {
        // A video outside could rank among the first `limit` unless the last of them
        // ranks clearly above the frontier's best.
        let Some(&(last, _)) = shown.get(limit - 1) else {
            return Ok(Outside::Unsure);
        };
        if last <= bound || too_close(last, bound) {
            return Ok(Outside::Unsure);
        }
    }
    shown.truncate(limit);
    Ok(Outside::Proved(shown.into_iter().map(|s| s.1).collect()))
}

fn best_in(
    conn: &Connection,
    word: &str,
    region: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Option<Vec<i64>>> {
    if !has_lists(conn)? {
        return Ok(None);
    }
    let Some(built_through) = conn
        .prepare_cached("SELECT built_through FROM best_matches_state")?
        .query_row([], |r| r.get::<_, i64>(0))
        .optional()?
    else {
        return Ok(None);
    };
    let mut kept = Vec::new();
    let mut front = Vec::new();
    {
        let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_OF)?;
        let mut rows = stmt.query([word])?;
        while let Some(row) = rows.next()? {
            let video: i64 = row.get(1)?;
            if row.get::<_, i64>(0)? == 0 {
                kept.push(video);
            } else {
                front.push(video);
            }
        }
    }
    if kept.is_empty() {
        // Not a common word: ranking every match is quick.
        return Ok(None);
    }
    let changed: Vec<i64> = conn
        .prepare_cached("SELECT DISTINCT video FROM best_matches_changed")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let changed_set: HashSet<i64> = changed.iter().copied().collect();
    if front.iter().any(|v| changed_set.contains(v)) {
        return Ok(None);
    }
    let front_set: HashSet<i64> = front.iter().copied().collect();
    let mut candidates: Vec<i64> = kept;
    candidates.extend(&front);
    candidates.extend(changed.iter().filter(|v| !front_set.contains(v)));
    candidates.sort_unstable();
    candidates.dedup();
    let ids = serde_json::Value::from(candidates).to_string();
    let mut scored: Vec<Scored> = Vec::new();
    {
        let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_SCORE)?;
        let mut rows = stmt.query(params![word, ids, region, built_through])?;
        while let Some(row) = rows.next()? {
            scored.push((row.get(1)?, row.get(0)?, row.get(2)?));
        }
    }
    // The best a video outside the candidates can rank: its frontier's best.
    let bound = scored
        .iter()
        .filter(|s| front_set.contains(&s.1))
        .map(|s| s.0)
        .min_by(f64::total_cmp);
    if bound.is_none() && !front.is_empty() {
        // A frontier video no longer matches: it changed, so the lists are stale.
        return Ok(None);
    }
    let mut shown: Vec<Scored> = scored.into_iter().filter(|s| s.2).collect();
    shown.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let limit = limit as usize;
    match bound {
        // Every match is a candidate.
        None => {}
        Some(bound) => {
            if shown.len() < limit || limit == 0 && shown.is_empty() {
                return Ok(None);
            }
            if limit > 0 && shown[limit - 1].0 >= bound {
                return Ok(None);
            }
        }
    }
    shown.truncate(limit);
    Ok(Some(shown.into_iter().map(|s| s.1).collect()))
}

#[cfg(test)]
mod tests;

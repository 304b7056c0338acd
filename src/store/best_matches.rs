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
//!
//! The module is in parts: the migration steps here, the building of the lists
//! (`build`), their upkeep as the file grows (`upkeep`), the search with them
//! (`query`) and the arithmetic of bm25 they rely on (`rank`).
//!
//! [`outside`]: query::outside
//! [`share`]: rank::share
//! [`best_in`]: query::best_in

mod build;
mod query;
mod rank;
mod upkeep;

use rusqlite::Connection;

pub(crate) use build::{compute, rebuild};
pub(crate) use query::{best, single_word};
pub(crate) use upkeep::STALE;

use crate::sqlite::{Migration, StepError};
// The parts name the store's queries as `super::sql`, as the code did in one file.
use super::sql;

// What the tests (`super::*`) reach in the parts.
#[cfg(test)]
use {
    build::frontier,
    query::{CHANGED_MOST, FRESH_MOST, Outside, outside},
    rank::{average_length, doc_length, share, too_close, weighted},
    rusqlite::params,
    upkeep::staleness,
};

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
/// search ranks the lists without asking FTS5 (see [`outside`](query::outside)).
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

/// The columns of `videos_fts`.
const COLUMNS: usize = 4;

#[cfg(test)]
mod tests;

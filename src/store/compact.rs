//! The compact snapshot layout (schema step 3) and the upgrade that moves a version 1
//! database into it.
//!
//! Years of hourly snapshots are almost all chart places, so those rows are what must
//! be small: one row per fetch of a chart (`fetches`: run, region, which list, when),
//! and one row of integers per place in it (`places`: fetch, rank, video number,
//! counts). Text (run ids, region codes, search names, video ids) is stored once and
//! referred to by integer. The old tables' names live on as views, so SQL written for
//! version 1 (and an analyst's sqlite3 session) still reads the same rows.
//!
//! Indexes exist only for the reads the product makes:
//! - a chart at a time and the newest fetch of a chart: `fetches_by_chart_time`;
//! - a chart's places: the primary key of `places`;
//! - a video's rank and count history: `places_by_video`;
//! - a video's regions and a region's videos (`search --region`): `video_regions`,
//!   a summary the write path keeps up to date, so a search never reads the snapshots.

use std::collections::{BTreeSet, HashMap};

use rusqlite::{Connection, OptionalExtension, params};

/// Creates the new tables beside the version 1 ones, which the data step then empties
/// into them and drops ([`FINISH`]).
pub(crate) const CREATE: &str = r#"
CREATE TABLE regions (
    num  INTEGER PRIMARY KEY,
    code TEXT NOT NULL UNIQUE
) STRICT;

-- An integer for each run id; `runs` keeps its text key for everything else.
CREATE TABLE run_nums (
    num    INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE REFERENCES runs (run_id)
) STRICT;

-- A region's configured search, by name.
CREATE TABLE searches (
    num    INTEGER PRIMARY KEY,
    region INTEGER NOT NULL REFERENCES regions (num),
    name   TEXT NOT NULL,
    UNIQUE (region, name)
) STRICT;

-- One fetch of one list of one region in one run: the trending chart (`search` = 0)
-- or a configured search (`search` = searches.num). `fetched_at` is when its first
-- stored page arrived.
CREATE TABLE fetches (
    num        INTEGER PRIMARY KEY,
    run        INTEGER NOT NULL REFERENCES run_nums (num),
    region     INTEGER NOT NULL REFERENCES regions (num),
    search     INTEGER NOT NULL,
    fetched_at INTEGER NOT NULL,
    UNIQUE (run, region, search)
) STRICT;
CREATE INDEX fetches_by_chart_time ON fetches (region, search, fetched_at);

-- One video's place in one fetch, with the counts that fetch saw (NULL = hidden or
-- absent upstream, never 0 in its place). `offset_s` is how many seconds after the
-- fetch's first page this place's page was stored (pages of one fetch arrive
-- seconds apart), so every place keeps its exact time in one byte or two.
CREATE TABLE places (
    fetch    INTEGER NOT NULL REFERENCES fetches (num) ON DELETE CASCADE,
    rank     INTEGER NOT NULL CHECK (rank >= 1),
    video    INTEGER NOT NULL REFERENCES videos (num) ON DELETE CASCADE,
    offset_s INTEGER NOT NULL,
    views    INTEGER,
    likes    INTEGER,
    comments INTEGER,
    PRIMARY KEY (fetch, rank)
) STRICT, WITHOUT ROWID;

-- Counts a version 1 database held beyond its places: a page stored twice in one run
-- (a retry) left two count rows for one place. Kept so the upgrade loses nothing;
-- the compact write path replaces a re-stored place instead.
CREATE TABLE extra_counts (
    video      INTEGER NOT NULL REFERENCES videos (num) ON DELETE CASCADE,
    run        INTEGER NOT NULL REFERENCES run_nums (num),
    fetched_at INTEGER NOT NULL,
    views      INTEGER,
    likes      INTEGER,
    comments   INTEGER
) STRICT;
CREATE INDEX extra_counts_by_video ON extra_counts (video, fetched_at);

-- Where each video has been seen (a trending chart or a search), kept up to date by
-- the write path and by prune: `search --region` and the regions of a hit read this
-- instead of the snapshots.
CREATE TABLE video_regions (
    video  INTEGER NOT NULL REFERENCES videos (num) ON DELETE CASCADE,
    region INTEGER NOT NULL REFERENCES regions (num),
    PRIMARY KEY (video, region)
) STRICT, WITHOUT ROWID;
CREATE INDEX video_regions_by_region ON video_regions (region, video);

-- Small facts about the file itself, e.g. that a VACUUM is owed after the upgrade.
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;
"#;

/// Once the data moved: the version 1 tables go, their names come back as views, and
/// the video index is built in one sorted pass instead of row by row.
const FINISH: &str = r#"
DROP TABLE trending;
DROP TABLE search_results;
DROP TABLE video_stats;
-- No read of the product looks videos up by channel.
DROP INDEX videos_by_channel;

CREATE INDEX places_by_video ON places (video, fetch);

CREATE VIEW trending (run_id, region, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, p.rank, v.id, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.search = 0;

CREATE VIEW search_results (run_id, region, search_name, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, s.name, p.rank, v.id, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN searches AS s ON s.num = f.search
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video;

CREATE VIEW video_stats (video_id, fetched_at, run_id, view_count, like_count, comment_count) AS
SELECT v.id, f.fetched_at + p.offset_s, r.run_id, p.views, p.likes, p.comments
FROM places AS p
JOIN fetches AS f ON f.num = p.fetch
JOIN run_nums AS r ON r.num = f.run
JOIN videos AS v ON v.num = p.video
UNION ALL
SELECT v.id, e.fetched_at, r.run_id, e.views, e.likes, e.comments
FROM extra_counts AS e
JOIN run_nums AS r ON r.num = e.run
JOIN videos AS v ON v.num = e.video;
"#;

/// The `store_meta` key saying the file should be vacuumed (the upgrade leaves the
/// old tables' pages free inside the file).
pub(crate) const VACUUM_PENDING: &str = "vacuum_pending";

/// Moves a version 1 database's snapshots into the compact tables, inside the
/// migration's transaction: a kill at any moment rolls all of it back, and the next
/// open starts over from version 1.
///
/// Every trending and search row becomes a place; each takes its counts from the
/// version 1 stats row written with it (same video, run and time); stats rows left
/// over (pages stored twice in a run) go to `extra_counts`. Nothing is dropped.
pub(crate) fn migrate_from_v1(conn: &Connection) -> rusqlite::Result<()> {
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
    let total =
        count("SELECT count(*) FROM trending")? + count("SELECT count(*) FROM search_results")?;
    let bar = crate::output::progress::Task::new("upgrading the database", total.max(0) as u64);

    conn.execute(
        "INSERT INTO run_nums (run_id) SELECT run_id FROM runs ORDER BY started_at, rowid",
        [],
    )?;
    let mut mover = Mover::new(conn)?;
    mover.copy(
        conn,
        "SELECT t.run_id, t.region, NULL, t.rank, v.num, t.fetched_at, t.video_id
         FROM trending AS t JOIN videos AS v ON v.id = t.video_id
         ORDER BY t.run_id, t.region, t.rank",
        &bar,
    )?;
    mover.copy(
        conn,
        "SELECT s.run_id, s.region, s.search_name, s.rank, v.num, s.fetched_at, s.video_id
         FROM search_results AS s JOIN videos AS v ON v.id = s.video_id
         ORDER BY s.run_id, s.region, s.search_name, s.rank",
        &bar,
    )?;
    mover.extra_counts(conn)?;
    {
        let mut insert =
            conn.prepare("INSERT INTO video_regions (video, region) VALUES (?1, ?2)")?;
        for (video, region) in &mover.seen {
            insert.execute([video, region])?;
        }
    }
    conn.execute_batch(FINISH)?;
    if total > 0 {
        conn.execute(
            "INSERT INTO store_meta (key, value) VALUES (?1, 'after the compact upgrade')",
            [VACUUM_PENDING],
        )?;
    }
    bar.finish();
    Ok(())
}

/// State of the copy: integer keys handed out so far and which stats rows found
/// their place.
struct Mover {
    runs: HashMap<String, i64>,
    regions: HashMap<String, i64>,
    searches: HashMap<(i64, String), i64>,
    /// One bit per version 1 stats rowid, set when a place took that row's counts.
    used: Vec<u64>,
    /// (video, region) pairs seen, for `video_regions`.
    seen: BTreeSet<(i64, i64)>,
}

impl Mover {
    fn new(conn: &Connection) -> rusqlite::Result<Mover> {
        let runs = {
            let mut stmt = conn.prepare("SELECT run_id, num FROM run_nums")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<HashMap<String, i64>>>()?
        };
        let max_rowid: i64 =
            conn.query_row("SELECT ifnull(max(rowid), 0) FROM video_stats", [], |r| {
                r.get(0)
            })?;
        Ok(Mover {
            runs,
            regions: HashMap::new(),
            searches: HashMap::new(),
            used: vec![0; (max_rowid.max(0) as usize) / 64 + 1],
            seen: BTreeSet::new(),
        })
    }

    fn region(&mut self, conn: &Connection, code: &str) -> rusqlite::Result<i64> {
        if let Some(&num) = self.regions.get(code) {
            return Ok(num);
        }
        let num = region_num(conn, code)?;
        self.regions.insert(code.to_string(), num);
        Ok(num)
    }

    fn search(&mut self, conn: &Connection, region: i64, name: &str) -> rusqlite::Result<i64> {
        if let Some(&num) = self.searches.get(&(region, name.to_string())) {
            return Ok(num);
        }
        let num = search_num(conn, region, name)?;
        self.searches.insert((region, name.to_string()), num);
        Ok(num)
    }

    /// Copies the rows `select` yields — (run id, region, search name or NULL, rank,
    /// video num, fetched_at, video id), grouped by fetch — into fetches and places.
    fn copy(
        &mut self,
        conn: &Connection,
        select: &str,
        bar: &crate::output::progress::Task,
    ) -> rusqlite::Result<()> {
        let mut rows_stmt = conn.prepare(select)?;
        let mut stats = conn.prepare(
            "SELECT rowid, view_count, like_count, comment_count FROM video_stats
             WHERE video_id = ?1 AND fetched_at = ?2 AND run_id = ?3 ORDER BY rowid",
        )?;
        let mut new_fetch = conn.prepare(
            "INSERT INTO fetches (run, region, search, fetched_at) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut place = conn.prepare(
            "INSERT INTO places (fetch, rank, video, offset_s, views, likes, comments)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        let mut rows = rows_stmt.query([])?;
        // The fetch being copied: (run id, region, search name), its num, its start
        // and its region's num.
        let mut current: Option<(String, String, Option<String>, i64, i64, i64)> = None;
        let mut done = 0u64;
        while let Some(row) = rows.next()? {
            let run_id: String = row.get(0)?;
            let region: String = row.get(1)?;
            let search_name: Option<String> = row.get(2)?;
            let rank: i64 = row.get(3)?;
            let video: i64 = row.get(4)?;
            let fetched_at: i64 = row.get(5)?;
            let video_id: String = row.get(6)?;
            let same = matches!(&current, Some((r, g, s, ..))
                if *r == run_id && *g == region && *s == search_name);
            if !same {
                let run = match self.runs.get(&run_id) {
                    Some(&num) => num,
                    // Version 1 refers to runs by foreign key, so this is only a
                    // safeguard against a file written with foreign keys off.
                    None => {
                        conn.execute("INSERT INTO run_nums (run_id) VALUES (?1)", [&run_id])?;
                        let num = conn.last_insert_rowid();
                        self.runs.insert(run_id.clone(), num);
                        num
                    }
                };
                let region_num = self.region(conn, &region)?;
                let search = match &search_name {
                    Some(name) => self.search(conn, region_num, name)?,
                    None => 0,
                };
                new_fetch.execute(params![run, region_num, search, fetched_at])?;
                let num = conn.last_insert_rowid();
                current = Some((
                    run_id.clone(),
                    region,
                    search_name,
                    num,
                    fetched_at,
                    region_num,
                ));
            }
            let (fetch, start, region_num) = match &current {
                Some((.., fetch, start, region)) => (*fetch, *start, *region),
                None => continue,
            };
            let mut counts: (Option<i64>, Option<i64>, Option<i64>) = (None, None, None);
            {
                let mut found = stats.query(params![video_id, fetched_at, run_id])?;
                while let Some(s) = found.next()? {
                    let rowid: i64 = s.get(0)?;
                    let (word, bit) = ((rowid.max(0) as usize) / 64, rowid.max(0) % 64);
                    if self.used.get(word).is_some_and(|w| w & (1 << bit) == 0) {
                        self.used[word] |= 1 << bit;
                        counts = (s.get(1)?, s.get(2)?, s.get(3)?);
                        break;
                    }
                }
            }
            place.execute(params![
                fetch,
                rank,
                video,
                fetched_at - start,
                counts.0,
                counts.1,
                counts.2
            ])?;
            self.seen.insert((video, region_num));
            done += 1;
            if done.is_multiple_of(8192) {
                bar.inc(8192);
            }
        }
        bar.inc(done % 8192);
        Ok(())
    }

    /// Stats rows no place took: kept in `extra_counts`.
    fn extra_counts(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        let mut scan = conn.prepare(
            "SELECT s.rowid, v.num, r.num, s.fetched_at, s.view_count, s.like_count, s.comment_count
             FROM video_stats AS s
             JOIN videos AS v ON v.id = s.video_id
             JOIN run_nums AS r ON r.run_id = s.run_id",
        )?;
        let mut insert = conn.prepare(
            "INSERT INTO extra_counts (video, run, fetched_at, views, likes, comments)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let mut rows = scan.query([])?;
        while let Some(row) = rows.next()? {
            let rowid: i64 = row.get(0)?;
            let (word, bit) = ((rowid.max(0) as usize) / 64, rowid.max(0) % 64);
            if self.used.get(word).is_some_and(|w| w & (1 << bit) != 0) {
                continue;
            }
            insert.execute(params![
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, Option<i64>>(4)?,
                row.get::<_, Option<i64>>(5)?,
                row.get::<_, Option<i64>>(6)?,
            ])?;
        }
        Ok(())
    }
}

/// The integer of region `code`, created on first use.
pub(crate) fn region_num(conn: &Connection, code: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached("INSERT INTO regions (code) VALUES (?1) ON CONFLICT (code) DO NOTHING")?
        .execute([code])?;
    conn.prepare_cached("SELECT num FROM regions WHERE code = ?1")?
        .query_row([code], |r| r.get(0))
}

/// The integer of `region`'s search `name`, created on first use.
pub(crate) fn search_num(conn: &Connection, region: i64, name: &str) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO searches (region, name) VALUES (?1, ?2) ON CONFLICT (region, name) DO NOTHING",
    )?
    .execute(params![region, name])?;
    conn.prepare_cached("SELECT num FROM searches WHERE region = ?1 AND name = ?2")?
        .query_row(params![region, name], |r| r.get(0))
}

/// The integer of `run_id`, created on first use (runs begun before the upgrade have
/// theirs from it).
pub(crate) fn run_num(conn: &Connection, run_id: &str) -> rusqlite::Result<i64> {
    let found: Option<i64> = conn
        .prepare_cached("SELECT num FROM run_nums WHERE run_id = ?1")?
        .query_row([run_id], |r| r.get(0))
        .optional()?;
    match found {
        Some(num) => Ok(num),
        None => {
            conn.prepare_cached("INSERT INTO run_nums (run_id) VALUES (?1)")?
                .execute([run_id])?;
            Ok(conn.last_insert_rowid())
        }
    }
}

#[cfg(test)]
mod tests;

//! The charts bench's fast writer: bulk SQL into a file the product's `Store` created,
//! leaving what the product's write path leaves.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, params};
use trendsync::store::{Store, VideoRecord};

use super::simulation::{Counts, RunEnd, Sink};
use crate::Res;

/// Writes what the product's write path leaves, with prepared statements in one
/// transaction a day; the per-video rows that every place updates (`videos`' latest
/// counts, `follow_state`, `region_state`) are kept in memory and written at the end.
pub(crate) struct Bulk {
    conn: Connection,
    /// Records made but not yet placed, by idx.
    pending: HashMap<usize, VideoRecord>,
    /// Per video num (index num - 1): first seen (chart), last seen (chart), latest counts.
    videos: Vec<(i64, i64, Counts)>,
    regions: HashMap<String, i64>,
    runs: HashMap<String, i64>,
    fetch: Option<(String, String, u32, i64, i64)>,
    seen: HashSet<(i64, i64)>,
    follow_state: Vec<(i64, i64)>,
    region_state: HashMap<String, i64>,
    categories_at: HashMap<String, i64>,
    call_totals: HashMap<String, u64>,
}

pub(crate) const CATEGORIES: &[(&str, &str)] = &[
    ("1", "Film & Animation"),
    ("10", "Music"),
    ("17", "Sports"),
    ("20", "Gaming"),
    ("22", "People & Blogs"),
    ("24", "Entertainment"),
    ("25", "News & Politics"),
    ("28", "Science & Technology"),
];

impl Bulk {
    pub(crate) fn new(path: &Path) -> Res<Bulk> {
        drop(Store::open(path)?);
        let conn = Connection::open(path)?;
        // A fixture: no crash safety needed while it is written.
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -1000000;
             PRAGMA foreign_keys = OFF; BEGIN;",
        )?;
        Ok(Bulk {
            conn,
            pending: HashMap::new(),
            videos: Vec::new(),
            regions: HashMap::new(),
            runs: HashMap::new(),
            fetch: None,
            seen: HashSet::new(),
            follow_state: Vec::new(),
            region_state: HashMap::new(),
            categories_at: HashMap::new(),
            call_totals: HashMap::new(),
        })
    }

    fn region(&mut self, code: &str) -> Res<i64> {
        if let Some(&n) = self.regions.get(code) {
            return Ok(n);
        }
        let n = self.regions.len() as i64 + 1;
        self.conn
            .prepare_cached("INSERT INTO regions (num, code) VALUES (?1, ?2)")?
            .execute(params![n, code])?;
        self.regions.insert(code.into(), n);
        Ok(n)
    }

    fn insert_video(&mut self, num: i64, v: &VideoRecord, at: i64, c: Counts) -> Res<()> {
        let tags = v.tags.as_ref().map(serde_json::to_string).transpose()?;
        let tags_text = v.tags.as_ref().map(|t| t.join(" "));
        self.conn
            .prepare_cached(
                "INSERT INTO videos (num, id, title, description, channel_id, channel_title,
                     published_at, category_id, tags, tags_text, default_language,
                     default_audio_language, duration_s, live_broadcast_content, thumbnail_url,
                     region_restriction, view_count, like_count, comment_count, first_seen_at,
                     last_seen_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, NULL,
                         ?16, ?17, ?18, ?19, ?19)",
            )?
            .execute(params![
                num,
                v.id,
                v.title,
                v.description,
                v.channel_id,
                v.channel_title,
                v.published_at,
                v.category_id,
                tags,
                tags_text,
                v.default_language,
                v.default_audio_language,
                v.duration_s,
                v.live_broadcast_content,
                v.thumbnail_url,
                c.0,
                c.1,
                c.2,
                at
            ])?;
        Ok(())
    }
}

impl Sink for Bulk {
    fn new_video(&mut self, idx: usize, record: VideoRecord) -> Res<()> {
        self.pending.insert(idx, record);
        Ok(())
    }

    fn categories(&mut self, region: &str, at: i64) -> Res<()> {
        for (id, title) in CATEGORIES {
            self.conn
                .prepare_cached(
                    "INSERT INTO categories (region, id, title, fetched_at) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![region, id, title, at])?;
        }
        self.categories_at.insert(region.into(), at);
        Ok(())
    }

    fn begin_run(&mut self, run_id: &str, _region: &str, at: i64) -> Res<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO runs (run_id, kind, started_at, status) VALUES (?1, 'run', ?2, 'running')",
            )?
            .execute(params![run_id, at])?;
        Ok(())
    }

    fn page(
        &mut self,
        run_id: &str,
        region: &str,
        chart: u32,
        first_rank: u32,
        videos: &[(usize, i64, Counts)],
        fetched_at: i64,
    ) -> Res<()> {
        let region_num = self.region(region)?;
        let run = match self.runs.get(run_id) {
            Some(&n) => n,
            None => {
                let n = self.runs.len() as i64 + 1;
                self.conn
                    .prepare_cached("INSERT INTO run_nums (num, run_id) VALUES (?1, ?2)")?
                    .execute(params![n, run_id])?;
                self.runs.insert(run_id.into(), n);
                n
            }
        };
        let same =
            matches!(&self.fetch, Some((r, g, c, ..)) if r == run_id && g == region && *c == chart);
        if !same {
            self.conn
                .prepare_cached(
                    "INSERT INTO fetches (run, region, search, chart, fetched_at)
                     VALUES (?1, ?2, 0, ?3, ?4)",
                )?
                .execute(params![run, region_num, chart, fetched_at])?;
            let num = self.conn.last_insert_rowid();
            self.fetch = Some((run_id.into(), region.into(), chart, num, fetched_at));
        }
        let (fetch, start) = match &self.fetch {
            Some((.., num, start)) => (*num, *start),
            None => return Err("no fetch".into()),
        };
        for (i, &(idx, num, c)) in videos.iter().enumerate() {
            let slot = (num - 1) as usize;
            if slot == self.videos.len() {
                let record = self.pending.remove(&idx).ok_or("a video placed twice")?;
                self.insert_video(num, &record, fetched_at, c)?;
                self.videos.push((fetched_at, fetched_at, c));
                self.follow_state.push((fetched_at, fetched_at));
            }
            self.videos[slot].1 = fetched_at;
            self.videos[slot].2 = c;
            let state = &mut self.follow_state[slot];
            *state = (fetched_at, state.1.max(fetched_at));
            self.conn
                .prepare_cached(
                    "INSERT INTO places (fetch, rank, video, offset_s, views, likes, comments)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?
                .execute(params![
                    fetch,
                    i64::from(first_rank) + i as i64,
                    num,
                    fetched_at - start,
                    c.0,
                    c.1,
                    c.2
                ])?;
            if self.seen.insert((num, region_num)) {
                self.conn
                    .prepare_cached("INSERT INTO video_regions (video, region) VALUES (?1, ?2)")?
                    .execute(params![num, region_num])?;
            }
        }
        Ok(())
    }

    fn follow(&mut self, asked: &[(usize, i64, Counts)], at: i64) -> Res<()> {
        for &(_, num, c) in asked {
            self.conn
                .prepare_cached(
                    "INSERT INTO follow_counts (video, at, views, likes, comments)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![num, at, c.0, c.1, c.2])?;
            let slot = (num - 1) as usize;
            self.videos[slot].2 = c;
            self.follow_state[slot].1 = at;
        }
        Ok(())
    }

    fn end_run(&mut self, run_id: &str, region: &str, end: &RunEnd) -> Res<()> {
        let units = end.units() as i64;
        self.conn
            .prepare_cached(
                "UPDATE runs SET ended_at = ?2, status = 'complete', units = ?3, calls = ?3,
                 duration_us = ?4 WHERE run_id = ?1",
            )?
            .execute(params![run_id, end.at, units, end.duration_us() as i64])?;
        self.conn
            .prepare_cached(
                "INSERT INTO run_regions (run_id, region, started_at, status, pages, videos, units)
                 VALUES (?1, ?2, (SELECT started_at FROM runs WHERE run_id = ?1), 'complete',
                         ?3, ?4, ?5)",
            )?
            .execute(params![
                run_id,
                region,
                end.pages as i64,
                end.videos as i64,
                units
            ])?;
        for c in end.calls().iter().filter(|c| c.calls > 0) {
            self.conn
                .prepare_cached(
                    "INSERT INTO run_calls (run_id, method, outcome, calls) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![run_id, c.method, c.outcome, c.calls as i64])?;
            *self.call_totals.entry(c.method.clone()).or_default() += c.calls;
        }
        self.region_state.insert(region.into(), end.at);
        Ok(())
    }

    fn day_done(&mut self) -> Res<()> {
        self.conn.execute_batch("COMMIT; BEGIN")?;
        Ok(())
    }

    fn finish(&mut self) -> Res<()> {
        for (slot, &(_, last_seen, c)) in self.videos.iter().enumerate() {
            self.conn
                .prepare_cached(
                    "UPDATE videos SET view_count = ?2, like_count = ?3, comment_count = ?4,
                         last_seen_at = ?5
                     WHERE num = ?1",
                )?
                .execute(params![slot as i64 + 1, c.0, c.1, c.2, last_seen])?;
        }
        for (slot, &(charted, counted)) in self.follow_state.iter().enumerate() {
            self.conn
                .prepare_cached(
                    "INSERT INTO follow_state (video, charted_at, counted_at) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![slot as i64 + 1, charted, counted])?;
        }
        for (region, at) in &self.region_state {
            self.conn
                .prepare_cached(
                    "INSERT INTO region_state (region, last_complete_at, last_attempt_at,
                         last_status, categories_fetched_at)
                     VALUES (?1, ?2, ?2, 'complete', ?3)",
                )?
                .execute(params![region, at, self.categories_at.get(region)])?;
        }
        for (method, calls) in &self.call_totals {
            self.conn
                .prepare_cached(
                    "INSERT INTO call_totals (method, outcome, calls) VALUES (?1, 'ok', ?2)",
                )?
                .execute(params![method, *calls as i64])?;
        }
        self.conn
            .execute_batch("COMMIT; PRAGMA journal_mode = WAL;")?;
        Ok(())
    }
}

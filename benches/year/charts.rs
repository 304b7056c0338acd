//! Issue 18's year, in today's layout: 8 regions, each with its overall chart and two
//! category charts (Sports and News, each its own videos), one run per region per hour,
//! and follow-ups of every video on a chart in the last 7 days, none more often than
//! every 6 hours (`[follow] days = 7, every = "6h"`).
//!
//! ```text
//! cargo bench --bench year -- charts-generate DIR [--days N]   # DIR/charts.db
//! cargo bench --bench year -- charts-check DIR                 # bulk SQL = the Store API?
//! cargo bench --bench year -- charts-measure DIR [--binary PATH] [--no-export]
//! ```
//!
//! One simulation drives two writers: bulk SQL (prepared statements in day-long
//! transactions, what `charts-generate` uses) and the product's own `Store` API, call
//! for call as a run makes them (`charts-check` writes two days both ways and
//! compares every table but the full-text index's, row by row). `charts-measure` reads
//! the bytes per snapshot row off `dbstat`, times the release binary's `video ID` and
//! takes the peak RSS of `export --per day` over one month and over the whole file.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::{Connection, params};
use trendsync::clock::{Clock, SystemClock};
use trendsync::region_status::{CallOutcome, RegionStatus};
use trendsync::store::{
    CallCount, FollowCounts, RegionOutcome, RunKind, RunOutcome, Store, VideoRecord,
};

use super::{
    RANKS, REGIONS, Res, Synth, Words, counts, file_size, mb, median, ms, new_video, run_with_rss,
};

/// The overall chart (0) and the two categories every region follows.
const CHARTS: [u32; 3] = [0, 17, 25];
const PAGE: usize = 50;
const NEW_PER_CHART_PER_DAY: f64 = 60.0;
const FOLLOW_DAYS_S: i64 = 7 * 86_400;
const FOLLOW_EVERY_S: i64 = 6 * 3600;
/// Seconds after a run's start at which its follow-ups are stored: after its
/// 3 charts × 4 pages, one a second.
const FOLLOW_AFTER_S: i64 = 12;

type Counts = (i64, Option<i64>, Option<i64>);

/// What a run writes, in the order it writes it; implemented by bulk SQL and by the
/// product's `Store`.
trait Sink {
    /// A video was made (before its first place).
    fn new_video(&mut self, idx: usize, record: VideoRecord) -> Res<()>;
    fn categories(&mut self, region: &str, at: i64) -> Res<()>;
    fn begin_run(&mut self, run_id: &str, region: &str, at: i64) -> Res<()>;
    /// One page of one chart: (video idx, its num, its counts) by rank.
    fn page(
        &mut self,
        run_id: &str,
        region: &str,
        chart: u32,
        first_rank: u32,
        videos: &[(usize, i64, Counts)],
        fetched_at: i64,
    ) -> Res<()>;
    /// One follow-up call's answer: every video asked for, counted.
    fn follow(&mut self, asked: &[(usize, i64, Counts)], at: i64) -> Res<()>;
    fn end_run(&mut self, run_id: &str, region: &str, end: &RunEnd) -> Res<()>;
    fn day_done(&mut self) -> Res<()>;
    fn finish(&mut self) -> Res<()>;
}

/// How a run ended.
struct RunEnd {
    at: i64,
    pages: u64,
    videos: u64,
    follow_calls: u64,
}

impl RunEnd {
    fn units(&self) -> u64 {
        // Default cost file: 1 unit a page, 1 a follow-up call.
        self.pages + self.follow_calls
    }

    /// How long the run took, as its process measures it: 0.4 s a call.
    fn duration_us(&self) -> u64 {
        self.units() * 400_000
    }

    fn calls(&self) -> Vec<CallCount> {
        let call = |method: &str, calls| CallCount {
            method: method.into(),
            outcome: CallOutcome::Ok.into(),
            calls,
        };
        vec![
            call("videos.list", self.pages),
            call("videos.batchGetStats", self.follow_calls),
        ]
    }
}

/// Per video: its synthetic growth, its store number (0 before its first place), and
/// its follow-up state (last on a chart, last counted).
struct Followed {
    synth: Synth,
    num: i64,
    charted_at: i64,
    counted_at: i64,
}

/// Writes `days` of the year into `sink`. Returns (places, follow-up rows, videos
/// stored: a video made for a chart and pushed off it before its first fetch is not).
fn simulate(sink: &mut dyn Sink, days: u32, end: i64) -> Res<(u64, u64, usize)> {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(2026);
    let words = Words::new();
    let channels: Vec<String> = (0..5000).map(|_| words.text(&mut rng, 2)).collect();
    let hours = i64::from(days) * 24;
    let start = end - hours * 3600;
    let mut all: Vec<Followed> = Vec::new();
    let mut next_num = 1i64;
    // (counted_at, num, idx) of every video that was on a chart: due ones come first.
    let mut queue: BTreeSet<(i64, i64, usize)> = BTreeSet::new();
    // Per region and chart: the videos on it (idx) and their scores.
    let mut charts: Vec<Vec<Vec<(usize, f64)>>> =
        vec![vec![Vec::new(); CHARTS.len()]; REGIONS.len()];
    let mut due = vec![vec![0.0f64; CHARTS.len()]; REGIONS.len()];
    let (mut places, mut follows) = (0u64, 0u64);

    let make = |rng: &mut StdRng,
                all: &mut Vec<Followed>,
                sink: &mut dyn Sink,
                chart: u32,
                at: i64|
     -> Res<usize> {
        let (synth, mut record) = new_video(rng, &words, &channels, at);
        if chart != 0 {
            record.category_id = Some(chart.to_string());
        }
        all.push(Followed {
            synth,
            num: 0,
            charted_at: 0,
            counted_at: 0,
        });
        sink.new_video(all.len() - 1, record)?;
        Ok(all.len() - 1)
    };

    for region in REGIONS {
        sink.categories(region, start - 3600)?;
    }
    // The charts as the year begins: videos that entered over the 3 days before.
    for region_charts in charts.iter_mut() {
        for (chart, &category) in region_charts.iter_mut().zip(&CHARTS) {
            for _ in 0..RANKS {
                let at = start - rng.random_range(0..72 * 3600);
                let idx = make(&mut rng, &mut all, sink, category, at)?;
                chart.push((idx, rng.random_range(0.0..1.0)));
            }
        }
    }
    for hour in 0..hours {
        let hour_at = start + hour * 3600;
        for (r, region) in REGIONS.iter().enumerate() {
            let at = hour_at + r as i64 * 5 * 60;
            let run_id = format!("{:x}-{:08x}", at * 1000, rng.random::<u32>());
            sink.begin_run(&run_id, region, at)?;
            let mut pages = 0u64;
            for (c, &chart) in CHARTS.iter().enumerate() {
                // New videos enter at the top; the weakest leave, so the chart stays at 200.
                due[r][c] += NEW_PER_CHART_PER_DAY / 24.0;
                while due[r][c] >= 1.0 {
                    due[r][c] -= 1.0;
                    let idx = make(&mut rng, &mut all, sink, chart, at)?;
                    charts[r][c].push((idx, 1.5));
                }
                for entry in charts[r][c].iter_mut() {
                    entry.1 = entry.1 * 0.985 + rng.random_range(-0.02..0.02);
                }
                charts[r][c].sort_by(|a, b| b.1.total_cmp(&a.1));
                charts[r][c].truncate(RANKS);
                for (p, page) in charts[r][c].chunks(PAGE).enumerate() {
                    let fetched_at = at + (c * RANKS / PAGE + p) as i64;
                    let mut rows = Vec::with_capacity(page.len());
                    for &(idx, _) in page {
                        let v = &mut all[idx];
                        if v.num == 0 {
                            v.num = next_num;
                            next_num += 1;
                        } else {
                            queue.remove(&(v.counted_at, v.num, idx));
                        }
                        v.charted_at = fetched_at;
                        v.counted_at = v.counted_at.max(fetched_at);
                        queue.insert((v.counted_at, v.num, idx));
                        rows.push((idx, v.num, counts(&v.synth, fetched_at)));
                    }
                    sink.page(
                        &run_id,
                        region,
                        chart,
                        (p * PAGE + 1) as u32,
                        &rows,
                        fetched_at,
                    )?;
                    places += rows.len() as u64;
                    pages += 1;
                }
            }
            // Follow-ups: charted since now - 7 d, counted at or before now - 6 h,
            // stalest first, 50 a call.
            let follow_at = at + FOLLOW_AFTER_S;
            let mut asked = Vec::new();
            let mut stale = Vec::new();
            for &(counted_at, num, idx) in &queue {
                if counted_at > at - FOLLOW_EVERY_S {
                    break;
                }
                if all[idx].charted_at < at - FOLLOW_DAYS_S {
                    // Never due again unless it charts again (which queues it anew).
                    stale.push((counted_at, num, idx));
                } else {
                    asked.push((idx, num, counts(&all[idx].synth, follow_at)));
                }
            }
            for key in stale {
                queue.remove(&key);
            }
            let mut follow_calls = 0u64;
            for batch in asked.chunks(PAGE) {
                sink.follow(batch, follow_at)?;
                follow_calls += 1;
            }
            for &(idx, num, _) in &asked {
                let v = &mut all[idx];
                queue.remove(&(v.counted_at, num, idx));
                v.counted_at = follow_at;
                queue.insert((follow_at, num, idx));
            }
            follows += asked.len() as u64;
            let end = RunEnd {
                at: follow_at + 1,
                pages,
                videos: pages * PAGE as u64,
                follow_calls,
            };
            sink.end_run(&run_id, region, &end)?;
        }
        if hour % 24 == 23 {
            sink.day_done()?;
            if hour % (24 * 30) == 24 * 30 - 1 {
                eprintln!(
                    "day {} of {days}: {} videos, {places} places, {follows} follow-ups, {:.0?}",
                    hour / 24 + 1,
                    all.len(),
                    started.elapsed()
                );
            }
        }
    }
    sink.finish()?;
    Ok((places, follows, all.iter().filter(|v| v.num != 0).count()))
}

// ---- bulk SQL ----

/// Writes what the product's write path leaves, with prepared statements in one
/// transaction a day; the per-video rows that every place updates (`videos`' latest
/// counts, `follow_state`, `region_state`) are kept in memory and written at the end.
struct Bulk {
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

const CATEGORIES: &[(&str, &str)] = &[
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
    fn new(path: &Path) -> Res<Bulk> {
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

// ---- the product's Store API ----

/// Makes every write through the product's `Store`, as a run does.
struct ViaStore {
    store: Store,
    records: HashMap<usize, VideoRecord>,
}

impl Sink for ViaStore {
    fn new_video(&mut self, idx: usize, record: VideoRecord) -> Res<()> {
        self.records.insert(idx, record);
        Ok(())
    }

    fn categories(&mut self, region: &str, at: i64) -> Res<()> {
        let names: Vec<(String, String)> = CATEGORIES
            .iter()
            .map(|(id, t)| ((*id).into(), (*t).into()))
            .collect();
        self.store.store_categories(region, &names, at)?;
        Ok(())
    }

    fn begin_run(&mut self, run_id: &str, region: &str, at: i64) -> Res<()> {
        self.store.begin_run(run_id, RunKind::Run, at)?;
        self.store
            .begin_run_regions(run_id, at, &[region.to_owned()])?;
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
        let page = videos
            .iter()
            .map(|&(idx, _, c)| {
                let mut v = self.records.get(&idx).ok_or("an unknown video")?.clone();
                (v.view_count, v.like_count, v.comment_count) = (Some(c.0), c.1, c.2);
                Ok(v)
            })
            .collect::<Res<Vec<VideoRecord>>>()?;
        let category = (chart != 0).then_some(chart);
        self.store
            .store_chart_page(run_id, region, category, first_rank, &page, fetched_at)?;
        Ok(())
    }

    fn follow(&mut self, asked: &[(usize, i64, Counts)], at: i64) -> Res<()> {
        let id = |idx: usize| -> Res<String> {
            Ok(self.records.get(&idx).ok_or("an unknown video")?.id.clone())
        };
        let ids = asked
            .iter()
            .map(|&(idx, ..)| id(idx))
            .collect::<Res<Vec<_>>>()?;
        let counts = asked
            .iter()
            .map(|&(idx, _, c)| {
                Ok(FollowCounts {
                    video_id: id(idx)?,
                    view_count: Some(c.0),
                    like_count: c.1,
                    comment_count: c.2,
                })
            })
            .collect::<Res<Vec<_>>>()?;
        self.store.store_follow_ups(&ids, &counts, at)?;
        Ok(())
    }

    fn end_run(&mut self, run_id: &str, region: &str, end: &RunEnd) -> Res<()> {
        self.store.mark_region_complete(region, end.at)?;
        self.store.finish_run(
            run_id,
            &RunOutcome {
                status: RegionStatus::Complete,
                units: end.units(),
                calls: end.units(),
                stop_reason: None,
                ended_at: end.at,
                duration_us: end.duration_us(),
            },
        )?;
        let outcome = RegionOutcome {
            region: region.into(),
            status: RegionStatus::Complete.into(),
            pages: end.pages,
            videos: end.videos,
            units: end.units(),
            reason: None,
        };
        self.store
            .record_run_details(run_id, &[outcome], &end.calls())?;
        Ok(())
    }

    fn day_done(&mut self) -> Res<()> {
        Ok(())
    }

    fn finish(&mut self) -> Res<()> {
        self.store.checkpoint()?;
        Ok(())
    }
}

fn fresh(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// The year ends at the last full hour, so `export --since 30d` is its last month.
fn year_end() -> i64 {
    SystemClock.now().to_secs().as_i64() / 3600 * 3600
}

pub(crate) fn generate(dir: &Path, days: u32) -> Res<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("charts.db");
    fresh(&path);
    let started = Instant::now();
    let mut bulk = Bulk::new(&path)?;
    let (places, follows, videos) = simulate(&mut bulk, days, year_end())?;
    drop(bulk);
    eprintln!(
        "wrote {} ({days} days: {places} places, {follows} follow-up rows, {videos} videos, {}) in {:.0?}",
        path.display(),
        mb(file_size(&path)),
        started.elapsed()
    );
    Ok(())
}

/// Every row of every table but the full-text index's shadow tables, sorted.
fn tables(conn: &Connection) -> Res<Vec<(String, Vec<String>)>> {
    let names: Vec<String> = {
        let mut stmt = conn.prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table'
               AND name NOT LIKE 'videos_fts%' AND name NOT LIKE 'sqlite_%'
             ORDER BY name",
        )?;
        stmt.query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?
    };
    let mut out = Vec::new();
    for name in names {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{name}\""))?;
        let n = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                (0..n)
                    .map(|i| {
                        r.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(|v| v.join("|"))
            })?
            .collect::<rusqlite::Result<_>>()?;
        rows.sort();
        out.push((name, rows));
    }
    Ok(out)
}

/// Pages per table and index (dbstat), for the record.
fn pages(path: &Path) -> Res<HashMap<String, i64>> {
    let conn = Connection::open(path)?;
    let mut stmt = conn.prepare("SELECT name, count(*) FROM dbstat GROUP BY name")?;
    Ok(stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?)
}

/// Writes `days` both ways and compares them table by table; an error if they differ.
pub(crate) fn check(dir: &Path, days: u32) -> Res<()> {
    std::fs::create_dir_all(dir)?;
    let end = year_end();
    let bulk_path = dir.join("check-bulk.db");
    let store_path = dir.join("check-store.db");
    fresh(&bulk_path);
    fresh(&store_path);
    let t = Instant::now();
    let mut bulk = Bulk::new(&bulk_path)?;
    let written = simulate(&mut bulk, days, end)?;
    drop(bulk);
    let bulk_t = t.elapsed();
    let t = Instant::now();
    let mut via = ViaStore {
        store: Store::open(&store_path)?,
        records: HashMap::new(),
    };
    simulate(&mut via, days, end)?;
    drop(via);
    eprintln!(
        "{days} days ({} places, {} follow-up rows, {} videos): bulk SQL {bulk_t:.1?}, Store API {:.1?}",
        written.0,
        written.1,
        written.2,
        t.elapsed()
    );
    let a = tables(&Connection::open(&bulk_path)?)?;
    let b = tables(&Connection::open(&store_path)?)?;
    let (pa, pb) = (pages(&bulk_path)?, pages(&store_path)?);
    let mut differ = Vec::new();
    println!("| table | rows | pages, bulk SQL | pages, Store API | same rows |");
    println!("|---|--:|--:|--:|---|");
    let names: BTreeSet<&String> = a.iter().chain(&b).map(|(n, _)| n).collect();
    for name in names {
        let ra = a.iter().find(|(n, _)| n == name).map(|(_, r)| r);
        let rb = b.iter().find(|(n, _)| n == name).map(|(_, r)| r);
        let same = ra == rb;
        if !same {
            differ.push(name.clone());
            if let (Some(ra), Some(rb)) = (ra, rb) {
                let only_a: Vec<_> = ra.iter().filter(|r| !rb.contains(r)).take(3).collect();
                let only_b: Vec<_> = rb.iter().filter(|r| !ra.contains(r)).take(3).collect();
                eprintln!("{name}: bulk only {only_a:?}; Store only {only_b:?}");
            }
        }
        println!(
            "| {name} | {} | {} | {} | {} |",
            ra.map_or(0, Vec::len),
            pa.get(name.as_str()).copied().unwrap_or(0),
            pb.get(name.as_str()).copied().unwrap_or(0),
            if same { "yes" } else { "**no**" }
        );
    }
    // Indexes: their pages (their rows are those of their tables).
    let indexes: BTreeSet<&String> = pa
        .keys()
        .chain(pb.keys())
        .filter(|n| !a.iter().any(|(t, _)| t == *n) && !n.starts_with("videos_fts"))
        .collect();
    for name in indexes {
        println!(
            "| {name} (index) | | {} | {} | |",
            pa.get(name).copied().unwrap_or(0),
            pb.get(name).copied().unwrap_or(0)
        );
    }
    // The full-text index: the same videos behind the same words.
    let words = Words::new();
    let fts = |path: &Path| -> Res<Vec<Vec<i64>>> {
        let conn = Connection::open(path)?;
        conn.execute_batch("INSERT INTO videos_fts (videos_fts) VALUES ('integrity-check')")?;
        let mut stmt =
            conn.prepare("SELECT rowid FROM videos_fts WHERE videos_fts MATCH ?1 ORDER BY rowid")?;
        words.words[..200]
            .iter()
            .chain(&words.words[20_000..20_050])
            .map(|w| {
                Ok(stmt
                    .query_map([w], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<i64>>>()?)
            })
            .collect()
    };
    let fts_same = fts(&bulk_path)? == fts(&store_path)?;
    println!(
        "| videos_fts (250 words' matches; integrity-check) | | | | {} |",
        if fts_same { "yes" } else { "**no**" }
    );
    if !fts_same {
        differ.push("videos_fts".into());
    }
    fresh(&bulk_path);
    fresh(&store_path);
    if differ.is_empty() {
        Ok(())
    } else {
        Err(format!("bulk SQL and the Store API differ in {differ:?}").into())
    }
}

// ---- measure ----

/// `trendsync --db DB ARGS`, timed; its stdout discarded.
fn time_binary(binary: &Path, db: &Path, args: &[&str]) -> Res<Duration> {
    let t = Instant::now();
    let out = Command::new(binary)
        .arg("--db")
        .arg(db)
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()?;
    let elapsed = t.elapsed();
    if !out.status.success() {
        return Err(format!(
            "trendsync {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(elapsed)
}

pub(crate) fn measure(dir: &Path, binary: &Path, export: bool) -> Res<()> {
    let db = dir.join("charts.db");
    let conn = Connection::open(&db)?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    let q = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
    let mut report = Vec::new();
    let mut say = |line: String| {
        println!("{line}");
        report.push(line);
    };
    let places = q("SELECT count(*) FROM places")?;
    let follow_rows = q("SELECT count(*) FROM follow_counts")?;
    let fetches = q("SELECT count(*) FROM fetches")?;
    let videos = q("SELECT count(*) FROM videos")?;
    let file = file_size(&db) as i64;
    say(format!(
        "## The year with category charts and follow-ups (`{}`)",
        db.display()
    ));
    say(format!(
        "- {fetches} fetches, {places} places, {follow_rows} follow-up rows, {videos} videos; file {}",
        mb(file as u64)
    ));
    let sizes: Vec<(String, i64)> = {
        let mut stmt =
            conn.prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    say(format!(
        "- largest: {}",
        sizes
            .iter()
            .take(12)
            .map(|(n, s)| format!("{n} {}", mb(*s as u64)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let size_of = |pred: &dyn Fn(&str) -> bool| -> i64 {
        sizes.iter().filter(|(n, _)| pred(n)).map(|(_, s)| s).sum()
    };
    // As the 43 of the compact year: the file less the videos' metadata and its
    // full-text index, over the rows of counts it keeps.
    let metadata = size_of(&|n| n == "videos" || n.starts_with("videos_fts"));
    let follow = size_of(&|n| n.starts_with("follow_"));
    let snapshot = file - metadata;
    say(format!(
        "- bytes per snapshot row (file - videos - videos_fts*) / (places + follow-up rows): ({} - {}) / {} = **{:.1}**",
        mb(file as u64),
        mb(metadata as u64),
        places + follow_rows,
        snapshot as f64 / (places + follow_rows) as f64
    ));
    say(format!(
        "- per place, the follow-ups' bytes charged to the places: {:.1}",
        snapshot as f64 / places as f64
    ));
    say(format!(
        "- the same without the follow-ups (their tables {}): {:.1} per place; places + places_by_video alone: {:.1} per place",
        mb(follow as u64),
        (snapshot - follow) as f64 / places as f64,
        size_of(&|n| n == "places" || n == "places_by_video") as f64 / places as f64
    ));

    // `video ID`: a long-trending video, a recent one, one with the most follow-ups.
    let pick = |sql: &str| -> Res<String> { Ok(conn.query_row(sql, [], |r| r.get(0))?) };
    let ids = [
        (
            "longest on a chart",
            pick(
                "SELECT v.id FROM videos AS v
                 JOIN (SELECT video, count(*) AS n FROM places GROUP BY video
                       ORDER BY n DESC LIMIT 1) AS p ON p.video = v.num",
            )?,
        ),
        (
            "newest",
            pick("SELECT id FROM videos ORDER BY num DESC LIMIT 1")?,
        ),
        (
            "most follow-ups",
            pick(
                "SELECT v.id FROM videos AS v
                 JOIN (SELECT video, count(*) AS n FROM follow_counts GROUP BY video
                       ORDER BY n DESC LIMIT 1) AS c ON c.video = v.num",
            )?,
        ),
        (
            "mid-year",
            pick("SELECT id FROM videos WHERE num = (SELECT max(num) / 2 FROM videos)")?,
        ),
    ];
    say(
        "- `trendsync video ID` (release binary, whole process; 1 warm-up, then 15 runs each):"
            .into(),
    );
    say("  | video | places | follow-ups | text: first, median / max | --json: first, median / max | its four store reads in process, median |".into());
    say("  |---|--:|--:|---|---|---|".into());
    let store = Store::open_read_only(&db)?.ok_or("the file vanished")?;
    let mut worst = Duration::ZERO;
    for (what, id) in &ids {
        let count = |sql: &str| -> Res<i64> { Ok(conn.query_row(sql, [id], |r| r.get(0))?) };
        let n_places = count(
            "SELECT count(*) FROM places WHERE video = (SELECT num FROM videos WHERE id = ?1)",
        )?;
        let n_follow = count(
            "SELECT count(*) FROM follow_counts WHERE video = (SELECT num FROM videos WHERE id = ?1)",
        )?;
        let mut cells = Vec::new();
        for json in [false, true] {
            let mut args = vec!["video", id.as_str()];
            if json {
                args.push("--json");
            }
            let first = time_binary(binary, &db, &args)?;
            let times = (0..15)
                .map(|_| time_binary(binary, &db, &args))
                .collect::<Res<Vec<_>>>()?;
            let max = times.iter().copied().max().unwrap_or_default();
            worst = worst.max(max);
            cells.push(format!(
                "{}, {} / {}",
                ms(first),
                ms(median(times)),
                ms(max)
            ));
        }
        // What `video` reads, without the process around it.
        let reads = (0..15)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(store.video(id)?);
                std::hint::black_box(store.video_chart_places(id)?);
                std::hint::black_box(store.video_counts(id)?);
                std::hint::black_box(store.video_removed_at(id)?);
                Ok(t.elapsed())
            })
            .collect::<Res<Vec<_>>>()?;
        say(format!(
            "  | {what} (`{id}`) | {n_places} | {n_follow} | {} | {} | {} |",
            cells[0],
            cells[1],
            ms(median(reads))
        ));
    }
    let floor = {
        time_binary(binary, &db, &["video", "--help"])?;
        median(
            (0..15)
                .map(|_| time_binary(binary, &db, &["video", "--help"]))
                .collect::<Res<Vec<_>>>()?,
        )
    };
    say(format!(
        "- the process alone (`video --help`, median): {}; slowest `video ID` of all: {}",
        ms(floor),
        ms(worst)
    ));
    drop(store);

    // `export --per day`: one month against the whole year, peak RSS.
    let exports: &[(&str, Option<&str>)] = if export {
        &[("last 30 days", Some("30d")), ("whole file", None)]
    } else {
        &[]
    };
    let out = dir.join("export.csv");
    let out_s = out.display().to_string();
    let db_s = db.display().to_string();
    let bin = binary.display().to_string();
    if export {
        say("- `export --per day --output FILE` (all regions and charts; peak RSS from /usr/bin/time):".into());
    }
    for &(what, since) in exports {
        let mut args = vec!["--db", &db_s, "export", "--per", "day", "--output", &out_s];
        if let Some(s) = since {
            args.extend(["--since", s]);
        }
        let (t, rss) = run_with_rss(&bin, &args, None)?;
        let lines = std::fs::read_to_string(&out)
            .map(|s| s.lines().count())
            .unwrap_or(0);
        say(format!(
            "  - {what}: {lines} lines, {}, {t:.1?}, peak RSS **{rss:.1} MB**",
            mb(std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0))
        ));
        let _ = std::fs::remove_file(&out);
    }
    std::fs::write(dir.join("charts-report.md"), report.join("\n") + "\n")?;
    Ok(())
}

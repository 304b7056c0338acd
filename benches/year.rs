//! A synthetic year of hourly snapshots, before and after the compact layout.
//!
//! ```text
//! cargo bench --bench year -- generate DIR [--days N]   # the year in today's (v1) layout
//! cargo bench --bench year -- measure DIR [--binary PATH]
//! cargo bench --bench year -- charts-generate DIR [--days N]   # issue 18's year, see charts.rs
//! cargo bench --bench year -- charts-check DIR [--days N]
//! cargo bench --bench year -- charts-measure DIR [--binary PATH] [--no-export]
//! cargo bench --bench year -- charts-search DIR [--binary PATH]
//! ```
//!
//! `generate` writes `DIR/v1.db`: 8 regions, one run per region per hour (crontab
//! lines at staggered minutes), 4 pages of 50 a fetch (200 ranks), about 60 new videos
//! per region per day that stay on the chart for about 3 days; titles, descriptions and
//! tags of realistic lengths drawn from a 40,000-word vocabulary with a Zipf head (the
//! most common word lands in every video). History is written with bulk SQL in the
//! version 1 layout, as the version 1 write path leaves it (foreign keys, FTS triggers
//! and all indexes in place). The year ends now, so `prune --older-than` works on it.
//! With `--days N` it writes N days instead of 365 (every rate stays the same).
//!
//! `measure` copies it, upgrades the copy through the product's own `Store::open`
//! (time and peak disk), then measures the product's code paths on the upgraded year
//! (storing pages, search with and without `--region`, export against `sqlite3 -csv`,
//! prune of 90 days with a concurrent writer) and prints a Markdown report. The
//! version 1 search figures come from the same query the version 1 build ran, on the
//! v1 file, in the same run. Keep DIR outside the repository: a year is gigabytes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::{Connection, params};
use trendsync::clock::{Clock, Secs, SystemClock};
use trendsync::store::{RunKind, Store, VideoRecord};

#[path = "year/charts.rs"]
mod charts;

const REGIONS: [&str; 8] = ["US", "GB", "DE", "FR", "IN", "BR", "AU", "CA"];
const RANKS: usize = 200;
const NEW_PER_REGION_PER_DAY: f64 = 60.0;
const VOCABULARY: usize = 40_000;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    match args.first().map(String::as_str) {
        Some("generate") => {
            let dir = PathBuf::from(args.get(1).ok_or("generate DIR")?);
            let days: u32 = flag("--days").map_or(Ok(365), |d| d.parse())?;
            generate(&dir, days)
        }
        Some("measure") => {
            let dir = PathBuf::from(args.get(1).ok_or("measure DIR")?);
            let binary = flag("--binary").map_or_else(default_binary, PathBuf::from);
            measure(&dir, &binary)
        }
        Some(cmd @ ("charts-generate" | "charts-check" | "charts-measure" | "charts-search")) => {
            let dir = PathBuf::from(args.get(1).ok_or("charts-… DIR")?);
            match cmd {
                "charts-generate" => {
                    charts::generate(&dir, flag("--days").map_or(Ok(365), |d| d.parse())?)
                }
                "charts-check" => charts::check(&dir, flag("--days").map_or(Ok(2), |d| d.parse())?),
                "charts-search" => charts::search(
                    &dir,
                    &flag("--binary").map_or_else(default_binary, PathBuf::from),
                ),
                _ => charts::measure(
                    &dir,
                    &flag("--binary").map_or_else(default_binary, PathBuf::from),
                    !args.iter().any(|a| a == "--no-export"),
                ),
            }
        }
        _ => {
            eprintln!(
                "usage: year generate DIR [--days N] | year measure DIR [--binary PATH]\n       \
                 year charts-generate DIR [--days N] | year charts-check DIR [--days N] | \
                 year charts-measure DIR [--binary PATH] [--no-export] | \
                 year charts-search DIR [--binary PATH]"
            );
            Ok(())
        }
    }
}

fn default_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/trendsync")
}

// ---- text ----

/// Words and a Zipf(1) sampler over them.
struct Words {
    words: Vec<String>,
    cdf: Vec<f64>,
}

impl Words {
    fn new() -> Words {
        const SYL: &[&str] = &[
            "ka", "ri", "mo", "ten", "sa", "lo", "vi", "na", "ber", "go", "ul", "mi", "tra", "on",
            "de", "ex", "pa", "zu", "chi", "rel", "fa", "nor", "qui", "es", "lan", "to", "bi",
            "ya",
        ];
        let words = (0..VOCABULARY)
            .map(|mut i| {
                // A bijective base-28 spelling: every index its own word.
                let mut w = String::new();
                loop {
                    w.push_str(SYL[i % SYL.len()]);
                    i /= SYL.len();
                    if i == 0 {
                        break;
                    }
                    i -= 1;
                }
                w
            })
            .collect();
        let mut acc = 0.0;
        let cdf = (1..=VOCABULARY)
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect::<Vec<_>>();
        let total = acc;
        Words {
            words,
            cdf: cdf.into_iter().map(|c| c / total).collect(),
        }
    }

    fn pick(&self, rng: &mut StdRng) -> &str {
        let x: f64 = rng.random();
        let i = self.cdf.partition_point(|&c| c < x).min(VOCABULARY - 1);
        &self.words[i]
    }

    fn text(&self, rng: &mut StdRng, n: usize) -> String {
        let mut s = String::with_capacity(n * 6);
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.pick(rng));
        }
        s
    }
}

fn video_id(rng: &mut StdRng) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..11)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// One synthetic video's metadata and how its counts grow.
struct Synth {
    id: String,
    entered: i64,
    base_views: f64,
    hide_likes: bool,
    no_comments: bool,
}

fn new_video(
    rng: &mut StdRng,
    words: &Words,
    channels: &[String],
    at: i64,
) -> (Synth, VideoRecord) {
    let id = video_id(rng);
    let title_words = rng.random_range(5..14);
    let desc_words = rng.random_range(20..220);
    let tags = if rng.random_bool(0.15) {
        None
    } else {
        Some(
            (0..rng.random_range(3..18))
                .map(|_| {
                    let n = rng.random_range(1..3);
                    words.text(rng, n)
                })
                .collect::<Vec<_>>(),
        )
    };
    let synth = Synth {
        id: id.clone(),
        entered: at,
        base_views: rng.random_range(5_000.0..500_000.0),
        hide_likes: rng.random_bool(0.05),
        no_comments: rng.random_bool(0.03),
    };
    let channel = &channels[rng.random_range(0..channels.len())];
    let record = VideoRecord {
        id: id.clone(),
        title: words.text(rng, title_words),
        description: words.text(rng, desc_words),
        channel_id: format!("UC{}", &id[..10]),
        channel_title: channel.clone(),
        published_at: jiff::Timestamp::from_second(at - rng.random_range(3600..86_400))
            .map(|t| t.to_string())
            .unwrap_or_default(),
        category_id: Some(["10", "17", "20", "22", "24", "28"][rng.random_range(0..6)].to_string()),
        tags,
        default_language: Some("en".into()),
        default_audio_language: Some("en".into()),
        duration_s: Some(rng.random_range(30..3600)),
        live_broadcast_content: Some("none".into()),
        thumbnail_url: Some(format!("https://i.ytimg.com/vi/{id}/hqdefault.jpg")),
        region_restriction: None,
        view_count: None,
        like_count: None,
        comment_count: None,
    };
    (synth, record)
}

fn counts(s: &Synth, at: i64) -> (i64, Option<i64>, Option<i64>) {
    let hours = ((at - s.entered) as f64 / 3600.0).max(0.0) + 1.0;
    let views = (s.base_views * hours.powf(1.1)) as i64;
    let likes = (!s.hide_likes).then_some(views / 25);
    let comments = (!s.no_comments).then_some(views / 400);
    (views, likes, comments)
}

// ---- generate ----

fn generate(dir: &Path, days: u32) -> Res<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("v1.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Store::create_at_version(&path, 1)?;
    let conn = Connection::open(&path)?;
    // A fixture: no crash safety needed while it is written.
    conn.execute_batch(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -4000000;
         PRAGMA foreign_keys = OFF;",
    )?;
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(2024);
    let words = Words::new();
    let channels: Vec<String> = (0..5000).map(|_| words.text(&mut rng, 2)).collect();
    let hours = i64::from(days) * 24;
    let end = SystemClock.now().to_secs().as_i64() / 3600 * 3600;
    let start = end - hours * 3600;

    let mut all: Vec<Synth> = Vec::new();
    let mut last: HashMap<usize, i64> = HashMap::new();
    // Per region: the chart's videos (index into `all`) and their scores.
    let mut charts: Vec<Vec<(usize, f64)>> = vec![Vec::new(); REGIONS.len()];
    let mut due = vec![0.0f64; REGIONS.len()];

    let insert_video = |conn: &Connection, v: &VideoRecord, at: i64| -> rusqlite::Result<()> {
        let tags = v
            .tags
            .as_ref()
            .map(|t| serde_json::to_string(t).unwrap_or_default());
        let tags_text = v.tags.as_ref().map(|t| t.join(" "));
        conn.prepare_cached(
            "INSERT INTO videos (id, title, description, channel_id, channel_title, published_at,
                 category_id, tags, tags_text, default_language, default_audio_language, duration_s,
                 live_broadcast_content, thumbnail_url, region_restriction, view_count, like_count,
                 comment_count, first_seen_at, last_seen_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, NULL, NULL, NULL, NULL, ?15, ?15)",
        )?
        .execute(params![
            v.id, v.title, v.description, v.channel_id, v.channel_title, v.published_at,
            v.category_id, tags, tags_text, v.default_language, v.default_audio_language,
            v.duration_s, v.live_broadcast_content, v.thumbnail_url, at
        ])?;
        Ok(())
    };

    conn.execute_batch("BEGIN")?;
    for (r, chart) in charts.iter_mut().enumerate() {
        for _ in 0..RANKS {
            let at = start - rng.random_range(0..72 * 3600);
            let (s, v) = new_video(&mut rng, &words, &channels, at);
            insert_video(&conn, &v, start)?;
            all.push(s);
            chart.push((all.len() - 1, rng.random_range(0.0..1.0)));
        }
        let _ = r;
    }
    for hour in 0..hours {
        let hour_at = start + hour * 3600;
        for (r, region) in REGIONS.iter().enumerate() {
            let at = hour_at + r as i64 * 5 * 60;
            // New videos enter; the weakest leave, so the chart stays at 200.
            due[r] += NEW_PER_REGION_PER_DAY / 24.0;
            while due[r] >= 1.0 {
                due[r] -= 1.0;
                let (s, v) = new_video(&mut rng, &words, &channels, at);
                insert_video(&conn, &v, at)?;
                all.push(s);
                charts[r].push((all.len() - 1, 1.5));
            }
            for entry in charts[r].iter_mut() {
                entry.1 = entry.1 * 0.985 + rng.random_range(-0.02..0.02);
            }
            charts[r].sort_by(|a, b| b.1.total_cmp(&a.1));
            charts[r].truncate(RANKS);

            let run_id = format!("{:x}-{:08x}", at * 1000, rng.random::<u32>());
            conn.prepare_cached(
                "INSERT INTO runs (run_id, kind, started_at, ended_at, status, units, calls, stop_reason)
                 VALUES (?1, 'run', ?2, ?3, 'complete', 5, 5, NULL)",
            )?
            .execute(params![run_id, at, at + 4])?;
            for (rank0, &(idx, _)) in charts[r].iter().enumerate() {
                let fetched_at = at + (rank0 / 50) as i64;
                let s = &all[idx];
                let (views, likes, comments) = counts(s, fetched_at);
                conn.prepare_cached(
                    "INSERT INTO video_stats (video_id, fetched_at, run_id, view_count, like_count, comment_count)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![s.id, fetched_at, run_id, views, likes, comments])?;
                conn.prepare_cached(
                    "INSERT INTO trending (run_id, region, rank, video_id, fetched_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![run_id, region, rank0 as i64 + 1, s.id, fetched_at])?;
                last.insert(idx, fetched_at);
            }
            conn.prepare_cached(
                "INSERT INTO region_state (region, last_complete_at, last_attempt_at, last_status)
                 VALUES (?1, ?2, ?2, 'complete')
                 ON CONFLICT (region) DO UPDATE SET last_complete_at = excluded.last_complete_at,
                     last_attempt_at = excluded.last_attempt_at",
            )?
            .execute(params![region, at + 4])?;
        }
        if hour % 24 == 23 {
            conn.execute_batch("COMMIT; BEGIN")?;
            if hour % (24 * 30) == 24 * 30 - 1 {
                eprintln!(
                    "day {} of {days}: {} videos, {:.0?}",
                    hour / 24 + 1,
                    all.len(),
                    started.elapsed()
                );
            }
        }
    }
    // The latest counts and last sighting of every video, as the upserts leave them.
    for (idx, &seen) in &last {
        let s = &all[*idx];
        let (views, likes, comments) = counts(s, seen);
        conn.prepare_cached(
            "UPDATE videos SET view_count = ?2, like_count = ?3, comment_count = ?4, last_seen_at = ?5
             WHERE id = ?1",
        )?
        .execute(params![s.id, views, likes, comments, seen])?;
    }
    for region in REGIONS {
        conn.prepare_cached(
            "INSERT INTO categories (region, id, title, fetched_at) VALUES
             (?1, '10', 'Music', ?2), (?1, '17', 'Sports', ?2), (?1, '20', 'Gaming', ?2),
             (?1, '22', 'People & Blogs', ?2), (?1, '24', 'Entertainment', ?2),
             (?1, '28', 'Science & Technology', ?2)",
        )?
        .execute(params![region, start])?;
    }
    conn.execute_batch("COMMIT; PRAGMA journal_mode = WAL;")?;
    drop(conn);
    eprintln!(
        "wrote {} ({} days, {} videos) in {:.0?}",
        path.display(),
        days,
        all.len(),
        started.elapsed()
    );
    Ok(())
}

// ---- measure ----

fn file_size(path: &Path) -> u64 {
    ["", "-wal", "-shm"]
        .iter()
        .map(|s| {
            std::fs::metadata(format!("{}{s}", path.display()))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum()
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn mb(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}

/// The largest tables and indexes, from the sqlite3 shell's dbstat.
fn sizes(path: &Path) -> Res<String> {
    let out = Command::new("sqlite3")
        .arg(path)
        .arg("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 12")
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(n, s)| format!("{n} {}", mb(s.parse().unwrap_or(0))))
        .collect::<Vec<_>>()
        .join(", "))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Runs `f` a few times (first one warms the cache) and returns the median.
fn time_it(n: usize, mut f: impl FnMut() -> Res<()>) -> Res<Duration> {
    f()?;
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    Ok(median(v))
}

/// The version 1 build's search query, run on the version 1 file.
const V1_SEARCH: &str = "SELECT v.id, v.title, v.channel_title,
        snippet(videos_fts, -1, '[', ']', '...', 16),
        v.view_count, v.published_at,
        (SELECT group_concat(seen.region, ',' ORDER BY seen.region) FROM (
             SELECT region FROM trending WHERE video_id = v.id
             UNION
             SELECT region FROM search_results WHERE video_id = v.id) AS seen)
 FROM videos_fts
 JOIN videos AS v ON v.num = videos_fts.rowid
 WHERE videos_fts MATCH ?1
   AND (?2 IS NULL
        OR EXISTS (SELECT 1 FROM trending AS t
                   WHERE t.video_id = v.id AND t.region = ?2)
        OR EXISTS (SELECT 1 FROM search_results AS s
                   WHERE s.video_id = v.id AND s.region = ?2))
 ORDER BY bm25(videos_fts, 10.0, 1.0, 4.0, 2.0)
 LIMIT ?3";

/// Runs a child to completion and returns its wall time.
fn run_child(cmd: &mut Command) -> Res<Duration> {
    let t = Instant::now();
    let status = cmd.status()?;
    let elapsed = t.elapsed();
    if !status.success() {
        return Err(format!("{cmd:?} failed: {status}").into());
    }
    Ok(elapsed)
}

/// Runs `cmd` under /usr/bin/time -f %M when present, for its peak RSS.
fn run_with_rss(program: &str, args: &[&str], stdout: Option<&Path>) -> Res<(Duration, f64)> {
    let rss_file = std::env::temp_dir().join(format!("year-rss-{}", std::process::id()));
    let mut cmd = if Path::new("/usr/bin/time").exists() {
        let mut c = Command::new("/usr/bin/time");
        c.arg("-f").arg("%M").arg("-o").arg(&rss_file).arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args);
    if let Some(out) = stdout {
        cmd.stdout(std::fs::File::create(out)?);
    }
    let elapsed = run_child(&mut cmd)?;
    let rss_kb: f64 = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|s| s.trim().lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0.0);
    let _ = std::fs::remove_file(&rss_file);
    Ok((elapsed, rss_kb / 1024.0))
}

fn measure(dir: &Path, binary: &Path) -> Res<()> {
    let v1 = dir.join("v1.db");
    let v2 = dir.join("v2.db");
    let mut report = Vec::new();
    let mut say = |line: String| {
        println!("{line}");
        report.push(line);
    };
    say(format!("## The year (`{}`)", v1.display()));
    let v1_conn = Connection::open(&v1)?;
    let q = |c: &Connection, sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0));
    say(format!(
        "- v1: {} trending rows, {} stats rows, {} videos, {} runs; file {}",
        q(&v1_conn, "SELECT count(*) FROM trending")?,
        q(&v1_conn, "SELECT count(*) FROM video_stats")?,
        q(&v1_conn, "SELECT count(*) FROM videos")?,
        q(&v1_conn, "SELECT count(*) FROM runs")?,
        mb(file_size(&v1))
    ));
    say(format!("- v1 largest: {}", sizes(&v1)?));

    // Upgrade a copy through the product's own open, sampling the disk used.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", v2.display()));
    }
    std::fs::copy(&v1, &v2)?;
    let start_disk = dir_size(dir) - file_size(&v1);
    let peak = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done, dir, v1) = (peak.clone(), done.clone(), dir.to_path_buf(), v1.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let used = dir_size(&dir).saturating_sub(file_size(&v1));
                peak.fetch_max(used, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let t = Instant::now();
    let store = Store::open(&v2)?;
    let upgrade = t.elapsed();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    say(format!(
        "- upgrade v1 -> v{} (with its VACUUM): {:.0?}; disk before {}, peak {} (v2.db, its WAL and SQLite's temporary files in the same directory are counted; the VACUUM temp file goes to the system temp dir)",
        trendsync::schema::latest_version(),
        upgrade,
        mb(start_disk),
        mb(peak.load(Ordering::Relaxed))
    ));
    store.checkpoint()?;
    drop(store);
    let v2_conn = Connection::open(&v2)?;
    v2_conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    say(format!(
        "- size: v1 {} -> compact {} ({:.2}x smaller)",
        mb(file_size(&v1)),
        mb(file_size(&v2)),
        file_size(&v1) as f64 / file_size(&v2) as f64
    ));
    say(format!("- compact largest: {}", sizes(&v2)?));

    // Storing pages on the year, through the product's write path.
    let store = Store::open(&v2)?;
    let mut rng = StdRng::seed_from_u64(7);
    let words = Words::new();
    let channels: Vec<String> = (0..100).map(|_| words.text(&mut rng, 2)).collect();
    let now = SystemClock.now().to_secs().as_i64();
    let known: Vec<String> = {
        let mut stmt = v2_conn.prepare("SELECT id FROM videos ORDER BY num DESC LIMIT 200")?;
        stmt.query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?
    };
    let (mut new_t, mut re_t) = (Vec::new(), Vec::new());
    for i in 0..40 {
        let run = format!("bench-{i}");
        store.begin_run(&run, RunKind::Run, Secs::new(now))?;
        let page: Vec<VideoRecord> = (0..50)
            .map(|_| new_video(&mut rng, &words, &channels, now).1)
            .collect();
        let t = Instant::now();
        store.store_trending_page(&run, "US", 1, &page, Secs::new(now + i))?;
        new_t.push(t.elapsed());
        let page: Vec<VideoRecord> = known[(i as usize % 4) * 50..(i as usize % 4) * 50 + 50]
            .iter()
            .map(|id| {
                let mut v = store
                    .video(id)
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| new_video(&mut rng, &words, &channels, now).1);
                v.view_count = v.view_count.map(|n| n + 1000);
                v
            })
            .collect();
        let t = Instant::now();
        store.store_trending_page(&run, "GB", 1, &page, Secs::new(now + i))?;
        re_t.push(t.elapsed());
    }
    say(format!(
        "- store a 50-video page on the year (40 pages each, median / max): new {} / {}, re-fetched {} / {}",
        ms(median(new_t.clone())),
        ms(new_t.iter().copied().max().unwrap_or_default()),
        ms(median(re_t.clone())),
        ms(re_t.iter().copied().max().unwrap_or_default())
    ));
    drop(store);

    // Search: the most common word, one in about 29k videos, a rare one.
    v2_conn.execute_batch(
        "CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, videos_fts, 'row')",
    )?;
    let pick = |sql: &str| -> Res<(String, i64)> {
        Ok(v2_conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))?)
    };
    let common = pick("SELECT term, doc FROM vocab ORDER BY doc DESC LIMIT 1")?;
    let mid = pick("SELECT term, doc FROM vocab ORDER BY abs(doc - 29000) LIMIT 1")?;
    let rare =
        pick("SELECT term, doc FROM vocab WHERE doc BETWEEN 20 AND 60 ORDER BY doc DESC LIMIT 1")?;
    let store = Store::open_read_only(&v2)?.ok_or("v2 vanished")?;
    say("- search (median of 5 after a warm-up; the product's `Store::search`, limit 20):".into());
    say("  | word | videos | v1 | v1 --region US | compact | compact --region US | ratio |".into());
    say("  |---|---|---|---|---|---|---|".into());
    for (word, docs) in [&common, &mid, &rare] {
        let old = time_it(5, || {
            let mut stmt = v1_conn.prepare_cached(V1_SEARCH)?;
            let n = stmt
                .query_map(params![word, None::<String>, 20], |_| Ok(()))?
                .count();
            std::hint::black_box(n);
            Ok(())
        })?;
        let old_region = time_it(5, || {
            let mut stmt = v1_conn.prepare_cached(V1_SEARCH)?;
            let n = stmt.query_map(params![word, "US", 20], |_| Ok(()))?.count();
            std::hint::black_box(n);
            Ok(())
        })?;
        let new = time_it(5, || {
            std::hint::black_box(store.search(word, None, 20)?);
            Ok(())
        })?;
        let new_region = time_it(5, || {
            std::hint::black_box(store.search(word, Some("US"), 20)?);
            Ok(())
        })?;
        say(format!(
            "  | {word} | {docs} | {} | {} | {} | {} | {:.2}x |",
            ms(old),
            ms(old_region),
            ms(new),
            ms(new_region),
            new_region.as_secs_f64() / new.as_secs_f64()
        ));
    }
    drop(store);
    drop(v1_conn);

    // Export of a year of one region, against sqlite3 -csv on the same join.
    let csv_out = dir.join("export-us.csv");
    let db = v2.display().to_string();
    let out = csv_out.display().to_string();
    let (ours, ours_rss) = run_with_rss(
        &binary.display().to_string(),
        &[
            "--db", &db, "export", "--region", "US", "--format", "csv", "--output", &out,
        ],
        None,
    )?;
    let rows = std::fs::read_to_string(&csv_out)
        .map(|s| s.lines().count())
        .unwrap_or(0);
    let join = "SELECT v.id, date(f.fetched_at, 'unixepoch'), v.title, v.channel_title, v.category_id,
        v.published_at, v.tags, p.views, p.likes, NULL, p.comments, v.thumbnail_url,
        p.comments IS NULL, p.likes IS NULL, 0, v.description, 'US', p.rank,
        strftime('%Y-%m-%dT%H:%M:%SZ', f.fetched_at + p.offset_s, 'unixepoch'), c.title, v.duration_s
        FROM fetches AS f JOIN places AS p ON p.fetch = f.num JOIN videos AS v ON v.num = p.video
        LEFT JOIN categories AS c ON c.region = 'US' AND c.id = v.category_id
        WHERE f.region = (SELECT num FROM regions WHERE code = 'US') AND f.search = 0
        ORDER BY f.fetched_at, f.num, p.rank";
    let sqlite_out = dir.join("export-us-sqlite3.csv");
    let (theirs, theirs_rss) = run_with_rss(
        "sqlite3",
        &["-csv", "-header", &db, join],
        Some(&sqlite_out),
    )?;
    say(format!(
        "- export a year of US as CSV ({} lines, {}): trendsync {:.1?} (peak RSS {:.0} MB), sqlite3 -csv {:.1?} (peak RSS {:.0} MB): {:.2}x",
        rows,
        mb(std::fs::metadata(&csv_out).map(|m| m.len()).unwrap_or(0)),
        ours,
        ours_rss,
        theirs,
        theirs_rss,
        ours.as_secs_f64() / theirs.as_secs_f64()
    ));
    let _ = std::fs::remove_file(&csv_out);
    let _ = std::fs::remove_file(&sqlite_out);

    // Prune 90 days while a writer stores a page every 200 ms, as a cron run would.
    let days: i64 = {
        let c = Connection::open(&v2)?;
        let (lo, hi): (i64, i64) = c.query_row(
            "SELECT min(fetched_at), max(fetched_at) FROM fetches",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        (hi - lo) / 86_400 + 1
    };
    let keep = (days - 90).max(1);
    let waits = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (waits, stop, v2) = (waits.clone(), stop.clone(), v2.clone());
        std::thread::spawn(move || -> Res<()> {
            let store = Store::open(&v2)?;
            let mut rng = StdRng::seed_from_u64(9);
            let words = Words::new();
            let channels = vec!["c".to_string()];
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let run = format!("concurrent-{i}");
                let page: Vec<VideoRecord> = (0..50)
                    .map(|_| new_video(&mut rng, &words, &channels, now).1)
                    .collect();
                let t = Instant::now();
                store.begin_run(&run, RunKind::Run, Secs::new(now))?;
                store.store_trending_page(&run, "US", 1, &page, Secs::new(now))?;
                waits.lock().map_err(|_| "poisoned")?.push(t.elapsed());
                i += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            Ok(())
        })
    };
    let before = file_size(&v2);
    let older = format!("{keep}d");
    let (prune_t, _) = run_with_rss(
        &binary.display().to_string(),
        &["--db", &db, "prune", "--older-than", &older, "--json"],
        Some(&dir.join("prune.json")),
    )?;
    stop.store(true, Ordering::Relaxed);
    writer.join().map_err(|_| "writer panicked")??;
    let waits = waits.lock().map_err(|_| "poisoned")?.clone();
    let pruned = std::fs::read_to_string(dir.join("prune.json"))?;
    let (vacuum_t, _) = run_with_rss(
        &binary.display().to_string(),
        &[
            "--db",
            &db,
            "prune",
            "--older-than",
            &older,
            "--vacuum",
            "--json",
        ],
        Some(&dir.join("vacuum.json")),
    )?;
    say(format!(
        "- prune --older-than {older} (90 of {days} days): {prune_t:.1?}; {}",
        pruned.trim()
    ));
    say(format!(
        "- a concurrent writer (begin_run + a 50-video page every 200 ms, {} pages during the prune): median {}, longest {}",
        waits.len(),
        ms(median(if waits.is_empty() {
            vec![Duration::ZERO]
        } else {
            waits.clone()
        })),
        ms(waits.iter().copied().max().unwrap_or_default())
    ));
    say(format!(
        "- then prune --vacuum: {vacuum_t:.1?}; file {} -> {}",
        mb(before),
        mb(file_size(&v2))
    ));
    std::fs::write(dir.join("report.md"), report.join("\n") + "\n")?;
    Ok(())
}

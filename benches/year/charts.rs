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

#[path = "charts/bulk.rs"]
mod bulk;
#[path = "charts/simulation.rs"]
mod simulation;
#[path = "charts/via_store.rs"]
mod via_store;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use trendsync::store::Store;

use bulk::Bulk;
use simulation::simulate;
use via_store::ViaStore;

use super::{Res, Words, file_size, mb, median, ms, run_with_rss};

fn fresh(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// The year ends at the last full hour, so `export --since 30d` is its last month.
fn year_end() -> i64 {
    jiff::Timestamp::now().as_second() / 3600 * 3600
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

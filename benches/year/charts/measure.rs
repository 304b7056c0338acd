//! `charts-measure`: the bytes per snapshot row of a generated year, the release
//! binary's `video ID` against it, and the peak RSS of `export --per day`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use trendsync::store::Store;

use crate::{Res, file_size, mb, median, ms, run_with_rss};

/// `trendsync --db DB ARGS`, timed; its stdout discarded.
pub(super) fn time_binary(binary: &Path, db: &Path, args: &[&str]) -> Res<Duration> {
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

//! What a hostile or unlucky operator does (issue 16): output streams that are closed,
//! full or cut short, a `RUST_LOG` that turns everything off, prunes interrupted at
//! any point, files that are not files at `--output` and `--metrics-file`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use trendsync::clock::{Clock, SystemClock};

use crate::common::harness::Harness;
use crate::common::upstream::{API_KEY, answer, page1};
use crate::common::{Costs, Trendsync, contains, hold_lock, lacks};

/// How stdout and stderr are broken for one invocation.
#[derive(Debug, Clone, Copy)]
enum Broken {
    /// Both closed before the program starts (`>&- 2>&-`).
    Closed,
    /// Both on `/dev/full`: every write fails with ENOSPC.
    Full,
    /// Both on one pipe whose reader takes three lines and goes (`2>&1 | head -n 3`).
    CutShort,
}

/// Runs `t` with its output broken as `how`; returns the exit code, or the signal
/// that ended it as its negative.
fn run_broken(t: Trendsync, how: Broken) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let status = match how {
        Broken::Closed => {
            // The shell closes both and execs the program, as a crontab line would.
            let mut sh = t
                .within(
                    std::path::Path::new("sh"),
                    &["-c", "exec \"$@\" >&- 2>&-", "sh"],
                )
                .cmd;
            sh.stdin(Stdio::null()).status().expect("running sh")
        }
        Broken::Full => {
            let full = || {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .expect("opening /dev/full")
            };
            let mut cmd = t.cmd;
            cmd.stdin(Stdio::null())
                .stdout(full())
                .stderr(full())
                .status()
                .expect("running trendsync")
        }
        Broken::CutShort => {
            let (reader, writer) = std::io::pipe().expect("a pipe");
            let mut cmd = t.cmd;
            cmd.stdin(Stdio::null())
                .stdout(writer.try_clone().expect("cloning the pipe"))
                .stderr(writer);
            let mut child = cmd.spawn().expect("starting trendsync");
            // The parent's ends of the writer go with the command.
            drop(cmd);
            let mut lines = BufReader::new(reader).lines();
            for _ in 0..3 {
                if lines.next().is_none() {
                    break;
                }
            }
            drop(lines);
            child.wait().expect("waiting for trendsync")
        }
    };
    status
        .code()
        .unwrap_or_else(|| -status.signal().unwrap_or(0))
}

/// Every command with stdout and stderr closed, on `/dev/full`, and on a pipe cut
/// short: never a panic (101) nor a signal. A command that acts (run, a charge, a
/// prune, a health check) ends with the code of what it did; one whose whole point is
/// its output ends with 1 when that output hit a full disk, and as usual otherwise.
#[test]
fn broken_stdout_and_stderr_never_panic_nor_change_the_outcome() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();

    // (arguments, whether the command acts rather than only prints, its exit code)
    let commands: &[(&[&str], bool, i32)] = &[
        (&["run", "--region", "US"], true, 0),
        (&["run", "--region", "US", "--json"], true, 0),
        (&["run", "--dry-run"], true, 0),
        (&["backfill", "--region", "GB", "--json"], true, 0),
        (&["budget", "charge", "videos.list"], true, 0),
        (
            &["budget", "charge", "videos.list", "--count", "99999"],
            true,
            75,
        ),
        (&["budget", "charge", "videos.list", "--json"], true, 0),
        (&["status", "--stale-after", "1h"], true, 1),
        (&["prune", "--older-than", "3000d"], true, 0),
        (&["prune", "--older-than", "3000d", "--json"], true, 0),
        (&["--regions", "missing.toml", "status"], true, 78),
        (&["--regions", "missing.toml", "run", "--json"], true, 78),
        (&["search", "\"unbalanced"], true, 2),
        (&["budget"], false, 0),
        (&["budget", "--json"], false, 0),
        (&["status"], false, 0),
        (&["runs", "--json"], false, 0),
        (&["search", "the"], false, 0),
        (&["export"], false, 0),
        (&["export", "--format", "jsonl"], false, 0),
        (&["crontab"], false, 0),
        (&["completions", "bash"], false, 0),
    ];
    let mut wrong = Vec::new();
    for (args, acts, code) in commands {
        for how in [Broken::Closed, Broken::Full, Broken::CutShort] {
            let t = h.cmd().arg("-v").args(*args);
            let got = run_broken(t, how);
            let want = match how {
                Broken::Full if !acts => 1,
                _ => *code,
            };
            if got != want {
                wrong.push(format!("{args:?} {how:?}: exit {got}, want {want}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A fatal error is on stderr whatever `RUST_LOG` says (docs/commands.md).
#[test]
fn a_fatal_error_is_printed_whatever_rust_log_says() {
    let h = Harness::new(None);
    for filter in [
        "off",
        "trendsync=off",
        "reqwest=debug",
        "error,trendsync=off",
    ] {
        let cases: [(Trendsync, i32, &str); 4] = [
            (
                h.bare().args(["--costs", "missing.toml", "budget"]),
                78,
                "missing.toml",
            ),
            (h.bare().args(["run", "--region", "US"]), 78, "API key"),
            (
                h.bare().args(["--db", "no/such/dir/t.db", "status"]),
                78,
                "no/such/dir",
            ),
            (
                h.bare().env("YOUTUBE_API_KEY", API_KEY).args([
                    "--api-base",
                    "http://127.0.0.1:9",
                    "run",
                    "--region",
                    "US",
                ]),
                1,
                "connection",
            ),
        ];
        for (t, code, says) in cases {
            t.env("RUST_LOG", filter)
                .expect_stderr(says)
                .allow_stderr(crate::common::ended("failed"))
                .status(code)
                .run();
        }
    }
}

/// Old snapshots for prune to delete: `fetches` fetches of 50 places each, 100 days
/// old, every place a video of its own whose title holds "Zyzzogeton", added beside
/// what a real run stored. Then the damage a prune of an older version left when it
/// was killed between its phases: the snapshots of a few fetches gone, their videos
/// (and full-text entries) still there.
fn fill_with_old_snapshots(db: &std::path::Path, fetches: i64) {
    let conn = rusqlite::Connection::open(db).expect("opening the database to fill it");
    let old = SystemClock.now().to_secs().as_i64() - 100 * 86_400;
    conn.execute_batch(&format!(
        "BEGIN;
         INSERT INTO videos (id, title, description, channel_id, channel_title, published_at,
                             tags, tags_text, first_seen_at, last_seen_at)
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {videos})
         SELECT printf('old%08d', i), printf('Zyzzogeton number %d', i), 'gone soon',
                'UCold', 'Old Channel', '2020-01-01T00:00:00Z', NULL, NULL, {old}, {old}
         FROM n;
         INSERT INTO runs (run_id, kind, started_at, ended_at, status, units, calls)
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {fetches})
         SELECT printf('old-run-%d', i), 'run', {old} + i, {old} + i, 'complete', 1, 1 FROM n;
         INSERT INTO run_nums (run_id) SELECT run_id FROM runs WHERE run_id LIKE 'old-run-%';
         INSERT INTO fetches (run, region, search, fetched_at)
         SELECT r.num, (SELECT min(num) FROM regions), 0, {old} + CAST(substr(r.run_id, 9) AS INTEGER)
         FROM run_nums AS r WHERE r.run_id LIKE 'old-run-%';
         INSERT INTO places (fetch, rank, video, offset_s)
         SELECT f.num, v.k % 50 + 1, v.num, 0
         FROM (SELECT num, row_number() OVER (ORDER BY num) - 1 AS k FROM videos
               WHERE id LIKE 'old%') AS v
         JOIN (SELECT num, row_number() OVER (ORDER BY num) - 1 AS j FROM fetches
               WHERE fetched_at < {old} + 1000000) AS f
           ON f.j = v.k / 50;
         INSERT OR IGNORE INTO video_regions (video, region)
         SELECT num, (SELECT min(num) FROM regions) FROM videos WHERE id LIKE 'old%';
         DELETE FROM places WHERE fetch IN (SELECT num FROM fetches WHERE fetched_at < {old} + 4);
         DELETE FROM fetches WHERE fetched_at < {old} + 4;
         COMMIT;",
        videos = fetches * 50,
    ))
    .expect("filling the database with old snapshots");
}

/// Prunes interrupted at random points by SIGTERM, SIGINT or `kill -9`, then one
/// clean prune: no video is left that no snapshot refers to, the full-text index is
/// whole, and `search` finds nothing pruned. A signal stops a prune cleanly (143 or
/// 130, its summary printed), never kills it.
#[test]
fn interrupted_prunes_leave_nothing_behind_for_the_next() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();
    fill_with_old_snapshots(&h.db_path(), 300);
    let orphans = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM videos AS v
             WHERE NOT EXISTS (SELECT 1 FROM places WHERE video = v.num)
               AND NOT EXISTS (SELECT 1 FROM extra_counts WHERE video = v.num)",
            [],
            |r| r.get(0),
        )
        .expect("counting orphan videos")
    };
    assert_eq!(orphans(&h.db()), 150, "the older prune's leftovers");

    let signals = [("TERM", 143), ("INT", 130), ("KILL", -9)];
    let mut seen = Vec::new();
    for round in 0..12 {
        let (name, code) = signals[round % signals.len()];
        // Done before the signal came, it says nothing of it; a killed one's stderr
        // is not checked.
        let prune = h
            .bare()
            .args(["prune", "--older-than", "45d"])
            .allow_stderr(format!("SIG{name}: stopping the prune"))
            .start();
        // The signal must find the prune, not a process still starting: before its
        // handler is in place a signal kills it whatever it would do.
        wait_until_it_catches(prune.child.id(), 15);
        std::thread::sleep(std::time::Duration::from_millis(rand::random_range(
            40..250,
        )));
        let killed = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(prune.child.id().to_string())
            .status()
            .expect("running kill");
        assert!(killed.success());
        let out = prune.killed();
        let got = {
            use std::os::unix::process::ExitStatusExt;
            out.status
                .code()
                .unwrap_or_else(|| -out.status.signal().unwrap_or(0))
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            got == code || got == 0,
            "prune after SIG{name}: exit {got}, want {code} (or 0 when done first): {stderr}"
        );
        if got > 0 {
            assert!(
                stdout.contains("deleted snapshots"),
                "a stopped prune prints its summary: {stdout:?} {stderr}"
            );
            assert!(stderr.contains(&format!("SIG{name}")), "{stderr}");
        }
        seen.push(got);
    }
    eprintln!("exits of the interrupted prunes: {seen:?}");
    assert!(
        seen.iter().any(|&c| c != 0),
        "no prune was interrupted: {seen:?}"
    );

    let clean = h
        .bare()
        .args(["prune", "--older-than", "45d", "--json"])
        .run();
    assert_eq!(clean.json()["interrupted"], false);

    let conn = rusqlite::Connection::open(h.db_path()).expect("opening the database");
    assert_eq!(orphans(&conn), 0, "videos no snapshot refers to");
    let old: i64 = conn
        .query_row(
            "SELECT count(*) FROM videos WHERE id LIKE 'old%'",
            [],
            |r| r.get(0),
        )
        .expect("counting old videos");
    assert_eq!(old, 0, "every old video went");
    let kept: i64 = conn
        .query_row("SELECT count(*) FROM videos", [], |r| r.get(0))
        .expect("counting videos");
    assert!(kept > 0, "the recent run's videos stay");
    conn.execute(
        "INSERT INTO videos_fts (videos_fts, rank) VALUES ('integrity-check', 1)",
        [],
    )
    .expect("the full-text index agrees with the videos");
    let stale_regions: i64 = conn
        .query_row(
            "SELECT count(*) FROM video_regions AS vr
             WHERE NOT EXISTS (SELECT 1 FROM places AS p JOIN fetches AS f ON f.num = p.fetch
                               WHERE p.video = vr.video AND f.region = vr.region)",
            [],
            |r| r.get(0),
        )
        .expect("counting stale video regions");
    assert_eq!(stale_regions, 0);
    drop(conn);

    let found = h.bare().args(["search", "Zyzzogeton", "--json"]).run();
    assert_eq!(
        found.json()["results"],
        serde_json::json!([]),
        "{}",
        found.stdout
    );
    let dry = h
        .bare()
        .args(["prune", "--older-than", "45d", "--dry-run", "--json"])
        .run();
    assert_eq!(dry.json()["videos_deleted"], 0, "{}", dry.stdout);
}

/// Permission bits of `path`.
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
}

/// Names in `dir` that look like a temporary file.
fn temps(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("listing")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// `--output` and `--metrics-file` replace a regular file keeping its mode, and refuse
/// anything else at the path with 78, saying what it is, leaving it as it was: a FIFO
/// (whose reader would hang), a symbolic link, a directory, a device.
#[test]
fn output_files_replace_only_regular_files_and_keep_their_mode() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();
    let dir = h.scratch.path().to_path_buf();

    // A regular file keeps its mode, through both writers.
    for (name, args) in [
        ("out.csv", &["export", "--output"][..]),
        ("trendsync.prom", &["--metrics-file"][..]),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, "old\n").expect("an earlier file");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        }
        let t = h.cmd().args(args).arg(&path);
        let t = if name.ends_with(".prom") {
            t.args(["run", "--region", "US"])
        } else {
            t
        };
        t.run();
        assert_ne!(std::fs::read_to_string(&path).expect("reading"), "old\n");
        assert_eq!(mode(&path), 0o640, "{name} keeps its mode");
    }

    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let target = dir.join("target.csv");
    std::fs::write(&target, "kept\n").expect("a link's target");
    let link = dir.join("link.csv");
    std::os::unix::fs::symlink(&target, &link).expect("a symlink");
    let subdir = dir.join("subdir");
    std::fs::create_dir(&subdir).expect("a directory");
    let cases: [(&std::path::Path, &str); 4] = [
        (&fifo, "a FIFO"),
        (&link, "a symbolic link"),
        (&subdir, "a directory"),
        (std::path::Path::new("/dev/null"), "a character device"),
    ];
    let calls_before = h.fake.calls().len();
    for (path, what) in cases {
        for t in [
            h.bare().args(["export", "--output"]).arg(path),
            h.cmd()
                .arg("--metrics-file")
                .arg(path)
                .args(["run", "--region", "US"]),
            h.cmd()
                .arg("--metrics-file")
                .arg(path)
                .args(["run", "--region", "US", "--dry-run"]),
            h.bare().arg("--metrics-file").arg(path).arg("crontab"),
        ] {
            t.expect_stderr(what).status(78).run();
        }
    }
    assert_eq!(h.fake.calls().len(), calls_before, "no call made");
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .expect("fifo")
            .file_type()
            .is_fifo()
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).expect("reading"), "kept\n");
    assert!(temps(&dir).is_empty(), "{:?}", temps(&dir));
}

/// An export to a file stopped by SIGTERM leaves the old file and no temporary file;
/// one killed by `kill -9` leaves its temporary file, which the next export removes.
/// CSV and Parquet alike (Parquet writes its footer only at the end).
#[test]
fn an_export_stopped_or_killed_leaves_no_temporary_file_behind() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();
    fill_with_old_snapshots(&h.db_path(), 1000);
    let dir = h.scratch.path().to_path_buf();
    for format in ["csv", "parquet"] {
        let out = dir.join(format!("out.{format}"));
        std::fs::write(&out, "old\n").expect("an earlier export");

        for (signal, code) in [("TERM", 143), ("INT", 130), ("KILL", -9)] {
            // A killed export's stderr is not checked.
            let export = h
                .bare()
                .args(["export", "--format", format, "--output"])
                .arg(&out)
                .expect_stderr(format!("SIG{signal}: stopping the export"))
                .expect_stderr("export stopped;")
                .start();
            let started = std::time::Instant::now();
            while temps(&dir).is_empty() {
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(20),
                    "the {format} export never began writing"
                );
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            let killed = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(export.child.id().to_string())
                .status()
                .expect("running kill");
            assert!(killed.success());
            let ended = export.killed();
            let got = {
                use std::os::unix::process::ExitStatusExt;
                ended
                    .status
                    .code()
                    .unwrap_or_else(|| -ended.status.signal().unwrap_or(0))
            };
            let stderr = String::from_utf8_lossy(&ended.stderr);
            assert_eq!(got, code, "{format} export after SIG{signal}: {stderr}");
            assert_eq!(std::fs::read_to_string(&out).expect("reading"), "old\n");
            if signal == "KILL" {
                assert_eq!(temps(&dir).len(), 1, "kill -9 leaves its temp");
            } else {
                assert!(temps(&dir).is_empty(), "SIG{signal}: {:?}", temps(&dir));
            }
        }
        h.bare()
            .args(["export", "--format", format, "--output"])
            .arg(&out)
            .run();
        assert!(temps(&dir).is_empty(), "{:?}", temps(&dir));
    }
    let rows = std::fs::read_to_string(dir.join("out.csv"))
        .expect("reading")
        .lines()
        .count();
    assert!(rows > 40_000, "{rows} rows");
    let parquet = std::fs::read(dir.join("out.parquet")).expect("reading");
    assert!(
        parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"),
        "a whole Parquet file"
    );
}

/// A region that completed shows no reason in `runs` and `status`, even when another
/// region of its run failed and the run's stop reason is that failure.
#[test]
fn a_completed_region_never_shows_another_regions_failure() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.fake
        .answer_instead(page1("GB"), answer(200, "{\"items\": ["));
    h.cmd()
        .args(["run", "--region", "US", "--region", "GB"])
        .expect_stderr("malformed HTTP 200 response")
        .expect_ended("failed")
        .status(1)
        .run();
    let runs = h.bare().args(["runs", "--json"]).run().json();
    let reason_of = |rows: &serde_json::Value, key: &str, code: &str| {
        rows.as_array()
            .expect("an array")
            .iter()
            .find(|r| r[key] == code)
            .unwrap_or_else(|| panic!("no {code} in {rows}"))
            .clone()
    };
    let us = reason_of(&runs["runs"], "region", "US");
    let gb = reason_of(&runs["runs"], "region", "GB");
    assert_eq!(us["status"], "complete", "{runs}");
    assert_eq!(us["reason"], serde_json::Value::Null, "{runs}");
    assert!(gb["reason"].is_string(), "{runs}");
    let status = h.bare().args(["status", "--json"]).run().json();
    let us = reason_of(&status["regions"], "code", "US");
    assert_eq!(us["last_status"], "complete", "{status}");
    assert_eq!(us["last_reason"], serde_json::Value::Null, "{status}");
}

/// Runs `t` on a terminal, which must succeed, and returns what the terminal received.
fn on_terminal(t: Trendsync) -> Vec<u8> {
    let out = t.on_terminal();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Titles that a spreadsheet would run, and titles that would act on a terminal.
fn hostile_titles(db: &std::path::Path) {
    let conn = rusqlite::Connection::open(db).expect("opening the database");
    let titles = [
        "=HYPERLINK(\"http://evil.example\",\"click\")",
        "+1",
        "@SUM(1)",
        "-2+3",
        "\u{1b}]0;owned\u{7}\u{1b}[2JTitle \u{202e}reversed",
    ];
    for (i, title) in titles.iter().enumerate() {
        let changed = conn
            .execute(
                "UPDATE videos SET title = ?1, channel_title = ?1
                 WHERE num = (SELECT num FROM videos ORDER BY num LIMIT 1 OFFSET ?2)",
                rusqlite::params![title, i64::try_from(i).expect("small")],
            )
            .expect("setting a title");
        assert_eq!(changed, 1);
    }
}

/// `export` to a terminal shows the upstream's control characters escaped, as
/// `search` does; to a file it keeps the text as it is. CSV cells a spreadsheet would
/// run as formulas start with a single quote, wherever they go.
#[test]
fn export_shows_control_characters_on_a_terminal_and_no_formula_runs() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();
    hostile_titles(&h.db_path());

    for format in ["csv", "jsonl"] {
        let shown = on_terminal(h.bare().args(["export", "--format", format]));
        let text = String::from_utf8_lossy(&shown);
        assert!(
            !shown.contains(&0x1b) && !text.contains('\u{202e}') && !text.contains('\u{7}'),
            "{format}: raw control characters reached the terminal: {text:?}"
        );
        assert!(text.contains("owned"), "{format}: {text}");
    }

    let out = h.scratch.file("out.csv");
    h.bare().args(["export", "--output"]).arg(&out).run();
    let mut reader = csv::Reader::from_path(&out).expect("reading the CSV");
    let headers = reader.headers().expect("a header").clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let (title, channel) = (col("title"), col("channel_title"));
    let mut seen = Vec::new();
    for record in reader.records() {
        let record = record.expect("a CSV record");
        for cell in [&record[title], &record[channel]] {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "a cell a spreadsheet would run: {cell:?}"
            );
        }
        seen.push(record[title].to_owned());
    }
    for want in [
        "'=HYPERLINK(\"http://evil.example\",\"click\")",
        "'+1",
        "'@SUM(1)",
        "'-2+3",
        // To a file, the text is kept as it is.
        "\u{1b}]0;owned\u{7}\u{1b}[2JTitle \u{202e}reversed",
    ] {
        assert!(seen.iter().any(|t| t == want), "{want:?} not in {seen:?}");
    }
}

/// A run whose start cannot be recorded stops before its first charge (exit 1): no
/// call, no unit spent that no history would show.
#[test]
fn a_run_whose_start_cannot_be_recorded_charges_and_calls_nothing() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();
    let used = h.budget()["used"].clone();
    let calls = h.fake.calls().len();
    rusqlite::Connection::open(h.db_path())
        .expect("opening the database")
        .execute_batch(
            "CREATE TRIGGER refuse_runs BEFORE INSERT ON runs
             BEGIN SELECT RAISE(ABORT, 'the disk says no'); END;",
        )
        .expect("a trigger that refuses new runs");
    let ran = h
        .cmd()
        .args(["run", "--region", "US", "--json"])
        .expect_stderr("the disk says no")
        .expect_ended("failed")
        .status(1)
        .stderr(lacks("NOT NULL"))
        .run();
    assert_eq!(ran.json()["status"], "failed");
    assert_eq!(h.fake.calls().len(), calls, "no call made");
    assert_eq!(h.budget()["used"], used, "nothing charged");
}

/// A read command on a file of an older layout names the command that upgrades it,
/// and that command works.
#[test]
fn a_read_command_on_an_old_file_names_the_command_that_upgrades_it() {
    let s = crate::common::Scratch::new();
    let db = s.file("trendsync.db");
    trendsync::store::Store::create_at_version(&db, 1).expect("creating a version 1 file");
    let ran = s
        .cmd()
        .arg("--db")
        .arg(&db)
        .arg("status")
        .expect_stderr("older than this build's version")
        .status(1)
        .run();
    let advice = ran
        .stderr
        .split('`')
        .find(|part| part.starts_with("trendsync ") && part.contains("prune"))
        .unwrap_or_else(|| panic!("no command to run in {}", ran.stderr))
        .to_owned();
    let words: Vec<&str> = advice.split_whitespace().skip(1).collect();
    s.cmd().args(&words).run();
    s.cmd().arg("--db").arg(&db).arg("status").run();
}

/// A Redis that can never serve the URL as written is a configuration error (78)
/// saying what to fix: a database the server does not have, a Cluster URL pointed at
/// a lone server. A URL without a scheme is never echoed (it may be a password), and
/// a password or database given as a query parameter the client ignores is named.
#[test]
fn redis_urls_that_cannot_work_are_configuration_errors_that_say_why() {
    let server = crate::common::RedisServer::start();
    let s = crate::common::Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(1000).ceiling(1000).to_toml(),
    );
    let charge = |url: &str, says: &str| {
        s.cmd()
            .costs(&costs)
            .args(["--redis-url", url, "budget", "charge", "videos.list"])
            .expect_stderr(says)
    };
    let port = server.port();
    for (url, says) in [
        (format!("redis://127.0.0.1:{port}/99"), "database below"),
        (
            format!("redis+cluster://127.0.0.1:{port}"),
            "is not a Redis Cluster",
        ),
    ] {
        charge(&url, says).status(78).run();
    }

    charge("s3cretpw", "no scheme")
        .status(78)
        .stderr(lacks("s3cretpw"))
        .run();

    charge(
        &format!("redis://127.0.0.1:{port}/0?password=s3cret"),
        "?password= is ignored",
    )
    .stderr(lacks("s3cret\""))
    .run();
}

/// The command of a crontab line as cron hands it to the shell (crontab(5)): `\%`
/// becomes `%`, and an unescaped `%` ends the command.
fn as_cron_runs_it(line: &str) -> String {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).expect("a schedule field");
        rest = &rest[end..];
    }
    let mut command = String::new();
    let mut chars = rest.trim_start().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'%') => {
                command.push('%');
                chars.next();
            }
            '%' => break,
            c => command.push(c),
        }
    }
    command
}

/// A `%` in a path reaches the shell whole: crontab escapes it, and the line runs
/// where it should, its log beside the database.
#[test]
fn crontab_escapes_percent_signs_for_cron() {
    let s = crate::common::Scratch::new();
    let dir = s.file("at 100% capacity");
    std::fs::create_dir(&dir).expect("a directory with a percent sign");
    let db = dir.join("trendsync.db");
    let ran = s.cmd().arg("--db").arg(&db).arg("crontab").run();
    let line = ran
        .stdout
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .expect("a crontab line");
    let command = as_cron_runs_it(line);
    assert!(
        command.ends_with("2>&1"),
        "cron cuts the command: {command:?}"
    );
    let ran = Command::new("sh")
        .args(["-c", &command])
        .env_remove("YOUTUBE_API_KEY")
        .env_remove("TRENDSYNC_DB")
        .output()
        .expect("running the line");
    assert_eq!(ran.status.code(), Some(78), "no key: {command}");
    let log = std::fs::read_to_string(dir.join("trendsync.log")).expect("the log beside the db");
    assert!(log.contains("API key"), "{log}");
}

/// A run recorded by a clock a day ahead (`faketime`) is not a fresh fetch: `status`
/// says it is in the future, calls the region stale, and the health check fails
/// instead of passing for as long as the clocks disagree.
#[test]
fn a_run_dated_in_the_future_is_stale_and_says_so() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.regions("[defaults]\npages = 2\n\n[[region]]\ncode = \"US\"\noffset = 0\n");
    h.cmd().args(["run"]).run();
    h.bare().args(["status", "--stale-after", "2h"]).run();
    // An upstream that agrees with the clock a day ahead: the run is dated so whole
    // (a clock that the upstream disagrees with stops the run at its first call).
    h.fake.shift_dates(86_400);
    h.cmd().args(["run"]).faketime(&["-f", "+1d"]).run();
    h.fake.shift_dates(0);

    h.bare()
        .args(["status", "--stale-after", "2h"])
        .expect_stderr("stale: US not fetched completely")
        .status(1)
        .run();
    h.bare()
        .arg("status")
        .stdout(contains("in the future"))
        .stdout(lacks("0s ago"))
        .run();
    let json = h.bare().args(["status", "--json"]).run().json();
    let us = json["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .find(|r| r["code"] == "US")
        .expect("US")
        .clone();
    assert_eq!(us["stale"], true, "{json}");
}

/// A run killed mid-way (`kill -9`) shows the units it charged, in `runs` and
/// `status`, not 0: they were spent whether or not it lived to record its end.
#[test]
fn a_killed_run_shows_the_units_it_charged() {
    let mut h = Harness::with(
        crate::common::upstream::FakeUpstream::youtube_after(std::time::Duration::from_secs(30)),
        None,
    );
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    let mut child = h
        .cmd()
        .args(["run", "--region", "US", "--region", "GB"])
        .spawn();
    let started = std::time::Instant::now();
    while h.fake.received() < 2 {
        assert!(
            child.try_wait().expect("polling").is_none(),
            "the run ended"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().expect("kill -9");
    child.wait().expect("reaping");

    let used = h.budget()["used"].as_u64().expect("used");
    assert!(used >= 2, "{used}");
    let runs = h.bare().args(["runs", "--json"]).run().json();
    let rows = runs["runs"].as_array().expect("runs");
    let units: u64 = rows.iter().map(|r| r["units"].as_u64().unwrap_or(0)).sum();
    assert_eq!(
        units, used,
        "the regions' units add up to what was charged: {runs}"
    );
    for r in rows {
        assert_eq!(r["status"], "abandoned", "{runs}");
        assert!(r["units"].as_u64().unwrap_or(0) >= 1, "{runs}");
    }
}

/// One database under two names: through a symbolic link a second run of a region
/// being fetched is skipped (the locks go by the file's canonical path) and does not
/// take the live run for an abandoned one; a hard-linked file is refused (78).
#[test]
fn one_database_under_two_names_shares_its_locks_and_a_hard_link_is_refused() {
    let mut h = Harness::with(
        crate::common::upstream::FakeUpstream::youtube_after(std::time::Duration::from_millis(600)),
        None,
    );
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    let link = h.scratch.file("other-name.db");
    h.cmd().args(["run", "--region", "US"]).run();
    std::os::unix::fs::symlink(h.db_path(), &link).expect("a symlink");

    let mut first = h.cmd().args(["run", "--region", "US", "--json"]).start();
    let before = h.fake.received();
    let started = std::time::Instant::now();
    while h.fake.received() == before {
        assert!(
            first.child.try_wait().expect("polling").is_none(),
            "the run ended"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let calls = h.fake.received();
    let second = h
        .cmd()
        .arg("--db")
        .arg(&link)
        .args(["run", "--region", "US", "--json"])
        .expect_ended("skipped")
        .status(75)
        .run();
    assert_eq!(second.json()["status"], "skipped", "{}", second.stdout);
    first.finish();
    assert!(h.fake.received() >= calls);
    let runs = h.bare().args(["runs", "--json"]).run().json();
    assert!(
        runs["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .all(|r| r["status"] != "abandoned"),
        "{runs}"
    );

    let hard = h.scratch.file("hard-link.db");
    std::fs::hard_link(h.db_path(), &hard).expect("a hard link");
    for t in [
        h.bare().arg("--db").arg(&hard).arg("status"),
        h.bare().arg("status"),
        h.cmd().args(["run", "--region", "US"]),
    ] {
        t.expect_stderr("hard links").status(78).run();
    }
}

/// Writers wait for a `prune --vacuum` (here its lock, held longer than a small
/// file's vacuum takes) instead of failing on SQLite's busy timeout, then do their
/// work: exit 0, never 1. A real vacuum alongside them leaves every exit 0.
#[test]
fn writers_wait_for_a_vacuum_and_never_fail_for_it() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();

    // Holding the maintenance byte as a vacuum does.
    let lock = hold_lock(&h.db_path(), 0, true);
    let held = std::time::Duration::from_millis(1500);
    let release = std::thread::spawn(move || {
        std::thread::sleep(held);
        drop(lock);
    });
    let started = std::time::Instant::now();
    let charge = h.bare().args(["budget", "charge", "videos.list"]).start();
    let run = h.cmd().args(["run", "--region", "GB"]).start();
    for writer in [charge, run] {
        writer.finish();
    }
    assert!(
        started.elapsed() >= held,
        "the writers waited for the vacuum"
    );
    release.join().expect("releasing");

    fill_with_old_snapshots(&h.db_path(), 300);
    let prune = h
        .bare()
        .args(["prune", "--older-than", "45d", "--vacuum", "--json"])
        .start();
    let writers: Vec<_> = (0..3)
        .map(|_| h.bare().args(["budget", "charge", "videos.list"]).start())
        .collect();
    for command in std::iter::once(prune).chain(writers) {
        command.finish();
    }
}

/// Waits (10 s at most) until process `pid` catches `signal`, as Linux's
/// `/proc/PID/status` shows it (`SigCgt`), or has ended; returns at once where there is
/// no such file to read.
fn wait_until_it_catches(pid: u32, signal: u32) {
    let status = format!("/proc/{pid}/status");
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(10) {
        let Ok(text) = std::fs::read_to_string(&status) else {
            return;
        };
        // A zombie has ended: nothing of it will catch a signal again.
        if text
            .lines()
            .any(|line| line.starts_with("State:") && line.contains('Z'))
        {
            return;
        }
        let caught = text
            .lines()
            .find_map(|line| line.strip_prefix("SigCgt:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok());
        match caught {
            Some(mask) if mask & (1 << (signal - 1)) == 0 => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            _ => return,
        }
    }
    panic!("process {pid} never caught signal {signal}");
}

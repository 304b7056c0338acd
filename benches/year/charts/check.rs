//! `charts-check`: writes the same days with bulk SQL and with the product's `Store`
//! API, and compares the two files table by table.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Instant;

use rusqlite::Connection;
use trendsync::store::Store;

use super::bulk::Bulk;
use super::simulation::simulate;
use super::via_store::ViaStore;
use super::{fresh, year_end};
use crate::{Res, Words};

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

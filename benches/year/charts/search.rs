//! `charts-search`: `trendsync search WORD [--region US]` on the charts year, for the
//! most common word, a middle one and a rare one: the release binary as a whole
//! process and the product's `Store::search` in process, median of 5 after a warm-up.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use trendsync::store::Store;

use super::measure::time_binary;
use crate::{Res, median, ms};

/// A warm-up, then the median of 5.
fn median_of_5(mut f: impl FnMut() -> Res<Duration>) -> Res<Duration> {
    f()?;
    Ok(median((0..5).map(|_| f()).collect::<Res<Vec<_>>>()?))
}

pub(crate) fn search(dir: &Path, binary: &Path) -> Res<()> {
    let db = dir.join("charts.db");
    let conn = Connection::open(&db)?;
    conn.execute_batch("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, videos_fts, 'row')")?;
    let pick = |sql: &str| -> Res<(String, i64)> {
        Ok(conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))?)
    };
    let words = [
        (
            "most common",
            pick("SELECT term, doc FROM vocab ORDER BY doc DESC LIMIT 1")?,
        ),
        (
            "middle",
            pick("SELECT term, doc FROM vocab ORDER BY abs(doc - 29000) LIMIT 1")?,
        ),
        (
            "rare",
            pick("SELECT term, doc FROM vocab ORDER BY doc, term LIMIT 1")?,
        ),
    ];
    drop(conn);
    let store = Store::open_read_only(&db)?.ok_or("the file vanished")?;
    println!(
        "- `search WORD` (release binary `{}`, whole process; in process: `Store::search`, limit 20), median of 5 after a warm-up:",
        binary.display()
    );
    println!(
        "  | word | videos | process | process --region US | in process | in process --region US |"
    );
    println!("  |---|--:|--:|--:|--:|--:|");
    for (what, (word, docs)) in &words {
        let whole = median_of_5(|| time_binary(binary, &db, &["search", word]))?;
        let whole_us =
            median_of_5(|| time_binary(binary, &db, &["search", word, "--region", "US"]))?;
        let inner = |region: Option<&'static str>| {
            median_of_5(|| {
                let t = Instant::now();
                std::hint::black_box(store.search(word, region, 20)?);
                Ok(t.elapsed())
            })
        };
        let (inner_all, inner_us) = (inner(None)?, inner(Some("US"))?);
        println!(
            "  | {what} (`{word}`) | {docs} | {} | {} | {} | {} |",
            ms(whole),
            ms(whole_us),
            ms(inner_all),
            ms(inner_us)
        );
    }
    Ok(())
}

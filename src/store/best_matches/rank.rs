//! The arithmetic of the ranking (docs/schema.md, "Internal"): what bm25 knows of a
//! video for a word alone, its weighted occurrences and its length, read from FTS5's
//! records, and bm25's share of them computed as FTS5 computes it, with the test of
//! shares too close to order. Apart, since building the lists and searching them both
//! rely on it.

use rusqlite::{Connection, OptionalExtension};

use super::{COLUMNS, WEIGHTS};

/// Reads an SQLite varint (as FTS5 writes them) at `at`; returns it and its length.
pub(super) fn varint(blob: &[u8], at: usize) -> (u64, usize) {
    let mut value = 0u64;
    for i in 0..9 {
        let Some(&byte) = blob.get(at + i) else {
            return (value, i);
        };
        if i == 8 {
            return ((value << 8) | u64::from(byte), 9);
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return (value, i + 1);
        }
    }
    (value, 9)
}

/// A video's length in tokens, all columns: the sum of its `videos_fts_docsize` row.
pub(super) fn doc_length(blob: &[u8]) -> u64 {
    let (mut at, mut total) = (0, 0);
    while at < blob.len() {
        let (n, len) = varint(blob, at);
        if len == 0 {
            break;
        }
        total += n;
        at += len;
    }
    total
}

/// A row of [`super::sql::BEST_MATCHES_FRESH`]: the video, and its weighted
/// occurrences of the word and its length in tokens.
pub(super) fn fresh_counts(row: &rusqlite::Row) -> rusqlite::Result<(i64, (i64, i64))> {
    let mut per_column = [0i64; COLUMNS];
    for (i, n) in per_column.iter_mut().enumerate() {
        *n = row.get(i + 1)?;
    }
    let sizes: Option<Vec<u8>> = row.get(COLUMNS + 1)?;
    let tokens = sizes.as_deref().map_or(0, doc_length) as i64;
    Ok((row.get(0)?, (weighted(per_column), tokens)))
}

/// FTS5's average length of a video in tokens, as bm25 computes it: the tokens of
/// every column over the rows, from the averages record (`videos_fts_data` id 1: a
/// varint of the rows, then one per column). `None` for an empty index.
pub(super) fn average_length(conn: &Connection) -> rusqlite::Result<Option<f64>> {
    let Some(record) = conn
        .prepare_cached(super::sql::FTS_AVERAGES)?
        .query_row([], |r| r.get::<_, Vec<u8>>(0))
        .optional()?
    else {
        return Ok(None);
    };
    let (rows, mut at) = varint(&record, 0);
    let mut tokens: i64 = 0;
    for _ in 0..COLUMNS {
        if at >= record.len() {
            break;
        }
        let (n, len) = varint(&record, at);
        tokens = tokens.wrapping_add(n as i64);
        at += len;
    }
    let rows = rows as i64;
    Ok((rows > 0).then(|| tokens as f64 / rows as f64))
}

/// bm25 of a word alone in a video, less the word's rarity (a positive factor, the
/// same for every video): FTS5's own expression, operation for operation, so that
/// the value is the one FTS5 multiplies by that factor, bit for bit. `occurrences`
/// is the sum of the column weights of the word's occurrences; `tokens` the video's
/// length.
pub(crate) fn share(occurrences: f64, tokens: f64, avgdl: f64) -> f64 {
    let (k1, b) = (1.2, 0.75);
    (occurrences * (k1 + 1.0)) / (occurrences + k1 * (1.0 - b + b * tokens / avgdl))
}

/// Whether two shares differ by so little that FTS5's multiplication by the word's
/// rarity might round them to one bm25 (which it then ties by num), or that the
/// arithmetic of a video never ranked might land on either side: far wider than any
/// rounding (2^-46 of the larger, about 100 units in the last place).
pub(super) fn too_close(a: f64, b: f64) -> bool {
    a != b && (a - b).abs() <= a.abs().max(b.abs()) * f64::powi(2.0, -46)
}

/// A word's occurrences weighted by column, from occurrences per column.
pub(super) fn weighted(per_column: [i64; COLUMNS]) -> i64 {
    per_column
        .iter()
        .zip(WEIGHTS)
        .map(|(n, w)| n * w as i64)
        .sum()
}

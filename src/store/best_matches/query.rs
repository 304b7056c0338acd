//! Searching with the lists (`trendsync search` in docs/commands.md): the first matches
//! of a single word, proved from the lists ranked here or, when that cannot be proved,
//! from the candidates ranked by FTS5's own bm25; and `None` when only ranking every
//! match will do.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params};

use super::rank::{average_length, fresh_counts, share, too_close};
use super::{has_counts, has_lists};

/// The single word `query` is, as the index spells it, when it is one: ASCII letters
/// and digits only (the tokenizer lowercases them), not an operator.
pub(crate) fn single_word(query: &str) -> Option<String> {
    let word = query.trim();
    let plain = !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric());
    (plain && !matches!(word, "AND" | "OR" | "NOT" | "NEAR")).then(|| word.to_ascii_lowercase())
}

/// One ranked candidate: bm25 (lower ranks first), num, and whether it is in the region.
type Scored = (f64, i64, bool);

/// The first `limit` matches of `word` by bm25 then num, in the region if one is
/// given, from the lists; `None` when the lists cannot prove it (then rank every
/// match).
pub(crate) fn best(
    conn: &Connection,
    word: &str,
    region: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Option<Vec<i64>>> {
    // One snapshot: the lists, the changes and the index as one writer left them, not
    // a rebuild's lists beside the changes it forgot.
    let tx = conn.unchecked_transaction()?;
    let best = match outside(&tx, word, region, limit)? {
        Outside::Proved(nums) => Some(nums),
        Outside::NotListed => None,
        Outside::Unsure => best_in(&tx, word, region, limit)?,
    };
    tx.commit()?;
    Ok(best)
}

/// What ranking the lists outside FTS5 found.
#[derive(Debug, PartialEq)]
pub(crate) enum Outside {
    /// The answer, exactly the full ranking's.
    Proved(Vec<i64>),
    /// The word has no lists: rank every match.
    NotListed,
    /// The lists could not prove it here (too many new or changed videos, a tie
    /// at the edge, scores too close to order without FTS5's own arithmetic, lists
    /// without counts): ask FTS5 to rank the candidates.
    Unsure,
}

/// Videos added since the lists were built that match the word, above this many,
/// [`outside`] leaves to FTS5: counting each one's occurrences (about 13 us each on a
/// year's file) would cost as much as FTS5's walk of the word's matches.
pub(crate) const FRESH_MOST: usize = 2_000;

/// Videos changed since the lists were built, above this many, [`outside`] leaves to
/// FTS5: each is looked up on its own (about 80 us on a year's file).
pub(crate) const CHANGED_MOST: usize = 250;

/// Ranks the lists of `word` with bm25 computed here, from the counts step 17 stores,
/// the counts of the videos added or changed since (looked up one by one, FTS5
/// computing no bm25, which would count every match of the word first) and the
/// averages FTS5 keeps. For a word alone bm25 is the word's rarity, the same for
/// every video, times [`share`]: the order of the shares is the order of bm25, but
/// for shares so close that the product could round them together.
pub(crate) fn outside(
    conn: &Connection,
    word: &str,
    region: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Outside> {
    if !has_counts(conn)? {
        // A file read without being upgraded may have step 16's lists: FTS5 ranks them.
        return Ok(Outside::Unsure);
    }
    let Some(built_through) = conn
        .prepare_cached("SELECT built_through FROM best_matches_state")?
        .query_row([], |r| r.get::<_, i64>(0))
        .optional()?
    else {
        return Ok(Outside::NotListed);
    };
    let (listed, front) = listed_counts(conn, word)?;
    if listed.len() == front.len() {
        // Not a common word: ranking every match is quick.
        return Ok(Outside::NotListed);
    }
    let Some(avgdl) = average_length(conn)? else {
        return Ok(Outside::Unsure);
    };
    let changed: HashSet<i64> = conn
        .prepare_cached("SELECT DISTINCT video FROM best_matches_changed")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if changed.len() > CHANGED_MOST {
        return Ok(Outside::Unsure);
    }
    let Some(candidates) = candidates(conn, word, built_through, listed, &changed)? else {
        return Ok(Outside::Unsure);
    };
    // Every video outside the candidates matched the word when the lists were built,
    // has not changed since, and ranked below the kept ones and at or below a video of
    // the frontier as built: its share is at most the frontier's best.
    let bound = front
        .iter()
        .map(|&(occurrences, tokens)| share(occurrences as f64, tokens as f64, avgdl))
        .max_by(f64::total_cmp);
    let mut ranked: Vec<(f64, i64)> = candidates
        .into_iter()
        .map(|(video, (occurrences, tokens))| {
            (share(occurrences as f64, tokens as f64, avgdl), video)
        })
        .collect();
    // Best first; equal shares make equal bm25, which FTS5 orders by num.
    ranked.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let limit = limit as usize;
    if limit == 0 {
        return Ok(Outside::Proved(Vec::new()));
    }
    let shown = first_in_region(conn, &ranked, region, limit)?;
    if shown.windows(2).any(|w| too_close(w[0].0, w[1].0)) {
        return Ok(Outside::Unsure);
    }
    if let Some(bound) = bound {
        // A video outside could rank among the first `limit` unless the last of them
        // ranks clearly above the frontier's best.
        let Some(&(last, _)) = shown.get(limit - 1) else {
            return Ok(Outside::Unsure);
        };
        if last <= bound || too_close(last, bound) {
            return Ok(Outside::Unsure);
        }
    }
    Ok(Outside::Proved(
        shown.into_iter().take(limit).map(|s| s.1).collect(),
    ))
}

/// A listed video as the lists were built: (video, occurrences, tokens).
type Listed = (i64, i64, i64);

/// A video's (occurrences, tokens) of the word.
type Counts = (i64, i64);

/// The word's lists as they were built: every listed video, and the (occurrences,
/// tokens) of the frontier's videos.
fn listed_counts(conn: &Connection, word: &str) -> rusqlite::Result<(Vec<Listed>, Vec<Counts>)> {
    let mut listed = Vec::new();
    let mut front = Vec::new();
    let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_COUNTS_OF)?;
    let mut rows = stmt.query([word])?;
    while let Some(row) = rows.next()? {
        let (video, occurrences, tokens) = (row.get(1)?, row.get(2)?, row.get(3)?);
        listed.push((video, occurrences, tokens));
        if row.get::<_, i64>(0)? == 1 {
            front.push((occurrences, tokens));
        }
    }
    Ok((listed, front))
}

/// The candidates, video to (occurrences, tokens): the listed videos as built, unless
/// their text changed since, then the videos added since and the changed ones as they
/// are now. `None` when more videos were added than a proof can afford to rank.
fn candidates(
    conn: &Connection,
    word: &str,
    built_through: i64,
    listed: Vec<Listed>,
    changed: &HashSet<i64>,
) -> rusqlite::Result<Option<HashMap<i64, (i64, i64)>>> {
    let mut candidates: HashMap<i64, (i64, i64)> = listed
        .into_iter()
        .filter(|(video, _, _)| !changed.contains(video))
        .map(|(video, occurrences, tokens)| (video, (occurrences, tokens)))
        .collect();
    let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_FRESH)?;
    {
        let mut rows = stmt.query(params![
            word,
            built_through,
            i64::MAX,
            FRESH_MOST as i64 + 1
        ])?;
        let mut added = 0;
        while let Some(row) = rows.next()? {
            added += 1;
            if added > FRESH_MOST {
                return Ok(None);
            }
            let (video, counts) = fresh_counts(row)?;
            candidates.insert(video, counts);
        }
    }
    for &video in changed {
        let now = stmt
            .query_row(params![word, video - 1, video, 1], fresh_counts)
            .optional()?;
        if let Some((video, counts)) = now {
            candidates.insert(video, counts);
        }
    }
    Ok(Some(candidates))
}

/// The first `limit` of `ranked` seen in `region` (any, without one) and the one after,
/// whose order against the last shown decides the edge.
fn first_in_region(
    conn: &Connection,
    ranked: &[(f64, i64)],
    region: Option<&str>,
    limit: usize,
) -> rusqlite::Result<Vec<(f64, i64)>> {
    let mut shown: Vec<(f64, i64)> = Vec::with_capacity(limit + 1);
    let mut in_region = conn.prepare_cached(super::sql::VIDEO_IN_REGION)?;
    for &(q, video) in ranked {
        if shown.len() > limit {
            break;
        }
        let seen = match region {
            None => true,
            Some(code) => in_region.query_row(params![video, code], |r| r.get(0))?,
        };
        if seen {
            shown.push((q, video));
        }
    }
    Ok(shown)
}

fn best_in(
    conn: &Connection,
    word: &str,
    region: Option<&str>,
    limit: u32,
) -> rusqlite::Result<Option<Vec<i64>>> {
    if !has_lists(conn)? {
        return Ok(None);
    }
    let Some(built_through) = conn
        .prepare_cached("SELECT built_through FROM best_matches_state")?
        .query_row([], |r| r.get::<_, i64>(0))
        .optional()?
    else {
        return Ok(None);
    };
    let mut kept = Vec::new();
    let mut front = Vec::new();
    {
        let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_OF)?;
        let mut rows = stmt.query([word])?;
        while let Some(row) = rows.next()? {
            let video: i64 = row.get(1)?;
            if row.get::<_, i64>(0)? == 0 {
                kept.push(video);
            } else {
                front.push(video);
            }
        }
    }
    if kept.is_empty() {
        // Not a common word: ranking every match is quick.
        return Ok(None);
    }
    let changed: Vec<i64> = conn
        .prepare_cached("SELECT DISTINCT video FROM best_matches_changed")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let changed_set: HashSet<i64> = changed.iter().copied().collect();
    if front.iter().any(|v| changed_set.contains(v)) {
        return Ok(None);
    }
    let front_set: HashSet<i64> = front.iter().copied().collect();
    let mut candidates: Vec<i64> = kept;
    candidates.extend(&front);
    candidates.extend(changed.iter().filter(|v| !front_set.contains(v)));
    candidates.sort_unstable();
    candidates.dedup();
    let ids = serde_json::Value::from(candidates).to_string();
    let mut scored: Vec<Scored> = Vec::new();
    {
        let mut stmt = conn.prepare_cached(super::sql::BEST_MATCHES_SCORE)?;
        let mut rows = stmt.query(params![word, ids, region, built_through])?;
        while let Some(row) = rows.next()? {
            scored.push((row.get(1)?, row.get(0)?, row.get(2)?));
        }
    }
    // The best a video outside the candidates can rank: its frontier's best.
    let bound = scored
        .iter()
        .filter(|s| front_set.contains(&s.1))
        .map(|s| s.0)
        .min_by(f64::total_cmp);
    if bound.is_none() && !front.is_empty() {
        // A frontier video no longer matches: it changed, so the lists are stale.
        return Ok(None);
    }
    let mut shown: Vec<Scored> = scored.into_iter().filter(|s| s.2).collect();
    shown.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let limit = limit as usize;
    match bound {
        // Every match is a candidate.
        None => {}
        Some(bound) => {
            if shown.len() < limit || limit == 0 && shown.is_empty() {
                return Ok(None);
            }
            if limit > 0 && shown[limit - 1].0 >= bound {
                return Ok(None);
            }
        }
    }
    shown.truncate(limit);
    Ok(Some(shown.into_iter().map(|s| s.1).collect()))
}

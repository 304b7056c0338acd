use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use std::collections::HashMap;

use super::*;
use crate::clock::Secs;
use crate::store::test_support::{FILE, open, raw, steps_before, temp_db, video};
use crate::store::{RunKind, SearchHit, Store, VideoRecord};

/// A few words, the first far more common than the last, so that some are in most
/// videos and some in few.
const WORDS: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "zeta",
];

const REGIONS: &[&str] = &["US", "GB", "DE", "FR"];

fn word(rng: &mut StdRng) -> &'static str {
    // The smaller of two draws: the first words come far more often.
    let i = rng
        .random_range(0..WORDS.len())
        .min(rng.random_range(0..WORDS.len()));
    WORDS[i]
}

fn text(rng: &mut StdRng, most: usize) -> String {
    let n = rng.random_range(0..=most);
    (0..n).map(|_| word(rng)).collect::<Vec<_>>().join(" ")
}

/// Stores again, in run "r2" of `region`, every `every`-th video of `first` with a
/// title of `title` and a few random words, half of them without a description.
fn change_some(
    store: &Store,
    rng: &mut StdRng,
    first: &[VideoRecord],
    every: usize,
    title: &str,
    region: &str,
) {
    store
        .begin_run("r2", RunKind::Run, Secs::new(5_000))
        .unwrap();
    let mut changed: Vec<VideoRecord> = first.iter().step_by(every).cloned().collect();
    for (i, v) in changed.iter_mut().enumerate() {
        v.title = format!("{title} {}", text(rng, 2));
        if i % 2 == 0 {
            v.description = String::new();
        }
    }
    store
        .store_trending_page("r2", region, 1, &changed, Secs::new(5_000))
        .unwrap();
}

/// The two numbers of `sql`'s one row.
fn pair(store: &Store, sql: &str) -> (i64, i64) {
    store
        .conn
        .query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
}

/// The lists' `built_through`, and how many changes they have recorded since.
fn built_through_and_changed(store: &Store) -> (i64, i64) {
    pair(
        store,
        "SELECT built_through, (SELECT count(*) FROM best_matches_changed)
         FROM best_matches_state",
    )
}

/// The first column of `sql`'s rows, as numbers.
fn nums(store: &Store, sql: &str) -> Vec<i64> {
    store
        .conn
        .prepare(sql)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// Deletes three of the kept best matches of `term`.
fn delete_kept(store: &Store, term: &str) {
    store
        .conn
        .execute(
            "DELETE FROM videos WHERE num IN (SELECT video FROM best_matches
                                              WHERE frontier = 0 AND term = ?1 LIMIT 3)",
            [term],
        )
        .unwrap();
}

/// A video of random text; a third of them copy an earlier video's text exactly, so
/// that bm25 ties (same occurrences, same length) are common.
fn random_video(rng: &mut StdRng, id: usize, earlier: &[VideoRecord]) -> VideoRecord {
    let mut v = video(&format!("v{id:05}"), "");
    if !earlier.is_empty() && rng.random_bool(0.33) {
        let e = &earlier[rng.random_range(0..earlier.len())];
        v.title = e.title.clone();
        v.description = e.description.clone();
        v.tags = e.tags.clone();
        v.channel_title = e.channel_title.clone();
    } else {
        v.title = format!("{} {}", word(rng), text(rng, 3));
        v.description = text(rng, 12);
        v.tags = Some(
            (0..rng.random_range(0..3))
                .map(|_| word(rng).to_string())
                .collect(),
        );
        v.channel_title = ["Alpha News", "Sigma Sports", "Plain"][rng.random_range(0..3)].into();
    }
    v
}

/// Stores `n` random videos in pages of 50, each page in a region, and returns them.
fn fill(
    store: &Store,
    rng: &mut StdRng,
    run: &str,
    at: i64,
    n: usize,
    from: usize,
) -> Vec<VideoRecord> {
    store.begin_run(run, RunKind::Run, Secs::new(at)).unwrap();
    let mut all: Vec<VideoRecord> = Vec::new();
    for i in 0..n {
        let v = random_video(rng, from + i, &all);
        all.push(v);
    }
    for (page, videos) in all.chunks(50).enumerate() {
        let region = REGIONS[page % REGIONS.len()];
        store
            .store_trending_page(run, region, 1, videos, Secs::new(at + page as i64))
            .unwrap();
    }
    all
}

fn ids(hits: &[SearchHit]) -> Vec<String> {
    hits.iter().map(|h| h.video_id.clone()).collect()
}

/// The ranking as the build before the lists ranked: every match by bm25, in the
/// statement it ran (no tie-break of its own: ties come in FTS5's order, by num).
fn ranked_by_every_match(
    store: &Store,
    word: &str,
    region: Option<&str>,
    limit: u32,
) -> Vec<String> {
    let mut stmt = store
        .conn
        .prepare(
            "SELECT v.id FROM videos_fts JOIN videos AS v ON v.num = videos_fts.rowid
             WHERE videos_fts MATCH ?1
               AND (?2 IS NULL
                    OR +videos_fts.rowid IN (
                        SELECT vr.video FROM video_regions AS vr
                        WHERE vr.region = (SELECT num FROM regions WHERE code = ?2)))
             ORDER BY bm25(videos_fts, 10.0, 1.0, 4.0, 2.0)
             LIMIT ?3",
        )
        .unwrap();
    stmt.query_map(params![word, region, limit], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// Every word, region and limit: `search` answers what ranking every match answers.
/// Returns how many of those answers came from the lists.
fn assert_same_as_every_match(store: &Store) -> usize {
    let mut from_lists = 0;
    for word in WORDS {
        for region in [None, Some("US"), Some("GB"), Some("DE"), Some("XX")] {
            for limit in [1, 5, 20, 50] {
                let shown = ids(&store.search(word, region, limit).unwrap());
                let every = ranked_by_every_match(store, word, region, limit);
                assert_eq!(shown, every, "{word} in {region:?}, {limit}");
                if best(&store.conn, word, region, limit).unwrap().is_some() {
                    from_lists += 1;
                }
            }
        }
    }
    from_lists
}

/// How many of the first `n` of a word's full ranking share their bm25 with the next.
fn ties_in_top(store: &Store, word: &str, n: usize) -> usize {
    let scores: Vec<f64> = store
        .conn
        .prepare(
            "SELECT bm25(videos_fts, 10.0, 1.0, 4.0, 2.0) AS s FROM videos_fts
             WHERE videos_fts MATCH ?1 ORDER BY s LIMIT ?2",
        )
        .unwrap()
        .query_map(params![word, n as i64 + 1], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    scores.windows(2).filter(|w| w[0] == w[1]).count()
}

#[test]
fn the_lists_show_exactly_what_ranking_every_match_shows_ties_and_changes_included() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    let mut rng = StdRng::seed_from_u64(27);
    let first = fill(&store, &mut rng, "r1", 1_000, 1_500, 0);
    // Small lists, so that most words have a frontier and the bound is put to work.
    rebuild(&store.conn, 40, 25).unwrap();
    let listed: i64 = store
        .conn
        .query_row("SELECT count(DISTINCT term) FROM best_matches", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(listed >= WORDS.len() as i64, "every word is common here");
    assert!(
        ties_in_top(&store, "alpha", 50) > 0,
        "the fixture has ties at the top"
    );
    let from_lists = assert_same_as_every_match(&store);
    assert!(
        from_lists > 40,
        "the lists answered only {from_lists} searches"
    );
    for word in ["alpha", "beta"] {
        assert!(
            best(&store.conn, word, None, 20).unwrap().is_some(),
            "{word}"
        );
    }

    // Text changes, kept and frontier videos among them, deletions and new videos.
    let frontier: Vec<i64> = nums(
        &store,
        "SELECT video FROM best_matches WHERE frontier = 1 LIMIT 5",
    );
    assert!(!frontier.is_empty());
    change_some(&store, &mut rng, &first, 37, "alpha alpha", "US");
    delete_kept(&store, "beta");
    fill(&store, &mut rng, "r3", 6_000, 300, 10_000);
    assert_same_as_every_match(&store);

    // A frontier video changed: its word's lists no longer prove anything.
    store
        .conn
        .execute(
            "UPDATE videos SET title = 'alpha alpha alpha alpha' WHERE num = ?1",
            [frontier[0]],
        )
        .unwrap();
    assert_same_as_every_match(&store);

    // Rebuilt, the lists start afresh and agree again.
    rebuild(&store.conn, 40, 25).unwrap();
    let changed_left: i64 = store
        .conn
        .query_row("SELECT count(*) FROM best_matches_changed", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(changed_left, 0);
    assert!(assert_same_as_every_match(&store) > 40);
}

#[test]
fn videos_tied_on_bm25_show_in_the_order_they_were_first_stored() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
    let same = |id: &str| {
        let mut v = video(id, "gamma gamma");
        v.description = "same words".into();
        v.tags = None;
        v
    };
    // Stored in this order: z first, a last.
    let videos = [same("z-first"), same("m-second"), same("a-third")];
    store
        .store_trending_page("r1", "US", 1, &videos, Secs::new(1))
        .unwrap();
    rebuild(&store.conn, 1, 1).unwrap();
    let expected = ["z-first", "m-second", "a-third"];
    assert_eq!(ids(&store.search("gamma", None, 10).unwrap()), expected);
    assert_eq!(
        ids(&store.search("gamma", Some("US"), 10).unwrap()),
        expected
    );
    assert_eq!(ranked_by_every_match(&store, "gamma", None, 10), expected);
    // Three tied at the edge of a limit of 2: not provable from a list of 1, ranked in
    // full, and still the first two stored.
    assert_eq!(
        ids(&store.search("gamma", None, 2).unwrap()),
        ["z-first", "m-second"]
    );
}

#[test]
fn only_a_plain_word_is_looked_up_in_the_lists() {
    assert_eq!(single_word("Alpha").as_deref(), Some("alpha"));
    assert_eq!(single_word("  beta42 ").as_deref(), Some("beta42"));
    for query in [
        "alp*",
        "title:alpha",
        "alpha beta",
        "\"alpha\"",
        "AND",
        "NOT",
        "",
        "café",
    ] {
        assert_eq!(single_word(query), None, "{query:?}");
    }
}

#[test]
fn the_frontier_keeps_what_no_other_match_beats_on_both_counts() {
    // (score, weighted occurrences, tokens, num)
    let rest = vec![
        (0.0, 10.0, 50, 1),
        (0.0, 10.0, 40, 2),
        (0.0, 3.0, 10, 3),
        (0.0, 3.0, 45, 4),
        (0.0, 1.0, 5, 5),
        (0.0, 1.0, 5, 6),
    ];
    let kept: Vec<i64> = frontier(rest).iter().map(|m| m.3).collect();
    assert_eq!(kept, [2, 3, 5]);
    assert_eq!(doc_length(&[3, 0x81, 0x00, 2]), 3 + 128 + 2);
}

/// The step on a file of the version before it: the lists built from what the file
/// holds, nothing else changed, and searches answer as before.
#[test]
fn the_step_builds_the_lists_of_an_older_file_and_changes_nothing_else() {
    let (_dir, path) = temp_db();
    {
        let store = Store::open_with(&path, steps_before(&STEP)).unwrap();
        let mut rng = StdRng::seed_from_u64(16);
        fill(&store, &mut rng, "r1", 1_000, 200, 0);
    }
    let videos: i64 = raw(&path)
        .query_row("SELECT count(*) FROM videos", [], |r| r.get(0))
        .unwrap();
    let store = Store::open_with(&path, FILE).unwrap();
    let (through, changed) = built_through_and_changed(&store);
    assert_eq!((through, changed), (videos, 0));
    assert_eq!(store.videos_count().unwrap() as i64, videos);
    // A file this small has no word in COMMON videos: every search ranks every match.
    for word in WORDS {
        assert_eq!(
            ids(&store.search(word, None, 20).unwrap()),
            ranked_by_every_match(&store, word, None, 20)
        );
    }
    assert!(store.integrity_check().unwrap());
}

#[test]
fn a_refresh_rebuilds_stale_lists_and_forgets_only_the_changes_it_read() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    fill(&store, &mut rng, "r1", 1_000, 600, 0);
    rebuild(&store.conn, 40, 25).unwrap();
    assert!(
        !store.refresh_best_matches(1, 40, 25).unwrap(),
        "nothing is stale"
    );
    fill(&store, &mut rng, "r2", 2_000, 200, 5_000);
    store
        .conn
        .execute("UPDATE videos SET title = 'omega omega' WHERE num <= 3", [])
        .unwrap();
    assert_eq!(staleness(&store.conn).unwrap(), Some(200 + 3));
    assert!(
        !store.refresh_best_matches(1_000, 40, 25).unwrap(),
        "below the floor"
    );
    assert!(store.refresh_best_matches(1, 40, 25).unwrap());
    assert_eq!(staleness(&store.conn).unwrap(), Some(0));
    assert!(assert_same_as_every_match(&store) > 40);
}

/// Every match of `word` with its weighted occurrences and length, as a search reads
/// a video added since the lists were built (every video is, above num 0).
fn fresh_counts(store: &Store, word: &str) -> HashMap<i64, (i64, i64)> {
    let mut stmt = store
        .conn
        .prepare(crate::store::sql::BEST_MATCHES_FRESH)
        .unwrap();
    let mut rows = stmt.query(params![word, 0, i64::MAX, i64::MAX]).unwrap();
    let mut out = HashMap::new();
    while let Some(row) = rows.next().unwrap() {
        let per_column: [i64; COLUMNS] = std::array::from_fn(|i| row.get(i + 1).unwrap());
        let sizes: Vec<u8> = row.get(COLUMNS + 1).unwrap();
        out.insert(
            row.get(0).unwrap(),
            (weighted(per_column), doc_length(&sizes) as i64),
        );
    }
    out
}

/// How many answers of [`assert_same_as_every_match`]'s searches the lists proved
/// without FTS5 ranking anything; each one proved is checked against every match.
fn proved_outside(store: &Store) -> usize {
    let mut proved = 0;
    for word in WORDS {
        for region in [None, Some("US"), Some("GB"), Some("DE"), Some("XX")] {
            for limit in [1, 5, 20, 50] {
                if let Outside::Proved(nums) = outside(&store.conn, word, region, limit).unwrap() {
                    let shown: Vec<String> = nums
                        .iter()
                        .map(|n| {
                            store
                                .conn
                                .query_row("SELECT id FROM videos WHERE num = ?1", [n], |r| {
                                    r.get(0)
                                })
                                .unwrap()
                        })
                        .collect();
                    assert_eq!(
                        shown,
                        ranked_by_every_match(store, word, region, limit),
                        "{word} in {region:?}, {limit}"
                    );
                    proved += 1;
                }
            }
        }
    }
    proved
}

/// bm25 for a word alone, as this module computes it outside FTS5, is FTS5's own value
/// to the last bit: its rarity (from a count of the matches, as FTS5 counts them)
/// times [`share`] of the counts the lists store and the counts read for new videos,
/// with the average length read from FTS5's averages record. Occurrences next to each
/// other, across punctuation, with accents, and text holding the marker byte count
/// right.
#[test]
fn bm25_computed_outside_fts5_is_fts5s_to_the_last_bit() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    let mut rng = StdRng::seed_from_u64(17);
    fill(&store, &mut rng, "r1", 1_000, 700, 0);
    let mut odd = video("odd1", "alpha alpha,alpha.Álpha \u{1}alpha\u{1}");
    odd.description = "ALPHA-alpha\u{1}\u{1} beta".into();
    odd.tags = None;
    odd.channel_title = "alpha".into();
    let mut empty = video("odd2", "alpha");
    empty.description = String::new();
    empty.tags = Some(vec![]);
    store
        .store_trending_page("r1", "US", 1, &[odd, empty], Secs::new(9_000))
        .unwrap();
    rebuild(&store.conn, 40, 25).unwrap();
    let avgdl = average_length(&store.conn).unwrap().unwrap();
    let rows: i64 = store
        .conn
        .query_row("SELECT count(*) FROM videos", [], |r| r.get(0))
        .unwrap();
    let total_tokens: u64 = store
        .conn
        .prepare("SELECT sz FROM videos_fts_docsize")
        .unwrap()
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .unwrap()
        .map(|sz| doc_length(&sz.unwrap()))
        .sum();
    assert_eq!(
        avgdl.to_bits(),
        (total_tokens as f64 / rows as f64).to_bits()
    );
    let mut compared = 0;
    for word in WORDS {
        let counts = fresh_counts(&store, word);
        let hits = counts.len() as i64;
        // FTS5's rarity: log((N - n + 0.5) / (n + 0.5)), at least 1e-6.
        let idf = match (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln() {
            idf if idf <= 0.0 => 1e-6,
            idf => idf,
        };
        // The lists' stored counts are the counts of now.
        let stored: Vec<(i64, i64, i64)> = store
            .conn
            .prepare("SELECT video, occurrences, tokens FROM best_matches WHERE term = ?1")
            .unwrap()
            .query_map([word], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(!stored.is_empty(), "{word}");
        for (video, occurrences, tokens) in stored {
            assert_eq!(
                counts.get(&video),
                Some(&(occurrences, tokens)),
                "{word} {video}"
            );
        }
        let mut stmt = store
            .conn
            .prepare(
                "SELECT rowid, bm25(videos_fts, 10.0, 1.0, 4.0, 2.0) FROM videos_fts
                 WHERE videos_fts MATCH ?1",
            )
            .unwrap();
        let mut rows = stmt.query([word]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let num: i64 = row.get(0).unwrap();
            let bm25: f64 = row.get(1).unwrap();
            let (occurrences, tokens) = counts[&num];
            // FTS5: score = 0.0 + idf * share; returns -1.0 * score (negation is exact).
            let here = -(0.0 + idf * share(occurrences as f64, tokens as f64, avgdl));
            assert_eq!(
                here.to_bits(),
                bm25.to_bits(),
                "{word} in {num}: {here} {bm25}"
            );
            compared += 1;
        }
    }
    assert!(compared > 1_000, "{compared}");
    // The odd video: title 5 (the marker bytes are not occurrences), description 2,
    // channel 1.
    let odd: i64 = store
        .conn
        .query_row("SELECT num FROM videos WHERE id = 'odd1'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fresh_counts(&store, "alpha")[&odd].0, 5 * 10 + 2 + 2);
}

/// With the counts stored, the lists answer without FTS5 ranking anything, through new
/// videos, changed ones (a frontier video among them, which the lists ranked by FTS5
/// could not get past), deleted ones, regions and ties, and each answer is the full
/// ranking's.
#[test]
fn the_lists_rank_outside_fts5_what_ranking_every_match_shows() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    let mut rng = StdRng::seed_from_u64(2717);
    let first = fill(&store, &mut rng, "r1", 1_000, 1_500, 0);
    rebuild(&store.conn, 40, 25).unwrap();
    assert!(ties_in_top(&store, "alpha", 50) > 0);
    let proved = proved_outside(&store);
    assert!(proved > 60, "proved only {proved}");
    assert!(assert_same_as_every_match(&store) >= proved);

    // New videos, changed ones (a frontier video of each word among them) and deleted
    // ones: still proved, and right.
    change_some(&store, &mut rng, &first, 41, "alpha", "GB");
    let fronts: Vec<i64> = nums(
        &store,
        "SELECT min(video) FROM best_matches WHERE frontier = 1 GROUP BY term",
    );
    assert!(fronts.len() >= 4);
    for num in &fronts {
        store
            .conn
            .execute(
                "UPDATE videos SET title = 'alpha beta ' || title WHERE num = ?1",
                [num],
            )
            .unwrap();
    }
    delete_kept(&store, "alpha");
    fill(&store, &mut rng, "r3", 6_000, 300, 10_000);
    let proved = proved_outside(&store);
    assert!(proved > 60, "proved only {proved} after changes");
    assert_same_as_every_match(&store);
    assert!(
        matches!(
            outside(&store.conn, "alpha", None, 20).unwrap(),
            Outside::Proved(_)
        ),
        "a changed frontier video no longer stops the lists"
    );

    // More changed videos than are looked up one by one: FTS5 ranks the candidates.
    store
        .conn
        .execute(
            "UPDATE videos SET title = title || ' omega'
             WHERE num IN (SELECT num FROM videos ORDER BY num LIMIT ?1)",
            [CHANGED_MOST as i64 + 1],
        )
        .unwrap();
    assert_eq!(
        outside(&store.conn, "alpha", None, 20).unwrap(),
        Outside::Unsure
    );
    assert_same_as_every_match(&store);
    rebuild(&store.conn, 40, 25).unwrap();
    assert!(proved_outside(&store) > 60);

    // More new videos than are counted one by one: the same.
    fill(&store, &mut rng, "r4", 7_000, FRESH_MOST * 3 / 2, 20_000);
    assert_eq!(
        outside(&store.conn, "alpha", None, 20).unwrap(),
        Outside::Unsure
    );
    assert_same_as_every_match(&store);
}

#[test]
fn shares_too_close_to_order_without_fts5_are_told_apart_from_ties() {
    let q = share(10.0, 12.0, 9.5);
    assert!(!too_close(q, q), "a tie is exact: ordered by num");
    assert!(too_close(q, f64::from_bits(q.to_bits() + 1)));
    assert!(too_close(q, f64::from_bits(q.to_bits() + 50)));
    assert!(!too_close(q, share(10.0, 13.0, 9.5)));
    assert!(!too_close(q, share(11.0, 12.0, 9.5)));
}

/// Step 17 on a file of version 16 with lists: the lists built again with every
/// match's counts, which are the counts of now, and searches proved from them.
#[test]
fn step_17_stores_the_counts_of_a_version_16_files_lists() {
    let (_dir, path) = temp_db();
    {
        let store = Store::open_with(&path, steps_before(&COUNTS)).unwrap();
        store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
        // Enough videos for a word in COMMON of them, as step 16 would list it.
        let mut rng = StdRng::seed_from_u64(1617);
        let videos: Vec<VideoRecord> = (0..COMMON as usize + 50)
            .map(|i| {
                let mut v = video(&format!("w{i:05}"), "");
                v.title = format!("zeta {}", text(&mut rng, 3));
                v.description = text(&mut rng, 6);
                v.tags = None;
                v
            })
            .collect();
        for (page, chunk) in videos.chunks(500).enumerate() {
            store
                .store_trending_page(
                    "r1",
                    REGIONS[page % 2],
                    1,
                    chunk,
                    Secs::new(1 + page as i64),
                )
                .unwrap();
        }
        // Version 16's lists, as its step builds them.
        build(&store.conn).unwrap();
        let listed: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM best_matches WHERE term = 'zeta'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(listed >= KEEP as i64);
        assert!(!has_counts(&store.conn).unwrap());
        // A change after the build, which the upgrade's build reads.
        store
            .conn
            .execute(
                "UPDATE videos SET title = 'zeta zeta zeta' WHERE num = 7",
                [],
            )
            .unwrap();
    }
    let store = Store::open_with(&path, FILE).unwrap();
    assert!(has_counts(&store.conn).unwrap());
    let (through, changed) = built_through_and_changed(&store);
    assert_eq!((through, changed), (COMMON + 50, 0));
    let rebuilt: i64 = store
        .conn
        .query_row("SELECT rebuilt_through FROM best_matches_state", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(rebuilt, COMMON + 50);
    let counts = fresh_counts(&store, "zeta");
    let stored: Vec<(i64, i64, i64)> = store
        .conn
        .prepare("SELECT video, occurrences, tokens FROM best_matches WHERE term = 'zeta'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(stored.len() >= KEEP);
    for (video, occurrences, tokens) in stored {
        assert_eq!(counts.get(&video), Some(&(occurrences, tokens)), "{video}");
    }
    for region in [None, Some("US")] {
        let Outside::Proved(nums) = outside(&store.conn, "zeta", region, 20).unwrap() else {
            panic!("the lists prove zeta in {region:?}");
        };
        assert_eq!(nums.len(), 20);
        assert_eq!(
            ids(&store.search("zeta", region, 20).unwrap()),
            ranked_by_every_match(&store, "zeta", region, 20)
        );
    }
    assert!(store.integrity_check().unwrap());
}

/// A file of version 16 read as it is (a read-only open does not upgrade it): its lists
/// have no counts, and FTS5 ranks them as step 16 did.
#[test]
fn lists_without_counts_are_still_ranked_by_fts5() {
    let (_dir, path) = temp_db();
    let store = Store::open_with(&path, steps_before(&COUNTS)).unwrap();
    let mut rng = StdRng::seed_from_u64(16);
    fill(&store, &mut rng, "r1", 1_000, 600, 0);
    compute(&store.conn, 40, 25)
        .unwrap()
        .write_as(&store.conn, false)
        .unwrap();
    assert_eq!(
        outside(&store.conn, "alpha", None, 20).unwrap(),
        Outside::Unsure
    );
    assert!(best(&store.conn, "alpha", None, 20).unwrap().is_some());
    assert!(assert_same_as_every_match(&store) > 40);
}

/// `prune` between rebuilds appends the new videos to the lists with their counts, so
/// that however many were added a search counts none of them; the rows appended are a
/// search's own counts, a rebuild in full still comes when they are many, and every
/// answer is the full ranking's.
#[test]
fn new_videos_appended_to_the_lists_keep_searches_outside_fts5() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    let mut rng = StdRng::seed_from_u64(1717);
    fill(&store, &mut rng, "r1", 1_000, 1_000, 0);
    rebuild(&store.conn, 40, 25).unwrap();
    assert_eq!(store.append_best_matches().unwrap(), 0, "nothing new");
    fill(&store, &mut rng, "r2", 2_000, FRESH_MOST * 3 / 2, 10_000);
    assert_eq!(
        outside(&store.conn, "alpha", None, 20).unwrap(),
        Outside::Unsure,
        "too many new videos to count at search time"
    );
    // A new video changed before the append: appended, and still looked up.
    store
        .conn
        .execute(
            "UPDATE videos SET title = 'alpha alpha alpha' WHERE num = (SELECT max(num) FROM videos)",
            [],
        )
        .unwrap();
    let appended = store.append_best_matches().unwrap();
    assert!(appended > FRESH_MOST, "{appended}");
    let counts = fresh_counts(&store, "alpha");
    let newest: i64 = store
        .conn
        .query_row("SELECT max(num) FROM videos", [], |r| r.get(0))
        .unwrap();
    let (through, rebuilt) = pair(
        &store,
        "SELECT built_through, rebuilt_through FROM best_matches_state",
    );
    assert_eq!((through, rebuilt), (newest, 1_000));
    let stored: Vec<(i64, i64, i64)> = store
        .conn
        .prepare(
            "SELECT video, occurrences, tokens FROM best_matches
             WHERE term = 'alpha' AND video > 1000",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        stored.len(),
        counts.keys().filter(|&&v| v > 1_000).count(),
        "every new match of alpha"
    );
    for (video, occurrences, tokens) in stored {
        assert_eq!(counts.get(&video), Some(&(occurrences, tokens)), "{video}");
    }
    assert!(matches!(
        outside(&store.conn, "alpha", None, 20).unwrap(),
        Outside::Proved(_)
    ));
    assert!(proved_outside(&store) > 60);
    assert_same_as_every_match(&store);
    // Still stale by the videos added since the full rebuild: prune's rule rebuilds.
    assert_eq!(
        staleness(&store.conn).unwrap(),
        Some(FRESH_MOST as i64 * 3 / 2 + 1)
    );
    assert!(store.refresh_best_matches(1, 40, 25).unwrap());
    let rebuilt: i64 = store
        .conn
        .query_row("SELECT rebuilt_through FROM best_matches_state", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(rebuilt, newest);
    assert!(proved_outside(&store) > 60);

    // `prune` appends what a rebuild would not yet redo.
    fill(&store, &mut rng, "r3", 9_000, 100, 20_000);
    store.prune(0, false, false).unwrap();
    let (through, rebuilt) = pair(
        &store,
        "SELECT built_through, rebuilt_through FROM best_matches_state",
    );
    assert_eq!((through, rebuilt), (newest + 100, newest));
    assert_same_as_every_match(&store);
}

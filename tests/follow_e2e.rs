//! Follow-ups end to end (docs/upstream.md): after every region's calls a run
//! refreshes, through `videos:batchGetStats`, the counts of the videos that were on a
//! chart in the last `days` and not counted for `every`, stalest first, 50 ids a
//! call, charged to their own bucket; a video the answer leaves out is marked removed.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};
use serde_json::Value;

use crate::common::contains;
use crate::common::harness::Harness;
use crate::common::upstream::{Billing, FakeUpstream, GONE_PREFIX};

/// One region, both pages of the fixtures' chart, and follow-ups.
const FOLLOWING: &str = r#"
[defaults]
pages = 2

[[region]]
code = "US"
offset = 0

[follow]
days = 7
every = "6h"
"#;

/// The shipped cost files.
const DEFAULT_COSTS: &str = include_str!("../quota-costs.toml");
const GRANULAR: &str = include_str!("../quota-costs.granular.toml");

/// Each bucket's `used` from `budget --json`, by name.
fn used(h: &Harness<'_>) -> BTreeMap<String, u64> {
    h.budget()["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| {
            (
                b["name"].as_str().expect("name").to_owned(),
                b["used"].as_u64().expect("used"),
            )
        })
        .collect()
}

/// `n` videos that were on a chart a day ago and last counted `hours` ago (each a
/// minute apart, the first the stalest), as a long history leaves them; `gone` of them
/// are ones the upstream no longer shows. Returns their ids, stalest first.
fn seed(h: &Harness<'_>, n: usize, gone: usize, hours: i64) -> Vec<String> {
    let db = Connection::open(h.db_path()).expect("opening");
    let now: i64 = db
        .query_row("SELECT max(last_seen_at) FROM videos", [], |r| r.get(0))
        .expect("the first run stored videos");
    let mut ids = Vec::new();
    for i in 0..n {
        let id = if i < gone {
            format!("{GONE_PREFIX}{i:07}")
        } else {
            format!("seed{i:07}")
        };
        db.execute(
            "INSERT INTO videos (id, title, description, channel_id, channel_title,
                 published_at, view_count, first_seen_at, last_seen_at)
             VALUES (?1, 'seeded', '', 'UC', 'C', '2026-01-01T00:00:00Z', 1, ?2, ?2)",
            params![id, now - 86_400],
        )
        .expect("a video");
        db.execute(
            "INSERT INTO follow_state (video, charted_at, counted_at)
             SELECT num, ?2, ?3 FROM videos WHERE id = ?1",
            params![id, now - 86_400, now - hours * 3600 - (n - i) as i64 * 60],
        )
        .expect("its follow state");
        ids.push(id);
    }
    ids
}

/// The ids each follow-up call asked for, in order.
fn follow_batches(h: &Harness<'_>, from: usize) -> Vec<Vec<String>> {
    h.fake.calls()[from..]
        .iter()
        .filter(|c| c.method == "videos.batchGetStats")
        .map(|c| {
            c.ids
                .as_deref()
                .expect("ids")
                .split(',')
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn count(h: &Harness<'_>, sql: &str) -> i64 {
    h.db().query_row(sql, [], |r| r.get(0)).expect(sql)
}

/// Both cost files: the follow-ups go 50 ids a call, stalest first, every due video
/// once; removed videos are marked; each bucket's `used` is what the upstream billed.
fn follow_ups_under(costs: &str, billing: Billing) -> Harness<'static> {
    let mut h = Harness::with(FakeUpstream::billing(billing), None);
    h.costs(costs).regions(FOLLOWING);
    // The first run charts ten videos, counted just now: none is due yet.
    let (report, _, _) = h.run_to(&["run", "--json"], 0, "complete");
    assert_eq!(report["follow"]["calls"], 0, "{report}");
    let due = seed(&h, 120, 2, 7);

    h.cmd()
        .args(["run", "--dry-run"])
        .stdout(contains("follow-up of 50 videos").count(2))
        .stdout(contains("follow-up of 20 videos").count(1))
        .run();

    let before = h.fake.calls().len();
    let (report, _, _) = h.run_to(&["run", "--json"], 0, "complete");
    let batches = follow_batches(&h, before);
    assert_eq!(
        batches.iter().map(Vec::len).collect::<Vec<_>>(),
        [50, 50, 20],
        "50 ids a call at most"
    );
    assert_eq!(batches.concat(), due, "every due video once, stalest first");
    assert_eq!(report["follow"]["status"], "complete", "{report}");
    // Three batches, and one videos.list that confirms the two left out are gone.
    assert_eq!(report["follow"]["calls"], 4, "{report}");
    assert_eq!(report["follow"]["videos"], 118, "{report}");
    assert_eq!(report["follow"]["missing"], 2, "{report}");
    assert_eq!(report["follow"]["missing_found"], 0, "{report}");
    assert_eq!(report["follow"]["removed"], 2, "{report}");
    assert_eq!(
        count(&h, "SELECT count(*) FROM follow_counts"),
        118,
        "a point of each video's series"
    );
    assert_eq!(
        count(
            &h,
            "SELECT count(*) FROM videos WHERE removed_at IS NOT NULL AND id LIKE 'gone%'"
        ),
        2
    );
    // The follow-ups of a run come after every chart call; the one videos.list among
    // them asks for the two ids the first answer left out.
    let calls = h.fake.calls();
    let first_follow = calls[before..]
        .iter()
        .position(|c| c.method == "videos.batchGetStats")
        .expect("a follow-up");
    let after = &calls[before + first_follow..];
    let confirming: Vec<&str> = after
        .iter()
        .filter(|c| c.method != "videos.batchGetStats")
        .map(|c| {
            assert_eq!(c.method, "videos.list", "{c:?}");
            c.ids.as_deref().expect("ids")
        })
        .collect();
    assert_eq!(confirming, [due[..2].join(",")]);

    // Refreshed now: none is due again before six hours.
    let before = h.fake.calls().len();
    let (report, _, _) = h.run_to(&["run", "--json"], 0, "complete");
    assert!(follow_batches(&h, before).is_empty());
    assert_eq!(report["follow"]["calls"], 0, "{report}");
    let billed = h.fake.billed();
    let used = used(&h);
    assert_eq!(
        used, billed,
        "each bucket's used (left) against what the upstream billed (right)"
    );
    h
}

#[test]
fn follow_ups_batch_50_ids_and_are_charged_as_billed_under_the_default_costs() {
    let h = follow_ups_under(DEFAULT_COSTS, Billing::single(10_000));
    // One pool: 3 runs of 2 pages (the category names in the first), 3 follow-ups
    // and the videos.list that confirms the two videos gone.
    assert_eq!(h.fake.billed()["budget"], 11);
}

#[test]
fn follow_ups_batch_50_ids_and_are_charged_to_their_own_bucket_under_the_granular_costs() {
    let h = follow_ups_under(GRANULAR, Billing::granular(10_000, 100, 10_000));
    // The videos.list that confirms the two videos gone is the main bucket's.
    assert_eq!(h.fake.billed()["budget"], 8);
    assert_eq!(h.fake.billed()["stats"], 3);
}

#[test]
fn a_spent_stats_bucket_stops_only_the_follow_ups() {
    let costs = GRANULAR.replace(
        "name = \"stats\"\nquota = 10000\nceiling = 9500",
        "name = \"stats\"\nquota = 3\nceiling = 2",
    );
    assert_ne!(costs, GRANULAR, "the stats bucket made small");
    let mut h = Harness::with(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    h.costs(&costs).regions(FOLLOWING);
    h.run_to(&["run", "--json"], 0, "complete");
    seed(&h, 120, 0, 7);
    let before = h.fake.calls().len();
    h.expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted");
    let (report, _, _): (Value, _, _) = h.run_to(&["run", "--json"], 75, "budget_exhausted");
    assert_eq!(report["regions"][0]["status"], "complete", "{report}");
    assert_eq!(report["follow"]["status"], "budget_exhausted", "{report}");
    assert_eq!(report["follow"]["calls"], 2, "{report}");
    assert_eq!(follow_batches(&h, before).len(), 2);
    assert_eq!(used(&h), h.fake.billed());
    // The 20 left are the freshest of the due: the next run with room takes them.
    assert_eq!(
        count(
            &h,
            "SELECT count(*) FROM follow_state WHERE counted_at < (SELECT max(counted_at) - 3600 FROM follow_state)"
        ),
        20
    );
}

/// Retention reaches the follow-ups (docs/commands.md): `prune --older-than` deletes the
/// follow-up counts taken before its cutoff and keeps the newer ones, says how many in
/// its text and its JSON (`deleted.follow_counts`), and deletes a video only when
/// nothing is left that refers to it. The dry run counts the same and deletes nothing.
#[test]
fn prune_deletes_the_follow_up_counts_older_than_the_cutoff_and_says_how_many() {
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.costs(DEFAULT_COSTS).regions(FOLLOWING);
    h.run_to(&["run", "--json"], 0, "complete");
    seed(&h, 20, 0, 7);
    let (report, _, _) = h.run_to(&["run", "--json"], 0, "complete");
    assert_eq!(report["follow"]["videos"], 20, "{report}");
    {
        // Each followed video gets a sample 100 days old beside today's; five of
        // them have only old samples (today's moved back 101 days).
        let db = Connection::open(h.db_path()).expect("opening");
        db.execute_batch(
            "INSERT INTO follow_counts (video, at, views, likes, comments)
                 SELECT video, at - 100 * 86400, views, likes, comments FROM follow_counts;
             UPDATE follow_counts SET at = at - 101 * 86400
              WHERE at = (SELECT max(at) FROM follow_counts)
                AND video IN (SELECT num FROM videos WHERE id LIKE 'seed%'
                              ORDER BY id LIMIT 5);",
        )
        .expect("ageing follow-up counts");
    }
    let old = "SELECT count(*) FROM follow_counts
               WHERE at < (SELECT max(at) FROM follow_counts) - 90 * 86400";
    assert_eq!(count(&h, old), 25);
    assert_eq!(count(&h, "SELECT count(*) FROM follow_counts"), 40);
    let videos = count(&h, "SELECT count(*) FROM videos");

    h.bare()
        .args(["prune", "--older-than", "90d", "--dry-run"])
        .stdout(contains("25 follow-up counts"))
        .stdout(contains("and 5 videos"))
        .run();
    let dry = h
        .bare()
        .args(["prune", "--older-than", "90d", "--dry-run", "--json"])
        .run()
        .json();
    assert_eq!(dry["deleted"]["follow_counts"], 25, "{dry}");
    assert_eq!(dry["videos_deleted"], 5, "{dry}");
    assert_eq!(count(&h, "SELECT count(*) FROM follow_counts"), 40);

    let done = h
        .bare()
        .args(["prune", "--older-than", "90d", "--json"])
        .run()
        .json();
    assert_eq!(done["deleted"], dry["deleted"], "{done}");
    assert_eq!(done["videos_deleted"], 5, "{done}");
    // Only today's samples are left, each with its video; the five videos that had
    // only old ones are gone, with their follow state.
    assert_eq!(count(&h, old), 0);
    assert_eq!(count(&h, "SELECT count(*) FROM follow_counts"), 15);
    assert_eq!(
        count(
            &h,
            "SELECT count(DISTINCT c.video) FROM follow_counts AS c
             JOIN videos AS v ON v.num = c.video"
        ),
        15
    );
    assert_eq!(count(&h, "SELECT count(*) FROM videos"), videos - 5);
    assert_eq!(
        count(
            &h,
            "SELECT count(*) FROM follow_state
             WHERE NOT EXISTS (SELECT 1 FROM videos WHERE num = follow_state.video)"
        ),
        0
    );
    assert_eq!(
        count(&h, "SELECT count(*) FROM pragma_foreign_key_check"),
        0
    );
}

/// `videos.batchGetStats` is not atomic: an upstream whose every answer leaves out a
/// third of the videos, which `videos.list` still shows. No video is marked removed;
/// each missing one is confirmed, counted, and charged to the main bucket as billed.
#[test]
fn a_partial_follow_up_answer_marks_nothing_removed_and_confirms_with_videos_list() {
    let mut h = Harness::with(
        FakeUpstream::billing_partial_follow_ups(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    h.costs(GRANULAR).regions(FOLLOWING);
    h.run_to(&["run", "--json"], 0, "complete");
    let main_before = used(&h)["budget"];
    let due = seed(&h, 120, 0, 7);
    let before = h.fake.calls().len();
    let (report, _, _) = h.run_to(&["run", "--json"], 0, "complete");
    let follow = &report["follow"];
    assert_eq!(follow["removed"], 0, "{report}");
    // The first of every three in each answer of 50, 50 and 20.
    assert_eq!(follow["missing"], 17 + 17 + 7, "{report}");
    assert_eq!(follow["missing_found"], 17 + 17 + 7, "{report}");
    assert_eq!(follow["videos"], 120, "{report}");
    assert_eq!(
        count(
            &h,
            "SELECT count(*) FROM videos WHERE removed_at IS NOT NULL"
        ),
        0
    );
    let confirmations = h.fake.calls()[before..]
        .iter()
        .filter(|c| c.method == "videos.list" && c.ids.is_some())
        .count() as u64;
    assert_eq!(
        confirmations, 3,
        "one videos.list per batch with a video left out"
    );
    assert_eq!(
        follow_batches(&h, before).concat(),
        due,
        "every due video asked once"
    );
    // The confirmations are the main bucket's, and the budget counts what was billed.
    let used = used(&h);
    assert!(used["budget"] >= main_before + confirmations, "{used:?}");
    assert_eq!(used, h.fake.billed(), "used (left) against billed (right)");
}

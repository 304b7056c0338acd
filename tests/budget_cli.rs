//! `budget`, `budget charge` and `run --dry-run` through the binary.

use serde_json::Value;

use crate::common::{Bucket, Costs, Expected, Limit, RedisServer, Scratch, contains, lacks};

#[test]
fn dry_run_works_with_nothing_configured_and_writes_nothing() {
    let s = Scratch::new();
    let ran = s
        .cmd()
        .args(["run", "--dry-run"])
        .stdout(contains(
            "40 of 40 calls fit, 40 units; 9460 would remain to the ceiling",
        ))
        .run();
    // The built-in regions: 8 regions of 4 pages and category names.
    for code in ["US", "GB", "DE", "FR", "IN", "BR", "AU", "CA"] {
        assert!(
            ran.stdout.contains(&format!(" {code} ")),
            "plan lists {code}: {}",
            ran.stdout
        );
    }
    assert!(s.listing().is_empty(), "nothing written: {:?}", s.listing());
}

#[test]
fn dry_run_against_a_spent_budget_exits_75_and_marks_the_stop() {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(200).ceiling(120).to_toml(),
    );
    s.cmd()
        .costs(&costs)
        .args(["budget", "charge", "videos.list", "--count", "110"])
        .run();
    let before = std::fs::read(s.file("trendsync.db")).expect("the database exists");
    let listing = s.listing();

    let ran = s
        .cmd()
        .costs(&costs)
        .args(["run", "--dry-run", "--json"])
        .status(75)
        .run();
    let json = ran.json();
    assert_eq!(json["status"], "budget_exhausted");
    assert_eq!(json["units_planned"], 10);
    assert_eq!(json["units_charged"], 0);
    let plan = json["plan"].as_array().expect("plan");
    assert_eq!(plan.iter().filter(|c| c["fits"] == true).count(), 10);
    assert_eq!(plan.len(), 40);
    // Two regions fit whole (4 pages and their categories each); the third is cut.
    assert_eq!(json["regions"][0]["pages"], 4, "{json}");
    assert_eq!(json["regions"][1]["pages"], 4, "{json}");
    assert_eq!(json["regions"][1]["status"], "complete", "{json}");
    assert_eq!(json["regions"][2]["pages"], 0, "{json}");
    assert_eq!(json["regions"][2]["status"], "budget_exhausted", "{json}");
    // Charged nothing and wrote nothing.
    assert_eq!(
        std::fs::read(s.file("trendsync.db")).expect("the database exists"),
        before
    );
    assert_eq!(s.listing(), listing);
    s.cmd()
        .costs(&costs)
        .args(["run", "--dry-run"])
        .status(75)
        .stdout(contains(
            "---- the run would stop here: bucket \"budget\" would say no; capacity frees in",
        ))
        .run();
}

#[test]
fn backfill_dry_run_may_use_the_reserve() {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(200).ceiling(120).to_toml(),
    );
    let c = |args: &[&str], status: i32| s.cmd().costs(&costs).args(args).status(status).run();
    c(&["budget", "charge", "videos.list", "--count", "110"], 0);
    c(&["run", "--dry-run"], 75);
    let ran = c(&["backfill", "--dry-run", "--json"], 0);
    assert_eq!(ran.json()["units_planned"], 40);
}

#[test]
fn an_unknown_region_is_a_usage_error() {
    let s = Scratch::new();
    s.cmd()
        .args(["run", "--dry-run", "--region", "JP"])
        .expect_stderr("--region JP is not in regions.toml; configured: US, GB")
        .status(2)
        .run();
}

#[test]
fn budget_json_reports_the_window() {
    let s = Scratch::new();
    s.cmd()
        .args(["budget", "charge", "search.list", "--count", "2"])
        .run();
    s.cmd()
        .args(["budget", "charge", "videos.list", "--count", "5"])
        .run();
    let ran = s.cmd().args(["budget", "--json"]).run();
    let j = ran.json();
    assert_eq!(j["used"], 205);
    assert_eq!(j["ceiling"], 9500);
    assert_eq!(j["quota"], 10000);
    assert_eq!(j["remaining"], 9295);
    assert_eq!(j["remaining_to_quota"], 9795);
    assert_eq!(j["window_s"], 86400.0);
    assert_eq!(j["by_method"]["search.list"], 200);
    assert_eq!(j["by_method"]["videos.list"], 5);
    assert_eq!(j["limits"][0]["name"], "search");
    assert_eq!(j["limits"][0]["used"], 200);
    assert_eq!(j["limits"][0]["max"], 2000);
    assert!(
        j["next_free_s"]
            .as_f64()
            .is_some_and(|s| s > 86_000.0 && s <= 86_400.0)
    );
    // The window empties when the newest charge leaves, no earlier than the oldest.
    let (next, empty) = (j["next_free_s"].as_f64(), j["empty_in_s"].as_f64());
    assert!(
        matches!((next, empty), (Some(n), Some(e)) if e >= n && e <= 86_400.0),
        "{j}"
    );
    assert!(
        j["limits"][0]["next_free_s"]
            .as_f64()
            .is_some_and(|s| s > 0.0 && s <= 600.0),
        "{j}"
    );
    assert!(j["blocked_until"].is_null());
}

#[test]
fn budget_charge_is_all_or_nothing_and_says_when_to_retry() {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(1000).ceiling(250).to_toml(),
    );
    let c = |args: &[&str]| s.cmd().costs(&costs).args(args);
    let j = c(&["budget", "charge", "search.list", "--count", "2", "--json"])
        .run()
        .json();
    assert_eq!(
        (
            j["granted"].as_bool(),
            j["units"].as_u64(),
            j["used"].as_u64(),
            j["remaining"].as_u64()
        ),
        (Some(true), Some(200), Some(200), Some(50))
    );
    assert!(j["retry_after_s"].is_null() && j["denied_by"].is_null());

    let j = c(&["budget", "charge", "search.list", "--json"])
        .status(75)
        .run()
        .json();
    assert_eq!(j["granted"], false);
    assert_eq!(j["denied_by"], "budget");
    assert!(
        j["retry_after_s"]
            .as_f64()
            .is_some_and(|s| s > 86_000.0 && s <= 86_400.0),
        "{j}"
    );

    // The reserve goes up to the quota.
    c(&["budget", "charge", "search.list", "--reserve"]).run();
    c(&[
        "budget",
        "charge",
        "search.list",
        "--count",
        "8",
        "--reserve",
    ])
    .status(75)
    .stdout(contains(
        "denied by bucket \"budget\": 800 units (8 × search.list) do not fit; retry after",
    ))
    // A denial charged nothing, and says so where a grant says where it charged.
    .stdout(contains("\nnothing was charged on embedded limiter in "))
    .stdout(lacks("\ncharged on"))
    .run();
    assert_eq!(c(&["budget", "--json"]).run().json()["used"], 300);
}

#[test]
fn budget_charge_of_an_unknown_method_is_a_usage_error() {
    let s = Scratch::new();
    s.cmd()
        .args(["budget", "charge", "playlists.list"])
        .expect_stderr("the methods with a cost are: channels.list, search.list")
        .status(2)
        .run();
}

#[test]
fn budget_against_a_missing_database_creates_nothing() {
    let s = Scratch::new();
    // Not a whole budget left: the embedded limiter's window is in the file.
    s.cmd()
        .args(["budget"])
        .expect_stderr("no such file")
        .status(78)
        .stderr(contains("trendsync.db: no such file"))
        .stdout("")
        .run();
    assert!(s.listing().is_empty(), "{:?}", s.listing());
}

/// Many processes charge 100-unit calls at once against a ceiling of 1000: exactly
/// 10 are granted, whichever backend keeps the window.
fn racing_processes_grant_exactly_ten(redis: Option<&RedisServer>) {
    racing_processes_grant_exactly_ten_through("test", |_| {
        redis.map(RedisServer::client_args).unwrap_or_default()
    });
}

/// What the Redis client says when thirty TLS handshakes of a debug build at once on
/// two cores outlast the limiter's 1 s connect timeout: it connects a cluster node
/// again.
pub const CLIENT_RECONNECTS: [&str; 2] = [
    "redis: Failed to connect to node: ",
    "redis: async cluster client recovery: ",
];

/// What a charge the limiter did not answer in time says: refused as "limiter down"
/// (75).
const TIMED_OUT: &str = "is unreachable: timed out; ";

/// What a refused charge says when the limiter may have counted it all the same (it
/// timed out after the request was sent).
const MAYBE_COUNTED: &str = "the limiter may have counted it";

/// One `budget charge --json` in `s`.
fn charge_once(
    s: &Scratch,
    costs: &std::path::Path,
    method: &str,
    limiter_args: Vec<String>,
) -> crate::common::Trendsync {
    s.cmd()
        .costs(costs)
        .args(["-q", "budget", "charge", "--json", method])
        .args(limiter_args)
        .expecting(&CLIENT_RECONNECTS.map(Expected::maybe))
        .allow_stderr(TIMED_OUT)
        .status_in(&[0, 75])
}

/// A charge's answer: `Some(granted)` when the budget decided, `None` when the
/// limiter did not answer.
fn answer_of(out: &crate::common::Ran) -> Option<bool> {
    let json = out.json();
    if json["denied_by"] == "limiter" {
        return None;
    }
    assert_eq!(json["granted"], out.code == 0, "{json}");
    Some(out.code == 0)
}

/// How one of the racing charges ended.
#[derive(Debug)]
struct Raced {
    method: &'static str,
    granted: bool,
    /// Its first try was refused with the limiter not answering in time after the
    /// request may have reached it: that try may hold units no answer granted.
    maybe_counted_unanswered: bool,
}

/// Thirty `budget charge` processes at once in `s`, the `i`th charging
/// `method(i)` with `limiter_args(i)` (none: the embedded limiter).
///
/// A charge the limiter did not answer in time (a connection timed out under the
/// race's load) is asked again on its own until the budget decides it: the race's
/// claims are about what the budget decides, and a refusal for the limiter being
/// down is not one.
fn thirty_charges_at_once(
    s: &Scratch,
    costs: &std::path::Path,
    method: impl Fn(usize) -> &'static str,
    limiter_args: &impl Fn(usize) -> Vec<String>,
) -> Vec<Raced> {
    let children: Vec<_> = (0..30)
        .map(|i| (i, charge_once(s, costs, method(i), limiter_args(i)).start()))
        .collect();
    let firsts: Vec<_> = children
        .into_iter()
        .map(|(i, charge)| (i, charge.finish()))
        .collect();
    firsts
        .into_iter()
        .map(|(i, first)| {
            let granted = answer_of(&first).unwrap_or_else(|| {
                (0..5)
                    .find_map(|_| {
                        answer_of(&charge_once(s, costs, method(i), limiter_args(i)).run())
                    })
                    .expect("the limiter answers a charge on its own within five tries")
            });
            Raced {
                method: method(i),
                granted,
                maybe_counted_unanswered: first.stderr.contains(MAYBE_COUNTED),
            }
        })
        .collect()
}

/// Checks the grants of `method` among `raced`: exactly `fits`, less one for each
/// try the limiter may have counted without answering.
fn assert_grants(raced: &[Raced], method: &str, fits: usize) {
    let of = |f: fn(&Raced) -> bool| raced.iter().filter(|r| r.method == method && f(r)).count();
    let granted = of(|r| r.granted);
    let unanswered = of(|r| r.maybe_counted_unanswered);
    assert!(
        granted <= fits && granted + unanswered >= fits,
        "{method}: {granted} granted, {unanswered} maybe counted unanswered, {fits} fit: {raced:?}"
    );
}

/// The race on budget `key`, the `i`th process given `limiter_args(i)` (none: the
/// embedded limiter).
pub fn racing_processes_grant_exactly_ten_through(
    key: &str,
    limiter_args: impl Fn(usize) -> Vec<String>,
) {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube()
            .key(key)
            .quota(1000)
            .ceiling(1000)
            .to_toml(),
    );
    let raced = thirty_charges_at_once(&s, &costs, |_| "search.list", &limiter_args);
    assert_grants(&raced, "search.list", 10);
    let ran = s
        .cmd()
        .costs(&costs)
        .args(limiter_args(0))
        .args(["budget", "--json"])
        .run();
    assert_eq!(ran.json()["used"], 1000, "{}", ran.stderr);
}

#[test]
fn racing_processes_on_the_embedded_limiter_grant_exactly_what_fits() {
    racing_processes_grant_exactly_ten(None);
}

#[test]
fn racing_processes_on_redis_grant_exactly_what_fits() {
    let server = RedisServer::start();
    racing_processes_grant_exactly_ten(Some(&server));
}

/// Thirty processes at once, half charging each bucket: in each bucket exactly
/// ceiling ÷ cost charges are granted (10 and 7), and neither loses anything to the
/// other.
pub fn racing_processes_fill_each_bucket_exactly_through(
    key: &str,
    limiter_args: impl Fn(usize) -> Vec<String>,
) {
    let s = Scratch::new();
    // Two buckets (docs/budget.md, "Buckets"): the main one, videos.list at 2 units under a
    // ceiling of 20, and `search`, search.list at 1 under a ceiling of 7 with a
    // per-call limit.
    let two_buckets = Costs::new()
        .key(key)
        .quota(20)
        .ceiling(20)
        .cost("videos.list", 2)
        .cost("videoCategories.list", 1)
        .bucket(
            Bucket::new("search")
                .quota(7)
                .ceiling(7)
                .window("day@America/Los_Angeles")
                .cost("search.list", 1),
        )
        .limit(
            Limit::new("search-calls", 100, "10m")
                .method("search.list")
                .per("call"),
        );
    let costs = s.write("c.toml", &two_buckets.to_toml());
    let method = |i: usize| {
        if i.is_multiple_of(2) {
            "videos.list"
        } else {
            "search.list"
        }
    };
    let raced = thirty_charges_at_once(&s, &costs, method, &limiter_args);
    assert_grants(&raced, "videos.list", 10); // 20 ÷ 2 in the main bucket
    assert_grants(&raced, "search.list", 7); // 7 ÷ 1 in the search bucket
    let ran = s
        .cmd()
        .costs(&costs)
        .args(limiter_args(0))
        .args(["budget", "--json"])
        .run();
    let budget = ran.json();
    assert_eq!(budget["used"], 20, "{}", ran.stderr);
    assert_eq!(budget["buckets"][1]["name"], "search", "{budget}");
    assert_eq!(budget["buckets"][1]["used"], 7, "{budget}");
}

#[test]
fn racing_processes_on_the_embedded_limiter_fill_each_bucket_exactly() {
    racing_processes_fill_each_bucket_exactly_through("test", |_| Vec::new());
}

#[test]
fn racing_processes_on_redis_fill_each_bucket_exactly() {
    let server = RedisServer::start();
    racing_processes_fill_each_bucket_exactly_through("test", |_| server.client_args());
}

/// A charge of 2^50 units, the most one may hold, on Redis: one member in the
/// window, whose units read back exactly (docs/budget.md, "no step turns a number into
/// text with fewer digits than it has"). Written as a Lua number, the member was
/// `1.1258999068427e+15|…`: the next process did not find its own newest charge,
/// replayed its ledger into a window that had lost nothing, and counted it twice.
#[test]
fn a_charge_of_2_pow_50_units_on_redis_is_one_member_read_back_exactly() {
    const MAX: u64 = 1 << 50;
    let server = RedisServer::start();
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::new()
            .key("exact")
            .quota(MAX)
            .ceiling(MAX)
            .cost("videos.list", 1)
            .cost("big.list", MAX - 1)
            .cost("all.list", MAX)
            .to_toml(),
    );
    let c = |args: &[&str]| {
        s.cmd()
            .costs(&costs)
            .redis(&server)
            .args(args)
            .stderr(lacks("Replaying"))
    };
    let members = || -> Vec<String> {
        server.query(
            redis::cmd("ZRANGE")
                .arg("trendsync:{exact}:budget")
                .arg(0)
                .arg(-1),
        )
    };

    // 2^50 − 1 units, then one more: both granted, to the unit.
    let big = c(&["budget", "charge", "big.list", "--json"]).run().json();
    assert_eq!(big["granted"], true, "{big}");
    assert_eq!(big["used"], MAX - 1, "{big}");
    assert_eq!(big["remaining"], 1, "{big}");
    let held = members();
    assert_eq!(held.len(), 1, "one charge, one member: {held:?}");
    assert!(
        held[0].starts_with(&format!("{}|big.list|", MAX - 1)),
        "{held:?}"
    );
    let budget = c(&["budget", "--json"]).run().json();
    assert_eq!(budget["used"], MAX - 1, "{budget}");
    assert_eq!(budget["by_method"]["big.list"], MAX - 1, "{budget}");

    let one = c(&["budget", "charge", "videos.list", "--json"])
        .run()
        .json();
    assert_eq!(one["granted"], true, "{one}");
    assert_eq!(one["used"], MAX, "{one}");
    assert_eq!(one["remaining"], 0, "{one}");
    assert_eq!(members().len(), 2, "{:?}", members());
    let denied = c(&["budget", "charge", "videos.list", "--json"])
        .status(75)
        .run()
        .json();
    assert_eq!(denied["denied_by"], "budget", "{denied}");
    assert_eq!(denied["used"], MAX, "{denied}");
    assert_eq!(c(&["budget", "--json"]).run().json()["used"], MAX);

    // 2^50 at once, in a window of its own: one member, used exact, and then not one
    // unit more fits.
    let _: () = server.query(&redis::cmd("FLUSHALL"));
    let s2 = Scratch::new();
    let c2 = |args: &[&str]| {
        s2.cmd()
            .costs(&costs)
            .redis(&server)
            .args(args)
            .stderr(lacks("Replaying"))
    };
    let all = c2(&["budget", "charge", "all.list", "--json"]).run().json();
    assert_eq!(all["granted"], true, "{all}");
    assert_eq!(all["used"], MAX, "{all}");
    let held = members();
    assert_eq!(held.len(), 1, "one charge, one member: {held:?}");
    assert!(held[0].starts_with(&format!("{MAX}|all.list|")), "{held:?}");
    let budget = c2(&["budget", "--json"]).run().json();
    assert_eq!(budget["used"], MAX, "{budget}");
    assert_eq!(budget["remaining"], 0, "{budget}");
    let denied = c2(&["budget", "charge", "videos.list", "--json"])
        .status(75)
        .run()
        .json();
    assert_eq!(denied["granted"], false, "{denied}");
    assert_eq!(denied["used"], MAX, "{denied}");
    assert_eq!(members().len(), 1, "{:?}", members());
}

/// On a grant, `policy`, `used` and `remaining` are METHOD's bucket's (docs/commands.md),
/// not the narrower limit's that has less room, and the text names the bucket first.
fn a_grant_names_the_bucket_under_the_default_costs_file(redis: Option<&RedisServer>) {
    let s = Scratch::new();
    let c = |args: &[&str]| {
        let cmd = s.cmd().args(args);
        match redis {
            Some(server) => cmd.redis(server),
            None => cmd,
        }
    };
    let granted = c(&["budget", "charge", "search.list", "--json"])
        .run()
        .json();
    assert_eq!(granted["granted"], true, "{granted}");
    assert_eq!(granted["policy"], "budget", "{granted}");
    assert_eq!(granted["used"], 100, "{granted}");
    assert_eq!(granted["remaining"], 9400, "{granted}");
    assert_eq!(granted["denied_by"], Value::Null, "{granted}");
    // Every part the charge went to, its bucket first.
    assert_eq!(
        granted["parts"],
        serde_json::json!([
            {"name": "budget", "kind": "bucket", "used": 100, "remaining": 9400},
            {"name": "search", "kind": "limit", "used": 100, "remaining": 1900},
        ]),
        "{granted}"
    );

    c(&["budget", "charge", "search.list"])
        .stdout(contains(
            "granted 100 units (1 × search.list); 200 used, 9300 remaining in bucket \"budget\"; 200 used, 1800 remaining in limit \"search\"",
        ))
        .run();

    // A denial still names what said no, with its numbers.
    let denied = c(&["budget", "charge", "search.list", "--count", "19", "--json"])
        .status(75)
        .run()
        .json();
    assert_eq!(denied["denied_by"], "search", "{denied}");
    assert_eq!(denied["policy"], "search", "{denied}");
    assert_eq!(denied["remaining"], 1800, "{denied}");
    assert_eq!(
        denied["parts"],
        serde_json::json!([
            {"name": "budget", "kind": "bucket", "used": 200, "remaining": 9300},
            {"name": "search", "kind": "limit", "used": 200, "remaining": 1800},
        ]),
        "{denied}"
    );
    // The text leads with the bucket, names what said no in the words budget,
    // bucket and limit, and never says "policy".
    c(&["budget", "charge", "search.list", "--count", "19"])
        .status(75)
        .stdout(contains(
            "denied by limit \"search\": 1900 units (19 × search.list) do not fit; retry after",
        ))
        .stdout(contains(
            "; 200 used, 9300 remaining in bucket \"budget\"; 200 used, 1800 remaining in limit \"search\"",
        ))
        .stdout(lacks("polic"))
        .run();
}

#[test]
fn a_grant_names_the_bucket_on_the_embedded_limiter() {
    a_grant_names_the_bucket_under_the_default_costs_file(None);
}

#[test]
fn a_grant_names_the_bucket_on_redis() {
    let server = RedisServer::start();
    a_grant_names_the_bucket_under_the_default_costs_file(Some(&server));
}

#[test]
fn completions_are_printed() {
    Scratch::new()
        .cmd()
        .args(["completions", "bash"])
        .stdout(contains("_trendsync()"))
        .run();
}

#[test]
fn crontab_has_one_line_per_region_at_its_offset() {
    let s = Scratch::new();
    let ran = s
        .cmd()
        .args([
            "crontab",
            "--every",
            "1h",
            "--binary",
            "/opt/trendsync/bin/trendsync",
        ])
        .expect_stderr("is not a file here")
        // The needed environment is named.
        .stdout(contains("YOUTUBE_API_KEY"))
        .run();
    let lines: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let offsets = [
        ("US", 0),
        ("GB", 7),
        ("DE", 14),
        ("FR", 21),
        ("IN", 28),
        ("BR", 35),
        ("AU", 42),
        ("CA", 49),
    ];
    assert_eq!(lines.len(), offsets.len(), "{}", ran.stdout);
    for (line, (code, minute)) in lines.iter().zip(offsets) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            fields[..5],
            [minute.to_string().as_str(), "*", "*", "*", "*"],
            "{line}"
        );
        assert!(line.contains(&format!("run --region {code} ")), "{line}");
        assert!(
            line.contains("/opt/trendsync/bin/trendsync --db /"),
            "absolute paths: {line}"
        );
        assert!(line.ends_with("trendsync.log 2>&1"), "{line}");
    }
    let every3 = s.cmd().args(["crontab", "--every", "3h"]).run();
    assert!(
        every3
            .stdout
            .lines()
            .any(|l| l.starts_with("49 */3 * * * ")),
        "{}",
        every3.stdout
    );
    s.cmd()
        .args(["crontab", "--every", "7m"])
        .expect_stderr("does not divide an hour")
        .status(2)
        .run();
}

#[test]
fn json_logs_are_one_object_per_line_and_levels_shift_with_v_and_q() {
    let s = Scratch::new();
    let json = s
        .cmd()
        .args(["--log-format", "json", "run", "--dry-run"])
        .run();
    let lines: Vec<&str> = json.stderr.lines().collect();
    assert!(!lines.is_empty(), "the dry run logs its summary");
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{v}");
    }
    assert!(
        lines.iter().any(|l| l.contains("the whole plan fits")),
        "{}",
        json.stderr
    );

    // -q hides info lines.
    s.cmd().args(["-q", "run", "--dry-run"]).stderr("").run();
    s.cmd()
        .args(["run", "--dry-run"])
        .stderr(contains(" INFO "))
        .stderr(lacks("DEBUG"))
        .run();
    // RUST_LOG filters.
    s.cmd()
        .env("RUST_LOG", "error")
        .args(["run", "--dry-run"])
        .stderr("")
        .run();
}

/// The budget's text leads with what can be spent now, so "more frees in 24h" above
/// 9459 units left does not read as "nothing available"; a spent bucket says none
/// first. `budget charge` names the limiter it charged and the file that keeps its
/// ledger (a shell without cron's TRENDSYNC_DB would otherwise not know).
#[test]
fn the_budget_leads_with_what_is_available_and_a_charge_names_its_database() {
    let server = RedisServer::start();
    let s = Scratch::new();
    s.cmd()
        .args(["budget", "charge", "videos.list", "--count", "41"])
        .stdout(contains("charged on embedded limiter in trendsync.db"))
        .run();
    let text = s.cmd().arg("budget").run().stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[1].starts_with("  available   9459 now, to the ceiling (9959 to the quota)"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("  used        41 of ceiling 9500"),
        "{text}"
    );
    assert!(lines[3].starts_with("  more frees  in "), "{text}");

    // A database of its own: this one's calls were charged on the embedded limiter,
    // which a charge on Redis refuses.
    s.cmd()
        .redis(&server)
        .args(["--db", "on-redis.db", "budget", "charge", "videos.list"])
        .stdout(contains("its ledger of this charge is kept in on-redis.db"))
        .run();

    let spent = Costs::one_unit_each()
        .key("key1")
        .ceiling(41)
        .quota(50)
        .to_toml();
    let costs = s.write("spent.toml", &spent);
    let text = s
        .cmd()
        .costs(&costs)
        .arg("budget")
        .expect_stderr("were counted again at this host's costs")
        .run()
        .stdout;
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("  available   none to the ceiling; 9 to the quota")),
        "{text}"
    );
    assert!(text.contains("  next free   in "), "{text}");
}

/// `budget` and the dry run cannot read a window from a limiter that does not answer:
/// they say so and exit 75 (try later), as a run stopped by it does, never 1.
#[test]
fn budget_and_the_dry_run_exit_75_while_the_limiter_is_down() {
    let s = Scratch::new();
    let closed = format!("redis://127.0.0.1:{}", closed_port());
    for args in [
        &["budget"][..],
        &["budget", "--json"],
        &["run", "--dry-run"],
    ] {
        let ran = s
            .cmd()
            .args(["--redis-url", &closed])
            .args(args)
            .expect_stderr("is unreachable")
            .status(75)
            .run();
        if args.contains(&"--json") {
            assert_eq!(ran.json()["exit_code"], 75, "{}", ran.stdout);
        }
    }
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

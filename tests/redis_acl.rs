//! The smallest ACL the README gives is enough, and only just: a user created with
//! exactly that line (read from the README, so the two cannot drift apart) charges,
//! reloads the script after `SCRIPT FLUSH`, reads the budget and records an upstream
//! block; on another budget's keys it is refused with exit 78. The shared deployments
//! of the conformance suite check the same line through TLS, Sentinel and Cluster.

use wiremock::Mock;
use wiremock::matchers::any;

use crate::common::upstream::{API_KEY, FakeUpstream, answer_fixture};
use crate::common::{Costs, RedisServer, Scratch, contains, lacks};

const USER: &str = "trendsync";
const PASSWORD: &str = "aCl-pAsS-9902";

/// The README's `ACL SETUSER` line for budget `key`, as arguments after `ACL`.
pub fn readme_acl(key: &str) -> Vec<String> {
    let readme = include_str!("../README.md");
    let begin = readme
        .find("<!-- acl:begin")
        .expect("the README marks its ACL");
    let end = readme
        .find("<!-- acl:end -->")
        .expect("the README marks its ACL's end");
    let line = readme[begin..end]
        .lines()
        .find(|l| l.starts_with("ACL SETUSER "))
        .expect("an ACL SETUSER line between the markers");
    line.split_whitespace()
        .skip(1)
        .map(|w| {
            w.replace("{key1}", &format!("{{{key}}}"))
                .replace(">password", &format!(">{PASSWORD}"))
        })
        .collect()
}

/// Creates the README's user for budget `key` on `server`.
pub fn create_user(server: &RedisServer, key: &str) {
    let mut cmd = redis::cmd("ACL");
    for arg in readme_acl(key) {
        cmd.arg(arg);
    }
    let () = server.query(&cmd);
}

/// `url` with the README's user and password in it.
pub fn as_user(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    format!("{scheme}://{USER}:{PASSWORD}@{rest}")
}

/// Charges, flushes the scripts, charges again and reads the budget as the README's
/// user, through `args` (the URL and TLS files) with the user's URL; `flush` runs
/// `SCRIPT FLUSH` as an administrator.
pub fn charge_read_and_reload(key: &str, args: Vec<String>, flush: impl Fn()) {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube()
            .key(key)
            .quota(1000)
            .ceiling(1000)
            .to_toml(),
    );
    // Run after a race on a shared deployment, the client may still find a cluster
    // node slow to answer and connect it again, and says so.
    let reconnects = crate::budget_cli::CLIENT_RECONNECTS.map(crate::common::Expected::maybe);
    let under_load = |cmd: crate::common::Trendsync| cmd.expecting(&reconnects);
    let charge = || {
        under_load(s.cmd())
            .costs(&costs)
            .args(&args)
            .args(["budget", "charge", "videos.list"])
            .run()
    };
    // Charging as the README's user, then after SCRIPT FLUSH.
    charge();
    flush();
    charge();
    let ran = under_load(s.cmd())
        .costs(&costs)
        .args(&args)
        .args(["budget", "--json"])
        .run();
    assert_eq!(ran.json()["used"], 2, "{}", ran.stdout);
}

#[test]
fn the_readme_acl_is_enough_for_every_path_and_no_more() {
    let server = RedisServer::start();
    create_user(&server, "test");
    let url = as_user(&server.url());
    assert!(url.contains("trendsync:"), "{url}");
    charge_read_and_reload("test", vec!["--redis-url".into(), url.clone()], || {
        let () = server.query(redis::cmd("SCRIPT").arg("FLUSH"));
    });

    // The block path: the upstream says the quota is spent, and the run records the
    // block for every host.
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(1000).ceiling(1000).to_toml(),
    );
    let fake = FakeUpstream::youtube();
    fake.answer_instead(
        Mock::given(any()),
        answer_fixture(403, "error_quota_exceeded.json"),
    );
    let ran = s
        .cmd()
        .costs(&costs)
        .args(["--redis-url", &url, "--api-base", &fake.uri()])
        .env("YOUTUBE_API_KEY", API_KEY)
        .args(["run", "--region", "US", "--json"])
        .expect_stderr("quota is spent")
        .expect_stderr("quota is lower than configured")
        .expect_ended("upstream_quota_exhausted")
        .status(75)
        .run();
    assert_eq!(
        ran.json()["status"],
        "upstream_quota_exhausted",
        "{}",
        ran.stdout
    );
    let ran = s
        .cmd()
        .costs(&costs)
        .args(["--redis-url", &url, "budget", "--json"])
        .run();
    assert!(
        ran.json()["blocked_until"].is_string(),
        "the block was recorded: {}",
        ran.stdout
    );
    let blocked: i64 =
        server.query(redis::cmd("EXISTS").arg("trendsync:{test}:blocked:videos.list"));
    assert_eq!(blocked, 1);
    // And what the refusal measured (docs/budget.md, "When the upstream refuses"), which
    // `budget` read back.
    let spent: i64 = server.query(redis::cmd("EXISTS").arg("trendsync:{test}:upstream_spent"));
    assert_eq!(spent, 1);
    assert!(
        ran.json()["buckets"][0]["upstream_spent_at"].is_u64(),
        "{}",
        ran.stdout
    );
    // And the operator lifts it.
    let ran = s
        .cmd()
        .costs(&costs)
        .args(["--redis-url", &url, "budget", "unblock", "--json"])
        .expect_stderr("lifted the upstream block")
        .run();
    let blocked: i64 =
        server.query(redis::cmd("EXISTS").arg("trendsync:{test}:blocked:videos.list"));
    assert_eq!(blocked, 0, "the block was lifted: {}", ran.stdout);

    // Another budget's keys are out of reach: a configuration error, not an outage.
    let costs = s.write(
        "other.toml",
        &Costs::youtube()
            .key("other")
            .quota(1000)
            .ceiling(1000)
            .to_toml(),
    );
    s.cmd()
        .costs(&costs)
        .args(["--redis-url", &url, "budget", "charge", "videos.list"])
        .expect_stderr("refused a command the limiter needs")
        .status(78)
        .stderr(contains("refused a command the limiter needs"))
        .stderr(contains("trendsync:***@"))
        .stderr(lacks(PASSWORD))
        .run();
}

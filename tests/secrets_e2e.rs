//! No secret anywhere: a session of runs against a Redis that requires a password,
//! reached over TCP (`redis://:PASSWORD@…`) and over a unix socket
//! (`unix://…?pass=PASSWORD`), leaves no trace of the API key or of the Redis password
//! in anything the binary wrote: stdout, stderr (text and JSON logs, up to trace), the
//! database and its companions, the metrics file, and every key name and value in
//! Redis. Where the Redis URL is printed, it is printed redacted.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use wiremock::Mock;
use wiremock::matchers::any;

use crate::common::harness::Harness;
use crate::common::upstream::{API_KEY, answer_fixture};
use crate::common::{Costs, Ran, RedisServer, contains};

const PASSWORD: &str = "rEdIs-PaSs-7731-secret";

fn bytes_contain(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Every file under `dir`, recursively, with its bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("listing") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((path, bytes));
        }
    }
    out
}

/// Keeps what one command of the session printed.
fn step(session: &mut Vec<(String, Ran)>, what: &str, ran: Ran) {
    session.push((what.to_owned(), ran));
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn no_secret_anywhere() {
    let server = RedisServer::start_with_password(PASSWORD);
    let redacted = format!("redis://:***@127.0.0.1:{}/0", server.port());
    let dead = format!("redis://:{PASSWORD}@127.0.0.1:{}/0", dead_port());
    session(&server, &redacted, &dead);
}

#[test]
fn no_secret_anywhere_through_a_unix_socket() {
    let server = RedisServer::start_unix_with_password(PASSWORD);
    let redacted = format!("unix://{}?db=0&pass=***", server.socket().display());
    let gone = tempfile::tempdir().expect("a directory");
    let dead = format!(
        "unix://{}?db=0&pass={PASSWORD}",
        gone.path().join("redis.sock").display()
    );
    session(&server, &redacted, &dead);
}

/// The session against `server`, whose URL prints as `redacted`; `dead` is a URL of
/// the same form with the password where nothing listens.
fn session(server: &RedisServer, redacted: &str, dead: &str) {
    let url = server.url();
    assert!(
        url.contains(PASSWORD),
        "the binary is given the password: {url}"
    );
    let redacted = redacted.to_owned();
    // The password is really needed: without it Redis refuses.
    let anonymous = redis::Client::open(format!("redis://127.0.0.1:{}/0", server.port()))
        .and_then(|c| c.get_connection())
        .and_then(|mut c| redis::cmd("DBSIZE").query::<i64>(&mut c));
    assert!(
        anonymous.is_err_and(|e| e.to_string().contains("NOAUTH")),
        "redis-server requires the password"
    );

    let mut h = Harness::new(Some(server));
    h.costs(Costs::one_unit_each().quota(1000).ceiling(30));
    let metrics = h.scratch.file("trendsync.prom");
    let metrics_arg = metrics.to_str().expect("a UTF-8 path");
    let mut session: Vec<(String, Ran)> = Vec::new();

    // The runs: complete, stopped by the budget, then refused keys; at every log level
    // and in both log formats.
    let (ran, calls) = h.run(&[
        "--log-format",
        "json",
        "-v",
        "--metrics-file",
        metrics_arg,
        "run",
        "--json",
    ]);
    assert_eq!(calls.len(), 24);
    step(&mut session, "full run, JSON logs", ran);
    let ran = h
        .cmd()
        .env("RUST_LOG", "trace")
        .args(["--metrics-file", metrics_arg, "run", "--json"])
        .expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted")
        .status(75)
        .run();
    assert!(ran.json()["status"] == "budget_exhausted", "{}", ran.stdout);
    step(&mut session, "run stopped by the budget, traced", ran);
    h.costs(Costs::one_unit_each().quota(1000).ceiling(100));
    let ran = h
        .cmd()
        .args(["-vv", "--log-format", "json", "backfill", "--json"])
        .run();
    step(&mut session, "backfill", ran);
    let ran = h
        .cmd()
        .args(["run", "--dry-run"])
        .stdout(contains(redacted.as_str()))
        .run();
    step(&mut session, "dry run", ran);

    // What a person types.
    let ran = h
        .bare()
        .arg("budget")
        .stdout(contains(format!("budget \"test\" on {redacted}")))
        .run();
    step(&mut session, "budget", ran);
    step(
        &mut session,
        "budget --json",
        h.bare().args(["-v", "budget", "--json"]).run(),
    );
    let ran = h
        .bare()
        .env("RUST_LOG", "trace")
        .args(["budget", "charge", "videos.list", "--json"])
        .run();
    assert_eq!(ran.json()["granted"], true, "{}", ran.stdout);
    step(&mut session, "budget charge", ran);
    step(
        &mut session,
        "budget charge denied",
        h.bare()
            .args(["budget", "charge", "search.list", "--count", "500"])
            .status(75)
            .run(),
    );
    let ran = h.bare().args(["search", "Ammonite", "--json"]).run();
    assert_eq!(
        ran.json()["results"].as_array().map(Vec::len),
        Some(1),
        "{}",
        ran.stdout
    );
    step(&mut session, "search", ran);
    step(
        &mut session,
        "search text",
        h.bare().args(["-v", "search", "Ammonite"]).run(),
    );
    // The URL from the environment instead of the flag, and the help that lists it.
    let ran = h
        .scratch
        .cmd()
        .env("TRENDSYNC_REDIS_URL", &url)
        .env("YOUTUBE_API_KEY", API_KEY)
        .args(["run", "--help"])
        .stdout(contains("TRENDSYNC_REDIS_URL"))
        .run();
    step(&mut session, "run --help", ran);

    // The upstream refuses the key from now on.
    h.fake.answer_instead(
        Mock::given(any()),
        answer_fixture(400, "error_key_invalid.json"),
    );
    h.expect_stderr("API_KEY_INVALID")
        .expect_ended("failed")
        .status(1);
    let (ran, calls) = h.run(&["--metrics-file", metrics_arg, "run", "--json"]);
    assert!(!calls.is_empty());
    step(&mut session, "invalid key", ran);
    let ran = h
        .cmd()
        .env("RUST_LOG", "trace")
        .args(["--log-format", "json", "run"])
        .expect_stderr("API_KEY_INVALID")
        .expect_ended("failed")
        .status(1)
        .run();
    step(&mut session, "invalid key, traced JSON logs", ran);
    step(
        &mut session,
        "invalid key, -vv",
        h.cmd()
            .args(["-vv", "run"])
            .expect_stderr("API_KEY_INVALID")
            .expect_ended("failed")
            .status(1)
            .run(),
    );

    // Redis unreachable at a URL with the password: the error names it redacted.
    let dead_redacted = dead.replace(PASSWORD, "***");
    let ran = h
        .scratch
        .cmd()
        .env("RUST_LOG", "trace")
        .args(["--redis-url", dead, "budget"])
        .expect_stderr("is unreachable")
        // Another Redis than the runs', and the built-in costs file: both named
        // (masked), before the limiter is tried.
        .expect_stderr("but the latest run")
        // The window cannot be read: try later.
        .status(75)
        .stderr(contains(dead_redacted.as_str()))
        .stderr(contains("unreachable"))
        .run();
    step(&mut session, "budget, Redis unreachable", ran);
    let ran = h
        .scratch
        .cmd()
        .env("TRENDSYNC_REDIS_URL", dead)
        .env("YOUTUBE_API_KEY", API_KEY)
        .args(["--api-base", &h.fake.uri(), "-vv", "run", "--json"])
        .expect_stderr("is unreachable")
        .expect_stderr("API_KEY_INVALID")
        .expect_ended("failed")
        .status(1)
        .stderr(contains(dead_redacted.as_str()))
        .run();
    session.push(("run, Redis unreachable".to_owned(), ran));

    // Everything the session wrote.
    let mut written: Vec<(String, Vec<u8>)> = Vec::new();
    for (what, ran) in &session {
        written.push((format!("stdout of {what}"), ran.stdout.clone().into_bytes()));
        written.push((format!("stderr of {what}"), ran.stderr.clone().into_bytes()));
    }
    let files = files_under(h.scratch.path());
    let names: Vec<String> = files
        .iter()
        .map(|(p, _)| {
            p.file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for expected in ["trendsync.db", "trendsync.prom"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    for (path, bytes) in files {
        written.push((path.display().to_string(), bytes));
    }
    let contents = server.contents();
    assert!(
        contents.iter().any(|(k, _)| k == "trendsync:{test}:budget"),
        "the budget is in Redis: {:?}",
        contents.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    for (key, values) in contents {
        written.push((format!("Redis key name {key}"), key.clone().into_bytes()));
        for value in values {
            written.push((format!("Redis value of {key}"), value));
        }
    }

    // The search below can find what it looks for: the session wrote the videos, the
    // charges' methods and the redacted URL.
    let all: Vec<u8> = written
        .iter()
        .flat_map(|(_, b)| b.iter().copied())
        .collect();
    for present in [
        "Ammonite",
        "videos.list",
        redacted.as_str(),
        "API key not valid",
    ] {
        assert!(
            bytes_contain(&all, present),
            "the session wrote {present:?}"
        );
    }
    // The key was in use: every request carried it, in its header.
    for req in h.fake.requests() {
        assert_eq!(
            req.headers
                .get("x-goog-api-key")
                .and_then(|v| v.to_str().ok()),
            Some(API_KEY)
        );
    }
    for (what, bytes) in &written {
        for secret in [API_KEY, PASSWORD] {
            assert!(
                !bytes_contain(bytes, secret),
                "{secret} is in {what}:\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

/// Everything under the scratch directory and every output of the session, checked
/// for `secrets`.
fn assert_nowhere(h: &Harness<'_>, session: &[(String, Ran)], secrets: &[&str]) {
    let mut written: Vec<(String, Vec<u8>)> = Vec::new();
    for (what, ran) in session {
        written.push((format!("stdout of {what}"), ran.stdout.clone().into_bytes()));
        written.push((format!("stderr of {what}"), ran.stderr.clone().into_bytes()));
    }
    for (path, bytes) in files_under(h.scratch.path()) {
        written.push((path.display().to_string(), bytes));
    }
    for (what, bytes) in &written {
        for secret in secrets {
            assert!(
                !bytes_contain(bytes, secret),
                "{secret} is in {what}:\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}

#[test]
fn a_refused_api_base_carrying_the_key_never_shows_it() {
    let h = Harness::new(None);
    let secret_password = "base-PaSs-4410";
    let mut session: Vec<(String, Ran)> = Vec::new();
    for base in [
        format!("http://user:{secret_password}@127.0.0.1:9/v3?key={API_KEY}"),
        format!("http://127.0.0.1:99999/v3?key={API_KEY}&x=1"),
        format!("ftp://{API_KEY}@127.0.0.1/v3"),
        format!("https://127.0.0.1/v3#{API_KEY}"),
        format!("not a url {API_KEY}"),
    ] {
        for format in ["text", "json"] {
            let ran = h
                .bare()
                .env("YOUTUBE_API_KEY", API_KEY)
                .env("RUST_LOG", "trace")
                .args(["--log-format", format, "--api-base", &base, "run", "--json"])
                .expect_stderr("is not usable")
                .status(78)
                .run();
            assert_eq!(ran.json()["status"], "failed", "{}", ran.stdout);
            step(
                &mut session,
                &format!("--api-base {base}, {format} logs"),
                ran,
            );
        }
    }
    assert!(
        session[0]
            .1
            .stderr
            .contains("http://user:***@127.0.0.1:9/v3?key=***"),
        "the refused base is shown masked: {}",
        session[0].1.stderr
    );
    assert!(h.fake.calls().is_empty());
    assert_nowhere(&h, &session, &[API_KEY, secret_password]);
}

#[test]
fn an_upstream_that_reflects_the_key_in_a_200_does_not_make_it_leak() {
    let h = Harness::new(None);
    // Page 1 carries the key in text the store keeps; page 2 in a count, which makes it
    // malformed and quoted in the region's error.
    let mut page = crate::common::upstream::fixture_json("videos_page1.json");
    page["items"][0]["snippet"]["title"] = format!("Wombatfest echo {API_KEY}").into();
    page["items"][0]["snippet"]["description"] = format!("key={API_KEY}").into();
    page["items"][0]["snippet"]["tags"] = serde_json::json!([API_KEY, "wombat"]);
    page["items"][0]["snippet"]["channelTitle"] = API_KEY.into();
    h.fake.answer_instead(
        crate::common::upstream::page1("US"),
        crate::common::upstream::answer(200, &page.to_string()),
    );
    let mut last = crate::common::upstream::fixture_json("videos_last_page.json");
    last["items"][0]["statistics"]["viewCount"] = API_KEY.into();
    h.fake.answer_instead(
        crate::common::upstream::page2("US"),
        crate::common::upstream::answer(200, &last.to_string()),
    );
    let mut session: Vec<(String, Ran)> = Vec::new();
    h.expect_stderr("malformed HTTP 200 response")
        .expect_ended("failed")
        .status(1);
    let (ran, calls) = h.run(&["-vv", "run", "--json", "--region", "US"]);
    assert_eq!(calls.len(), 2);
    let error = ran.json()["regions"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("viewCount") && error.contains("[redacted]"),
        "{error}"
    );
    step(&mut session, "run", ran);
    let ran = h
        .cmd()
        .env("RUST_LOG", "trace")
        .args(["--log-format", "json", "run", "--json", "--region", "US"])
        .expect_stderr("malformed HTTP 200 response")
        .expect_ended("failed")
        .status(1)
        .run();
    step(&mut session, "run, traced JSON logs", ran);
    let ran = h.bare().args(["search", "Wombatfest", "--json"]).run();
    assert_eq!(
        ran.json()["results"][0]["title"],
        "Wombatfest echo [redacted]",
        "{}",
        ran.stdout
    );
    step(&mut session, "search --json", ran);
    step(
        &mut session,
        "search",
        h.bare().args(["search", "wombat"]).run(),
    );
    assert_nowhere(&h, &session, &[API_KEY]);
}

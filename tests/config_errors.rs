//! Every configuration mistake: exit 78, with the file, the line and what was expected.

use std::path::Path;

use crate::common::{Costs, Ran, Scratch, Trendsync, contains, lacks};

const REGIONS_OK: &str = "[[region]]\ncode = \"US\"\noffset = 0\n";

/// Runs `run --dry-run` with the given files and checks exit 78 and the message.
fn expect_config_error(costs: &str, regions: &str, file: &str, line: usize, says: &str) {
    let s = Scratch::new();
    let costs_path = s.write("costs.toml", costs);
    let regions_path = s.write("regions.toml", regions);
    s.cmd()
        .arg_paths(&costs_path, &regions_path)
        .args(["run", "--dry-run"])
        .expect_stderr(says)
        .status(78)
        .stderr(contains(format!("{file}:{line}:")))
        // No plan is printed.
        .stdout("")
        .run();
}

trait Files {
    fn arg_paths(self, costs: &std::path::Path, regions: &std::path::Path) -> Self;
}

impl Files for crate::common::Trendsync {
    fn arg_paths(self, costs: &std::path::Path, regions: &std::path::Path) -> Self {
        self.args([
            std::ffi::OsStr::new("--costs"),
            costs.as_os_str(),
            std::ffi::OsStr::new("--regions"),
            regions.as_os_str(),
        ])
    }
}

#[test]
fn the_valid_files_load() {
    let s = Scratch::new();
    let c = s.write("costs.toml", &Costs::youtube().to_toml());
    let r = s.write("regions.toml", REGIONS_OK);
    s.cmd().arg_paths(&c, &r).args(["run", "--dry-run"]).run();
}

#[test]
fn an_unknown_key() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("window = \"24h\"", "window = \"24h\"\nwindwo = \"1h\"");
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        6,
        "unknown field `windwo`",
    );
}

#[test]
fn a_wrong_type() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("quota = 10000", "quota = \"lots\"");
    expect_config_error(&costs, REGIONS_OK, "costs.toml", 3, "invalid type");
}

#[test]
fn a_bad_duration() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("window = \"24h\"", "window = \"a day\"");
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        5,
        "budget.window: \"a day\" is not a duration",
    );
}

#[test]
fn a_zero_duration() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("window = \"24h\"", "window = \"0s\"");
    expect_config_error(&costs, REGIONS_OK, "costs.toml", 5, "is zero");
}

#[test]
fn a_ceiling_above_the_quota() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("ceiling = 9500", "ceiling = 10001");
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        4,
        "budget.ceiling (10001) is above budget.quota (10000)",
    );
}

#[test]
fn a_cost_above_the_ceiling() {
    let costs = Costs::youtube().quota(1000).ceiling(50).to_toml();
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        9,
        "the cost of \"search.list\" (100) is above budget.ceiling (50)",
    );
}

#[test]
fn a_limit_narrower_than_one_call() {
    let costs = format!(
        "{}\n[[limit]]\nname = \"search\"\nmethods = [\"search.list\"]\nmax = 99\nwindow = \"10m\"\n",
        Costs::youtube().to_toml()
    );
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        21,
        "limit \"search\" has max 99, below one call of \"search.list\" (100)",
    );
}

#[test]
fn a_limit_on_a_method_without_a_cost() {
    let costs = format!(
        "{}\n[[limit]]\nname = \"pl\"\nmethods = [\"playlists.list\"]\nmax = 99\nwindow = \"10m\"\n",
        Costs::youtube().to_toml()
    );
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        20,
        "limit \"pl\" names \"playlists.list\", which has no entry in [costs]",
    );
}

#[test]
fn a_limiter_down_policy_for_a_method_without_a_cost() {
    let costs = Costs::youtube().to_toml().replace(
        "\"search.list\" = \"deny\"",
        "\"search.list\" = \"deny\"\n\"playlists.list\" = \"allow\"",
    );
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        17,
        "[when_limiter_down] names \"playlists.list\"",
    );
}

#[test]
fn a_limiter_down_policy_that_is_neither_allow_nor_deny() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("\"search.list\" = \"deny\"", "\"search.list\" = \"maybe\"");
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        16,
        "unknown variant `maybe`",
    );
}

#[test]
fn a_limit_with_a_reserved_name() {
    let costs = format!(
        "{}\n[[limit]]\nname = \"budget\"\nmethods = [\"search.list\"]\nmax = 1000\nwindow = \"10m\"\n",
        Costs::youtube().to_toml()
    );
    expect_config_error(
        &costs,
        REGIONS_OK,
        "costs.toml",
        19,
        "limit name \"budget\"",
    );
}

#[test]
fn a_method_trendsync_calls_without_a_cost() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("\"videos.list\" = 1\n", "")
        .replace("\"videos.list\" = \"allow\"\n", "");
    let s = Scratch::new();
    let c = s.write("costs.toml", &costs);
    let r = s.write("regions.toml", REGIONS_OK);
    s.cmd()
        .arg_paths(&c, &r)
        .args(["run", "--dry-run"])
        .expect_stderr("[costs] has no entry for \"videos.list\"")
        .status(78)
        .stderr(contains("costs.toml"))
        .run();
}

#[test]
fn a_search_without_a_search_cost() {
    let costs = Costs::youtube()
        .to_toml()
        .replace("\"search.list\" = 100\n", "")
        .replace("\"search.list\" = \"deny\"\n", "");
    let regions = format!("{REGIONS_OK}[[region.search]]\nname = \"fresh\"\n");
    let s = Scratch::new();
    let c = s.write("costs.toml", &costs);
    let r = s.write("regions.toml", &regions);
    s.cmd()
        .arg_paths(&c, &r)
        .args(["run", "--dry-run"])
        .expect_stderr("region US")
        .status(78)
        .stderr(contains("configures searches"))
        .run();
}

#[test]
fn a_bad_region_code() {
    let regions =
        "[[region]]\ncode = \"US\"\noffset = 0\n\n[[region]]\ncode = \"UK\"\noffset = 5\n";
    expect_config_error(
        &Costs::youtube().to_toml(),
        regions,
        "regions.toml",
        6,
        "\"UK\" is not an ISO 3166-1 alpha-2 region code",
    );
}

#[test]
fn a_region_twice() {
    let regions =
        "[[region]]\ncode = \"US\"\noffset = 0\n\n[[region]]\ncode = \"US\"\noffset = 5\n";
    expect_config_error(
        &Costs::youtube().to_toml(),
        regions,
        "regions.toml",
        6,
        "region US is configured twice",
    );
}

#[test]
fn an_offset_that_is_not_a_minute() {
    let regions = "[[region]]\ncode = \"US\"\noffset = 60\n";
    expect_config_error(
        &Costs::youtube().to_toml(),
        regions,
        "regions.toml",
        3,
        "offset 60 is not a crontab minute",
    );
}

#[test]
fn too_many_pages() {
    let regions = "[defaults]\npages = 5\n\n[[region]]\ncode = \"US\"\noffset = 0\n";
    expect_config_error(
        &Costs::youtube().to_toml(),
        regions,
        "regions.toml",
        2,
        "defaults.pages is 5; expected 1 to 4",
    );
}

#[test]
fn a_bad_search_order() {
    let regions = format!("{REGIONS_OK}[[region.search]]\nname = \"x\"\norder = \"views\"\n");
    expect_config_error(
        &Costs::youtube().to_toml(),
        &regions,
        "regions.toml",
        6,
        "order \"views\" is not one of",
    );
}

#[test]
fn an_empty_region_list() {
    let s = Scratch::new();
    let c = s.write("costs.toml", &Costs::youtube().to_toml());
    let r = s.write("regions.toml", "[defaults]\npages = 2\n");
    s.cmd()
        .arg_paths(&c, &r)
        .args(["run", "--dry-run"])
        .expect_stderr("regions.toml: no [[region]] is configured")
        .status(78)
        .run();
}

#[test]
fn a_missing_file_named_on_the_command_line() {
    let s = Scratch::new();
    s.cmd()
        .args(["--costs", "nowhere.toml", "budget"])
        .expect_stderr("nowhere.toml: cannot read the file")
        .status(78)
        .run();
}

#[test]
fn a_file_in_the_current_directory_is_picked_up() {
    let s = Scratch::new();
    s.write(
        "quota-costs.toml",
        &Costs::youtube()
            .to_toml()
            .replace("quota = 10000", "quota = -1"),
    );
    s.cmd()
        .args(["budget"])
        .expect_stderr("quota-costs.toml:3:")
        .status(78)
        .run();
}

#[test]
fn a_config_error_in_the_environment_is_reported_too() {
    let s = Scratch::new();
    let c = s.write("c.toml", "[budget]\n");
    s.cmd()
        .env("TRENDSYNC_COSTS", &c)
        .args(["budget", "--json"])
        .expect_stderr("c.toml:1:1: missing field `key`")
        .status(78)
        .run();
}

#[test]
fn windows_and_unit_counts_the_limiter_cannot_hold_are_refused_with_their_place() {
    for (from, to, line, says) in [
        (
            "window = \"24h\"",
            "window = \"300000y\"",
            5,
            "outside 1s to 31d",
        ),
        (
            "window = \"24h\"",
            "window = \"1ns\"",
            5,
            "outside 1s to 31d",
        ),
        (
            "window = \"24h\"",
            "window = \"500us\"",
            5,
            "outside 1s to 31d",
        ),
        (
            "window = \"24h\"",
            "window = \"32d\"",
            5,
            "outside 1s to 31d",
        ),
        (
            "quota = 10000",
            "quota = 18446744073709551615",
            3,
            "the most units the limiter counts exactly",
        ),
        (
            "ceiling = 9500\nwindow",
            "ceiling = 9007199254740993\nwindow",
            4,
            "the most units the limiter counts exactly",
        ),
    ] {
        let costs = Costs::youtube().to_toml().replace(from, to);
        assert_ne!(costs, Costs::youtube().to_toml(), "{to}");
        expect_config_error(&costs, REGIONS_OK, "costs.toml", line, says);
    }
    let limit = format!(
        "{}\n[[limit]]\nname = \"search\"\nmethods = [\"search.list\"]\nmax = 1000\nwindow = \"0.5s\"\n",
        Costs::youtube().to_toml()
    );
    expect_config_error(&limit, REGIONS_OK, "costs.toml", 22, "outside 1s to 31d");
}

/// Type mistakes are told in a person's words, not a type name (docs/commands.md).
#[test]
fn a_quoted_number_is_told_in_words() {
    expect_config_error(
        &Costs::youtube()
            .to_toml()
            .replace("ceiling = 9500", "ceiling = \"9500\""),
        REGIONS_OK,
        "costs.toml",
        4,
        "expected a whole number such as 9500 (write the number without quotes)",
    );
    expect_config_error(
        &Costs::youtube().to_toml(),
        "[defaults]\npages = \"two\"\n\n[[region]]\ncode = \"US\"\noffset = 0\n",
        "regions.toml",
        2,
        "expected a whole number such as",
    );
}

/// An --api-base without its scheme says to write it in full (exit 78).
#[test]
fn an_api_base_without_a_scheme_says_to_add_https() {
    let s = Scratch::new();
    s.cmd()
        .args([
            "--api-base",
            "www.googleapis.com/youtube/v3",
            "run",
            "--dry-run",
        ])
        .expect_stderr("starting with https://")
        .status(78)
        .stderr(lacks("relative URL"))
        .run();
}

/// Buckets (docs/budget.md, "Buckets" and 4): a method in two buckets, a bucket under a reserved
/// name or a limit's name, and a day window in a zone nobody knows are each refused.
#[test]
fn bucket_mistakes_are_configuration_errors() {
    let base = Costs::youtube()
        .to_toml()
        .replace("\"search.list\" = 100\n", "");
    let bucket = |name: &str, window: &str, method: &str| {
        format!(
            "{base}\n[[bucket]]\nname = \"{name}\"\nquota = 100\nceiling = 95\nwindow = \"{window}\"\ncosts = {{ \"{method}\" = 1 }}\n"
        )
    };
    let in_two = bucket("search", "24h", "videos.list");
    let at = in_two.lines().count();
    expect_config_error(
        &in_two,
        REGIONS_OK,
        "costs.toml",
        at,
        "\"videos.list\" is in [costs] already; every method belongs to exactly one bucket",
    );
    let reserved = bucket("blocked", "24h", "search.list");
    expect_config_error(
        &reserved,
        REGIONS_OK,
        "costs.toml",
        reserved.lines().count() - 4,
        "bucket name \"blocked\"",
    );
    let zone = bucket("search", "day@Mars/Olympus_Mons", "search.list");
    expect_config_error(
        &zone,
        REGIONS_OK,
        "costs.toml",
        zone.lines().count() - 1,
        "\"Mars/Olympus_Mons\" is not a time zone",
    );
}

/// `budget unblock` with a bucket the file does not have is a usage error (2)
/// naming the buckets there are.
#[test]
fn unblocking_an_unknown_bucket_names_the_buckets() {
    let s = Scratch::new();
    let costs = s.write("costs.toml", include_str!("../quota-costs.granular.toml"));
    s.cmd()
        .arg("--costs")
        .arg(&costs)
        .args(["budget", "unblock", "serach"])
        .expect_stderr("budget, search, stats")
        .status(2)
        .run();
}

/// Runs `t` to its end. Whenever it holds `fifo` open to read, waiting for a writer
/// that never comes, the test opens the write end and closes it at once, so that the
/// process reads an empty file and goes on instead of waiting for ever; what it then
/// printed is checked as [`Trendsync::run`] does.
#[track_caller]
fn run_beside_fifo(t: Trendsync, fifo: &Path) -> Ran {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK on Linux: opening a FIFO's write end then succeeds only while a
    // reader has it open, and never waits.
    const O_NONBLOCK: i32 = 0o4000;
    let (mut child, checks) = t.start().into_parts();
    while child.try_wait().expect("polling trendsync").is_none() {
        let _released = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(O_NONBLOCK)
            .open(fifo);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    checks.ran(child.wait_with_output().expect("waiting for trendsync"))
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Only a regular file is read as configuration. A FIFO, a directory or a link to
/// nowhere under a configuration file's name, given or found by the lookup, is refused
/// (78) naming it and what it is: the lookup does not skip it for a file further down,
/// and a FIFO is never opened (which would wait for a writer for ever), not even to
/// compare it with the file above it.
#[test]
fn only_a_regular_file_is_read_as_configuration() {
    let s = Scratch::new();
    let fifo = s.file("fifo.toml");
    mkfifo(&fifo);
    run_beside_fifo(
        s.cmd()
            .arg("--costs")
            .arg(&fifo)
            .arg("config")
            .status(78)
            .expect_stderr(
                "fifo.toml: cannot read the file: it is a FIFO (named pipe), not a regular file",
            ),
        &fifo,
    );

    // Found by the lookup in $TRENDSYNC_CONFIG_DIR: not skipped for the built-in file.
    let dir = s.file("etc");
    std::fs::create_dir_all(dir.join("quota-costs.toml")).expect("a directory");
    s.cmd()
        .env("TRENDSYNC_CONFIG_DIR", &dir)
        .arg("config")
        .status(78)
        .expect_stderr(format!(
            "{}: cannot read the file: it is a directory, not a regular file; replace it",
            dir.join("quota-costs.toml").display()
        ))
        .run();
    std::fs::remove_dir(dir.join("quota-costs.toml")).expect("removing it");
    std::os::unix::fs::symlink(s.file("nowhere.toml"), dir.join("quota-costs.toml"))
        .expect("a link to nowhere");
    s.cmd()
        .env("TRENDSYNC_CONFIG_DIR", &dir)
        .arg("config")
        .status(78)
        .expect_stderr(format!(
            "{}: found in $TRENDSYNC_CONFIG_DIR: a symbolic link to {}, which does not exist; point the link at an existing file, or remove it",
            dir.join("quota-costs.toml").display(),
            s.file("nowhere.toml").display()
        ))
        .stderr(lacks("leave the option out"))
        .run();
    std::fs::remove_file(dir.join("quota-costs.toml")).expect("removing the link");
    let regions = dir.join("regions.toml");
    mkfifo(&regions);
    run_beside_fifo(
        s.cmd()
            .env("TRENDSYNC_CONFIG_DIR", &dir)
            .arg("config")
            .status(78)
            .expect_stderr("regions.toml: cannot read the file: it is a FIFO"),
        &regions,
    );

    // A regular file above a FIFO: the FIFO is not read to compare them.
    std::fs::remove_file(&regions).expect("removing the FIFO");
    s.write("etc/quota-costs.toml", &Costs::youtube().to_toml());
    let below = s.file("quota-costs.toml");
    mkfifo(&below);
    let shown = run_beside_fifo(
        s.cmd()
            .env("TRENDSYNC_CONFIG_DIR", &dir)
            .args(["config", "--json"]),
        &below,
    )
    .json();
    assert_eq!(shown["costs"]["source"], "TRENDSYNC_CONFIG_DIR", "{shown}");
}

/// The lookup never falls back in silence (docs/commands.md, "Configuration files"): a
/// `$TRENDSYNC_CONFIG_DIR` that does not exist, and a configuration directory that
/// exists but cannot be searched, are 78 naming the directory, for `config` as for a
/// run and a reader, where they used to be skipped for the next file or the built-in
/// one. "Cannot be searched" is shown two ways: a directory this user has no search
/// (x) permission on, run as an unprivileged user (under `setpriv` when the suite runs
/// as root, who may search anything; skipped, saying so, when neither works), and a
/// file where the directory should be, which no user can search.
#[test]
fn a_configuration_directory_that_cannot_be_searched_is_named() {
    let s = Scratch::new();
    let missing = s.file("no-such-dir");
    for args in [&["config"][..], &["run", "--dry-run"][..], &["status"][..]] {
        s.cmd()
            .env("TRENDSYNC_CONFIG_DIR", &missing)
            .args(args)
            .status(78)
            .expect_stderr(format!(
                "{}: TRENDSYNC_CONFIG_DIR names this directory, which does not exist",
                missing.display()
            ))
            .run();
    }

    // A file where $XDG_CONFIG_HOME/trendsync should be: nobody can search it.
    let xdg = s.file("xdg");
    std::fs::create_dir_all(&xdg).expect("a directory");
    std::fs::write(xdg.join("trendsync"), "not a directory").expect("write");
    s.cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["config", "--json"])
        .status(78)
        .expect_stderr(format!(
            "{}: the configuration directory ($XDG_CONFIG_HOME/trendsync) cannot be searched for quota-costs.toml: Not a directory",
            xdg.join("trendsync").display()
        ))
        .run();

    // A directory this user may not search, as a locked-down /etc/trendsync is to a
    // service user: 78 naming it, not the built-in file.
    std::fs::remove_file(xdg.join("trendsync")).expect("removing the file");
    let locked = xdg.join("trendsync");
    std::fs::create_dir(&locked).expect("a directory");
    std::fs::write(locked.join("quota-costs.toml"), "[budget]\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let root = runs_as_root();
    let mut cmd = s.cmd().env("XDG_CONFIG_HOME", &xdg).args(["config"]);
    if root {
        let Some(setpriv) = which("setpriv") else {
            eprintln!("skipped the permission case: running as root, and no setpriv to drop it");
            return;
        };
        // The unprivileged user must reach the scratch directory to run there.
        std::fs::set_permissions(s.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        cmd = cmd.within(
            &setpriv,
            &["--reuid=65534", "--regid=65534", "--clear-groups", "--"],
        );
    }
    cmd.status(78)
        .expect_stderr(format!(
            "{}: the configuration directory ($XDG_CONFIG_HOME/trendsync) cannot be searched for quota-costs.toml: Permission denied",
            locked.display()
        ))
        .run();
}

/// Whether this process runs as root (who may search any directory).
fn runs_as_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program` on the PATH.
fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// An `--api-base` a run refuses (78) is refused by `crontab`, which would otherwise
/// print it into every line, and by `config`, which shows what runs use; masked, as a
/// run's error is.
#[test]
fn an_api_base_a_run_refuses_is_refused_by_crontab_and_config_too() {
    let s = Scratch::new();
    for (base, problem) in [
        (
            "ftp://127.0.0.1/youtube/v3",
            "the scheme must be http or https",
        ),
        ("http://[::1", "invalid IPv6 address"),
        ("http://127.0.0.1/v3?key=s3cret", "must not have a query"),
    ] {
        for command in ["crontab", "config"] {
            s.cmd()
                .args(["--api-base", base, command])
                .status(78)
                .expect_stderr(problem)
                .stderr(lacks("s3cret"))
                .stdout("")
                .run();
        }
    }
}

/// A key in `--api-base`'s path (a proxy that takes it there), or the key in use
/// anywhere in it, is masked by `config` in text and JSON, and `crontab` leaves the
/// base out of its lines for the crontab's environment, as it does a Redis URL.
#[test]
fn config_and_crontab_mask_a_key_wherever_it_is_in_the_api_base() {
    let s = Scratch::new();
    let google = "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv";
    let in_use = "plainsecretvalue";
    for (base, secret) in [
        (format!("http://127.0.0.1:9/{google}/youtube/v3"), google),
        (format!("http://127.0.0.1:9/{in_use}/youtube/v3"), in_use),
    ] {
        for args in [&["config"][..], &["config", "--json"][..]] {
            let shown = s
                .cmd()
                .env("YOUTUBE_API_KEY", in_use)
                .args(["--api-base", &base])
                .args(args)
                .stdout(lacks(secret))
                .run();
            assert!(shown.stdout.contains("/youtube/v3"), "{}", shown.stdout);
        }
        let lines = s
            .cmd()
            .env("YOUTUBE_API_KEY", in_use)
            .args(["--api-base", &base, "crontab"])
            .stdout(lacks(secret))
            .stdout(contains("TRENDSYNC_API_BASE=..."))
            .run()
            .stdout;
        assert!(
            lines
                .lines()
                .filter(|l| !l.starts_with('#'))
                .all(|l| !l.contains("--api-base")),
            "{lines}"
        );
    }
    // A base with nothing to hide is printed in the lines as given.
    s.cmd()
        .args(["--api-base", "http://127.0.0.1:9/youtube/v3", "crontab"])
        .stdout(contains("--api-base http://127.0.0.1:9/youtube/v3"))
        .run();
}

#[test]
fn a_slot_that_is_not_whole_seconds_minutes_or_hours() {
    let regions = "[[region]]\ncode = \"US\"\noffset = 0\nslot = \"90\"\n";
    expect_config_error(
        &Costs::youtube().to_toml(),
        regions,
        "regions.toml",
        4,
        "region US slot \"90\" is not a slot",
    );
}

#[test]
fn a_lease_longer_than_a_slot() {
    let regions =
        "[defaults]\nslot = \"1m\"\nlease = \"2m\"\n\n[[region]]\ncode = \"US\"\noffset = 0\n";
    expect_config_error(
        &Costs::youtube().to_toml(),
        regions,
        "regions.toml",
        3,
        "defaults.lease \"2m\" is longer than region US's slot of 60 s",
    );
}

/// A host name the slot records cannot carry is a usage error (2), from the flag and
/// from the environment alike, before anything is read or written.
#[test]
fn a_host_name_with_a_space_is_a_usage_error() {
    let s = Scratch::new();
    s.cmd()
        .args(["run", "--host-name", "host a"])
        .expect_stderr("expected printable characters and no spaces")
        .status(2)
        .run();
    s.cmd()
        .env("TRENDSYNC_HOST_NAME", "x".repeat(65))
        .args(["backfill"])
        .expect_stderr("expected at most 64")
        .status(2)
        .run();
    assert!(!s.file("trendsync.db").exists(), "nothing written");
}

//! One configuration everywhere, and each command saying which limiter it read
//! (docs/commands.md, docs/metrics.md): the configuration directories, `config`, the README's
//! deployment run as written for the shell, a cron line and the systemd unit, and the
//! limiter each run records, which read commands compare and charging commands
//! enforce.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::harness::{Harness, THREE_REGIONS};
use crate::common::upstream::API_KEY;
use crate::common::{RedisServer, Scratch, contains, lacks};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn binary() -> PathBuf {
    assert_cmd::cargo::cargo_bin("trendsync")
}

/// The fingerprint `config --json` gives for the costs file `path`.
fn fingerprint_of(path: &Path) -> String {
    let s = Scratch::new();
    let config = s.cmd().costs(path).args(["config", "--json"]).run().json();
    config["costs"]["fingerprint"]
        .as_str()
        .expect("a fingerprint")
        .to_owned()
}

/// The latest run's recorded limiter and fingerprint in the database at `db`: the
/// last recorded, whatever clock stamped its start.
fn last_run(db: &Path) -> (String, Option<String>, String) {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("the database");
    conn.query_row(
        "SELECT limiter_kind, limiter_url, costs_fingerprint FROM runs
         ORDER BY rowid DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .expect("a run that recorded its limiter")
}

/// The README's deployment block, between its markers.
fn readme_deployment() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let begin = readme
        .find("<!-- deployment:begin")
        .expect("the README marks its deployment");
    let end = readme
        .find("<!-- deployment:end -->")
        .expect("the README marks its deployment's end");
    let block = &readme[begin..end];
    let code = block
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a sh block between the markers")
        .0;
    code.to_owned()
}

/// A scratch root standing in for the machine: `/etc/trendsync`, `/usr/local/bin` and
/// `/var/lib/trendsync` under it. The binary is pointed at its `etc/trendsync` with
/// `TRENDSYNC_CONFIG_DIR` (no test writes the real `/etc/trendsync`).
struct Root {
    dir: tempfile::TempDir,
}

impl Root {
    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Text written for the real machine, moved into this root.
    fn moved(&self, text: &str) -> String {
        text.replace(
            "/etc/trendsync",
            &self.path("etc/trendsync").display().to_string(),
        )
        .replace(
            "/etc/sysusers.d",
            &self.path("etc/sysusers.d").display().to_string(),
        )
        .replace(
            "/usr/local/bin",
            &self.path("usr/local/bin").display().to_string(),
        )
        .replace(
            "/var/lib/trendsync",
            &self.path("var/lib/trendsync").display().to_string(),
        )
        .replace("target/release/trendsync", &binary().display().to_string())
    }

    /// A command with only `vars` in its environment, as cron and systemd start one;
    /// `TRENDSYNC_CONFIG_DIR` stands in for `/etc/trendsync`.
    fn bare(&self, program: impl AsRef<std::ffi::OsStr>, vars: &[(&str, String)]) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("TRENDSYNC_CONFIG_DIR", self.path("etc/trendsync"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env("HOME", self.path("home"));
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd
    }
}

#[track_caller]
fn ok(cmd: &mut Command) -> (String, String) {
    let out = cmd.output().expect("running a command");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        matches!(out.status.code(), Some(0 | 75)),
        "{cmd:?}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// The user and group the README's deployment creates, as the scratch root's
/// `/etc/passwd` has them: (uid, gid).
fn trendsync_ids(root: &Root) -> (u32, u32) {
    let passwd = std::fs::read_to_string(root.path("etc/passwd")).expect("etc/passwd");
    let fields: Vec<&str> = passwd
        .lines()
        .find(|l| l.starts_with("trendsync:"))
        .unwrap_or_else(|| panic!("no trendsync user in {passwd}"))
        .split(':')
        .collect();
    let id = |i: usize| fields[i].parse().expect("a numeric id");
    (id(2), id(3))
}

/// The README's deployment block as root runs it, in the scratch `root`: the user is
/// created in the scratch root's `/etc/passwd` and `/etc/group` (a copy of this
/// machine's, as on a real host), which from then on stand in for the machine's in a
/// mount namespace of the script's own, so that `install -o trendsync` finds the user.
fn deployment_script(root: &Root) -> String {
    let r = root.path("").display().to_string();
    let r = r.trim_end_matches('/');
    for file in ["passwd", "group"] {
        std::fs::copy(Path::new("/etc").join(file), root.path("etc").join(file))
            .expect("a copy of the machine's user database");
    }
    let script = root.moved(&readme_deployment());
    let mut created = false;
    let lines: Vec<String> = script
        .lines()
        .map(|line| match line.strip_prefix("systemd-sysusers ") {
            Some(rest) => {
                created = true;
                format!(
                    "systemd-sysusers --root={r} {rest} && mount --bind {r}/etc/passwd /etc/passwd && mount --bind {r}/etc/group /etc/group"
                )
            }
            None => line.to_owned(),
        })
        .collect();
    assert!(
        created,
        "the README creates the user with systemd-sysusers: {script}"
    );
    lines.join("\n")
}

/// Whether this process runs as root: the deployment creates a user and hands files to
/// it, which only root can do.
fn as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The README's deployment, run as written (its paths moved into a scratch root): the
/// shell, an `env -i` cron line that `trendsync crontab` printed, and the systemd
/// unit's ExecStart all read the granular file from `/etc/trendsync` with no flag, and
/// `config --json` says so. The user it creates owns the state directory, the
/// environment file is readable by its group and by nobody else, and the unit writes
/// its metrics file into the directory it names.
///
/// The block creates a user and changes owners, as root: run as another user, the test
/// says so and checks nothing.
#[test]
fn the_readmes_deployment_reads_one_file_in_the_shell_under_cron_and_under_systemd() {
    if !as_root() {
        eprintln!(
            "skipped: the README's deployment creates a user and runs as root; run the suite as root to check it"
        );
        return;
    }
    let h = Harness::new(None);
    let root = Root {
        dir: tempfile::tempdir().expect("a scratch root"),
    };
    for dir in ["usr/local/bin", "var/lib", "etc", "home"] {
        std::fs::create_dir_all(root.path(dir)).expect("a directory");
    }
    {
        // Other users look into it, as into /.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.path(""), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    let granular = fingerprint_of(&repo().join("quota-costs.granular.toml"));
    let default = fingerprint_of(&repo().join("quota-costs.toml"));
    assert_ne!(granular, default);
    let path = format!("{}:/usr/bin:/bin", root.path("usr/local/bin").display());
    let etc_costs = root.path("etc/trendsync/quota-costs.toml");

    // The shell: the README's block, from the checkout.
    let script = deployment_script(&root);
    let (stdout, stderr) = ok(root
        .bare("/usr/bin/unshare", &[("PATH", path.clone())])
        .args(["--mount", "/bin/sh", "-e", "-c", &script])
        .current_dir(repo()));
    assert!(
        stdout.contains(&format!(
            "costs     {} (TRENDSYNC_CONFIG_DIR)",
            etc_costs.display()
        )),
        "{stdout}"
    );
    assert!(!stderr.contains("WARN"), "{stderr}");
    let installed = root.path("usr/local/bin/trendsync");
    let db = root.path("var/lib/trendsync/trendsync.db");

    // The user owns its state directory and the metrics directory in it; the
    // environment file is root's, readable by the user's group and no one else.
    {
        use std::os::unix::fs::MetadataExt;
        let (uid, gid) = trendsync_ids(&root);
        for dir in ["var/lib/trendsync", "var/lib/trendsync/metrics"] {
            let meta = std::fs::metadata(root.path(dir)).expect(dir);
            assert_eq!(
                (meta.uid(), meta.gid(), meta.mode() & 0o777),
                (uid, gid, 0o755),
                "{dir}"
            );
        }
        let env = root.path("etc/trendsync/env");
        let meta = std::fs::metadata(&env).expect("the environment file");
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o777),
            (0, gid, 0o640)
        );
        // The README's line, for a member of the group and for someone who is not.
        let line = format!(
            "set -a && . {} && set +a && echo \"$TRENDSYNC_DB\"",
            env.display()
        );
        let as_nobody = |groups: &str| {
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534"])
                .arg(groups)
                .args(["/bin/sh", "-e", "-c", &line])
                .current_dir("/")
                .output()
                .expect("running setpriv")
        };
        let member = as_nobody(&format!("--groups={gid}"));
        assert_eq!(
            (
                member.status.code(),
                String::from_utf8_lossy(&member.stdout).trim()
            ),
            (Some(0), db.display().to_string().as_str()),
            "{}",
            String::from_utf8_lossy(&member.stderr)
        );
        let stranger = as_nobody("--clear-groups");
        assert_ne!(stranger.status.code(), Some(0));
        assert!(
            String::from_utf8_lossy(&stranger.stderr).contains("Permission denied"),
            "{}",
            String::from_utf8_lossy(&stranger.stderr)
        );
    }
    // The shell read the runs' database from /etc/trendsync/env.
    assert!(stdout.contains(&db.display().to_string()), "{stdout}");
    let upstream = [
        ("YOUTUBE_API_KEY", API_KEY.to_owned()),
        ("TRENDSYNC_API_BASE", h.fake.uri()),
    ];

    let (json, _) = ok(root
        .bare(&installed, &[("PATH", path.clone())])
        .arg("--db")
        .arg(&db)
        .args(["config", "--json"])
        .current_dir(root.path("home")));
    let config: Value = serde_json::from_str(&json).expect("config --json");
    assert_eq!(
        config["costs"]["path"],
        etc_costs.display().to_string(),
        "{config}"
    );
    assert_eq!(
        config["costs"]["source"], "TRENDSYNC_CONFIG_DIR",
        "{config}"
    );
    assert_eq!(
        config["costs"]["fingerprint"],
        granular.as_str(),
        "{config}"
    );
    assert_eq!(
        config["regions"]["source"], "TRENDSYNC_CONFIG_DIR",
        "{config}"
    );
    assert_eq!(config["limiter"]["kind"], "embedded", "{config}");
    assert_eq!(config["key_source"], Value::Null, "{config}");
    let names: Vec<&str> = config["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| b["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["budget", "search", "stats"], "{config}");

    // The shell runs one region with no flag.
    let mut shell = root.bare(&installed, &[("PATH", path.clone())]);
    shell.envs(upstream.iter().map(|(k, v)| (*k, v.as_str())));
    ok(shell
        .arg("--db")
        .arg(&db)
        .args(["run", "--region", "US"])
        .current_dir(root.path("home")));
    assert_eq!(last_run(&db).2, granular, "the shell's run");

    // cron: the lines `crontab` prints name no file, and carry the lookup's start.
    let (crontab, _) = ok(root
        .bare(&installed, &[("PATH", path.clone())])
        .arg("--db")
        .arg(&db)
        .args(["crontab", "--binary"])
        .arg(&installed)
        .current_dir(root.path("home")));
    assert!(
        !crontab.contains("--costs") && !crontab.contains("--regions"),
        "{crontab}"
    );
    let vars: Vec<&str> = crontab
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('=') && !l.contains(' '))
        .collect();
    assert_eq!(
        vars,
        [format!(
            "TRENDSYNC_CONFIG_DIR={}",
            root.path("etc/trendsync").display()
        )],
        "{crontab}"
    );
    let line = crontab
        .lines()
        .find(|l| l.contains("--region GB "))
        .expect("GB's line");
    let command = line
        .splitn(6, ' ')
        .nth(5)
        .expect("a command after the schedule");
    let log = root.path("var/lib/trendsync/trendsync.log");
    let out = Command::new("env")
        .arg("-i")
        .arg(format!("HOME={}", root.path("home").display()))
        .args(["LOGNAME=trendsync", "PATH=/usr/bin:/bin", "SHELL=/bin/sh"])
        .args(&vars)
        .args(upstream.iter().map(|(k, v)| format!("{k}={v}")))
        .args(["/bin/sh", "-c", command])
        .current_dir("/")
        .output()
        .expect("running the cron line");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{line}\n{logged}");
    assert!(!logged.contains("WARN"), "{logged}");
    assert_eq!(last_run(&db).2, granular, "the cron line's run");
    let out = Command::new("env")
        .arg("-i")
        .args(&vars)
        .arg(&installed)
        .args(["config", "--json"])
        .current_dir("/")
        .output()
        .expect("config as cron runs it");
    let config: Value = serde_json::from_slice(&out.stdout).expect("config --json");
    assert_eq!(
        config["costs"]["path"],
        etc_costs.display().to_string(),
        "{config}"
    );

    // systemd: the unit's ExecStart, in its WorkingDirectory, with what
    // /etc/trendsync/env holds.
    let unit = std::fs::read_to_string(repo().join("contrib/systemd/trendsync.service"))
        .expect("the unit");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart");
    assert!(
        !exec.contains("--costs") && !exec.contains("--regions"),
        "{exec}"
    );
    let mut exec = root.moved(exec);
    // systemd puts in the unit's Environment= defaults (the environment file sets none
    // of them here).
    for (var, value) in unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .filter_map(|kv| kv.split_once('='))
    {
        exec = exec.replace(&format!("${{{var}}}"), value);
    }
    assert!(!exec.contains('$'), "{exec}");
    let mut words = exec.split_whitespace();
    let mut systemd = root.bare(words.next().expect("a program"), &[]);
    systemd.envs(upstream.iter().map(|(k, v)| (*k, v.as_str())));
    ok(systemd
        .args(words)
        .current_dir(root.path("var/lib/trendsync")));
    // Its metrics, where the unit says and the collector is told to read.
    let prom = std::fs::read_to_string(root.path("var/lib/trendsync/metrics/trendsync.prom"))
        .expect("the unit's metrics file");
    assert!(prom.contains("trendsync_build_info"), "{prom}");
    let (kind, url, fingerprint) = last_run(&db);
    assert_eq!(
        (kind.as_str(), url, fingerprint),
        ("embedded", None, granular)
    );
}

/// `config` says where the database, the limiter and the API base came from, as it
/// does for the files: the flag, the variable, or the default.
#[test]
fn config_names_where_the_database_limiter_and_api_base_came_from() {
    let s = Scratch::new();
    let shown = |t: crate::common::Trendsync| {
        let config = t.args(["config", "--json"]).run().json();
        (
            config["db_source"].as_str().unwrap_or("missing").to_owned(),
            config["limiter_source"]
                .as_str()
                .unwrap_or("missing")
                .to_owned(),
            config["api_base_source"]
                .as_str()
                .unwrap_or("missing")
                .to_owned(),
        )
    };
    let named = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
    assert_eq!(shown(s.cmd()), named("default", "default", "default"));
    assert_eq!(
        shown(
            s.cmd()
                .env("TRENDSYNC_DB", "state.db")
                .env("TRENDSYNC_REDIS_URL", "redis://127.0.0.1:1/0")
                .env("TRENDSYNC_API_BASE", "http://127.0.0.1:1/youtube/v3")
        ),
        named("TRENDSYNC_DB", "TRENDSYNC_REDIS_URL", "TRENDSYNC_API_BASE")
    );
    assert_eq!(
        shown(s.cmd().args([
            "--db",
            "other.db",
            "--redis-url",
            "redis://127.0.0.1:2/0",
            "--api-base",
            "http://127.0.0.1:2/youtube/v3",
        ])),
        named("--db", "--redis-url", "--api-base")
    );
    s.cmd()
        .env("TRENDSYNC_DB", "state.db")
        .arg("config")
        .stdout(contains("(TRENDSYNC_DB)"))
        .run();
}

/// A file found in the current directory that hides a different one further down the
/// directories is named in a warning; the same file twice is not.
#[test]
fn a_file_that_hides_a_different_one_below_is_named() {
    let s = Scratch::new();
    let xdg = s.file("xdg");
    std::fs::create_dir_all(xdg.join("trendsync")).expect("a directory");
    let granular = std::fs::read_to_string(repo().join("quota-costs.granular.toml"))
        .expect("the granular file");
    std::fs::write(xdg.join("trendsync/quota-costs.toml"), &granular).expect("write");
    let config = s
        .cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["config", "--json"])
        .run()
        .json();
    assert_eq!(config["costs"]["source"], "XDG_CONFIG_HOME", "{config}");
    assert_eq!(config["regions"]["source"], "built-in", "{config}");
    assert_eq!(config["regions"]["path"], "built-in", "{config}");

    // A copy in the current directory hides nothing.
    s.write("quota-costs.toml", &granular);
    s.cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["config"])
        .stdout(contains("(current directory)"))
        .run();
    // Another file does, and says which.
    let default =
        std::fs::read_to_string(repo().join("quota-costs.toml")).expect("the default file");
    s.write("quota-costs.toml", &default);
    let hidden = xdg.join("trendsync/quota-costs.toml");
    let config = s
        .cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["config", "--json"])
        .expect_stderr(format!("which hides a different {}", hidden.display()))
        .run()
        .json();
    assert_eq!(config["costs"]["source"], "current directory", "{config}");
    assert_eq!(config["costs"]["shadows"], hidden.display().to_string());
    // Named once per command, however often the command reads the file.
    let ran = s
        .cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["run", "--dry-run"])
        .expect_stderr("which hides a different")
        .run();
    assert_eq!(
        ran.stderr.matches("which hides a different").count(),
        1,
        "{}",
        ran.stderr
    );
}

/// `config` reports a mistake in a file found in the directories as `run` does (78).
#[test]
fn config_reports_file_problems_as_run_does() {
    let s = Scratch::new();
    let dir = s.file("conf");
    std::fs::create_dir_all(&dir).expect("a directory");
    std::fs::write(
        dir.join("regions.toml"),
        "[[region]]\ncode = \"US\"\noffset = 60\n",
    )
    .expect("write");
    for args in [&["config", "--json"][..], &["run", "--dry-run"][..]] {
        s.cmd()
            .env("TRENDSYNC_CONFIG_DIR", &dir)
            .args(args)
            .status(78)
            .expect_stderr(format!("{}:3:", dir.join("regions.toml").display()))
            .run();
    }
}

/// After a run on Redis, a shell without the Redis URL reads `status` with a warning
/// naming both limiters and `last_run_limiter` saying Redis, and `budget charge` is
/// refused (78) with nothing charged. `--switch-limiter` is the one step that moves
/// the database to the embedded limiter; after it, Redis is the other kind.
#[test]
fn after_a_run_on_redis_a_shell_without_its_url_is_warned_and_cannot_charge() {
    let server = RedisServer::start_with_password("s3cret-pw");
    let mut h = Harness::new(Some(&server));
    h.regions(THREE_REGIONS);
    h.run_to(&["run", "--json"], 0, "complete");
    let (kind, url, fingerprint) = last_run(&h.db_path());
    assert_eq!(kind, "redis");
    let url = url.expect("the run's Redis URL");
    assert!(url.contains("***") && !url.contains("s3cret-pw"), "{url}");
    assert_eq!(
        fingerprint,
        fingerprint_of(&repo().join("quota-costs.toml"))
    );
    let on_redis = h.budget();

    // The shell lacks TRENDSYNC_REDIS_URL.
    let regions = h.scratch.file("my-regions.toml");
    let shell = || h.scratch.cmd().arg("--regions").arg(&regions);
    let status = shell()
        .args(["status", "--json"])
        .expect_stderr(
            "this command reads the embedded limiter in trendsync.db, but the latest run",
        )
        .run()
        .json();
    assert_eq!(status["last_run_limiter"]["kind"], "redis", "{status}");
    assert_eq!(status["last_run_limiter"]["url"], url.as_str(), "{status}");
    assert_eq!(status["limiter"]["kind"], "embedded", "{status}");
    assert_eq!(status["limiter"]["path"], "trendsync.db", "{status}");
    shell()
        .args(["status"])
        .expect_stderr(format!("charged Redis at {url}"))
        .stdout(contains(
            "budget \"key1\" (on the embedded limiter in trendsync.db, costs from built-in quota-costs.toml): 0 used",
        ))
        .run();
    shell()
        .args(["budget"])
        .expect_stderr("set TRENDSYNC_REDIS_URL")
        .stdout(contains("budget \"key1\" on embedded limiter in trendsync.db, costs from built-in quota-costs.toml"))
        .run();
    shell()
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr(
            "budget charge would charge the embedded limiter in trendsync.db, but the latest run",
        )
        .expect_stderr("nothing was charged")
        .stdout("")
        .run();
    shell()
        .args(["run", "--dry-run"])
        .expect_stderr("but the latest run")
        .stdout(contains(
            "plan against embedded limiter in trendsync.db, costs from built-in quota-costs.toml",
        ))
        .run();
    let plan = shell()
        .args(["run", "--dry-run", "--json"])
        .expect_stderr("but the latest run")
        .run()
        .json();
    assert_eq!(plan["limiter"]["kind"], "embedded", "{plan}");
    assert_eq!(plan["last_run_limiter"]["kind"], "redis", "{plan}");
    let now_on_redis = h.budget();
    assert_eq!(
        (&now_on_redis["used"], &now_on_redis["by_method"]),
        (&on_redis["used"], &on_redis["by_method"]),
        "Redis charged nothing meanwhile"
    );
    let embedded = h
        .db()
        .query_row("SELECT count(*) FROM quota_entry", [], |r| {
            r.get::<_, i64>(0)
        });
    assert_eq!(
        embedded.ok(),
        Some(0),
        "the embedded window charged nothing"
    );

    // On Redis itself: no warning, and the JSON names it.
    let status = h.bare().args(["status", "--json"]).run().json();
    assert_eq!(status["limiter"]["kind"], "redis", "{status}");
    assert_eq!(status["limiter"]["url"], url.as_str(), "{status}");

    // The explicit step: one run on the embedded limiter with --switch-limiter.
    shell()
        .args(["--api-base", &h.fake.uri()])
        .env("YOUTUBE_API_KEY", API_KEY)
        .args(["run", "--region", "US", "--switch-limiter"])
        .expect_stderr(
            "--switch-limiter: this run charges the embedded limiter in trendsync.db from now on",
        )
        .run();
    assert_eq!(last_run(&h.db_path()).0, "embedded");
    shell()
        .args(["budget", "charge", "videos.list"])
        .stdout(contains("granted"))
        .run();
    h.bare()
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr("leave out TRENDSYNC_REDIS_URL")
        .run();
}

/// `budget charge` records no run, but its calls are in the database (the Redis ledger,
/// the embedded log): with no run yet, those decide. Charges on Redis alone, then a
/// shell without the URL: `status` warns and `budget charge` is refused (78) with
/// nothing charged. The other way round: charges on the embedded limiter alone, then a
/// charge on Redis is refused too.
#[test]
fn with_no_run_yet_the_calls_the_database_records_decide_the_limiter() {
    let server = RedisServer::start();
    let h = Harness::new(Some(&server));
    for _ in 0..2 {
        h.bare()
            .args(["budget", "charge", "videos.list"])
            .stdout(contains("granted"))
            .run();
    }
    assert!(
        h.db()
            .query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0))
            .map_or(true, |n| n == 0),
        "budget charge records no run"
    );
    let shell = || h.scratch.cmd();
    let status = shell()
        .args(["status", "--json"])
        .expect_stderr(
            "this command reads the embedded limiter in trendsync.db, but the calls trendsync.db records (no run yet; `budget charge`) charged Redis",
        )
        .run()
        .json();
    assert_eq!(status["last_run_limiter"], Value::Null, "{status}");
    shell()
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr("budget charge would charge the embedded limiter in trendsync.db, but the calls trendsync.db records")
        .expect_stderr("set TRENDSYNC_REDIS_URL")
        .stdout("")
        .run();
    let embedded = h
        .db()
        .query_row("SELECT count(*) FROM quota_entry", [], |r| {
            r.get::<_, i64>(0)
        });
    assert!(
        matches!(embedded, Ok(0) | Err(_)),
        "the embedded window charged nothing: {embedded:?}"
    );
    assert_eq!(h.budget()["used"], 2, "Redis holds the two charges");

    // The other way round, on a database of its own.
    let other = Harness::new(Some(&server));
    let embedded_only = || other.scratch.cmd();
    embedded_only()
        .args(["budget", "charge", "videos.list"])
        .stdout(contains("granted"))
        .run();
    other
        .bare()
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr("budget charge would charge Redis at")
        .expect_stderr("charged the embedded limiter in trendsync.db")
        .expect_stderr("leave out TRENDSYNC_REDIS_URL")
        .run();
}

/// A real `run` or `backfill` from that shell is refused the same way (78), before it
/// makes a single upstream call: an empty embedded window would spend the key's quota
/// a second time.
#[test]
fn after_a_run_on_redis_a_run_or_backfill_without_its_url_calls_nothing() {
    let server = RedisServer::start();
    let mut h = Harness::new(Some(&server));
    h.regions(THREE_REGIONS);
    h.run_to(&["run", "--json"], 0, "complete");
    let called = h.fake.received();
    let regions = h.scratch.file("my-regions.toml");
    for command in [&["run", "--region", "US"][..], &["backfill"][..]] {
        h.scratch
            .cmd()
            .arg("--regions")
            .arg(&regions)
            .args(["--api-base", &h.fake.uri()])
            .env("YOUTUBE_API_KEY", API_KEY)
            .args(command)
            .status(78)
            .expect_stderr("but the latest run")
            .expect_stderr("nothing was charged")
            .run();
        assert_eq!(h.fake.received(), called, "{command:?} called the upstream");
    }
    assert_eq!(last_run(&h.db_path()).0, "redis", "no run was recorded");
}

/// Another Redis URL is not refused (the ledger restores the window), but it is named;
/// a read under another costs file warns with both fingerprints.
#[test]
fn another_costs_file_than_the_latest_runs_is_named_with_both_fingerprints() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    h.run_to(&["run", "--json"], 0, "complete");
    let default = fingerprint_of(&repo().join("quota-costs.toml"));
    let granular = fingerprint_of(&repo().join("quota-costs.granular.toml"));
    let budget = h
        .bare()
        .costs(&repo().join("quota-costs.granular.toml"))
        .args(["budget", "--json"])
        .expect_stderr(format!("(fingerprint {granular}), but the latest run"))
        .expect_stderr(format!("another costs file (fingerprint {default})"))
        // The window, charged under the other file, is counted again at these costs.
        .expect_stderr(format!(
            "last charged under costs with fingerprint {default}, and this host's costs have fingerprint {granular}"
        ))
        .run()
        .json();
    assert_eq!(budget["last_run_limiter"]["kind"], "embedded", "{budget}");
    assert_eq!(
        budget["costs"]["fingerprint"],
        granular.as_str(),
        "{budget}"
    );
    // The same file: nothing to say.
    h.bare().args(["status"]).stderr(lacks("WARN")).run();
}

/// A costs file this shell found where cron would not (its current directory) is
/// named in every crontab line; one cron finds by itself is not.
#[test]
fn crontab_names_a_file_only_where_cron_would_not_find_it() {
    let s = Scratch::new();
    let granular = std::fs::read_to_string(repo().join("quota-costs.granular.toml"))
        .expect("the granular file");
    s.write("quota-costs.toml", &granular);
    std::fs::create_dir(s.file("state")).expect("a directory");
    let ran = s
        .cmd()
        .args(["--db", "state/trendsync.db", "crontab"])
        .run();
    let costs = s.file("quota-costs.toml");
    let lines: Vec<&str> = ran.stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 8, "{}", ran.stdout);
    for line in &lines {
        assert!(
            line.contains(&format!(" --costs {} ", costs.display())),
            "{line}"
        );
        assert!(!line.contains("--regions"), "{line}");
    }
    // In the directory the lines start in, cron finds the same file by itself.
    s.write("state/quota-costs.toml", &granular);
    s.cmd()
        .args(["--db", "state/trendsync.db", "crontab"])
        .stdout(lacks("--costs"))
        .run();
}

/// `config` shows the Redis URL with its password masked and names where the API key
/// comes from, never the key itself, in text and in JSON.
#[test]
fn config_masks_the_redis_password_and_never_shows_the_key() {
    let server = RedisServer::start_with_password("s3cret-pw");
    let h = Harness::new(Some(&server));
    for args in [&["config"][..], &["config", "--json"][..]] {
        let ran = h
            .cmd()
            .args(args)
            .stdout(contains("***"))
            .stdout(lacks("s3cret-pw"))
            .stdout(lacks(API_KEY))
            .stderr(lacks("s3cret-pw"))
            .stderr(lacks(API_KEY))
            .run();
        assert!(ran.stdout.contains("YOUTUBE_API_KEY"), "{}", ran.stdout);
    }
}

/// A run on a clock two days ahead is recorded with that start (the issue's repro): it
/// stops at its first answer (`clock_skew`), but its row must not outrank the runs
/// made after it. The switch to Redis on the right clock takes effect at once: the
/// next Redis run is not refused, and `budget charge` on the embedded limiter is,
/// naming both kinds; so is the dry run's and `status`'s record of the latest run.
#[cfg(target_os = "linux")]
#[test]
fn a_run_on_a_clock_days_ahead_does_not_pin_the_limiter_kind() {
    let server = RedisServer::start();
    let mut h = Harness::new(Some(&server));
    h.regions(THREE_REGIONS);
    let regions = h.scratch.file("my-regions.toml");
    // The shell of the embedded limiter: no Redis URL.
    let embedded = || h.scratch.cmd().arg("--regions").arg(&regions);
    embedded()
        .args(["--api-base", &h.fake.uri()])
        .env("YOUTUBE_API_KEY", API_KEY)
        .args(["run", "--json"])
        .faketime(&["-f", "+2d"])
        .expect_stderr("this host's clock is 2d ahead of the upstream's")
        .expect_ended("clock_skew")
        .status(75)
        .run();
    assert_eq!(last_run(&h.db_path()).0, "embedded");

    // On the right clock, the documented step moves the database to Redis.
    let switched = h
        .cmd()
        .args(["run", "--switch-limiter", "--json"])
        .expect_stderr("--switch-limiter: this run charges Redis at")
        .run()
        .json();
    assert_eq!(switched["status"], "complete", "{switched}");
    assert_eq!(last_run(&h.db_path()).0, "redis");

    // It took: Redis charges without the flag, and every reader names Redis.
    h.cmd().args(["run", "--json"]).run();
    h.bare()
        .args(["budget", "charge", "videos.list"])
        .stdout(contains("granted"))
        .run();
    let status = h.bare().args(["status", "--json"]).run().json();
    assert_eq!(status["last_run_limiter"]["kind"], "redis", "{status}");

    // The embedded limiter is the other kind now: refused, naming both, nothing
    // charged.
    let logged = |h: &Harness<'_>| {
        h.db()
            .query_row("SELECT count(*) FROM quota_log", [], |r| r.get::<_, i64>(0))
            .expect("the embedded log")
    };
    let before = logged(&h);
    embedded()
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr(
            "budget charge would charge the embedded limiter in trendsync.db, but the latest run",
        )
        .expect_stderr("charged Redis at")
        .expect_stderr("nothing was charged")
        .stdout("")
        .run();
    assert_eq!(logged(&h), before, "the embedded limiter charged nothing");
}

/// `budget charge` on a clock two days ahead, before any run, leaves only its entry in
/// the embedded log, stamped by that clock. It must not pin the kind either: after
/// the switch to Redis on the right clock, Redis charges and the embedded limiter is
/// refused (78), naming both. Without the runs' records (as a build from before they
/// recorded their limiter left them), the calls decide, and they hold both kinds:
/// only the stamps could say which came last, and the one two days ahead would win,
/// so both kinds are refused until the documented step says which.
#[cfg(target_os = "linux")]
#[test]
fn a_charge_on_a_clock_days_ahead_does_not_pin_the_limiter_kind() {
    let server = RedisServer::start();
    let mut h = Harness::new(Some(&server));
    h.regions(THREE_REGIONS);
    let regions = h.scratch.file("my-regions.toml");
    let embedded = || h.scratch.cmd().arg("--regions").arg(&regions);
    embedded()
        .args(["budget", "charge", "videos.list"])
        .faketime(&["-f", "+2d"])
        .stdout(contains("granted"))
        .run();

    // Before any run, the charges recorded decide: Redis is the other kind.
    h.bare()
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr("budget charge would charge Redis at")
        .expect_stderr("charged the embedded limiter in trendsync.db")
        .run();
    h.cmd()
        .args(["run", "--switch-limiter", "--json"])
        .expect_stderr("--switch-limiter: this run charges Redis at")
        .run();
    h.bare()
        .args(["budget", "charge", "videos.list"])
        .stdout(contains("granted"))
        .run();
    h.cmd().args(["run", "--json"]).run();
    embedded()
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr(
            "budget charge would charge the embedded limiter in trendsync.db, but the latest run",
        )
        .expect_stderr("charged Redis at")
        .stdout("")
        .run();

    // The runs' records gone: the embedded log holds the charge stamped two days
    // ahead, the Redis ledger the later ones.
    rusqlite::Connection::open(h.db_path())
        .and_then(|db| {
            db.execute(
                "UPDATE runs SET limiter_kind = NULL, limiter_url = NULL",
                [],
            )
        })
        .expect("forgetting the runs' limiters");
    let both = "charged the embedded limiter in trendsync.db and Redis";
    for (cmd, kind) in [
        (embedded(), "the embedded limiter in trendsync.db"),
        (h.bare(), "Redis at"),
    ] {
        cmd.args(["budget", "charge", "videos.list"])
            .status(78)
            .expect_stderr(format!("budget charge would charge {kind}"))
            .expect_stderr(both)
            .expect_stderr("which of them charged last is not recorded")
            .stdout("")
            .run();
    }
    h.bare()
        .args(["status"])
        .expect_stderr("this command reads Redis at")
        .expect_stderr(format!(
            "but the calls trendsync.db records (no run yet; `budget charge`) {both}"
        ))
        .run();
    h.cmd()
        .args(["run", "--switch-limiter", "--json"])
        .expect_stderr("--switch-limiter: this run charges Redis at")
        .expect_stderr(format!(
            "{both}; what the embedded limiter in trendsync.db holds is not counted here"
        ))
        .run();
    h.bare()
        .args(["budget", "charge", "videos.list"])
        .stdout(contains("granted"))
        .run();
}

/// A cron log of a day: 24 hourly runs from a directory whose `regions.toml` hides
/// the one in `$XDG_CONFIG_HOME/trendsync`, a hand charge, a dry run, and the readers
/// a dashboard and a shell call between them. The warning is on the lines of the
/// commands that charge (and the dry run, and `config`), once each; never a reader's.
#[test]
fn a_day_of_cron_warns_of_a_shadowing_file_only_where_it_charges() {
    let h = Harness::new(None);
    let xdg = h.scratch.file("xdg");
    std::fs::create_dir_all(xdg.join("trendsync")).expect("a directory");
    std::fs::write(
        xdg.join("trendsync/regions.toml"),
        "[[region]]\ncode = \"GB\"\noffset = 5\npages = 1\n",
    )
    .expect("write");
    let granular = std::fs::read_to_string(repo().join("quota-costs.granular.toml"))
        .expect("the granular file");
    std::fs::write(xdg.join("trendsync/quota-costs.toml"), granular).expect("write");
    // The local files, in the directory the commands run in.
    h.scratch.write(
        "regions.toml",
        "[[region]]\ncode = \"US\"\noffset = 0\npages = 1\n",
    );
    let default =
        std::fs::read_to_string(repo().join("quota-costs.toml")).expect("the default file");
    h.scratch.write("quota-costs.toml", &default);
    let warning = "which hides a different";
    let command = |args: &[&str]| {
        h.cmd()
            .env("XDG_CONFIG_HOME", &xdg)
            .allow_stderr(warning)
            .args(args)
            .run()
    };
    let mut log = Vec::new();
    let mut say = |what: &str, charges: bool, stderr: &str| {
        for line in stderr.lines() {
            log.push((what.to_owned(), charges, line.to_owned()));
        }
        // Each file it reads named once (`budget charge` reads only the costs).
        let named = |file: &str| stderr.matches(&format!("{file}: reading")).count();
        assert!(
            !charges
                || (named("quota-costs.toml") == 1
                    && named("regions.toml") <= 1
                    && stderr.matches(warning).count()
                        == named("quota-costs.toml") + named("regions.toml")),
            "{what} names each hidden file once:\n{stderr}"
        );
    };
    for hour in 0..24 {
        let ran = command(&["run"]);
        say(&format!("{hour:02}:00 run"), true, &ran.stderr);
        for reader in [&["status"][..], &["export"][..], &["runs"][..]] {
            let ran = command(reader);
            say(&format!("{hour:02}:30 {}", reader[0]), false, &ran.stderr);
        }
    }
    let ran = command(&["budget", "charge", "videos.list"]);
    say("budget charge", true, &ran.stderr);
    let ran = command(&["run", "--dry-run"]);
    say("run --dry-run", true, &ran.stderr);
    let ran = command(&["config"]);
    say("config", true, &ran.stderr);
    let video: String = h
        .db()
        .query_row("SELECT id FROM videos LIMIT 1", [], |r| r.get(0))
        .expect("a video stored");
    for reader in [
        &["budget"][..],
        &["search", "video"][..],
        &["video", &video][..],
    ] {
        let ran = command(reader);
        say(reader[0], false, &ran.stderr);
    }
    let warned: Vec<&(String, bool, String)> = log
        .iter()
        .filter(|(_, _, line)| line.contains(warning))
        .collect();
    // Both files for each run, the dry run and `config`; the costs for the charge.
    assert_eq!(warned.len(), 2 * 24 + 2 + 2 + 1, "{warned:#?}");
    for (what, charges, line) in warned {
        assert!(charges, "a reader warned: {what}: {line}");
    }
}

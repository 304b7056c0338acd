//! `promtool check metrics`, Prometheus's own parser and linter for the text format,
//! found like redis-server: `TRENDSYNC_TEST_PROMTOOL`, then `PATH`, then /usr/bin.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

pub fn promtool_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TRENDSYNC_TEST_PROMTOOL") {
        return PathBuf::from(p);
    }
    for dir in std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
    {
        let candidate = dir.join("promtool");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "promtool is not installed, and the tests check the metrics file with it: run \
         scripts/test (it installs Debian's prometheus package as root), install the \
         prometheus package, or point TRENDSYNC_TEST_PROMTOOL at a promtool binary"
    );
}

/// What `promtool check metrics < text` said: its exit code and its complaints.
pub struct Checked {
    pub code: i32,
    pub output: String,
}

pub fn check_metrics(text: &[u8]) -> Checked {
    let mut child = Command::new(promtool_binary())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting promtool");
    child
        .stdin
        .take()
        .expect("promtool's stdin")
        .write_all(text)
        .expect("feeding promtool");
    let out = child.wait_with_output().expect("waiting for promtool");
    Checked {
        code: out.status.code().unwrap_or(-1),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

//! Unit tests of `logging.rs`.

use super::{TextFields, is_own_target, says};
use std::sync::{Arc, Mutex};

/// What the text format writes for the events `emit` makes.
fn text_of(emit: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .fmt_fields(TextFields)
        .finish();
    tracing::subscriber::with_default(subscriber, emit);
    let bytes = buffer
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A library's line bridged from the `log` crate names the library, and never the
/// path of its source on the machine that built the binary.
#[test]
fn a_bridged_library_line_names_the_library_and_no_build_path() {
    let text = text_of(|| {
        tracing::warn!(
            log.target = "redis::cluster_handling::async_connection",
            log.module_path = "redis::cluster_handling::async_connection",
            log.file = "/home/builder/.cargo/registry/src/redis/mod.rs",
            log.line = 1739,
            "async cluster client recovery: beginning slot refresh"
        );
        tracing::warn!(region = "US", "a line of our own");
    });
    assert_eq!(
        text,
        " WARN redis: async cluster client recovery: beginning slot refresh\n \
             WARN a line of our own region=\"US\"\n"
    );
}

/// The summary's counts stay out of a text line, said or not; its other fields
/// follow the rule of every line.
#[test]
fn the_summarys_counts_are_for_json_logs_only() {
    let text = text_of(|| {
        tracing::warn!(
            run_id = "r1",
            units = 7,
            calls = 7,
            regions = "US,GB",
            "run r1 stopped in 2s: 9493 left; regions US complete"
        );
    });
    assert_eq!(
        text,
        " WARN run r1 stopped in 2s: 9493 left; regions US complete regions=\"US,GB\"\n"
    );
}

#[test]
fn a_field_the_message_says_is_not_said_again() {
    assert!(says("run r1 complete: 3 calls", "r1"));
    assert!(says("regions US GB complete", "US,GB"));
    assert!(!says("regions US complete", "US,GB"));
    assert!(!says("creating the database", "trendsync.db"));
    assert!(!says("anything", ""));
}

#[test]
fn only_trendsync_targets_are_its_own() {
    assert!(is_own_target("trendsync"));
    assert!(is_own_target("trendsync::runner::execute"));
    assert!(!is_own_target("trendsync_extra"));
    assert!(!is_own_target("reqwest::connect"));
}

//! The tables of the embedded limiter and of the journal: step 4 of the file's one
//! schema, composed above the owners (`crate::schema`) and applied by
//! [`crate::sqlite`]. The limiter and the journal run it ahead of the store's steps
//! ([`crate::sqlite::migrate_own`]), and the store runs it again in its place, so
//! every step here must be harmless to run twice. The tables are
//! prefixed `quota_`; the limiter's belong to `embedded.rs`, the journal's to
//! `journal.rs`, and neither creates them on its own.
//!
//! Before this step both created their tables on every open, without touching
//! `user_version`, so a file from an older build may already hold them, with rows:
//! every table and index here is created `IF NOT EXISTS`, exactly as those builds
//! created it, and the data step brings such a file to what a new one holds.

use rusqlite::Connection;

use crate::sqlite::{Migration, StepError};

/// The limiter's and the journal's steps, oldest first: all a limiter or a journal
/// ever runs.
pub(crate) const STEPS: &[Migration] = &[
    TABLES,
    CLOCK_SKEW,
    UPSTREAM_SPENT,
    CALL_LOG,
    LAST_FIGURES,
    LAST_FIGURES_AS_OF,
];

/// Step 4.
pub(crate) const TABLES: Migration = Migration {
    description: "the embedded limiter's and the journal's tables",
    sql: TABLES_SQL,
    data: Some(carry_forward),
};

const TABLES_SQL: &str = "
-- The embedded limiter: a weighted sliding-window log per policy, a running total per
-- policy, and the upstream block per budget.
CREATE TABLE IF NOT EXISTS quota_entry (
    policy     TEXT    NOT NULL,   -- '<budget.key>:<policy>'
    member     TEXT    NOT NULL,   -- the charge id
    at_us      INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,   -- at_us + the window it was charged under
    units      INTEGER NOT NULL,
    method     TEXT    NOT NULL,
    PRIMARY KEY (policy, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS quota_entry_by_time ON quota_entry (policy, at_us);
CREATE INDEX IF NOT EXISTS quota_entry_by_expiry ON quota_entry (expires_us);
CREATE TABLE IF NOT EXISTS quota_total (
    policy TEXT PRIMARY KEY,
    total  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS quota_block (
    budget   TEXT PRIMARY KEY,
    until_us INTEGER NOT NULL
) WITHOUT ROWID;

-- The journal of calls made while the limiter was down, and the ledger of those
-- Redis granted. The last two columns came with the ledger; an older journal gains
-- them in the data step, at the same place.
CREATE TABLE IF NOT EXISTS quota_journal (
    charge_id  TEXT    PRIMARY KEY,
    budget     TEXT    NOT NULL,   -- budget.key: the pool the call spent from
    method     TEXT    NOT NULL,
    units      INTEGER NOT NULL,   -- units to the budget's own window
    parts      TEXT    NOT NULL CHECK (json_valid(parts)),  -- [{policy, window_us, max, units}]
    made_at_us INTEGER NOT NULL,   -- this host's clock, when the call was let through
    -- 0: made unmetered, waiting for a replay; 1: counted, kept as the ledger.
    metered       INTEGER NOT NULL DEFAULT 0,
    -- When the row leaves its longest window and can go (only for metered rows).
    keep_until_us INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS quota_journal_by_time ON quota_journal (budget, made_at_us);
CREATE TABLE IF NOT EXISTS quota_epoch (
    budget TEXT    PRIMARY KEY,
    epoch  INTEGER NOT NULL       -- the epoch marker of the window last charged into
) WITHOUT ROWID;
";

/// Step 8.
pub(crate) const CLOCK_SKEW: Migration = Migration {
    description: "the last skew seen between the limiter's clock and the upstream's",
    sql: CLOCK_SKEW_SQL,
    data: None,
};

/// One row per clock a limiter decides by (`quota/skew.rs`): how far it was from the
/// upstream's `Date` when last compared. A row over 5 minutes distrusts that clock
/// until a run sees it agree again.
const CLOCK_SKEW_SQL: &str = "
CREATE TABLE IF NOT EXISTS quota_clock_skew (
    clock          TEXT    PRIMARY KEY,   -- 'host' (the embedded limiter) | 'redis'
    skew_us        INTEGER NOT NULL,      -- that clock minus the upstream's
    measured_at_us INTEGER NOT NULL       -- the upstream's time when it was seen
) WITHOUT ROWID;
";

/// Step 14.
pub(crate) const UPSTREAM_SPENT: Migration = Migration {
    description: "what the upstream's early refusals measured, per bucket and upstream day",
    sql: UPSTREAM_SPENT_SQL,
    data: None,
};

/// One row per budget, bucket and upstream day on which the upstream refused the bucket
/// while the embedded limiter still counted room below its quota (docs/budget.md, "When the
/// upstream refuses"): the units charged to the bucket since that day's midnight in
/// America/Los_Angeles at the first such refusal. Rows go a few days after their day.
const UPSTREAM_SPENT_SQL: &str = "
CREATE TABLE IF NOT EXISTS quota_upstream_spent (
    budget TEXT    NOT NULL,   -- budget.key
    bucket TEXT    NOT NULL,   -- the bucket's name; `budget` for the main one
    day_us INTEGER NOT NULL,   -- the upstream day's midnight, America/Los_Angeles
    units  INTEGER NOT NULL,   -- charged to the bucket that day, at the first refusal
    PRIMARY KEY (budget, bucket, day_us)
) WITHOUT ROWID;
";

/// Step 15.
pub(crate) const CALL_LOG: Migration = Migration {
    description: "every call's method and calls, kept to count the window again when the costs change",
    sql: CALL_LOG_SQL,
    data: Some(journal_calls),
};

/// The embedded limiter's log of calls, kept 31 days (`quota::KEEP`) whatever the window
/// of the policies that count them, and the fingerprint of the budget its windows were last
/// counted under (docs/budget.md, "When the costs file changes"); and the journal's calls
/// per row.
const CALL_LOG_SQL: &str = "
CREATE TABLE IF NOT EXISTS quota_log (
    budget    TEXT    NOT NULL,   -- budget.key
    charge_id TEXT    NOT NULL,
    method    TEXT    NOT NULL,
    calls     INTEGER NOT NULL,
    at_us     INTEGER NOT NULL,   -- the limiter's clock
    PRIMARY KEY (budget, charge_id, method)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS quota_log_by_time ON quota_log (budget, at_us);
CREATE TABLE IF NOT EXISTS quota_fingerprint (
    budget      TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,     -- Budget::fingerprint() the windows are counted under
    seen_us     INTEGER            -- the host's clock at the latest charge
) WITHOUT ROWID;
";

/// Step 18.
pub(crate) const LAST_FIGURES: Migration = Migration {
    description: "every bucket's figures as the limiter last reported them to a run",
    sql: LAST_FIGURES_SQL,
    data: None,
};

/// The last known figures (docs/metrics.md, `quota/figures.rs`): one row per budget and
/// bucket, as the limiter reported them at the end of the latest run that could read
/// them; the metrics show them while the limiter does not answer.
const LAST_FIGURES_SQL: &str = "
CREATE TABLE IF NOT EXISTS quota_last_figures (
    budget            TEXT    NOT NULL,   -- budget.key
    bucket            TEXT    NOT NULL,   -- the bucket's name; `budget` for the main one
    used              INTEGER NOT NULL,   -- units in its window
    blocked_until_us  INTEGER,            -- the end of an upstream block; NULL when none
    upstream_spent_at INTEGER,            -- units at the upstream's early refusal that day; NULL when none
    PRIMARY KEY (budget, bucket)
) WITHOUT ROWID;
";

/// Step 19.
pub(crate) const LAST_FIGURES_AS_OF: Migration = Migration {
    description: "when the last known figures were read",
    sql: "",
    data: Some(last_figures_as_of),
};

/// The last known figures' `as_of_us`: when the run that recorded them read them, on
/// that host's clock, so that `status` and `budget` can say how old they are while the
/// limiter does not answer (docs/json.md, `last_known`). NULL in a row recorded before
/// it. Added only where missing: the step may run twice.
fn last_figures_as_of(conn: &Connection) -> Result<(), StepError> {
    let present = conn
        .prepare("SELECT 1 FROM pragma_table_info('quota_last_figures') WHERE name = 'as_of_us'")?
        .exists([])?;
    if !present {
        conn.execute_batch("ALTER TABLE quota_last_figures ADD COLUMN as_of_us INTEGER")?;
    }
    Ok(())
}

/// The journal's `calls` column (NULL in a row journalled before it: its parts are
/// replayed as written). Added only where missing: the step may run twice.
fn journal_calls(conn: &Connection) -> Result<(), StepError> {
    let present = conn
        .prepare("SELECT 1 FROM pragma_table_info('quota_journal') WHERE name = 'calls'")?
        .exists([])?;
    if !present {
        conn.execute_batch("ALTER TABLE quota_journal ADD COLUMN calls INTEGER")?;
    }
    Ok(())
}

/// The ledger's columns of `quota_journal`, as [`TABLES_SQL`] declares them.
const LEDGER_COLUMNS: &[(&str, &str)] = &[
    ("metered", "INTEGER NOT NULL DEFAULT 0"),
    ("keep_until_us", "INTEGER NOT NULL DEFAULT 0"),
];

/// The only version of `quota_schema` any trendsync wrote.
const LAST_LIMITER_VERSION: i64 = 1;

/// What an older file needs beyond the tables: the ledger's columns on a journal
/// written before the ledger (its rows are all unmetered, which the defaults say),
/// and the end of the limiter's own version table.
fn carry_forward(conn: &Connection) -> Result<(), StepError> {
    for (column, decl) in LEDGER_COLUMNS {
        let present = conn
            .prepare("SELECT 1 FROM pragma_table_info('quota_journal') WHERE name = ?1")?
            .exists([column])?;
        if !present {
            conn.execute_batch(&format!(
                "ALTER TABLE quota_journal ADD COLUMN {column} {decl}"
            ))?;
        }
    }
    let versioned = conn
        .prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'quota_schema'")?
        .exists([])?;
    if versioned {
        let newest: Option<i64> =
            conn.query_row("SELECT max(version) FROM quota_schema", [], |r| r.get(0))?;
        if let Some(found) = newest.filter(|v| *v > LAST_LIMITER_VERSION) {
            return Err(StepError::Refused(format!(
                "its table quota_schema says the embedded limiter's tables are at version \
                 {found}, which no trendsync has written (the last was \
                 {LAST_LIMITER_VERSION}), so they may not be what this build reads; the file \
                 was left as it was: use it with the program that wrote it, or move it aside"
            )));
        }
        conn.execute_batch("DROP TABLE quota_schema")?;
    }
    Ok(())
}

//! The store's steps of the file's schema: versions 1 to 3, 5 to 7, 9 and 10 of the one
//! list composed above the owners (`crate::schema`); [`crate::sqlite`] applies them and
//! explains how `PRAGMA user_version` counts them.
//!
//! These steps shipped when the store alone kept `user_version`; they are never
//! edited. None of them creates or touches a `quota_*` table: those belong to the
//! limiter and the journal, whose tables are their own step (4).

use rusqlite::Connection;

use crate::sqlite::{Migration, StepError};

/// The store's steps, oldest first: the ones whose tables a reader of the store needs.
pub(crate) const STEPS: &[Migration] = &[
    VIDEOS,
    RUN_OUTCOMES,
    COMPACT,
    CHARTS,
    FOLLOW_UPS,
    RUN_DURATIONS,
];

/// Step 1.
pub(crate) const VIDEOS: Migration = Migration {
    description: "runs, videos, stats, trending, searches, categories, region state, FTS5",
    sql: V1,
    data: None,
};

/// Step 2.
pub(crate) const RUN_OUTCOMES: Migration = Migration {
    description: "each run's outcome per region and its calls by method and outcome",
    sql: RUN_OUTCOMES_SQL,
    data: None,
};

/// Step 3.
pub(crate) const COMPACT: Migration = Migration {
    description: "compact snapshots: one row per fetch, one row of integers per place",
    sql: super::compact::CREATE,
    data: Some(compact_data),
};

/// Step 5.
pub(crate) const CHARTS: Migration = Migration {
    description: "category charts: each fetch's chart, and the charts the upstream lacks",
    sql: super::charts::CREATE,
    data: Some(charts_data),
};

fn charts_data(conn: &Connection) -> Result<(), StepError> {
    super::charts::migrate_to_charts(conn)
}

/// Step 6.
pub(crate) const FOLLOW_UPS: Migration = Migration {
    description: "follow-ups: counts after the charts, and whom to refresh next",
    sql: super::follow::CREATE,
    data: Some(super::follow::fill_state),
};

/// Step 7: changes no table the store reads, so it is not among [`STEPS`]: it is the
/// analysts', and a read-only open of the store does not wait for it.
pub(crate) const ANALYSTS: Migration = Migration {
    description: "views with readable times; the full-text index declared for Datasette",
    sql: super::analysts::CREATE,
    data: Some(super::analysts::reindex),
};

/// Step 9.
pub(crate) const RUN_DURATIONS: Migration = Migration {
    description: "each run's duration to the microsecond",
    sql: RUN_DURATIONS_SQL,
    data: None,
};

/// `started_at` and `ended_at` are whole seconds: a run of 0.8 s would last 0 s, and
/// one of 1.9 s one second. The process that ran it measures it; older runs have NULL.
/// The readable twin of `runs` (step 7) gains the column too, so that it keeps every
/// column of its base.
const RUN_DURATIONS_SQL: &str = "
ALTER TABLE runs ADD COLUMN duration_us INTEGER CHECK (duration_us IS NULL OR duration_us >= 0);
DROP VIEW IF EXISTS runs_utc;
CREATE VIEW runs_utc (run_id, kind, started_at, ended_at, status, units, calls,
                      stop_reason, duration_us) AS
SELECT run_id, kind,
       strftime('%Y-%m-%dT%H:%M:%SZ', started_at, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%SZ', ended_at, 'unixepoch'),
       status, units, calls, stop_reason, duration_us
FROM runs;
";

/// Step 13: changes only columns that a reader finds missing without harm (no run of
/// such a file recorded its limiter), so it is not among [`STEPS`]: a read-only open of
/// the store does not wait for it.
pub(crate) const RUN_LIMITERS: Migration = Migration {
    description: "each run's limiter (kind, masked URL) and its costs file's fingerprint",
    sql: RUN_LIMITERS_SQL,
    data: None,
};

/// Which limiter a run charged and under which parsed budget, so that a command that
/// reads or charges another one can say so (or refuse). Older runs have NULL. The
/// readable twin of `runs` gains the columns too.
const RUN_LIMITERS_SQL: &str = "
ALTER TABLE runs ADD COLUMN limiter_kind TEXT
    CHECK (limiter_kind IS NULL OR limiter_kind IN ('embedded', 'redis'));
ALTER TABLE runs ADD COLUMN limiter_url TEXT;
ALTER TABLE runs ADD COLUMN costs_fingerprint TEXT;
DROP VIEW IF EXISTS runs_utc;
CREATE VIEW runs_utc (run_id, kind, started_at, ended_at, status, units, calls,
                      stop_reason, duration_us, limiter_kind, limiter_url,
                      costs_fingerprint) AS
SELECT run_id, kind,
       strftime('%Y-%m-%dT%H:%M:%SZ', started_at, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%SZ', ended_at, 'unixepoch'),
       status, units, calls, stop_reason, duration_us, limiter_kind, limiter_url,
       costs_fingerprint
FROM runs;
";

fn compact_data(conn: &Connection) -> Result<(), StepError> {
    Ok(super::compact::migrate_from_v1(conn)?)
}

/// Times the store generates are INTEGER unix seconds; `published_at` stays the RFC 3339
/// text the upstream sent, since it is upstream data, not ours.
const V1: &str = r#"
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('run', 'backfill')),
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    -- 'running' until finish_run records the outcome.
    status      TEXT NOT NULL,
    units       INTEGER,
    calls       INTEGER,
    stop_reason TEXT
) STRICT;
CREATE INDEX runs_by_start ON runs (started_at);

-- Latest metadata per video. `num` is an explicit INTEGER PRIMARY KEY because the FTS
-- index refers to rows by rowid, and VACUUM may renumber implicit rowids.
CREATE TABLE videos (
    num                    INTEGER PRIMARY KEY,
    id                     TEXT NOT NULL UNIQUE,
    title                  TEXT NOT NULL,
    description            TEXT NOT NULL,
    channel_id             TEXT NOT NULL,
    channel_title          TEXT NOT NULL,
    published_at           TEXT NOT NULL,
    category_id            TEXT,
    -- JSON array, NULL when absent upstream.
    tags                   TEXT CHECK (tags IS NULL OR json_valid(tags)),
    -- The same tags joined by spaces, for the full-text index only.
    tags_text              TEXT,
    default_language       TEXT,
    default_audio_language TEXT,
    duration_s             INTEGER,
    live_broadcast_content TEXT,
    thumbnail_url          TEXT,
    region_restriction     TEXT,
    -- NULL = hidden or absent upstream; never 0 in its place.
    view_count             INTEGER,
    like_count             INTEGER,
    comment_count          INTEGER,
    first_seen_at          INTEGER NOT NULL,
    last_seen_at           INTEGER NOT NULL
) STRICT;
CREATE INDEX videos_by_channel ON videos (channel_id);

-- One row per video per fetch: the time series of counts.
CREATE TABLE video_stats (
    video_id      TEXT NOT NULL REFERENCES videos (id) ON DELETE CASCADE,
    fetched_at    INTEGER NOT NULL,
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    view_count    INTEGER,
    like_count    INTEGER,
    comment_count INTEGER
) STRICT;
CREATE INDEX video_stats_by_video ON video_stats (video_id, fetched_at);

-- The primary key makes storing the same page twice in one run (a retry) idempotent.
CREATE TABLE trending (
    run_id     TEXT NOT NULL REFERENCES runs (run_id),
    region     TEXT NOT NULL,
    rank       INTEGER NOT NULL CHECK (rank >= 1),
    video_id   TEXT NOT NULL REFERENCES videos (id) ON DELETE CASCADE,
    fetched_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, region, rank)
) STRICT, WITHOUT ROWID;
CREATE INDEX trending_by_region_time ON trending (region, fetched_at);
CREATE INDEX trending_by_video ON trending (video_id, region);

CREATE TABLE search_results (
    run_id      TEXT NOT NULL REFERENCES runs (run_id),
    region      TEXT NOT NULL,
    search_name TEXT NOT NULL,
    rank        INTEGER NOT NULL CHECK (rank >= 1),
    video_id    TEXT NOT NULL REFERENCES videos (id) ON DELETE CASCADE,
    fetched_at  INTEGER NOT NULL,
    PRIMARY KEY (run_id, region, search_name, rank)
) STRICT, WITHOUT ROWID;
CREATE INDEX search_results_by_search_time ON search_results (region, search_name, fetched_at);
CREATE INDEX search_results_by_video ON search_results (video_id, region);

CREATE TABLE categories (
    region     TEXT NOT NULL,
    id         TEXT NOT NULL,
    title      TEXT NOT NULL,
    fetched_at INTEGER NOT NULL,
    PRIMARY KEY (region, id)
) STRICT, WITHOUT ROWID;

CREATE TABLE region_state (
    region                TEXT PRIMARY KEY,
    last_complete_at      INTEGER,
    last_attempt_at       INTEGER,
    last_status           TEXT,
    categories_fetched_at INTEGER
) STRICT;

-- Full-text index over title, description, tags and channel title: external content
-- read straight from `videos`, kept in step by the triggers below. The indexed tags
-- are `tags_text` (the same tags joined by spaces, written with `tags`), not the JSON:
-- FTS5 reads its content with virtual tables forbidden, so it cannot go through
-- json_each, and 'rebuild' / 'integrity-check' must see exactly what the triggers
-- indexed.
CREATE VIRTUAL TABLE videos_fts USING fts5 (
    title, description, tags_text, channel_title,
    content = 'videos',
    content_rowid = 'num',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER videos_fts_after_insert AFTER INSERT ON videos BEGIN
    INSERT INTO videos_fts (rowid, title, description, tags_text, channel_title)
    VALUES (new.num, new.title, new.description, new.tags_text, new.channel_title);
END;

CREATE TRIGGER videos_fts_after_delete AFTER DELETE ON videos BEGIN
    INSERT INTO videos_fts (videos_fts, rowid, title, description, tags_text, channel_title)
    VALUES ('delete', old.num, old.title, old.description, old.tags_text, old.channel_title);
END;

-- Most updates are a re-fetch that only changes counts; those leave the index alone.
CREATE TRIGGER videos_fts_after_update AFTER UPDATE ON videos
WHEN old.num IS NOT new.num
  OR old.title IS NOT new.title
  OR old.description IS NOT new.description
  OR old.tags_text IS NOT new.tags_text
  OR old.channel_title IS NOT new.channel_title
BEGIN
    INSERT INTO videos_fts (videos_fts, rowid, title, description, tags_text, channel_title)
    VALUES ('delete', old.num, old.title, old.description, old.tags_text, old.channel_title);
    INSERT INTO videos_fts (rowid, title, description, tags_text, channel_title)
    VALUES (new.num, new.title, new.description, new.tags_text, new.channel_title);
END;
"#;

/// What `status`, `runs` and the metrics file read: how each run went in each region
/// (written as `running` when the run starts, so a killed run's regions show up as
/// abandoned, not as missing), and every attempt at an upstream call by method and
/// outcome, so that the metrics file can be rebuilt whole by whichever process writes it.
const RUN_OUTCOMES_SQL: &str = r#"
CREATE TABLE run_regions (
    run_id     TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    region     TEXT NOT NULL,
    -- The run's start, copied so that a region's last attempt is one index probe.
    started_at INTEGER NOT NULL,
    status     TEXT NOT NULL,
    pages  INTEGER NOT NULL DEFAULT 0,
    videos INTEGER NOT NULL DEFAULT 0,
    units  INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    PRIMARY KEY (run_id, region)
) STRICT, WITHOUT ROWID;
CREATE INDEX run_regions_by_region ON run_regions (region, started_at);
CREATE INDEX runs_by_status ON runs (status);

CREATE TABLE run_calls (
    run_id  TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    method  TEXT NOT NULL,
    outcome TEXT NOT NULL,
    calls   INTEGER NOT NULL CHECK (calls >= 0),
    PRIMARY KEY (run_id, method, outcome)
) STRICT, WITHOUT ROWID;

-- Every run's calls added up, kept with each run's own rows: the metrics file's
-- counter reads one row per method and outcome, not years of runs.
CREATE TABLE call_totals (
    method  TEXT NOT NULL,
    outcome TEXT NOT NULL,
    calls   INTEGER NOT NULL CHECK (calls >= 0),
    PRIMARY KEY (method, outcome)
) STRICT, WITHOUT ROWID;
"#;

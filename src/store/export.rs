//! Reading the trending snapshots out, one row per (fetch, region, rank), streamed: a
//! row is handed to the caller as SQLite steps to it, so a year exports in the memory
//! of one row.

use rusqlite::params;

use super::{Store, StoreError, sql};

/// Which fetches to export: their start between `since` and `until`, inclusive (unix
/// seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSpan {
    pub since: i64,
    pub until: i64,
}

/// One trending place with the video's metadata and the counts that fetch saw.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportRow {
    pub video_id: String,
    /// When the fetch began (unix seconds): `trending_date` is its UTC date.
    pub fetch_started_at: i64,
    pub title: String,
    pub channel_title: String,
    pub category_id: Option<String>,
    /// As the upstream sent it (RFC 3339).
    pub published_at: String,
    pub tags: Option<Vec<String>>,
    pub view_count: Option<i64>,
    pub like_count: Option<i64>,
    pub comment_count: Option<i64>,
    pub thumbnail_url: Option<String>,
    pub description: String,
    pub region: String,
    pub rank: u32,
    /// When this place's page was stored (unix seconds).
    pub fetched_at: i64,
    pub category_title: Option<String>,
    pub duration_s: Option<i64>,
}

impl Store {
    /// Every region that has snapshots, by code.
    pub fn regions(&self) -> Result<Vec<String>, StoreError> {
        (|| {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT code FROM regions ORDER BY code")?;
            let rows = stmt.query_map([], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<Vec<String>>>()
        })()
        .map_err(self.err("listing the regions"))
    }

    /// Hands each trending place of `regions` (in that order; each region's fetches
    /// oldest first, ranks in order) within `span` to `each`, and returns how many.
    /// Stops at the first error `each` returns.
    pub fn export<E: From<StoreError>>(
        &self,
        regions: &[String],
        span: ExportSpan,
        mut each: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut count = 0u64;
        for region in regions {
            let context = format!("exporting the trending places of {region}");
            let mut stmt = self
                .conn
                .prepare_cached(sql::EXPORT_REGION)
                .map_err(self.err(context.clone()))?;
            let mut rows = stmt
                .query(params![region, span.since, span.until])
                .map_err(self.err(context.clone()))?;
            while let Some(row) = rows.next().map_err(self.err(context.clone()))? {
                let export = (|| {
                    let tags = super::read::tags_at(row, 6)?;
                    Ok(ExportRow {
                        video_id: row.get(0)?,
                        fetch_started_at: row.get(1)?,
                        title: row.get(2)?,
                        channel_title: row.get(3)?,
                        category_id: row.get(4)?,
                        published_at: row.get(5)?,
                        tags,
                        view_count: row.get(7)?,
                        like_count: row.get(8)?,
                        comment_count: row.get(9)?,
                        thumbnail_url: row.get(10)?,
                        description: row.get(11)?,
                        region: region.clone(),
                        rank: row.get(12)?,
                        fetched_at: row.get(13)?,
                        category_title: row.get(14)?,
                        duration_s: row.get(15)?,
                    })
                })()
                .map_err(self.err(context.clone()))?;
                each(&export)?;
                count += 1;
            }
        }
        Ok(count)
    }
}

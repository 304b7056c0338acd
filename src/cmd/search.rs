//! `trendsync search QUERY`: full-text search of what has been ingested; never calls
//! the upstream and never writes.

use std::io::Write;

use anyhow::{Context, Result};
use serde::Serialize;

use super::Ctx;
use crate::cli::SearchArgs;
use crate::error::UsageTip;
use crate::output::text::visible;
use crate::store::{QUERY_TIP, SearchHit, Store, StoreError};

#[derive(Serialize)]
struct HitJson<'a> {
    video_id: &'a str,
    title: &'a str,
    channel_title: &'a str,
    snippet: &'a str,
    view_count: Option<i64>,
    published_at: &'a str,
    regions: &'a [String],
}

#[derive(Serialize)]
struct SearchJson<'a> {
    query: &'a str,
    region: Option<&'a str>,
    results: Vec<HitJson<'a>>,
}

pub fn run(ctx: &Ctx<'_>, args: &SearchArgs) -> Result<()> {
    let global = ctx.global;
    let region = args.region.as_deref().map(str::to_ascii_uppercase);
    let db = ctx.require_db()?;
    let asked: Vec<String> = args.region.iter().cloned().collect();
    super::check_read_regions(ctx, &asked, || super::stored_regions(Some(db)))?;
    let store =
        Store::read_on(db).with_context(|| format!("opening {} to search", global.db.display()))?;
    let hits: Vec<SearchHit> = match store {
        // Only the budget's tables, from an older trendsync: nothing stored yet.
        None => {
            tracing::warn!(
                "no videos stored in {} yet: run `trendsync run` first",
                global.db.display()
            );
            Vec::new()
        }
        Some(store) => match store.search(&args.query, region.as_deref(), args.limit) {
            Ok(hits) => hits,
            Err(e @ StoreError::BadQuery { .. }) => {
                return Err(UsageTip {
                    message: e.to_string(),
                    tip: QUERY_TIP.to_owned(),
                }
                .into());
            }
            Err(e) => return Err(e).with_context(|| format!("searching {}", global.db.display())),
        },
    };
    if args.json {
        let results = hits
            .iter()
            .map(|h| HitJson {
                video_id: &h.video_id,
                title: &h.title,
                channel_title: &h.channel_title,
                snippet: &h.snippet,
                view_count: h.view_count,
                published_at: &h.published_at,
                regions: &h.regions,
            })
            .collect();
        return crate::output::json::print_json(&SearchJson {
            query: &args.query,
            region: region.as_deref(),
            results,
        });
    }
    // Each line wrapped at the terminal's width, as the tables are.
    let mut out =
        crate::output::table::Wrapped::new(std::io::stdout().lock(), crate::output::table::width());
    if hits.is_empty() {
        writeln!(out, "no videos match {:?}", args.query)?;
    }
    // Titles and channel names are the upstream's text: a screen clear or a
    // right-to-left override in one is shown escaped, never acted on (docs/commands.md).
    for (i, h) in hits.iter().enumerate() {
        let views = h.view_count.map_or("views hidden".to_owned(), |v| {
            format!("{} views", crate::output::human::count(v))
        });
        writeln!(
            out,
            "{:>3}. {} — {} ({views}; {})",
            i + 1,
            visible(&h.title),
            visible(&h.channel_title),
            visible(&h.regions.join(", "))
        )?;
        writeln!(out, "     {}", visible(&h.snippet.replace('\n', " ")))?;
        writeln!(
            out,
            // The share form: short enough to stay whole in 40 columns.
            "     https://youtu.be/{}",
            visible(&h.video_id)
        )?;
    }
    out.flush()?;
    Ok(())
}

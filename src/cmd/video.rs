//! `trendsync video VIDEO`: everything the database knows about one video, its
//! latest metadata, its places per region and chart, and its counts over time with
//! where each came from. Answers "what happened to this video after it trended";
//! never calls the upstream and never writes.

use std::io::Write;

use anyhow::{Context, Result, anyhow};
use serde::Serialize;

use super::Ctx;
use super::shared::at;
use crate::cli::VideoArgs;
use crate::error::{MissingConfig, UsageError};
use crate::output::table::{self, Column, Table};
use crate::output::text::visible;
use crate::store::{ChartSpan, CountPoint, Store, UpstreamChange, crossed, methodology_at};

#[derive(Serialize)]
struct PlaceJson<'a> {
    region: &'a str,
    /// The category id; null for the overall chart.
    chart: Option<String>,
    first_seen: String,
    last_seen: String,
    best_rank: u32,
    fetches: u64,
}

#[derive(Serialize)]
struct CountJson {
    at: String,
    views: Option<i64>,
    likes: Option<i64>,
    comments: Option<i64>,
    source: &'static str,
    /// The latest upstream change of meaning in force at `at`.
    methodology: Option<&'static str>,
}

/// An upstream change of meaning that the counts cross.
#[derive(Serialize)]
struct CrossingJson {
    id: &'static str,
    effective_at: String,
    what: &'static str,
}

#[derive(Serialize)]
struct VideoJson<'a> {
    video_id: &'a str,
    title: &'a str,
    channel_title: &'a str,
    published_at: &'a str,
    places: Vec<PlaceJson<'a>>,
    counts: Vec<CountJson>,
    /// The changes between the first and the last sample: where the series breaks.
    crosses: Vec<CrossingJson>,
}

fn chart_name(chart: Option<u32>) -> String {
    chart.map_or_else(|| "overall".to_owned(), |c| format!("category {c}"))
}

pub fn run(ctx: &Ctx<'_>, args: &VideoArgs) -> Result<()> {
    let global = ctx.global;
    let id = video_id(&args.video_id)?;
    let id = id.as_str();
    let store = Store::read_on(ctx.require_db()?)
        .with_context(|| format!("opening {} to read", global.db.display()))?
        .ok_or_else(|| {
            MissingConfig(format!(
                "--db {}: no trendsync database there; check the path (TRENDSYNC_DB) or run `trendsync run` first",
                global.db.display()
            ))
        })?;
    let reading = || format!("reading video {} from {}", id, global.db.display());
    let video = store.video(id).with_context(reading)?.ok_or_else(|| {
        anyhow!(
            "video {} was never seen: it is on no chart or search stored in {}",
            visible(id),
            global.db.display()
        )
    })?;
    let places = store.video_chart_places(id).with_context(reading)?;
    let counts = store.video_counts(id).with_context(reading)?;
    if args.json {
        return crate::output::json::print_json(&VideoJson {
            video_id: &video.id,
            title: &video.title,
            channel_title: &video.channel_title,
            published_at: &video.published_at,
            places: places.iter().map(place_json).collect(),
            counts: counts.iter().map(count_json).collect(),
            crosses: crossings(&counts)
                .map(|c| CrossingJson {
                    id: c.id,
                    effective_at: at(c.effective_at),
                    what: c.what,
                })
                .collect(),
        });
    }
    // Only the text says when a follow-up found the video gone.
    let removed_at = store.video_removed_at(id).with_context(reading)?;
    print_text(&video, &places, &counts, removed_at)
}

/// The video id an argument names: the id itself, or a watch, share, Shorts, embed or
/// live URL of it (`https://www.youtube.com/watch?v=ID`, `https://youtu.be/ID`,
/// `…/shorts/ID`), with or without the scheme, as `search` prints them. A URL of
/// another site, or one that names no video, is a usage error (2); an id that is not a
/// URL goes on as it is (one never seen is the store's to say).
fn video_id(arg: &str) -> Result<String, UsageError> {
    let trimmed = arg.trim();
    let looks_like_url =
        trimmed.contains('/') || trimmed.contains("youtube.") || trimmed.contains("youtu.be");
    if !looks_like_url {
        return well_formed(arg, trimmed);
    }
    let with_scheme = if trimmed.contains("://") {
        trimmed.to_owned()
    } else {
        format!("https://{trimmed}")
    };
    let not_a_video = || {
        UsageError(format!(
            "{} names no YouTube video; give its id (dQw4w9WgXcQ) or its watch, share or \
             Shorts URL (https://www.youtube.com/watch?v=ID, https://youtu.be/ID, \
             https://www.youtube.com/shorts/ID)",
            visible(arg)
        ))
    };
    let url = url::Url::parse(&with_scheme).map_err(|_| not_a_video())?;
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host);
    let mut path = url
        .path_segments()
        .into_iter()
        .flatten()
        .filter(|p| !p.is_empty());
    let id = match host {
        "youtu.be" => path.next().map(str::to_owned),
        "youtube.com" | "m.youtube.com" | "music.youtube.com" => match path.next() {
            Some("watch") => url
                .query_pairs()
                .find(|(key, _)| key == "v")
                .map(|(_, v)| v.into_owned()),
            Some("shorts" | "embed" | "live" | "v") => path.next().map(str::to_owned),
            _ => None,
        },
        _ => None,
    };
    let id = id.filter(|id| !id.is_empty()).ok_or_else(not_a_video)?;
    well_formed(arg, &id)
}

/// `id` if it can be a YouTube video id (11 letters, digits, `-` or `_`); else a usage
/// error (2) saying what one looks like, rather than "never seen" of a typo.
fn well_formed(arg: &str, id: &str) -> Result<String, UsageError> {
    if id.len() == 11
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Ok(id.to_owned());
    }
    Err(UsageError(format!(
        "\"{}\" is not a video id: an id is 11 letters, digits, '-' or '_' (dQw4w9WgXcQ); \
         a watch, share or Shorts URL names one too",
        visible(arg)
    )))
}

fn place_json(p: &ChartSpan) -> PlaceJson<'_> {
    PlaceJson {
        region: &p.region,
        chart: p.chart.map(|c| c.to_string()),
        first_seen: at(p.first_seen),
        last_seen: at(p.last_seen),
        best_rank: p.best_rank,
        fetches: p.fetches,
    }
}

fn count_json(c: &CountPoint) -> CountJson {
    CountJson {
        at: at(c.at),
        views: c.views,
        likes: c.likes,
        comments: c.comments,
        source: c.source.as_str(),
        methodology: methodology_at(c.at),
    }
}

/// The upstream changes of meaning between the first and the last of `counts`
/// (oldest first).
fn crossings(counts: &[CountPoint]) -> impl Iterator<Item = &'static UpstreamChange> {
    let first = counts.first().map_or(0, |c| c.at);
    let last = counts.last().map_or(0, |c| c.at);
    crossed(first, last)
}

/// Text for people: upstream text with its control characters made visible.
fn print_text(
    video: &crate::store::VideoRecord,
    places: &[ChartSpan],
    counts: &[CountPoint],
    removed_at: Option<i64>,
) -> Result<()> {
    let width = table::width();
    let mut out = table::Wrapped::new(std::io::stdout().lock(), width);
    writeln!(out, "{}  {}", visible(&video.id), visible(&video.title))?;
    writeln!(
        out,
        "channel {}, published {}",
        visible(&video.channel_title),
        visible(&video.published_at)
    )?;
    if let Some(removed) = removed_at {
        writeln!(
            out,
            "no longer shown by the upstream (removed or private) as of {}",
            at(removed)
        )?;
    }
    writeln!(out)?;
    out.flush()?;
    let mut out = std::io::stdout().lock();
    if places.is_empty() {
        writeln!(out, "on no chart (found by a search only)")?;
    } else {
        // Fitted to the width: the least useful columns go first.
        let mut shown = Table::new(vec![
            Column::text("region", 0),
            Column::text("chart", 0),
            Column::text("first seen", 2),
            Column::text("last seen", 1),
            Column::number("best", 0),
            Column::number("fetches", 3),
        ]);
        for p in places {
            shown.row(vec![
                p.region.clone(),
                chart_name(p.chart),
                at(p.first_seen),
                at(p.last_seen),
                p.best_rank.to_string(),
                p.fetches.to_string(),
            ]);
        }
        shown.write(&mut out, width)?;
    }
    writeln!(out)?;
    let cell = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let mut series = Table::new(vec![
        Column::text("counts at", 0),
        Column::number("views", 0),
        Column::number("likes", 2),
        Column::number("comments", 1),
        Column::text("source", 3),
    ]);
    let mut previous: Option<i64> = None;
    for c in counts {
        if let Some(before) = previous {
            // A change of what the numbers mean between two samples: the step from one
            // to the next is not only the audience.
            for change in crossed(before, c.at) {
                series.note(format!(
                    "-- {} upstream change: {}; counts before and after differ in meaning",
                    change.id, change.what
                ));
            }
        }
        previous = Some(c.at);
        series.row(vec![
            at(c.at),
            cell(c.views),
            cell(c.likes),
            cell(c.comments),
            c.source.as_str().to_owned(),
        ]);
    }
    series.write(&mut out, width)?;
    Ok(())
}

#[cfg(test)]
mod tests;

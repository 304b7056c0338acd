//! `trendsync video VIDEO_ID`: everything the database knows about one video, its
//! latest metadata, its places per region and chart, and its counts over time with
//! where each came from. Answers "what happened to this video after it trended";
//! never calls the upstream and never writes.

use std::io::Write;

use anyhow::{Context, Result, anyhow};
use serde::Serialize;

use crate::cli::{Global, VideoArgs};
use crate::error::MissingConfig;
use crate::output::json::rfc3339;
use crate::output::text::visible;
use crate::store::{ChartSpan, CountPoint, Store};

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
}

#[derive(Serialize)]
struct VideoJson<'a> {
    video_id: &'a str,
    title: &'a str,
    channel_title: &'a str,
    published_at: &'a str,
    places: Vec<PlaceJson<'a>>,
    counts: Vec<CountJson>,
}

fn at(s: i64) -> String {
    rfc3339(s.saturating_mul(1_000_000))
}

fn chart_name(chart: Option<u32>) -> String {
    chart.map_or_else(|| "overall".to_owned(), |c| format!("category {c}"))
}

pub fn run(global: &Global, args: &VideoArgs) -> Result<()> {
    super::database::require(&global.db)?;
    let store = Store::open_read_only(&global.db)
        .with_context(|| format!("opening {} to read", global.db.display()))?
        .ok_or_else(|| {
            MissingConfig(format!(
                "--db {}: no trendsync database there; check the path (TRENDSYNC_DB) or run `trendsync run` first",
                global.db.display()
            ))
        })?;
    let reading = || {
        format!(
            "reading video {} from {}",
            args.video_id,
            global.db.display()
        )
    };
    let video = store
        .video(&args.video_id)
        .with_context(reading)?
        .ok_or_else(|| {
            anyhow!(
                "video {} was never seen: it is on no chart or search stored in {}",
                visible(&args.video_id),
                global.db.display()
            )
        })?;
    let places = store
        .video_chart_places(&args.video_id)
        .with_context(reading)?;
    let counts = store.video_counts(&args.video_id).with_context(reading)?;
    let removed_at = store
        .video_removed_at(&args.video_id)
        .with_context(reading)?;

    if args.json {
        return crate::output::json::print_json(&VideoJson {
            video_id: &video.id,
            title: &video.title,
            channel_title: &video.channel_title,
            published_at: &video.published_at,
            places: places.iter().map(place_json).collect(),
            counts: counts.iter().map(count_json).collect(),
        });
    }
    print_text(&video, &places, &counts, removed_at)
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
    }
}

/// Text for people: upstream text with its control characters made visible.
fn print_text(
    video: &crate::store::VideoRecord,
    places: &[ChartSpan],
    counts: &[CountPoint],
    removed_at: Option<i64>,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
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
    if places.is_empty() {
        writeln!(out, "on no chart (found by a search only)")?;
    } else {
        writeln!(
            out,
            "{:<6} {:<12} {:<20} {:<20} {:>4} {:>7}",
            "region", "chart", "first seen", "last seen", "best", "fetches"
        )?;
        for p in places {
            writeln!(
                out,
                "{:<6} {:<12} {:<20} {:<20} {:>4} {:>7}",
                p.region,
                chart_name(p.chart),
                at(p.first_seen),
                at(p.last_seen),
                p.best_rank,
                p.fetches
            )?;
        }
    }
    writeln!(out)?;
    let cell = |n: Option<i64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    writeln!(
        out,
        "{:<20} {:>13} {:>11} {:>10}  source",
        "counts at", "views", "likes", "comments"
    )?;
    for c in counts {
        writeln!(
            out,
            "{:<20} {:>13} {:>11} {:>10}  {}",
            at(c.at),
            cell(c.views),
            cell(c.likes),
            cell(c.comments),
            c.source.as_str()
        )?;
    }
    Ok(())
}

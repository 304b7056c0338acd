//! `regions.toml`: which regions to fetch, at which crontab minute, how many pages, and
//! which searches.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::region_codes::{is_region_code, nearest_code};
use super::{ConfigError, SourceText, parse_duration};
use crate::youtube::SearchOrder;

/// The chart holds at most 200 videos: four pages of 50.
pub(crate) const MAX_PAGES: u32 = 4;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default, rename = "region")]
    regions: Vec<RawRegion>,
    follow: Option<RawFollow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFollow {
    days: Spanned<u32>,
    every: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default = "default_pages")]
    pages: Spanned<u32>,
    #[serde(default)]
    categories: Vec<Spanned<String>>,
    slot: Option<Spanned<String>>,
    lease: Option<Spanned<String>>,
}

impl Default for RawDefaults {
    fn default() -> Self {
        RawDefaults {
            pages: default_pages(),
            categories: Vec::new(),
            slot: None,
            lease: None,
        }
    }
}

fn default_pages() -> Spanned<u32> {
    Spanned::new(0..0, MAX_PAGES)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegion {
    code: Spanned<String>,
    offset: Spanned<u32>,
    hl: Option<Spanned<String>>,
    pages: Option<Spanned<u32>>,
    categories: Option<Vec<Spanned<String>>>,
    slot: Option<Spanned<String>>,
    #[serde(default, rename = "search")]
    searches: Vec<RawSearch>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSearch {
    name: Spanned<String>,
    #[serde(default)]
    q: String,
    #[serde(default)]
    order: Option<Spanned<String>>,
    published_within: Option<Spanned<String>>,
}

/// One configured search of a region.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Search {
    pub(crate) name: String,
    pub(crate) q: String,
    pub(crate) order: SearchOrder,
    /// Only videos published this recently (the upstream's `publishedAfter`).
    pub(crate) published_within: Option<Duration>,
}

/// One region to fetch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Region {
    /// ISO 3166-1 alpha-2.
    pub(crate) code: String,
    /// The crontab minute.
    pub(crate) offset: u32,
    pub(crate) hl: Option<String>,
    /// Chart pages of 50 to fetch, of the overall chart and of each category's.
    pub(crate) pages: u32,
    /// The categories (`videoCategoryId`) whose charts are fetched beside the overall
    /// chart, in the configured order.
    pub(crate) categories: Vec<u32>,
    pub(crate) searches: Vec<Search>,
    /// The period of the region's schedule, in seconds: one slot (docs/commands.md,
    /// "Several hosts"), 1 to [`MAX_SLOT_SECS`].
    pub(crate) slot_secs: u32,
}

/// The default slot: hourly, as the shipped crontab runs.
pub(crate) const DEFAULT_SLOT_SECS: u32 = 3600;
/// The longest slot: a day.
pub(crate) const MAX_SLOT_SECS: u32 = 86_400;
/// The default lease a run holds on a slot while it fetches it.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(120);

/// The most days `[follow]` may look back: a month.
pub(crate) const MAX_FOLLOW_DAYS: u32 = 31;

/// `[follow]`: keep counting videos after they left the charts (docs/upstream.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Follow {
    /// Videos seen on any chart in this many last days are followed.
    pub(crate) days: u32,
    /// None is refreshed more often than this.
    pub(crate) every: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Regions {
    pub(crate) regions: Vec<Region>,
    /// Follow-ups, when configured.
    pub(crate) follow: Option<Follow>,
    /// How long a claim on a slot lasts unless renewed (`[defaults] lease`): at most
    /// every region's slot.
    pub(crate) lease: Duration,
}

impl Regions {
    pub(crate) fn get(&self, code: &str) -> Option<&Region> {
        self.regions
            .iter()
            .find(|r| r.code.eq_ignore_ascii_case(code))
    }
}

fn pages(src: &SourceText<'_>, p: &Spanned<u32>, what: &str) -> Result<u32, ConfigError> {
    let n = *p.get_ref();
    if (1..=MAX_PAGES).contains(&n) {
        Ok(n)
    } else {
        Err(src.error_at(
            Some(p.span()),
            format!(
                "{what} is {n}; expected 1 to {MAX_PAGES} (the chart holds at most {} videos)",
                MAX_PAGES * 50
            ),
        ))
    }
}

/// The category ids of a `categories` list: whole numbers from 1 written as strings
/// (the upstream's ids, e.g. "17" for Sports), each listed once.
fn categories(
    src: &SourceText<'_>,
    ids: &[Spanned<String>],
    what: &str,
) -> Result<Vec<u32>, ConfigError> {
    let mut out: Vec<u32> = Vec::with_capacity(ids.len());
    for id in ids {
        let text = id.get_ref();
        let number = text
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| text.parse::<u32>().ok())
            .flatten()
            .filter(|n| *n >= 1);
        let Some(n) = number else {
            return Err(src.error_at(
                Some(id.span()),
                format!(
                    "{what}: \"{text}\" is not a category id; expected a whole number from 1 written as a string, such as \"17\""
                ),
            ));
        };
        if out.contains(&n) {
            return Err(src.error_at(
                Some(id.span()),
                format!("{what}: category {n} is listed twice"),
            ));
        }
        out.push(n);
    }
    Ok(out)
}

/// Parses and validates `regions.toml`.
pub(crate) fn parse_regions(src: &SourceText<'_>) -> Result<Regions, ConfigError> {
    let raw: RawFile = src.parse()?;
    let default_pages = pages(src, &raw.defaults.pages, "defaults.pages")?;
    let default_categories = categories(src, &raw.defaults.categories, "defaults.categories")?;
    let default_slot = match &raw.defaults.slot {
        Some(s) => slot(src, s, "defaults.slot")?,
        None => DEFAULT_SLOT_SECS,
    };
    if raw.regions.is_empty() {
        return Err(src.error_at(None, "no [[region]] is configured; add at least one, e.g. [[region]] code = \"US\" offset = 0"));
    }
    let mut regions: Vec<Region> = Vec::with_capacity(raw.regions.len());
    for r in &raw.regions {
        let region = region(
            src,
            r,
            &regions,
            default_pages,
            &default_categories,
            default_slot,
        )?;
        regions.push(region);
    }
    let follow = follow(src, raw.follow.as_ref())?;
    let lease = lease(src, raw.defaults.lease.as_ref(), &regions)?;
    Ok(Regions {
        regions,
        follow,
        lease,
    })
}

/// A `slot`: whole seconds, minutes or hours (`"90s"`, `"15m"`, `"1h"`), from 1 s to
/// a day.
fn slot(src: &SourceText<'_>, text: &Spanned<String>, what: &str) -> Result<u32, ConfigError> {
    let t = text.get_ref().trim();
    let (digits, unit) = t.split_at(t.len().saturating_sub(1));
    let scale = match unit {
        "s" => Some(1u64),
        "m" => Some(60),
        "h" => Some(3600),
        _ => None,
    };
    let secs = scale.and_then(|scale| {
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse::<u64>().ok())
            .flatten()
            .and_then(|n| n.checked_mul(scale))
    });
    match secs.and_then(|s| u32::try_from(s).ok()) {
        Some(s) if (1..=MAX_SLOT_SECS).contains(&s) => Ok(s),
        _ => Err(src.error_at(
            Some(text.span()),
            format!(
                "{what} \"{}\" is not a slot; expected a whole number of seconds, minutes or hours from 1 s to 24 h, such as \"1h\", \"15m\" or \"30s\"",
                text.get_ref()
            ),
        )),
    }
}

/// `[defaults] lease`: from 1 s to the shortest region's slot (a lease longer than its
/// slot would outlive the slot it claims).
fn lease(
    src: &SourceText<'_>,
    raw: Option<&Spanned<String>>,
    regions: &[Region],
) -> Result<Duration, ConfigError> {
    let Some(text) = raw else {
        let shortest = regions.iter().map(|r| r.slot_secs).min();
        // The default is cut to a short slot rather than refusing a file that never
        // named a lease.
        return Ok(match shortest {
            Some(s) => DEFAULT_LEASE.min(Duration::from_secs(u64::from(s))),
            None => DEFAULT_LEASE,
        });
    };
    let d = parse_duration(text.get_ref())
        .map_err(|e| src.error_at(Some(text.span()), format!("defaults.lease: {e}")))?;
    if d < Duration::from_secs(1) {
        return Err(src.error_at(
            Some(text.span()),
            format!(
                "defaults.lease \"{}\" is shorter than a second; expected 1 s up to the slot",
                text.get_ref()
            ),
        ));
    }
    if let Some(r) = regions
        .iter()
        .find(|r| d > Duration::from_secs(u64::from(r.slot_secs)))
    {
        return Err(src.error_at(
            Some(text.span()),
            format!(
                "defaults.lease \"{}\" is longer than region {}'s slot of {} s; expected 1 s up to the shortest slot",
                text.get_ref(),
                r.code,
                r.slot_secs
            ),
        ));
    }
    Ok(d)
}

/// One `[[region]]`, its unset pages and categories taken from the defaults.
fn region(
    src: &SourceText<'_>,
    r: &RawRegion,
    earlier: &[Region],
    default_pages: u32,
    default_categories: &[u32],
    default_slot: u32,
) -> Result<Region, ConfigError> {
    let code = region_code(src, &r.code, earlier)?;
    let offset = minute(src, &r.offset)?;
    let hl = r.hl.as_ref().map(|hl| language(src, hl)).transpose()?;
    let region_pages = match &r.pages {
        Some(p) => pages(src, p, &format!("region {code} pages"))?,
        None => default_pages,
    };
    let region_categories = match &r.categories {
        Some(ids) => categories(src, ids, &format!("region {code} categories"))?,
        None => default_categories.to_vec(),
    };
    let searches = searches(src, &code, &r.searches)?;
    let slot_secs = match &r.slot {
        Some(s) => slot(src, s, &format!("region {code} slot"))?,
        None => default_slot,
    };
    Ok(Region {
        slot_secs,
        code,
        offset,
        hl,
        pages: region_pages,
        categories: region_categories,
        searches,
    })
}

/// A region's code: ISO 3166-1 alpha-2 (with a near guess when it is not), and not
/// configured before.
fn region_code(
    src: &SourceText<'_>,
    code: &Spanned<String>,
    earlier: &[Region],
) -> Result<String, ConfigError> {
    let c = code.get_ref();
    if !is_region_code(c) {
        return Err(src.error_at(
            Some(code.span()),
            match nearest_code(c) {
                Some(near) => format!("\"{c}\" is not an ISO 3166-1 alpha-2 region code; did you mean \"{near}\"?"),
                None => format!("\"{c}\" is not an ISO 3166-1 alpha-2 region code; expected two capital letters such as \"US\" or \"GB\""),
            },
        ));
    }
    if earlier.iter().any(|x| &x.code == c) {
        return Err(src.error_at(Some(code.span()), format!("region {c} is configured twice")));
    }
    Ok(c.clone())
}

/// A region's `offset`: the crontab minute it runs at, 0 to 59.
fn minute(src: &SourceText<'_>, offset: &Spanned<u32>) -> Result<u32, ConfigError> {
    let o = *offset.get_ref();
    if o > 59 {
        return Err(src.error_at(
            Some(offset.span()),
            format!("offset {o} is not a crontab minute; expected 0 to 59"),
        ));
    }
    Ok(o)
}

/// A region's `hl`: a short language code such as `en_US`.
fn language(src: &SourceText<'_>, hl: &Spanned<String>) -> Result<String, ConfigError> {
    let ok = !hl.get_ref().is_empty()
        && hl.get_ref().len() <= 16
        && hl
            .get_ref()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        return Err(src.error_at(
            Some(hl.span()),
            format!(
                "hl \"{}\" is not a language code; expected e.g. \"en_US\" or \"de\"",
                hl.get_ref()
            ),
        ));
    }
    Ok(hl.get_ref().clone())
}

/// A region's `[[region.search]]`s, in file order, their names unique within it.
fn searches(
    src: &SourceText<'_>,
    code: &str,
    raw: &[RawSearch],
) -> Result<Vec<Search>, ConfigError> {
    let mut searches: Vec<Search> = Vec::new();
    for s in raw {
        let search = search(src, code, s, &searches)?;
        searches.push(search);
    }
    Ok(searches)
}

/// One search: a plain name not used earlier in the region, its order and window.
fn search(
    src: &SourceText<'_>,
    code: &str,
    s: &RawSearch,
    earlier: &[Search],
) -> Result<Search, ConfigError> {
    let name = s.name.get_ref();
    let plain = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !plain {
        return Err(src.error_at(
            Some(s.name.span()),
            format!("search name \"{name}\" must be 1 to 64 letters, digits, '_', '-' or '.'"),
        ));
    }
    if earlier.iter().any(|x| &x.name == name) {
        return Err(src.error_at(
            Some(s.name.span()),
            format!("region {code} has two searches named \"{name}\""),
        ));
    }
    let order = match &s.order {
        None => SearchOrder::default(),
        Some(o) => o.get_ref().parse::<SearchOrder>().map_err(|_| {
            src.error_at(
                Some(o.span()),
                format!(
                    "order \"{}\" is not one of date, rating, relevance, title, videoCount, viewCount",
                    o.get_ref()
                ),
            )
        })?,
    };
    let published_within = match &s.published_within {
        None => None,
        Some(p) => Some(
            parse_duration(p.get_ref())
                .map_err(|e| src.error_at(Some(p.span()), format!("published_within: {e}")))?,
        ),
    };
    Ok(Search {
        name: name.clone(),
        q: s.q.clone(),
        order,
        published_within,
    })
}

/// The `[follow]` table, if any: how many days to follow a video, and how often.
fn follow(src: &SourceText<'_>, raw: Option<&RawFollow>) -> Result<Option<Follow>, ConfigError> {
    let Some(f) = raw else {
        return Ok(None);
    };
    let days = *f.days.get_ref();
    if !(1..=MAX_FOLLOW_DAYS).contains(&days) {
        return Err(src.error_at(
            Some(f.days.span()),
            format!("follow.days is {days}; expected 1 to {MAX_FOLLOW_DAYS} days"),
        ));
    }
    let every = parse_duration(f.every.get_ref())
        .map_err(|e| src.error_at(Some(f.every.span()), format!("follow.every: {e}")))?;
    Ok(Some(Follow { days, every }))
}

#[cfg(test)]
mod tests;

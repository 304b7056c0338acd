//! `regions.toml`: which regions to fetch, at which crontab minute, how many pages, and
//! which searches.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::region_codes::{is_region_code, nearest_code};
use super::{ConfigError, SourceText, parse_duration};
use crate::youtube::SearchOrder;

/// The chart holds at most 200 videos: four pages of 50.
pub const MAX_PAGES: u32 = 4;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default, rename = "region")]
    regions: Vec<RawRegion>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default = "default_pages")]
    pages: Spanned<u32>,
}

impl Default for RawDefaults {
    fn default() -> Self {
        RawDefaults {
            pages: default_pages(),
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
pub struct Search {
    pub name: String,
    pub q: String,
    pub order: SearchOrder,
    /// Only videos published this recently (the upstream's `publishedAfter`).
    pub published_within: Option<Duration>,
}

/// One region to fetch.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    /// ISO 3166-1 alpha-2.
    pub code: String,
    /// The crontab minute.
    pub offset: u32,
    pub hl: Option<String>,
    /// Chart pages of 50 to fetch.
    pub pages: u32,
    pub searches: Vec<Search>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Regions {
    pub regions: Vec<Region>,
}

impl Regions {
    pub fn get(&self, code: &str) -> Option<&Region> {
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

/// Parses and validates `regions.toml`.
pub fn parse_regions(src: &SourceText<'_>) -> Result<Regions, ConfigError> {
    let raw: RawFile = src.parse()?;
    let default_pages = pages(src, &raw.defaults.pages, "defaults.pages")?;
    if raw.regions.is_empty() {
        return Err(src.error_at(None, "no [[region]] is configured; add at least one, e.g. [[region]] code = \"US\" offset = 0"));
    }
    let mut regions: Vec<Region> = Vec::with_capacity(raw.regions.len());
    for r in &raw.regions {
        let code = r.code.get_ref();
        if !is_region_code(code) {
            return Err(src.error_at(
                Some(r.code.span()),
                match nearest_code(code) {
                    Some(near) => format!("\"{code}\" is not an ISO 3166-1 alpha-2 region code; did you mean \"{near}\"?"),
                    None => format!("\"{code}\" is not an ISO 3166-1 alpha-2 region code; expected two capital letters such as \"US\" or \"GB\""),
                },
            ));
        }
        if regions.iter().any(|x| &x.code == code) {
            return Err(src.error_at(
                Some(r.code.span()),
                format!("region {code} is configured twice"),
            ));
        }
        let offset = *r.offset.get_ref();
        if offset > 59 {
            return Err(src.error_at(
                Some(r.offset.span()),
                format!("offset {offset} is not a crontab minute; expected 0 to 59"),
            ));
        }
        let hl = match &r.hl {
            Some(hl) => {
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
                Some(hl.get_ref().clone())
            }
            None => None,
        };
        let region_pages = match &r.pages {
            Some(p) => pages(src, p, &format!("region {code} pages"))?,
            None => default_pages,
        };
        let mut searches: Vec<Search> = Vec::new();
        for s in &r.searches {
            let name = s.name.get_ref();
            let plain = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if !plain {
                return Err(src.error_at(
                    Some(s.name.span()),
                    format!(
                        "search name \"{name}\" must be 1 to 64 letters, digits, '_', '-' or '.'"
                    ),
                ));
            }
            if searches.iter().any(|x| &x.name == name) {
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
            let published_within =
                match &s.published_within {
                    None => None,
                    Some(p) => Some(parse_duration(p.get_ref()).map_err(|e| {
                        src.error_at(Some(p.span()), format!("published_within: {e}"))
                    })?),
                };
            searches.push(Search {
                name: name.clone(),
                q: s.q.clone(),
                order,
                published_within,
            });
        }
        regions.push(Region {
            code: code.clone(),
            offset,
            hl,
            pages: region_pages,
            searches,
        });
    }
    Ok(Regions { regions })
}

//! The two configuration files, `quota-costs.toml` and `regions.toml`, read and
//! validated where they are read: every mistake is reported with the file, the line
//! and column, and what was expected (exit 78).

mod costs;
mod duration;
mod lookup;
mod region_codes;
pub(crate) use region_codes::nearest as nearest_region;
mod regions;
mod slots;
mod when;

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;

pub use costs::parse_costs;
pub(crate) use duration::parse_duration;
pub(crate) use lookup::same_text;
pub(crate) use lookup::{
    COSTS_FILE, ConfigDirs, Found, Lookup, REGIONS_FILE, SYSTEM_DIR, Shadowing, Source, shown,
};
#[cfg(test)]
pub(crate) use regions::Search;
pub(crate) use regions::{Follow, Region, Regions, parse_regions};
pub(crate) use slots::slot_schedule;
pub use when::When;
pub(crate) use when::parse_when;

use crate::quota::Budget;

/// The shipped `quota-costs.toml`, used when none is given or present.
pub(crate) const BUILTIN_COSTS: &str = include_str!("../../quota-costs.toml");
/// The shipped `regions.toml`, used when none is given or present.
pub(crate) const BUILTIN_REGIONS: &str = include_str!("../../regions.toml");

/// A configuration mistake, located as precisely as the file allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as the user named it, or "built-in quota-costs.toml".
    pub file: String,
    /// 1-based line and column, when the mistake has a place.
    pub position: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, col)) => write!(f, "{}:{}:{}: {}", self.file, line, col, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The text of one configuration file and the name to report it by; turns byte spans
/// into line and column.
pub struct SourceText<'a> {
    pub name: String,
    pub text: &'a str,
}

impl SourceText<'_> {
    pub(crate) fn error_at(
        &self,
        span: Option<Range<usize>>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.name.clone(),
            position: span.map(|s| line_col(self.text, s.start)),
            message: message.into(),
        }
    }

    /// Deserializes the whole file, turning toml's error into ours.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        toml::from_str(self.text)
            .map_err(|e| self.error_at(e.span(), in_words(e.message().trim_end())))
    }
}

/// A deserializer's message in the words a person uses: "expected u64" says "a whole
/// number such as 9500", and a number written in quotes says to drop them.
fn in_words(message: &str) -> String {
    const TYPES: [(&str, &str); 6] = [
        ("expected u64", "expected a whole number such as 9500"),
        ("expected u32", "expected a whole number such as 4"),
        ("expected u16", "expected a whole number such as 30"),
        ("expected u8", "expected a whole number such as 4"),
        ("expected i64", "expected a whole number"),
        (
            "expected a sequence",
            "expected a list such as [\"17\", \"25\"]",
        ),
    ];
    let mut words = message.to_owned();
    for (from, to) in TYPES {
        if let Some(rest) = words.strip_suffix(from) {
            words = format!("{rest}{to}");
        }
    }
    let quoted_number = words.starts_with("invalid type: string \"")
        && words.contains("expected a whole number")
        && words
            .split('"')
            .nth(1)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if quoted_number {
        words.push_str(" (write the number without quotes)");
    }
    words
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// Where a configuration file comes from: a path (given, or found by the lookup of
/// [`ConfigDirs`]), or the copy built into the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    Given(PathBuf),
    BuiltIn,
}

impl Origin {
    /// The file as messages name it: its path, or `built-in NAME`.
    pub(crate) fn describe(&self, default_name: &str) -> String {
        match self {
            Origin::Given(path) => path.display().to_string(),
            Origin::BuiltIn => format!("built-in {default_name}"),
        }
    }

    fn read(
        &self,
        builtin: &'static str,
        default_name: &str,
    ) -> Result<(String, String), ConfigError> {
        match self {
            Origin::BuiltIn => Ok((format!("built-in {default_name}"), builtin.to_owned())),
            Origin::Given(path) => {
                let name = path.display().to_string();
                let fail = |message: String| ConfigError {
                    file: name.clone(),
                    position: None,
                    message,
                };
                // Only a regular file is read: opening a FIFO would wait for a writer
                // for ever, and a directory says nothing useful when read.
                if let Ok(meta) = std::fs::metadata(path)
                    && !meta.is_file()
                {
                    let what = crate::atomic::describe(meta.file_type());
                    return Err(fail(format!(
                        "cannot read the file: it is {what}, not a regular file; replace it with a regular file, or remove it (or the option that names it) so that the next one found, or the built-in one, is used"
                    )));
                }
                std::fs::read_to_string(path)
                    .map(|text| (name.clone(), text))
                    .map_err(|e| fail(format!("cannot read the file: {e}; pass an existing file or leave the option out to use the built-in one")))
            }
        }
    }
}

/// Loads only `quota-costs.toml`, for the commands that need nothing else.
pub(crate) fn load_budget(costs: &Origin) -> Result<Budget, ConfigError> {
    let (name, text) = costs.read(BUILTIN_COSTS, "quota-costs.toml")?;
    parse_costs(&SourceText { name, text: &text })
}

/// Loads only `regions.toml`, for what needs nothing else: the regions a refused
/// run's metrics name (docs/metrics.md).
pub(crate) fn load_regions(regions: &Origin) -> Result<Regions, ConfigError> {
    let (name, text) = regions.read(BUILTIN_REGIONS, "regions.toml")?;
    parse_regions(&SourceText { name, text: &text })
}

/// Both files, checked against each other.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) budget: Budget,
    pub(crate) regions: Regions,
}

impl Config {
    /// Loads and validates both files. `called` lists the upstream methods the program
    /// itself charges, which must all have a cost; `search_method` must have one only
    /// when some region configures a search.
    pub(crate) fn load(
        costs: &Origin,
        regions: &Origin,
        called: &[&str],
        search_method: &str,
    ) -> Result<Config, ConfigError> {
        let (costs_name, costs_text) = costs.read(BUILTIN_COSTS, "quota-costs.toml")?;
        let costs_src = SourceText {
            name: costs_name,
            text: &costs_text,
        };
        let budget = parse_costs(&costs_src)?;
        let (regions_name, regions_text) = regions.read(BUILTIN_REGIONS, "regions.toml")?;
        let regions_src = SourceText {
            name: regions_name,
            text: &regions_text,
        };
        let regions = parse_regions(&regions_src)?;

        for method in called {
            if budget.bucket_of(method).is_none() {
                return Err(costs_src.error_at(
                    None,
                    format!("[costs] has no entry for \"{method}\", which trendsync calls; add e.g. \"{method}\" = 1"),
                ));
            }
        }
        if let Some(region) = regions.regions.iter().find(|r| !r.searches.is_empty())
            && budget.bucket_of(search_method).is_none()
        {
            return Err(costs_src.error_at(
                None,
                format!(
                    "[costs] has no entry for \"{search_method}\", but region {} in {} configures searches; add \"{search_method}\" = 100",
                    region.code, regions_src.name
                ),
            ));
        }
        let follow_method = crate::youtube::VIDEOS_BATCH_GET_STATS;
        if regions.follow.is_some() && budget.bucket_of(follow_method).is_none() {
            return Err(costs_src.error_at(
                None,
                format!(
                    "[costs] has no entry for \"{follow_method}\", but {} configures [follow]; add \"{follow_method}\" = 1",
                    regions_src.name
                ),
            ));
        }
        Ok(Config { budget, regions })
    }
}

#[cfg(test)]
mod tests;

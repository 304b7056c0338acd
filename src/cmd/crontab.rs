//! `trendsync crontab`: one crontab line per region at its offset minute.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::Ctx;
use super::load_config;
use crate::cli::{CrontabArgs, Global};
use crate::config::{ConfigDirs, Found, Origin, SYSTEM_DIR, Source};
use crate::db_files::DbFiles;
use crate::error::{MissingConfig, UsageError};

/// The minute and hour fields that run a job every `every`, at `offset` past the hour.
pub fn schedule(every: Duration, offset: u32) -> Result<String, UsageError> {
    let minutes = every.as_secs() / 60;
    if !every.as_secs().is_multiple_of(60) || minutes == 0 {
        return Err(UsageError(format!(
            "--every {} is not a whole number of minutes",
            crate::output::human::duration(every)
        )));
    }
    match minutes {
        m if m < 60 && 60u64.is_multiple_of(m) => {
            let first = u64::from(offset) % m;
            let list: Vec<String> = (0..60 / m).map(|k| (first + k * m).to_string()).collect();
            Ok(format!("{} *", list.join(",")))
        }
        60 => Ok(format!("{offset} *")),
        m if m.is_multiple_of(60) && m < 24 * 60 && (24u64 * 60).is_multiple_of(m) => {
            Ok(format!("{offset} */{}", m / 60))
        }
        m if m == 24 * 60 => Ok(format!("{offset} 0")),
        _ => Err(UsageError(format!(
            "--every {} does not divide an hour or a day evenly; use e.g. 15m, 30m, 1h, 2h, 3h, 6h, 12h or 1d",
            crate::output::human::duration(every)
        ))),
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir()
        .context("finding the current directory")?
        .join(path))
}

/// Quotes a word for /bin/sh.
fn sh(word: &Path) -> String {
    let text = word.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A command as crontab(5) must hold it: cron ends the command at an unescaped `%`
/// (the rest becomes its standard input) and turns `\%` into `%` before the shell
/// sees it, quotes or not.
fn cron_escape(command: &str) -> String {
    command.replace('%', r"\%")
}

/// Quotes a text word for /bin/sh.
fn sh_text(word: &str) -> String {
    sh(Path::new(word))
}

/// The line break or NUL in `text`, in words, if it holds one.
fn line_break(text: &str) -> Option<&'static str> {
    text.chars().find_map(|c| match c {
        '\n' => Some("a newline"),
        '\r' => Some("a carriage return"),
        '\0' => Some("a NUL byte"),
        _ => None,
    })
}

/// Refuses (78) a word for a cron line that holds a line break or NUL: cron reads one
/// line per job, so the job would end there and the rest would run as a job of its
/// own. `fix` says what to do instead.
fn refuse_line_break(what: &str, text: &str, fix: &str) -> Result<()> {
    match line_break(text) {
        None => Ok(()),
        Some(which) => Err(MissingConfig(format!(
            "{what} {text:?} holds {which}, and cron reads one line per job: the job would \
             end there and the rest run as a job of its own; {fix}"
        ))
        .into()),
    }
}

/// `path` (made absolute from `given`) quoted for a cron line, refused when it holds a
/// line break; when only the current directory put one there, that is what to change.
fn line_word(what: &str, given: &Path, path: &Path) -> Result<String> {
    let fix = if line_break(&given.display().to_string()).is_none() {
        format!(
            "the current directory's path holds it: run crontab from another directory, or give {what} as an absolute path"
        )
    } else {
        format!("give {what} a path without one")
    };
    refuse_line_break(what, &path.display().to_string(), &fix)?;
    Ok(sh(path))
}

/// `path` made absolute, refused when `what` needs it to exist and it does not: a
/// configuration problem (78), as `run` finds it, not a usage error.
fn existing(path: &Path, what: &str) -> Result<PathBuf> {
    let path = absolute(path)?;
    if !path.exists() {
        return Err(MissingConfig(format!(
            "{what} {} does not exist; the crontab would name it in every line",
            path.display()
        ))
        .into());
    }
    Ok(path)
}

/// Everything is checked and every line built before anything is printed, so that
/// `trendsync crontab ... | crontab -` with a mistake replaces no crontab with half
/// of one (the header alone would wipe the old one).
pub fn run(ctx: &Ctx<'_>, args: &CrontabArgs) -> Result<()> {
    let global = ctx.global;
    let config = load_config(ctx)?;
    let schedules = config
        .regions
        .regions
        .iter()
        .map(|r| schedule(args.every, r.offset).map(|when| (when, r.code.as_str())))
        .collect::<Result<Vec<_>, UsageError>>()?;
    let binary = binary_path(args.binary.as_deref())?;
    let db = absolute(&global.db)?;
    // The lines' directory and log are the database's, so checked with it.
    line_word("--db", &global.db, &db)?;
    let dir = db
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let config_dir = config_dir_variable()?;
    let fixed = fixed_command(ctx, &binary, &db, &dir, config_dir.as_deref())?;
    let mut text = header(global, args.every);
    if let Some(config_dir) = &config_dir {
        // cron starts the lines with none of this shell's variables: the lookup they
        // make must start where this one did.
        text.push_str(&format!(
            "# The lines look quota-costs.toml and regions.toml up from here first, as this shell did:\n\
             TRENDSYNC_CONFIG_DIR={}\n",
            config_dir.display()
        ));
    }
    text.push_str(&region_lines(&schedules, &dir, &fixed));
    text.push_str(&maintenance_lines(&schedules, args.every, &dir, &fixed));
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

/// The program the lines run: `--binary` made absolute, or this program.
fn binary_path(given: Option<&Path>) -> Result<PathBuf> {
    let Some(given) = given else {
        let p =
            std::env::current_exe().context("finding this program's path; pass --binary PATH")?;
        refuse_line_break(
            "this program's path",
            &p.display().to_string(),
            "install it under a path without one, or give --binary PATH",
        )?;
        return Ok(p);
    };
    let p = absolute(given)?;
    line_word("--binary", given, &p)?;
    // It may be meant for where the crontab is installed, not this host.
    if !p.is_file() {
        tracing::warn!(
            "--binary {} is not a file here; the lines will fail unless it exists where they run",
            p.display()
        );
    }
    Ok(p)
}

/// `$TRENDSYNC_CONFIG_DIR` made absolute, for a variable line of the crontab; an
/// error when cron could not be given it whole (a crontab variable is one line, and
/// cron strips quotes and spaces around it).
fn config_dir_variable() -> Result<Option<PathBuf>> {
    let Some(dir) = std::env::var_os("TRENDSYNC_CONFIG_DIR").filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    let dir = absolute(Path::new(&dir))?;
    let text = dir.display().to_string();
    let unsafe_char = |c: char| c.is_control() || c == '\'' || c == '"' || c == '%';
    if text.chars().any(unsafe_char) || text.trim() != text {
        return Err(MissingConfig(format!(
            "TRENDSYNC_CONFIG_DIR {text:?} cannot be written as a crontab variable (quotes, %, \
             control characters or spaces at its ends); move the files, or name them with --costs and --regions"
        ))
        .into());
    }
    Ok(Some(dir))
}

/// Whether the file the lookup found here is the one a cron line, started in `dir`
/// with only `config_dir` of this shell's variables, would find: cron has no
/// `XDG_CONFIG_HOME`, and its `HOME` may not be this shell's, so only
/// `$TRENDSYNC_CONFIG_DIR`, the line's directory and `/etc/trendsync` are counted on.
fn cron_finds_the_same(found: &Found, name: &str, dir: &Path, config_dir: Option<&Path>) -> bool {
    let mut dirs = Vec::with_capacity(3);
    if let Some(config_dir) = config_dir {
        dirs.push((config_dir.to_path_buf(), Source::ConfigDir));
    }
    dirs.push((dir.to_path_buf(), Source::CurrentDir));
    dirs.push((PathBuf::from(SYSTEM_DIR), Source::System));
    // Where cron could not tell, the line names the file.
    let Ok(cron) = ConfigDirs { dirs }.find(name) else {
        return false;
    };
    match (&found.origin, &cron.origin) {
        (Origin::BuiltIn, Origin::BuiltIn) => true,
        (Origin::Given(here), Origin::Given(there)) => {
            crate::config::same_text(here, there) == Some(true)
        }
        _ => false,
    }
}

/// The program and the global options every line shares, each path checked and made
/// absolute, since cron runs the lines from elsewhere. A configuration file the lines
/// would find by themselves (in `/etc/trendsync`, say) is not named: the lookup finds
/// it under cron as here. One they would not is named with its flag.
fn fixed_command(
    ctx: &Ctx<'_>,
    binary: &Path,
    db: &Path,
    dir: &Path,
    config_dir: Option<&Path>,
) -> Result<String> {
    let global = ctx.global;
    // Both checked by the caller.
    let mut fixed = format!("{} --db {}", sh(binary), sh(db));
    for (flag, given, found, name) in [
        (
            "--costs",
            &global.costs,
            ctx.config.costs()?,
            super::COSTS_FILE,
        ),
        (
            "--regions",
            &global.regions,
            ctx.config.regions()?,
            super::REGIONS_FILE,
        ),
    ] {
        let path = match (given, &found.origin) {
            (Some(p), _) => Some((p, existing(p, flag)?)),
            _ if cron_finds_the_same(found, name, dir, config_dir) => None,
            (None, Origin::Given(p)) => Some((p, absolute(p)?)),
            (None, Origin::BuiltIn) => {
                return Err(MissingConfig(format!(
                    "this shell reads the built-in {name}, but the lines, started in {}, would read another {name}; \
                     name the file to use with {flag}",
                    dir.display()
                ))
                .into());
            }
        };
        if let Some((given, p)) = path {
            fixed.push_str(&format!(" {flag} {}", line_word(flag, given, &p)?));
        }
    }
    if let Some(given) = &global.metrics_file {
        // As every line's run would refuse it (78).
        DbFiles::of(db).refuse_write(given, "--metrics-file")?;
        crate::atomic::check(given).context("--metrics-file")?;
        let p = absolute(given)?;
        if let Some(parent) = p.parent() {
            existing(parent, "the directory of --metrics-file")?;
        }
        fixed.push_str(&format!(
            " --metrics-file {}",
            line_word("--metrics-file", given, &p)?
        ));
    }
    if let Some(given) = &global.api_key_file {
        let p = existing(given, "--api-key-file")?;
        fixed.push_str(&format!(
            " --api-key-file {}",
            line_word("--api-key-file", given, &p)?
        ));
    }
    if global.api_base != crate::cli::DEFAULT_API_BASE {
        // As a run checks it (78): a base every line would pass on and every run
        // refuse. A URL parser drops line breaks; the line would not.
        crate::youtube::parse_api_base(&global.api_base)?;
        refuse_line_break(
            "--api-base",
            &global.api_base,
            "give --api-base without one",
        )?;
        // A base holding a key is left to the crontab's environment, as a Redis URL
        // is (see `header`): a crontab is often shared.
        if !super::key::api_base_holds_a_secret(global) {
            fixed.push_str(&format!(" --api-base {}", sh_text(&global.api_base)));
        }
    }
    Ok(fixed)
}

/// The comment lines above the jobs: what they do and what their environment needs.
fn header(global: &Global, every: Duration) -> String {
    let mut text = format!(
        "# trendsync: one line per region of regions.toml at its offset minute, every {}.\n",
        crate::output::human::duration(every)
    );
    if global.api_key_file.is_none() {
        text.push_str(
            "# Each run needs YOUTUBE_API_KEY in its environment (or add --api-key-file PATH).\n",
        );
    }
    if global.api_base != crate::cli::DEFAULT_API_BASE
        && super::key::api_base_holds_a_secret(global)
    {
        text.push_str(&format!(
            "# The runs need TRENDSYNC_API_BASE=... at the top of this crontab: --api-base {} is\n\
             # not printed here, as it holds what looks like a key.\n",
            super::key::shown_url(global, &global.api_base)
        ));
    }
    if global.redis_url.is_some() {
        // Never printed: the URL may hold a password, and a crontab is often shared.
        text.push_str(
            "# These runs share a budget in Redis: put TRENDSYNC_REDIS_URL=... at the top of this\n\
             # crontab (it is not printed here, as it may hold a password).\n",
        );
    } else {
        text.push_str(
            "# Add TRENDSYNC_REDIS_URL=... at the top when several hosts share one budget.\n",
        );
    }
    text.push_str(
        "# Each run appends its summary line to the log. Exit 75 means the run stopped cleanly\n\
         # (budget spent, upstream quota exhausted, region busy) and the next one resumes.\n",
    );
    text
}

/// One job line per region, run from the database's directory, logging beside it.
fn region_lines(schedules: &[(String, &str)], dir: &Path, fixed: &str) -> String {
    let log = dir.join("trendsync.log");
    let mut text = String::new();
    for (when, code) in schedules {
        let command = format!(
            "cd {} && {fixed} run --region {code} >> {} 2>&1",
            sh(dir),
            sh(&log)
        );
        text.push_str(&format!("{when} * * * {}\n", cron_escape(&command)));
    }
    text
}

/// The minutes past the hour at which `schedules` start a job.
fn minutes_used(schedules: &[(String, &str)]) -> Vec<u32> {
    schedules
        .iter()
        .filter_map(|(when, _)| when.split_whitespace().next())
        .flat_map(|minutes| minutes.split(','))
        .filter_map(|m| m.parse().ok())
        .collect()
}

/// `count` minutes past the hour that no line of `used` starts at, from :55 down
/// (the end of the hour, away from the offsets regions.toml usually starts with),
/// wrapping round; when every minute is taken, the least used ones.
fn free_minutes(used: &[u32], count: usize) -> Vec<u32> {
    let mut minutes: Vec<u32> = (0..60).map(|k| (55 + 60 - k) % 60).collect();
    // Stable: among minutes used as often, the order above stays.
    minutes.sort_by_key(|m| used.iter().filter(|u| *u == m).count());
    minutes.truncate(count);
    minutes
}

/// The backfill and prune lines, commented out, with their schedule (docs/commands.md):
/// a backfill four times a day of the regions not fetched completely for two of the
/// lines' periods, which may spend the reserve above the ceiling, and a prune every
/// night of what is older than a year, each at a minute no run line starts at, with the
/// same program, files and options as the run lines.
fn maintenance_lines(
    schedules: &[(String, &str)],
    every: Duration,
    dir: &Path,
    fixed: &str,
) -> String {
    let log = sh(&dir.join("trendsync.log"));
    let free = free_minutes(&minutes_used(schedules), 2);
    let (backfill_at, prune_at) = (free[0], free[1]);
    let stale_after = crate::output::human::duration(every.saturating_mul(2));
    let backfill = format!(
        "cd {} && {fixed} backfill --stale-after {stale_after} >> {log} 2>&1",
        sh(dir)
    );
    let prune = format!(
        "cd {} && {fixed} -q prune --older-than 365d >> {log} 2>&1",
        sh(dir)
    );
    format!(
        "# Backfill: the regions not fetched completely for {stale_after}, which may use the reserve\n\
         # above the ceiling, four times a day. Prune: what is older than a year, every night\n\
         # (-q: nothing in the log when all is well). Remove the leading # to use them.\n\
         #{backfill_at} */6 * * * {}\n\
         #{prune_at} 4 * * * {}\n",
        cron_escape(&backfill),
        cron_escape(&prune)
    )
}

#[cfg(test)]
mod tests;

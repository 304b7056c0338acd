//! Where a configuration file that no flag or variable names is looked for: the
//! configuration directories, in order, then the copy built into the binary. The same
//! lookup serves a shell, cron and systemd, so one `/etc/trendsync/` serves them all.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::{ConfigError, Origin};

/// The system-wide configuration directory, the last one searched.
pub(crate) const SYSTEM_DIR: &str = "/etc/trendsync";

/// Why a configuration file was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// `--costs` or `--regions` on the command line.
    Flag,
    /// `TRENDSYNC_COSTS` or `TRENDSYNC_REGIONS`.
    Variable,
    /// Found in `$TRENDSYNC_CONFIG_DIR`.
    ConfigDir,
    /// Found in the current directory.
    CurrentDir,
    /// Found in `$XDG_CONFIG_HOME/trendsync` (by default `~/.config/trendsync`).
    XdgConfigHome,
    /// Found in `/etc/trendsync`.
    System,
    /// Found nowhere: the copy built into the binary.
    BuiltIn,
}

impl Source {
    /// The word `config --json` gives.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Variable => "variable",
            Source::ConfigDir => "TRENDSYNC_CONFIG_DIR",
            Source::CurrentDir => "current directory",
            Source::XdgConfigHome => "XDG_CONFIG_HOME",
            Source::System => SYSTEM_DIR,
            Source::BuiltIn => "built-in",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The configuration directories, in the order they are searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigDirs {
    pub(crate) dirs: Vec<(PathBuf, Source)>,
}

/// A file the lookup chose, and the different file it hides, if any.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub(crate) origin: Origin,
    pub(crate) source: Source,
    /// The first file further down the list whose contents differ from the chosen
    /// one: what a process elsewhere (cron, systemd, another directory) may read.
    pub(crate) shadows: Option<(PathBuf, Source)>,
}

impl ConfigDirs {
    /// The directories as this process's environment names them:
    /// `$TRENDSYNC_CONFIG_DIR`, the current directory, `$XDG_CONFIG_HOME/trendsync`
    /// (`$HOME/.config/trendsync` when unset or not absolute, as the XDG base
    /// directory specification says), then `/etc/trendsync`.
    pub(crate) fn from_env() -> ConfigDirs {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        ConfigDirs::new(
            var("TRENDSYNC_CONFIG_DIR").map(PathBuf::from),
            var("XDG_CONFIG_HOME").map(PathBuf::from),
            var("HOME").map(PathBuf::from),
        )
    }

    /// The directories for the given variables' values.
    pub(crate) fn new(
        config_dir: Option<PathBuf>,
        xdg_config_home: Option<PathBuf>,
        home: Option<PathBuf>,
    ) -> ConfigDirs {
        let mut dirs = Vec::with_capacity(4);
        if let Some(dir) = config_dir {
            dirs.push((dir, Source::ConfigDir));
        }
        // The empty path: a file found here is named as the user would, `quota-costs.toml`.
        dirs.push((PathBuf::new(), Source::CurrentDir));
        let xdg = xdg_config_home
            .filter(|p| p.is_absolute())
            .or_else(|| home.map(|h| h.join(".config")));
        if let Some(xdg) = xdg {
            dirs.push((xdg.join("trendsync"), Source::XdgConfigHome));
        }
        dirs.push((PathBuf::from(SYSTEM_DIR), Source::System));
        ConfigDirs { dirs }
    }

    /// The first `name` found in the directories, else the built-in copy. Anything
    /// under that name counts, a regular file or not (a directory, a FIFO): reading it
    /// then fails and says so, where skipping it would quietly use another file.
    ///
    /// The lookup never falls back in silence (docs/commands.md, "Configuration
    /// files"): a directory searched before the file is found that exists but cannot
    /// be searched, a `$TRENDSYNC_CONFIG_DIR` that does not exist, and a symbolic link
    /// to nowhere are each an error naming it, where skipping them would quietly read
    /// the next file, or the built-in one.
    pub(crate) fn find(&self, name: &str) -> Result<Found, ConfigError> {
        let mut rest = self.dirs.iter();
        let mut chosen = None;
        for (dir, source) in rest.by_ref() {
            if let Some(path) = probe(dir, *source, name)? {
                chosen = Some((path, *source));
                break;
            }
        }
        let Some((path, source)) = chosen else {
            return Ok(Found {
                origin: Origin::BuiltIn,
                source: Source::BuiltIn,
                shadows: None,
            });
        };
        // Below the file found, nothing falls back: a directory that cannot be
        // searched there only leaves nothing to compare with.
        let shadows = rest
            .map(|(dir, source)| (dir.join(name), *source))
            .filter(|(other, _)| other.symlink_metadata().is_ok())
            .find(|(other, _)| differ(&path, other));
        Ok(Found {
            origin: Origin::Given(path),
            source,
            shadows,
        })
    }
}

/// `name` in `dir` when something is there; `None` when the directory does not have
/// it (or, but for `$TRENDSYNC_CONFIG_DIR`, does not exist); an error when there is no
/// telling, or what is there points nowhere.
fn probe(dir: &Path, source: Source, name: &str) -> Result<Option<PathBuf>, ConfigError> {
    let path = dir.join(name);
    // The current directory is the empty path, which `metadata` does not take.
    let dir_shown = shown(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    });
    let flag = if name == COSTS_FILE {
        "--costs"
    } else {
        "--regions"
    };
    let unsearchable = |e: &std::io::Error| ConfigError {
        file: dir_shown.clone(),
        position: None,
        message: format!(
            "the configuration directory ({}) cannot be searched for {name}: {e}; a {name} there would be skipped and another file used in its place. Give this user search (x) permission on the directory and its parents, or name the file with {flag}",
            where_found(source)
        ),
    };
    match path.symlink_metadata() {
        Ok(meta) => {
            if meta.file_type().is_symlink()
                && let Err(e) = std::fs::metadata(&path)
                && e.kind() == std::io::ErrorKind::NotFound
            {
                let target = std::fs::read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "a path that cannot be read".to_owned());
                return Err(ConfigError {
                    file: shown(&path),
                    position: None,
                    message: format!(
                        "found in {}: a symbolic link to {target}, which does not exist; point the link at an existing file, or remove it so that the next {name} found, or the built-in one, is used",
                        where_found(source)
                    ),
                });
            }
            Ok(Some(path))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::fs::metadata(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            }) {
                Ok(_) => Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if source == Source::ConfigDir {
                        Err(ConfigError {
                            file: dir_shown,
                            position: None,
                            message: "TRENDSYNC_CONFIG_DIR names this directory, which does not exist; create it, correct the variable, or unset it".to_owned(),
                        })
                    } else {
                        Ok(None)
                    }
                }
                Err(e) => Err(unsearchable(&e)),
            }
        }
        // No permission to search it, a file where a directory should be, a loop of
        // links: a file there cannot be ruled out.
        Err(e) => Err(unsearchable(&e)),
    }
}

/// Whether two files hold different text: the same file reached twice (a symbolic
/// link, the current directory being `/etc/trendsync`) or a copy hides nothing.
fn differ(a: &Path, b: &Path) -> bool {
    // One cannot be read: the command that reads it says why; nothing to compare.
    same_text(a, b) == Some(false)
}

/// Whether the files at `a` and `b` hold the same bytes; `None` when either is not a
/// regular file or cannot be read.
pub(crate) fn same_text(a: &Path, b: &Path) -> Option<bool> {
    // Only regular files are read: a FIFO would wait for a writer for ever.
    let regular = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    if !(regular(a) && regular(b)) {
        return None;
    }
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(a), Ok(b)) => Some(a == b),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

/// The costs file's name in the configuration directories.
pub(crate) const COSTS_FILE: &str = "quota-costs.toml";
/// The regions file's name in the configuration directories.
pub(crate) const REGIONS_FILE: &str = "regions.toml";

/// The configuration files of one command: each looked up once, when first asked for,
/// and the same answer every time after, so that a command names the file it loaded,
/// even if one appears meanwhile, and warns once about a file it hides.
#[derive(Debug)]
pub(crate) struct Lookup {
    costs: Wanted,
    regions: Wanted,
}

/// Whether a command names a file that hides a different one (docs/commands.md,
/// "Configuration files"): `config`, the dry run and the commands that charge do;
/// the readers, run from a shell or a dashboard many times a day, do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shadowing {
    Warn,
    Quiet,
}

/// One file of the lookup: what was given for it, and the answer once found.
#[derive(Debug)]
struct Wanted {
    name: &'static str,
    /// The flag that names the file, for the warning's advice.
    flag: &'static str,
    /// The variable that names the file.
    variable: &'static str,
    given: Option<PathBuf>,
    shadowing: Shadowing,
    found: OnceLock<Result<Found, ConfigError>>,
}

impl Lookup {
    /// The lookup for `--costs` and `--regions` as given (from the flag or its
    /// variable); the directories are searched only for a file not given.
    pub(crate) fn new(
        costs: Option<&Path>,
        regions: Option<&Path>,
        shadowing: Shadowing,
    ) -> Lookup {
        let wanted = |name, flag, variable, given: Option<&Path>| Wanted {
            name,
            flag,
            variable,
            given: given.map(Path::to_path_buf),
            shadowing,
            found: OnceLock::new(),
        };
        Lookup {
            costs: wanted(COSTS_FILE, "--costs", "TRENDSYNC_COSTS", costs),
            regions: wanted(REGIONS_FILE, "--regions", "TRENDSYNC_REGIONS", regions),
        }
    }

    /// The `quota-costs.toml` this command reads, and why; an error (78) when the
    /// lookup cannot tell.
    pub(crate) fn costs(&self) -> Result<&Found, ConfigError> {
        self.costs.found()
    }

    /// The `regions.toml` this command reads, and why; an error (78) when the lookup
    /// cannot tell.
    pub(crate) fn regions(&self) -> Result<&Found, ConfigError> {
        self.regions.found()
    }
}

impl Wanted {
    fn found(&self) -> Result<&Found, ConfigError> {
        self.found
            .get_or_init(|| self.resolve())
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The file a flag or variable names, else the first one the configuration
    /// directories hold, else the built-in copy. A file found that hides a different
    /// one further down the directories is named in a warning: a process started
    /// elsewhere (cron, systemd, another directory) would read the other one.
    fn resolve(&self) -> Result<Found, ConfigError> {
        if let Some(path) = &self.given {
            let from_variable =
                std::env::var_os(self.variable).is_some_and(|v| Path::new(&v) == path);
            return Ok(Found {
                origin: Origin::Given(path.clone()),
                source: if from_variable {
                    Source::Variable
                } else {
                    Source::Flag
                },
                shadows: None,
            });
        }
        let found = ConfigDirs::from_env().find(self.name)?;
        if let (Origin::Given(path), Some((other, other_source))) = (&found.origin, &found.shadows)
            && self.shadowing == Shadowing::Warn
            && first_time(self.name)
        {
            tracing::warn!(
                "{}: reading {} (found in {}), which hides a different {} (in {}); a process started in another directory or with other variables, as cron and systemd are, may read that one instead. Keep one of them, or name the file with {}",
                self.name,
                shown(path),
                where_found(found.source),
                shown(other),
                where_found(*other_source),
                self.flag
            );
        }
        Ok(found)
    }
}

/// Whether this process has not yet warned about the file called `name`: once per
/// process, however many lookups a command builds.
fn first_time(name: &'static str) -> bool {
    static SAID: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    // A poisoned lock only means another thread panicked mid-push; the list is whole.
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if said.contains(&name) {
        return false;
    }
    said.push(name);
    true
}

/// Where a configuration directory is, in words.
fn where_found(source: Source) -> &'static str {
    match source {
        Source::ConfigDir => "$TRENDSYNC_CONFIG_DIR",
        Source::CurrentDir => "the current directory",
        Source::XdgConfigHome => "$XDG_CONFIG_HOME/trendsync",
        Source::System => SYSTEM_DIR,
        Source::Flag | Source::Variable | Source::BuiltIn => "the place it was given",
    }
}

/// A path made absolute for a message, so that it names one file wherever it is read.
pub(crate) fn shown(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

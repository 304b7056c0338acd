//! Where a configuration file that no flag or variable names is looked for: the
//! configuration directories, in order, then the copy built into the binary. The same
//! lookup serves a shell, cron and systemd, so one `/etc/trendsync/` serves them all.

use std::fmt;
use std::path::{Path, PathBuf};

use super::Origin;

/// The system-wide configuration directory, the last one searched.
pub const SYSTEM_DIR: &str = "/etc/trendsync";

/// Why a configuration file was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
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
    pub fn as_str(self) -> &'static str {
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
pub struct ConfigDirs {
    pub dirs: Vec<(PathBuf, Source)>,
}

/// A file the lookup chose, and the different file it hides, if any.
#[derive(Debug, Clone)]
pub struct Found {
    pub origin: Origin,
    pub source: Source,
    /// The first file further down the list whose contents differ from the chosen
    /// one: what a process elsewhere (cron, systemd, another directory) may read.
    pub shadows: Option<(PathBuf, Source)>,
}

impl ConfigDirs {
    /// The directories as this process's environment names them:
    /// `$TRENDSYNC_CONFIG_DIR`, the current directory, `$XDG_CONFIG_HOME/trendsync`
    /// (`$HOME/.config/trendsync` when unset or not absolute, as the XDG base
    /// directory specification says), then `/etc/trendsync`.
    pub fn from_env() -> ConfigDirs {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        ConfigDirs::new(
            var("TRENDSYNC_CONFIG_DIR").map(PathBuf::from),
            var("XDG_CONFIG_HOME").map(PathBuf::from),
            var("HOME").map(PathBuf::from),
        )
    }

    /// The directories for the given variables' values.
    pub fn new(
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
    /// under that name counts, a regular file or not (a directory, a FIFO, a link to
    /// nowhere): reading it then fails and says so, where skipping it would quietly
    /// use another file.
    pub fn find(&self, name: &str) -> Found {
        let mut present = self
            .dirs
            .iter()
            .map(|(dir, source)| (dir.join(name), *source))
            .filter(|(path, _)| path.symlink_metadata().is_ok());
        let Some((path, source)) = present.next() else {
            return Found {
                origin: Origin::BuiltIn,
                source: Source::BuiltIn,
                shadows: None,
            };
        };
        let shadows = present.find(|(other, _)| differ(&path, other));
        Found {
            origin: Origin::Given(path),
            source,
            shadows,
        }
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

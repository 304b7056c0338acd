//! Files that others read (`export --output`, `--metrics-file`), written atomically: a
//! temporary file in the same directory (so the rename cannot cross file systems),
//! synced, renamed over the path. A reader sees the old file or the new one, never
//! half of one, and a failed write leaves the old one.
//!
//! Only a new file or a regular file is replaced, keeping its mode: renaming over a
//! FIFO leaves its reader hanging, over a symbolic link replaces the link instead of
//! writing where it points, over a device destroys the device node. Anything but a
//! regular file is refused, saying what it is.
//!
//! Temporary files are named after the file and the process that writes them, so each
//! write removes those that a process killed mid-write (`kill -9`, a second signal)
//! left beside it.
//!
//! Nothing is written over the database or its companions ([`DbFiles`]), whatever
//! name the path gives them; a file of theirs that only looks like a temporary file is
//! never tidied away either.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::db_files::{DbFiles, Overwrite};

/// Writing a file atomically failed, or was refused.
#[derive(Debug, thiserror::Error)]
pub enum AtomicError {
    #[error("{} names no file", .0.display())]
    NoFileName(PathBuf),
    /// Something that is not a regular file is at the path (exit 78).
    #[error(
        "{} is {what}, not a regular file; only a regular file is replaced (give the path of a file, or remove what is there)",
        .path.display()
    )]
    NotAFile { path: PathBuf, what: &'static str },
    /// The path is the database or one of its companions (exit 78).
    #[error(transparent)]
    Overwrite(#[from] Overwrite),
    #[error("{doing} {}", .path.display())]
    Io {
        doing: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// What a write would find at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Nothing yet: the file is created.
    New,
    /// A regular file, replaced with its permission bits kept.
    Regular { mode: u32 },
}

/// What is at `path`: nothing, or a regular file. Anything else is refused, saying
/// what it is; a symbolic link is refused even when it points at a regular file.
pub fn check(path: &Path) -> Result<Target, AtomicError> {
    if path.file_name().is_none() {
        return Err(AtomicError::NoFileName(path.to_path_buf()));
    }
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Target::New),
        Err(source) => {
            return Err(AtomicError::Io {
                doing: "looking at",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(Target::Regular {
            mode: mode_of(&meta),
        });
    }
    Err(AtomicError::NotAFile {
        path: path.to_path_buf(),
        what: describe(kind),
    })
}

/// Writes `path` through `fill`, atomically (see the module). A new file gets
/// `new_mode` when given (else the mode the umask makes); a regular file keeps its
/// own. On any error, `fill`'s included, the temporary file is removed and the old
/// file stays. `what` names the path in messages (`--output`); a path that is one of
/// `protected`'s files is refused.
pub fn write<E>(
    path: &Path,
    what: &str,
    protected: &DbFiles,
    new_mode: Option<u32>,
    fill: impl FnOnce(&mut File) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<AtomicError>,
{
    protected
        .refuse_write(path, what)
        .map_err(AtomicError::from)?;
    let target = check(path)?;
    let name = path
        .file_name()
        .ok_or_else(|| AtomicError::NoFileName(path.to_path_buf()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = dir.join(temp_name(name, std::process::id(), rand::random::<u32>()));
    protected
        .refuse_write(&tmp, &format!("the temporary file of {what}"))
        .map_err(AtomicError::from)?;
    let io_err = |doing: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| AtomicError::Io {
            doing,
            path,
            source,
        }
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io_err("creating", &tmp))?;
    // The file system's own stamp on the file just made is "now" for the ages of the
    // others beside it: the same clock stamped them, and no clock is read here.
    remove_stale_temps(
        dir,
        name,
        file.metadata().and_then(|m| m.modified()).ok(),
        protected,
    );
    let written = (|| {
        let mode = match target {
            Target::Regular { mode } => Some(mode),
            Target::New => new_mode,
        };
        // The umask decides the mode a file is created with; a reader running as
        // another user (the textfile collector) must keep the access it had.
        #[cfg(unix)]
        if let Some(mode) = mode {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(fs::Permissions::from_mode(mode))
                .map_err(io_err("setting the mode of", &tmp))?;
        }
        fill(&mut file)?;
        // Without it, a crash after the rename may leave an empty file in its place.
        file.sync_all().map_err(io_err("syncing", &tmp))?;
        // What is at the path may have changed since it was checked.
        protected
            .refuse_write(path, what)
            .map_err(AtomicError::from)?;
        check(path)?;
        fs::rename(&tmp, path).map_err(io_err("renaming the new file over", path))?;
        Ok(())
    })();
    drop(file);
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
        return written;
    }
    // Makes the rename itself durable; the file is already complete either way, so a
    // directory that cannot be synced is no reason to fail.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// `.NAME.PID-RANDOM.tmp`: a leading dot and no `.prom` or `.csv` ending, so neither
/// the textfile collector (it reads `*.prom`) nor a glob for exports picks it up; the
/// process id says whether its writer still lives.
fn temp_name(name: &OsStr, pid: u32, random: u32) -> OsString {
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{pid}-{random:08x}.tmp"));
    tmp
}

/// The process id in a temporary file name of `name`'s, if it is one.
fn temp_pid(candidate: &OsStr, name: &OsStr) -> Option<u32> {
    let candidate = candidate.to_str()?;
    let rest = candidate
        .strip_prefix('.')?
        .strip_prefix(name.to_str()?)?
        .strip_prefix('.')?
        .strip_suffix(".tmp")?;
    let (pid, random) = rest.split_once('-')?;
    (random.len() == 8 && random.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())?;
    pid.parse().ok()
}

/// A writer this old has been gone a long time, whatever its process id says now.
const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Removes the temporary files of `name` whose writer is gone: its process no longer
/// runs (Linux, where `/proc` says), or the file has not changed for a day before
/// `now` (by the file system's stamps; none, and age is not looked at). The database
/// and its companions are never removed, whatever their names.
/// Best effort: a file that cannot be removed stays for the next write.
fn remove_stale_temps(dir: &Path, name: &OsStr, now: Option<SystemTime>, protected: &DbFiles) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let proc = Path::new("/proc/self").exists();
    for entry in entries.flatten() {
        let Some(pid) = temp_pid(&entry.file_name(), name) else {
            continue;
        };
        if protected.refuse_write(&entry.path(), "").is_err() {
            continue;
        }
        let writer_gone = proc && !Path::new("/proc").join(pid.to_string()).exists();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .zip(now)
            .and_then(|(changed, now)| now.duration_since(changed).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if writer_gone || old {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[cfg(unix)]
fn mode_of(meta: &fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(_meta: &fs::Metadata) -> u32 {
    0o644
}

/// What a file type is, in words.
pub(crate) fn describe(kind: fs::FileType) -> &'static str {
    if kind.is_dir() {
        return "a directory";
    }
    if kind.is_symlink() {
        return "a symbolic link";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

#[cfg(test)]
mod tests;

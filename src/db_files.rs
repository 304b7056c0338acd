//! The database's files as one identity, so that nothing trendsync writes (an export,
//! the metrics file, a lock, a temporary file) ever lands on them: the database itself
//! and the `-wal`, `-shm` and `-journal` files SQLite keeps beside it. Writing over one
//! of them destroys the data or corrupts the file, and nothing at the time says so.
//!
//! A path names one of them when it resolves to the same name (through symbolic links
//! and `..`; the path need not exist yet, as a `-wal` often does not) or, for a file
//! that exists, is the same file on disk (a hard link). SQLite keeps the companions
//! beside the file a symbolic link points to, so the names are those of the link's
//! target.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// The companions SQLite keeps beside a database, after the database itself.
const COMPANIONS: [(&str, Part); 3] = [
    ("-wal", Part::Wal),
    ("-shm", Part::Shm),
    ("-journal", Part::Journal),
];

/// How many symbolic links are followed before giving up, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// One of the database's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Db,
    Wal,
    Shm,
    Journal,
}

impl Part {
    fn describe(self) -> &'static str {
        match self {
            Part::Db => "the database itself",
            Part::Wal => "the database's write-ahead log (-wal)",
            Part::Shm => "the database's shared-memory index (-shm)",
            Part::Journal => "the database's rollback journal (-journal)",
        }
    }
}

/// Which file on disk a path is: device and inode.
type FileId = (u64, u64);

/// One of the database's files: its resolved name, and which file it is on disk when
/// it exists.
#[derive(Debug, Clone)]
struct Member {
    part: Part,
    name: PathBuf,
    id: Option<FileId>,
}

/// The identity of the database at a path: the names of its four files, resolved,
/// and the files themselves as they exist when it is taken.
#[derive(Debug, Clone)]
pub struct DbFiles {
    /// `--db` as given, for messages.
    given: PathBuf,
    /// The database first, then its companions.
    members: [Member; 4],
}

impl DbFiles {
    /// The identity of the database at `db`: looked at (stat, symbolic links read,
    /// directories resolved), never opened or created.
    pub fn of(db: &Path) -> DbFiles {
        let name = resolve(db);
        let member = |part: Part, name: PathBuf| Member {
            part,
            id: file_id(&name),
            name,
        };
        let companion = |(suffix, part): (&str, Part)| {
            let mut companion = name.clone().into_os_string();
            companion.push(suffix);
            member(part, PathBuf::from(companion))
        };
        let [wal, shm, journal] = COMPANIONS.map(companion);
        DbFiles {
            given: db.to_path_buf(),
            members: [member(Part::Db, name.clone()), wal, shm, journal],
        }
    }

    /// The database's path as it was given.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// The database's one name: symbolic links (to a file not there yet, too) and
    /// other spellings (`./`, `..`) resolved, as far as the directories exist.
    pub fn canonical(&self) -> &Path {
        &self.members[0].name
    }

    /// The directory SQLite creates the database and its companions in: the resolved
    /// name's.
    pub fn directory(&self) -> &Path {
        self.canonical().parent().unwrap_or(Path::new("/"))
    }

    /// Refuses `target` when writing it would write over the database or one of its
    /// companions; `what` names it for the message (`--output`, "the lock file of
    /// region US"). Looks only, as [`DbFiles::of`] does.
    pub fn refuse_write(&self, target: &Path, what: &str) -> Result<(), Overwrite> {
        let name = resolve(target);
        let id = file_id(target);
        let hit = self
            .members
            .iter()
            .find(|m| m.name == name)
            .map(|m| (m, false))
            .or_else(|| {
                id.and_then(|id| self.members.iter().find(|m| m.id == Some(id)))
                    .map(|m| (m, true))
            });
        let Some((member, hard_link)) = hit else {
            return Ok(());
        };
        let link = if hard_link {
            Link::Hard
        } else if fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_symlink()) {
            Link::Symbolic
        } else {
            Link::None
        };
        Err(Overwrite {
            what: what.to_owned(),
            target: target.to_path_buf(),
            part: member.part,
            link,
            db: self.canonical().to_path_buf(),
        })
    }
}

/// How a refused path reaches the database's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// By its name (`..` and the like resolved).
    None,
    /// Through a symbolic link.
    Symbolic,
    /// Another name of the same file on disk.
    Hard,
}

/// Writing a path was refused: it is the database or one of its companions (exit 78).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overwrite {
    what: String,
    target: PathBuf,
    part: Part,
    link: Link,
    db: PathBuf,
}

impl Overwrite {
    /// Which of the database's files the path is.
    #[cfg(test)]
    pub fn part(&self) -> Part {
        self.part
    }
}

impl fmt::Display for Overwrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self.link {
            Link::None => "",
            Link::Symbolic => ", through a symbolic link",
            Link::Hard => ", under another name (a hard link)",
        };
        let fix = match self.link {
            Link::None => "choose another path",
            Link::Symbolic | Link::Hard => "remove that link, or choose another path",
        };
        write!(
            f,
            "{} {} is {}{how} (--db {}); writing it would damage the database: {fix}",
            self.what,
            self.target.display(),
            self.part.describe(),
            self.db.display()
        )
    }
}

impl std::error::Error for Overwrite {}

/// `path` resolved as far as it exists: the whole path when it does, else the symbolic
/// links of its last part followed and its directory resolved, the file name kept. A
/// directory that does not exist leaves the path made absolute as written.
pub fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = fs::canonicalize(path) {
        return real;
    }
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let Ok(to) = fs::read_link(&path) else {
            break;
        };
        // A relative target is read from the link's directory; an absolute one
        // replaces the path.
        path = match path.parent() {
            Some(dir) => dir.join(to),
            None => to,
        };
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    match (fs::canonicalize(dir), path.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => std::path::absolute(&path).unwrap_or(path),
    }
}

/// The file on disk at `path` (through symbolic links), when there is one.
fn file_id(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

#[cfg(test)]
mod tests;

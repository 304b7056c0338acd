//! Unit tests of `config/lookup.rs`.

use super::*;

fn dirs(root: &Path, names: &[(&str, Source)]) -> ConfigDirs {
    ConfigDirs {
        dirs: names
            .iter()
            .map(|(name, source)| {
                let dir = root.join(name);
                std::fs::create_dir_all(&dir).expect("a directory");
                (dir, *source)
            })
            .collect(),
    }
}

#[test]
fn the_directories_come_in_the_documented_order() {
    let found = ConfigDirs::new(
        Some(PathBuf::from("/c")),
        Some(PathBuf::from("/x")),
        Some(PathBuf::from("/h")),
    );
    let sources: Vec<(String, Source)> = found
        .dirs
        .iter()
        .map(|(p, s)| (p.display().to_string(), *s))
        .collect();
    assert_eq!(
        sources,
        [
            ("/c".to_owned(), Source::ConfigDir),
            (String::new(), Source::CurrentDir),
            ("/x/trendsync".to_owned(), Source::XdgConfigHome),
            ("/etc/trendsync".to_owned(), Source::System),
        ]
    );
}

#[test]
fn xdg_config_home_defaults_to_home_and_must_be_absolute() {
    let relative = ConfigDirs::new(None, Some(PathBuf::from("rel")), Some(PathBuf::from("/h")));
    assert_eq!(
        relative.dirs[1],
        (PathBuf::from("/h/.config/trendsync"), Source::XdgConfigHome)
    );
    let neither = ConfigDirs::new(None, None, None);
    assert_eq!(neither.dirs.len(), 2, "{neither:?}");
}

#[test]
fn the_first_file_found_wins_and_names_a_different_one_below() {
    let root = tempfile::tempdir().expect("a temp dir");
    let lookup = dirs(
        root.path(),
        &[
            ("a", Source::ConfigDir),
            ("b", Source::CurrentDir),
            ("c", Source::System),
        ],
    );
    let found = lookup.find("quota-costs.toml").expect("a lookup");
    assert_eq!(found.origin, Origin::BuiltIn);
    assert_eq!(found.source, Source::BuiltIn);

    std::fs::write(root.path().join("c/quota-costs.toml"), "x").expect("write");
    let found = lookup.find("quota-costs.toml").expect("a lookup");
    assert_eq!(found.source, Source::System);
    assert!(found.shadows.is_none());

    // A copy hides nothing.
    std::fs::write(root.path().join("b/quota-costs.toml"), "x").expect("write");
    let found = lookup.find("quota-costs.toml").expect("a lookup");
    assert_eq!(found.source, Source::CurrentDir);
    assert!(found.shadows.is_none(), "{found:?}");

    std::fs::write(root.path().join("a/quota-costs.toml"), "y").expect("write");
    let found = lookup.find("quota-costs.toml").expect("a lookup");
    assert_eq!(
        found.origin,
        Origin::Given(root.path().join("a/quota-costs.toml"))
    );
    assert_eq!(
        found.shadows,
        Some((root.path().join("b/quota-costs.toml"), Source::CurrentDir))
    );
}

//! The layers of `src/`, as `docs/architecture.md` maps them, checked on every test
//! run. Each top-level module of the crate is one room: a file, or a folder with every
//! file in it. Each room has a rank in [`LAYERS`], and every path from one room into
//! another must point to a lower rank. Two rooms of the same rank never reach each
//! other, so a cycle between rooms, closed through a `mod.rs` or any other file, can't
//! pass: one of its edges points up or sideways.
//!
//! The source is read with a Rust parser (`syn`): every `use` tree and every path
//! (`crate::…`, `super::…`, `self::…`) outside `#[cfg(test)]` code, and the
//! `crate::`/`super::` paths inside macro arguments. Comments and strings are not code,
//! so they name nothing. The crate is one package, so this test stands in for the crate
//! boundaries a workspace would draw (the architecture map says why).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The rooms of `src/`, lowest layer first. A room may use only rooms of the layers
/// before its own. `docs/architecture.md` says what each is for.
const LAYERS: &[&[&str]] = &[
    &["error", "clock", "mask", "db_files"],
    &["atomic", "sqlite", "region_status", "video", "output"],
    &["logging"],
    &["quota", "youtube", "store"],
    &["schema", "config", "dataset"],
    &["runner"],
    &["reports"],
    &["cli"],
    &["cmd"],
];

#[test]
fn every_import_between_rooms_points_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = check(&src, LAYERS);
    assert!(
        problems.is_empty(),
        "the layering of src/ is broken (see docs/architecture.md):\n  {}",
        problems.join("\n  ")
    );
}

/// The issue that asked for this check named the mutation it must catch: the leaf that
/// names the statuses importing the store, which imports it back. Made on a copy of the
/// real tree, so the test goes on catching it whatever the tree becomes.
/// The map in `docs/architecture.md` is this table: the same rooms in the same
/// layers, so that what a reader is told is what the check enforces.
#[test]
fn the_map_in_the_docs_is_the_table_the_check_enforces() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .expect("docs/architecture.md");
    assert_eq!(
        documented_layers(&doc),
        LAYERS,
        "docs/architecture.md's table"
    );
    // The reading itself: a room moved in the text is a difference.
    let moved = doc.replacen("| 2 | `logging` |", "| 2 | `logging`, `mask` |", 1);
    assert_ne!(documented_layers(&moved), LAYERS);
}

/// The layers of the map's table (`| 3 | \`quota\`, \`store\` | ...`), lowest first.
fn documented_layers(doc: &str) -> Vec<Vec<String>> {
    let mut rows: Vec<(usize, Vec<String>)> = doc
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix("| ")?.split(" | ");
            let rank: usize = cells.next()?.trim().parse().ok()?;
            let rooms = cells
                .next()?
                .split(", ")
                .map(|r| r.trim().trim_matches('`').to_owned())
                .collect();
            Some((rank, rooms))
        })
        .collect();
    rows.sort_by_key(|(rank, _)| *rank);
    rows.into_iter().map(|(_, rooms)| rooms).collect()
}

#[test]
fn a_cycle_closed_through_a_folders_mod_rs_is_caught() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let copy = tempfile::tempdir().expect("a temp dir");
    copy_tree(&src, copy.path());
    let leaf = copy.path().join("region_status.rs");
    let text = std::fs::read_to_string(&leaf).expect("reading region_status.rs");
    std::fs::write(
        &leaf,
        format!("{text}\n#[allow(unused_imports)]\nuse crate::store::Store;\n"),
    )
    .expect("writing the mutated copy");
    let problems = check(copy.path(), LAYERS);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("region_status") && p.contains("-> store")),
        "the region_status -> store import went unseen: {problems:?}"
    );
}

/// The check itself, on a small tree: an upward path through a folder's `mod.rs`, a
/// sideways one in a macro's argument, and one through `super::` are seen; comments,
/// strings and test code are not imports; a room missing from the table, and a room
/// of the table missing from the tree, are named.
#[test]
fn the_check_sees_real_imports_and_only_those() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(path, text).expect("writing a source file");
    };
    write(
        "lib.rs",
        "pub mod base;\npub mod left;\npub mod right;\npub mod extra;\n",
    );
    write(
        "base.rs",
        "// crate::left::Ignored in a comment\n\
         const S: &str = \"crate::right::Ignored in a string\";\n\
         #[cfg(test)]\nmod tests { use crate::left::Ignored; }\n\
         #[cfg(test)]\nmod more;\n",
    );
    write("base/more.rs", "use crate::right::AlsoIgnored;\n");
    write(
        "left/mod.rs",
        "mod inner;\nuse crate::base::Thing;\npub struct L;\n",
    );
    write(
        "left/inner.rs",
        "use super::L;\nfn f() { list![crate::right::R]; }\n",
    );
    write(
        "right/mod.rs",
        "pub struct R;\nfn g() -> super::base::Thing { todo!() }\n",
    );
    write("extra.rs", "use crate::base::{self, Thing as T};\n");
    let layers: &[&[&str]] = &[&["base", "gone"], &["left", "right"]];
    assert_eq!(
        check(src, layers),
        vec![
            "gone is in LAYERS but not in src/: take it out of tests/layering.rs and docs/architecture.md",
            "extra is in no layer: add it to LAYERS in tests/layering.rs and to docs/architecture.md",
            "left -> right (left/inner.rs: crate::right::R): right is not below left",
        ]
    );
}

/// Every import between rooms that does not point down `layers`, and every room of
/// `src` that is in no layer.
fn check(src: &Path, layers: &[&[&str]]) -> Vec<String> {
    let rank = |room: &str| layers.iter().position(|layer| layer.contains(&room));
    let files = read_tree(src);
    let mut problems = Vec::new();
    let rooms: BTreeSet<&str> = files
        .iter()
        .filter_map(|f| f.module.first())
        .map(String::as_str)
        .collect();
    for room in layers.iter().flat_map(|layer| layer.iter()) {
        if !rooms.contains(room) {
            problems.push(format!(
                "{room} is in LAYERS but not in src/: take it out of tests/layering.rs and docs/architecture.md"
            ));
        }
    }
    for room in &rooms {
        if rank(room).is_none() {
            problems.push(format!(
                "{room} is in no layer: add it to LAYERS in tests/layering.rs and to docs/architecture.md"
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for file in &files {
        let Some(from) = file.module.first() else {
            continue;
        };
        for (inline, path) in &file.paths {
            let at: Vec<String> = file.module.iter().chain(inline).cloned().collect();
            let Some(to) = room_of(&at, path) else {
                continue;
            };
            if to == *from || !rooms.contains(to.as_str()) {
                continue;
            }
            let (Some(high), Some(low)) = (rank(from), rank(&to)) else {
                continue;
            };
            if low < high || !seen.insert((from.clone(), to.clone())) {
                continue;
            }
            problems.push(format!(
                "{from} -> {to} ({}: {}): {to} is not below {from}",
                file.name,
                path.join("::")
            ));
        }
    }
    problems
}

/// The room a path from the module `at` leads into, if it names a module of this
/// crate: `crate::x::…` and `super::`/`self::` paths that climb to the root name the
/// room `x`; any other path stays in `at`'s room or leaves the crate.
fn room_of(at: &[String], path: &[String]) -> Option<String> {
    let first = path.first()?;
    let mut absolute: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "super" | "self" => at.to_vec(),
        _ => return at.first().cloned(),
    };
    let mut rest = path.iter().skip(usize::from(first == "crate")).peekable();
    while let Some(step) = rest.next_if(|s| *s == "super" || *s == "self") {
        if step == "super" {
            absolute.pop();
        }
    }
    absolute.extend(rest.cloned());
    absolute.into_iter().next()
}

/// One source file of the library, outside test code.
struct File {
    /// Its path under `src/`, for messages.
    name: String,
    /// Its module: `["quota", "journal"]` for `quota/journal.rs`, `[]` for `lib.rs`.
    module: Vec<String>,
    /// Every path its code names, each with the inline modules it stands in.
    paths: Vec<(Vec<String>, Vec<String>)>,
}

/// Every `.rs` file under `src` but `main.rs` (the binary, which reaches the library
/// only by its crate name) and the files declared `#[cfg(test)] mod …;`.
fn read_tree(src: &Path) -> Vec<File> {
    let mut found = Vec::new();
    walk(src, &mut found);
    found.sort();
    let mut files = Vec::new();
    let mut test_modules: Vec<Vec<String>> = Vec::new();
    for path in found {
        let name = path
            .strip_prefix(src)
            .expect("under src/")
            .to_string_lossy()
            .replace('\\', "/");
        if name == "main.rs" {
            continue;
        }
        let mut module: Vec<String> = name
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        let text = std::fs::read_to_string(&path).expect("reading a source file");
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("parsing src/{name}: {e}"));
        let mut reader = Reader::default();
        reader.visit_file(&parsed);
        test_modules.extend(reader.test_children.into_iter().map(|child| {
            let mut m = module.clone();
            m.push(child);
            m
        }));
        files.push(File {
            name,
            module,
            paths: reader.paths,
        });
    }
    files.retain(|f| !test_modules.iter().any(|t| f.module.starts_with(t)));
    files
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading src/") {
        let path = entry.expect("reading src/").path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("reading src/") {
        let path = entry.expect("reading src/").path();
        let target = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            std::fs::create_dir_all(&target).expect("making a directory");
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copying a source file");
        }
    }
}

/// Collects the paths of one file's code, skipping `#[cfg(test)]` items.
#[derive(Default)]
struct Reader {
    paths: Vec<(Vec<String>, Vec<String>)>,
    /// The inline modules (`mod x { … }`) the visit is in.
    inline: Vec<String>,
    /// The submodules declared `#[cfg(test)] mod name;`.
    test_children: Vec<String>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

impl Reader {
    fn push(&mut self, path: Vec<String>) {
        self.paths.push((self.inline.clone(), path));
    }

    fn use_tree(&mut self, tree: &syn::UseTree, mut prefix: Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
            }
            syn::UseTree::Name(n) => {
                if n.ident != "self" {
                    prefix.push(n.ident.to_string());
                }
                self.push(prefix);
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.push(prefix);
            }
            syn::UseTree::Glob(_) => self.push(prefix),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(tree, prefix.clone());
                }
            }
        }
    }

    /// `crate::a::b` and `super::a` runs inside a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let TokenTree::Group(group) = &trees[i] {
                self.tokens(group.stream());
                i += 1;
                continue;
            }
            let starts =
                matches!(&trees[i], TokenTree::Ident(id) if id == "crate" || id == "super");
            if !starts {
                i += 1;
                continue;
            }
            let mut path = Vec::new();
            while let Some(TokenTree::Ident(id)) = trees.get(i) {
                path.push(id.to_string());
                let sep = matches!(
                    (trees.get(i + 1), trees.get(i + 2)),
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':'
                );
                if !sep {
                    break;
                }
                i += 3;
            }
            i += 1;
            self.push(path);
        }
    }
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
            {
                self.test_children.push(m.ident.to_string());
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            _ => &[],
        };
        if !is_test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.inline.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.inline.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&item.tree, Vec::new());
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            self.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }
}

//! The shape of `src/`: no import cycle between its files, and the boundaries the
//! architecture draws (the quota knows no YouTube and no store; the store knows no
//! quota; the YouTube client knows no quota and no store), even through a shared file
//! such as `error.rs` or `sqlite.rs`.
//!
//! The check reads the source text: every `use` tree, and every path starting with
//! `crate::`, `super::` or `self::` elsewhere (macro arguments included), outside
//! comments, string literals and `#[cfg(test)]` code. A path names the file of the
//! longest module it starts with. What ties the layers together is decided at the top
//! (the front end), so a bottom module never needs to import upward.
//!
//! A module's paths into its own submodules (re-exports, calls into the files it is
//! split into) are not counted as cycles with them: a directory module and its files
//! are one unit to the layers above. They still count for what a file reaches.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// A module path: `["quota", "journal"]` for `src/quota/journal.rs`.
type Module = Vec<String>;

/// `from` must not reach any of `to`, directly or through any file in between.
const NEVER: &[(&str, &[&str])] = &[
    ("quota", &["youtube", "store"]),
    ("store", &["quota"]),
    ("youtube", &["quota", "store"]),
];

#[test]
fn src_has_no_import_cycle_and_no_import_across_a_boundary() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src);
    let mut problems = graph.cycles();
    problems.extend(graph.crossings(NEVER));
    assert!(
        problems.is_empty(),
        "the layering of src/ is broken:\n  {}",
        problems.join("\n  ")
    );
}

/// The check itself: a cycle through a shared file and a crossing through it are both
/// seen, in a `use` tree and in a macro's argument, while comments, strings and test
/// code are not read as imports.
#[test]
fn the_layering_check_sees_imports_through_a_shared_file_and_only_real_ones() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(path, text).expect("writing a source file");
    };
    write(
        "lib.rs",
        "pub mod error;\npub mod quota;\npub mod youtube;\n",
    );
    write(
        "error.rs",
        "list![crate::quota::QuotaError];\n\
         // crate::youtube::Ignored in a comment\n\
         const S: &str = \"crate::youtube::Ignored in a string\";\n\
         #[cfg(test)]\nmod tests { use crate::youtube::Ignored; }\n",
    );
    write(
        "quota/mod.rs",
        "mod inner;\nuse crate::{error::{self, Exit}};\npub struct QuotaError;\n",
    );
    write("quota/inner.rs", "use super::QuotaError;\n");
    write(
        "youtube/mod.rs",
        "use crate::error::Exit;\nconst C: char = '\"'; fn f<'a>() {}\n",
    );
    let graph = Graph::read(src);
    assert_eq!(
        graph.cycles(),
        vec!["cycle between error.rs, quota/mod.rs: error.rs -> quota/mod.rs -> error.rs"]
    );
    assert_eq!(
        graph.crossings(NEVER),
        vec!["youtube must not reach quota: youtube/mod.rs -> error.rs -> quota/mod.rs"]
    );
}

/// The files of `src/` and the files each one's paths name.
struct Graph {
    /// Every file that is not test code, by module, with its path for messages.
    files: BTreeMap<Module, String>,
    /// The modules a file's paths name, by the file's module.
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

impl Graph {
    fn read(src: &Path) -> Graph {
        let mut sources = BTreeMap::new();
        collect(src, src, &mut sources);
        let modules: BTreeSet<Module> = sources.keys().cloned().collect();
        // Files declared `#[cfg(test)] mod x;`, and everything under them.
        let mut tests = BTreeSet::new();
        let mut parsed = BTreeMap::new();
        for (module, (_, text)) in &sources {
            let file = parse(&lex(text));
            for name in &file.test_children {
                let mut child = module.clone();
                child.push(name.clone());
                tests.insert(child);
            }
            parsed.insert(module.clone(), file);
        }
        let is_test = |m: &Module| tests.iter().any(|t| m.starts_with(t));
        let mut files = BTreeMap::new();
        let mut edges = BTreeMap::new();
        for (module, (path, _)) in &sources {
            if is_test(module) {
                continue;
            }
            files.insert(module.clone(), path.clone());
            let targets: BTreeSet<Module> = parsed[module]
                .paths
                .iter()
                .filter_map(|p| resolve(module, p, &modules))
                .filter(|target| target != module && !is_test(target))
                .collect();
            edges.insert(module.clone(), targets);
        }
        Graph { files, edges }
    }

    fn name(&self, module: &Module) -> &str {
        &self.files[module]
    }

    fn describe(&self, path: &[Module]) -> String {
        let names: Vec<&str> = path.iter().map(|m| self.name(m)).collect();
        names.join(" -> ")
    }

    /// The shortest path from `from` to a module `goal` accepts, following `step`.
    fn shortest(
        &self,
        from: &Module,
        goal: impl Fn(&Module) -> bool,
        step: impl Fn(&Module, &Module) -> bool,
    ) -> Option<Vec<Module>> {
        let mut came_from: BTreeMap<&Module, &Module> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        while let Some(at) = queue.pop_front() {
            for next in &self.edges[at] {
                if !step(at, next) || came_from.contains_key(next) || (next == from && !goal(next))
                {
                    continue;
                }
                came_from.insert(next, at);
                if goal(next) {
                    let mut path = vec![next.clone()];
                    let mut back = next;
                    while back != from || path.len() == 1 {
                        back = came_from[back];
                        path.push(back.clone());
                        if back == from {
                            break;
                        }
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(next);
            }
        }
        None
    }

    /// Every cycle between files: each group of files that reach one another, once,
    /// with the shortest loop from its first file.
    fn cycles(&self) -> Vec<String> {
        // A module's paths into its own submodules do not make a cycle with them.
        let step = |from: &Module, to: &Module| !(to.len() > from.len() && to.starts_with(from));
        let reaches = |from: &Module, to: &Module| self.shortest(from, |m| m == to, step).is_some();
        let mut grouped: BTreeSet<&Module> = BTreeSet::new();
        let mut found = Vec::new();
        for module in self.files.keys() {
            if grouped.contains(module) {
                continue;
            }
            let Some(path) = self.shortest(module, |m| m == module, step) else {
                continue;
            };
            let group: Vec<&Module> = self
                .files
                .keys()
                .filter(|m| *m == module || reaches(module, m) && reaches(m, module))
                .collect();
            grouped.extend(&group);
            let names: Vec<&str> = group.iter().map(|m| self.name(m)).collect();
            found.push(format!(
                "cycle between {}: {}",
                names.join(", "),
                self.describe(&path)
            ));
        }
        found
    }

    /// Every way a file of one area reaches a file of an area it must not, through
    /// anything: one path per file where it leaves its area.
    fn crossings(&self, never: &[(&str, &[&str])]) -> Vec<String> {
        let area = |m: &Module, name: &str| m.first().is_some_and(|a| a == name);
        let mut found = Vec::new();
        for (from, forbidden) in never {
            for to in *forbidden {
                for module in self.files.keys().filter(|m| area(m, from)) {
                    let Some(path) = self.shortest(module, |m| area(m, to), |_, _| true) else {
                        continue;
                    };
                    // A path through another file of the same area is that file's.
                    if area(&path[1], from) {
                        continue;
                    }
                    found.push(format!(
                        "{from} must not reach {to}: {}",
                        self.describe(&path)
                    ));
                }
            }
        }
        found
    }
}

/// Every `.rs` file under `dir`, by module, with its path under `src` and its text.
/// `main.rs` is the binary's own crate and reaches the library only by its name.
fn collect(src: &Path, dir: &Path, out: &mut BTreeMap<Module, (String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("reading src/")
        .map(|e| e.expect("reading src/").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(src, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(src).expect("under src/");
        let name = relative.to_string_lossy().replace('\\', "/");
        if name == "main.rs" {
            continue;
        }
        let mut module: Module = name
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        let text = std::fs::read_to_string(&path).expect("reading a source file");
        out.insert(module, (name, text));
    }
}

/// The module a path names: the longest known module it starts with, or `None` for a
/// path into another crate or to a local item.
fn resolve(at: &Module, path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let first = path.first()?;
    let mut absolute: Module = match first.as_str() {
        "crate" => Vec::new(),
        "super" | "self" => at.clone(),
        _ => {
            let mut child = at.clone();
            child.push(first.clone());
            if !modules.contains(&child) {
                return None;
            }
            at.clone()
        }
    };
    let mut segments = path.iter().skip(usize::from(first == "crate")).peekable();
    while let Some(relative) = segments.next_if(|s| *s == "super" || *s == "self") {
        if relative == "super" {
            absolute.pop();
        }
    }
    absolute.extend(segments.filter(|s| *s != "self").cloned());
    (0..=absolute.len())
        .rev()
        .map(|n| absolute[..n].to_vec())
        .find(|m| modules.contains(m))
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
    /// A string, character or number literal.
    Literal,
}

/// The tokens of a Rust source file, without comments; literals stand for themselves
/// only as [`Token::Literal`], so nothing inside a string reads as a path.
fn lex(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&chars, i + 1);
            tokens.push(Token::Literal);
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                tokens.push(Token::Literal);
            } else if at(i + 2) == '\'' {
                i += 3;
                tokens.push(Token::Literal);
            } else {
                // A lifetime: its name follows as an identifier, harmlessly.
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            if raw && (at(i) == '"' || at(i) == '#' && matches!(at(i + 1), '"' | '#')) {
                let mut hashes = 0;
                while at(i) == '#' {
                    hashes += 1;
                    i += 1;
                }
                i += 1;
                while i < chars.len() {
                    if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
                tokens.push(Token::Literal);
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                i = skip_string(&chars, i + 1);
                tokens.push(Token::Literal);
            } else if word == "b" && at(i) == '\'' {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                tokens.push(Token::Literal);
            } else if word == "r" && at(i) == '#' {
                // A raw identifier, `r#type`.
                i += 1;
            } else {
                tokens.push(Token::Ident(word));
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Literal);
        } else if c == ':' && at(i + 1) == ':' {
            tokens.push(Token::Path);
            i += 2;
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    tokens
}

/// The index after the closing quote of a string whose text starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i] != '"' {
        i += if chars[i] == '\\' { 2 } else { 1 };
    }
    i + 1
}

/// What one file's code names, outside test code.
struct Parsed {
    /// Every path of a `use` tree, and every path starting `crate::`, `super::`,
    /// `self::` or `<child module>::` elsewhere.
    paths: Vec<Vec<String>>,
    /// The submodules declared `#[cfg(test)] mod name;`.
    test_children: Vec<String>,
}

fn parse(tokens: &[Token]) -> Parsed {
    let ident = |i: usize| match tokens.get(i) {
        Some(Token::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let is = |i: usize, t: &Token| tokens.get(i) == Some(t);
    let mut parsed = Parsed {
        paths: Vec::new(),
        test_children: Vec::new(),
    };
    let mut i = 0;
    while i < tokens.len() {
        let cfg_test = [
            Token::Punct('#'),
            Token::Punct('['),
            Token::Ident("cfg".into()),
            Token::Punct('('),
            Token::Ident("test".into()),
            Token::Punct(')'),
            Token::Punct(']'),
        ];
        if tokens[i..].starts_with(&cfg_test) {
            i += cfg_test.len();
            // Other attributes of the same item.
            while is(i, &Token::Punct('#')) && is(i + 1, &Token::Punct('[')) {
                i = skip_group(tokens, i + 1);
            }
            let start = i;
            i = skip_item(tokens, i);
            let item = &tokens[start..i];
            if let [.., Token::Ident(m), Token::Ident(name), Token::Punct(';')] = item
                && m == "mod"
            {
                parsed.test_children.push(name.clone());
            }
            continue;
        }
        if ident(i) == Some("use") {
            i += 1;
            if is(i, &Token::Path) {
                i += 1;
            }
            use_tree(tokens, &mut i, Vec::new(), &mut parsed.paths);
            continue;
        }
        let starts_path = ident(i).is_some() && is(i + 1, &Token::Path);
        let continues_path = i > 0 && is(i - 1, &Token::Path);
        if starts_path && !continues_path {
            let mut path = Vec::new();
            while let Some(segment) = ident(i) {
                path.push(segment.to_string());
                if !is(i + 1, &Token::Path) {
                    break;
                }
                i += 2;
            }
            i += 1;
            parsed.paths.push(path);
            continue;
        }
        i += 1;
    }
    parsed
}

/// Adds every path of the `use` tree at `i` to `out`, leaving `i` after it.
fn use_tree(tokens: &[Token], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    loop {
        match tokens.get(*i) {
            Some(Token::Punct('{')) => {
                *i += 1;
                while !matches!(tokens.get(*i), Some(Token::Punct('}')) | None) {
                    use_tree(tokens, i, prefix.clone(), out);
                    if tokens.get(*i) == Some(&Token::Punct(',')) {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Some(Token::Punct('*')) => {
                *i += 1;
                out.push(prefix);
                return;
            }
            Some(Token::Ident(segment)) => {
                prefix.push(segment.clone());
                *i += 1;
                if tokens.get(*i) == Some(&Token::Path) {
                    *i += 1;
                    continue;
                }
                if matches!(tokens.get(*i), Some(Token::Ident(a)) if a == "as") {
                    *i += 2;
                }
                out.push(prefix);
                return;
            }
            _ => return,
        }
    }
}

/// The index after the bracketed group opening at `i`.
fn skip_group(tokens: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match tokens[i] {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index after the item starting at `i`: its `;` or its closing brace.
fn skip_item(tokens: &[Token], mut i: usize) -> usize {
    while i < tokens.len() {
        match tokens[i] {
            Token::Punct(';') => return i + 1,
            Token::Punct('{') => return skip_group(tokens, i),
            Token::Punct('(' | '[') => i = skip_group(tokens, i),
            _ => i += 1,
        }
    }
    i
}

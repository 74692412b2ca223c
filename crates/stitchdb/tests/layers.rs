//! The workspace's interior layers: in every crate of the workspace, and at every level of each
//! crate's module tree, the modules of a folder import each other without a cycle, so every
//! import goes one way (for `stitchdb`'s top level, down the order its crate docs list).
//!
//! For each crate (`crates/*/src`, rooted at `lib.rs` or `main.rs`) the scan reads every source
//! file, blanks comments and literals, and collects every path: `use` items (groups, `self`
//! and renames included) and paths in code that start with `crate::`, `super::`, `self::` or a
//! name the module imports. Each path is made absolute (`super::` from a file of a folder is the
//! folder module, from the folder's `mod.rs` its parent, inside an inline `mod tests {}` the
//! file's module) and followed through the `use` items of the modules it passes (so
//! `crate::db::Stats`, with `pub use stats::Stats` in `db/mod.rs`, names `db::stats`). A path from
//! a file in child `a` of a folder to an item in another child `b` of the same folder is an edge
//! `a -> b` of that folder's graph (a child is a file `x.rs` or a subfolder `x/`, with everything
//! in it); a path to an item of the folder's own module file is no edge. The test fails naming
//! every cycle of every folder, with the file, line and path text of each edge along it.
//!
//! What the scan cannot see: a module that calls methods of a type another module defines, or
//! a macro by its bare name, without writing a path to that module.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A module's path from its crate's root (`["db", "write"]` for `db/write.rs`, `["db"]` for
/// `db/mod.rs`, `[]` for `lib.rs` or `main.rs`).
type ModPath = Vec<String>;

/// A source file of a crate.
struct SourceFile {
    /// The file's path as messages show it.
    shown: String,
    /// The module the file is.
    module: ModPath,
    /// The file's text with comments and literals blanked (see [`code_only`]).
    code: String,
}

fn source_files(dir: &Path, shown: &str, module: &[String], out: &mut Vec<SourceFile>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let file_name = path.file_name().unwrap().to_str().unwrap();
        let shown = format!("{shown}/{file_name}");
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            let mut sub = module.to_vec();
            sub.push(name);
            source_files(&path, &shown, &sub, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut m = module.to_vec();
            let is_root = module.is_empty() && (name == "lib" || name == "main");
            if name != "mod" && !is_root {
                m.push(name);
            }
            out.push(SourceFile {
                shown,
                module: m,
                code: code_only(&std::fs::read_to_string(&path).unwrap()),
            });
        }
    }
}

/// The text with comments, string literals and character literals blanked out, so that
/// only code is scanned. Line breaks are kept, so that offsets keep their line numbers.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let newlines = |out: &mut String, skipped: &[u8]| {
        for _ in skipped.iter().filter(|&&c| c == b'\n') {
            out.push('\n');
        }
    };
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let start = i;
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            newlines(&mut out, &b[start..i.min(b.len())]);
        } else if b[i] == b'"' || (b[i] == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#'))) {
            // A string literal (raw strings with their hashes included).
            let start = i;
            let raw = b[i] == b'r';
            if raw {
                i += 1;
            }
            let mut hashes = 0;
            while raw && b[i] == b'#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            while i < b.len() {
                if !raw && b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if b[i] == b'"' && b[i + 1..].iter().take(hashes).all(|&c| c == b'#') {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
            newlines(&mut out, &b[start..i.min(b.len())]);
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            i += 3;
            out.push_str("' '");
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier starting at `at`, if one does (ASCII letters, digits and `_`).
fn ident_at(s: &str, at: usize) -> Option<&str> {
    let b = s.as_bytes();
    let end = (at..b.len())
        .find(|&i| !is_ident_char(b[i]))
        .unwrap_or(b.len());
    (end > at && !b[at].is_ascii_digit()).then(|| &s[at..end])
}

fn skip_space(s: &str, mut at: usize) -> usize {
    let b = s.as_bytes();
    while at < b.len() && b[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

/// One path of a `use` tree or of code, as written, with the groups expanded.
#[derive(Clone, Debug, PartialEq)]
struct Leaf {
    /// Its segments (`["super", "stats", "Stats"]`); a trailing `self` of a group is dropped.
    segs: Vec<String>,
    /// The name it brings into scope, if it is in a `use` item: its rename or last segment.
    name: Option<String>,
    /// A glob (`path::*`).
    glob: bool,
    /// Where its last segment ends, for the line number.
    end: usize,
}

impl Leaf {
    fn text(&self) -> String {
        let mut t = self.segs.join("::");
        if self.glob {
            t.push_str("::*");
        }
        t
    }
}

/// Parses a `use` tree (or a path in code) at `at`, under the segments `prefix` already
/// read; pushes its paths to `out` and returns the offset just past it.
fn parse_tree(code: &str, at: usize, prefix: &[String], out: &mut Vec<Leaf>) -> usize {
    let b = code.as_bytes();
    let mut i = skip_space(code, at);
    if b.get(i) == Some(&b'{') {
        i += 1;
        loop {
            i = skip_space(code, i);
            match b.get(i) {
                None => return i,
                Some(b'}') => return i + 1,
                Some(b',') => i += 1,
                Some(_) => {
                    let next = parse_tree(code, i, prefix, out);
                    if next == i {
                        // Not a path: give up on this group rather than loop.
                        return i + 1;
                    }
                    i = next;
                }
            }
        }
    }
    if b.get(i) == Some(&b'*') {
        out.push(Leaf {
            segs: prefix.to_vec(),
            name: None,
            glob: true,
            end: i + 1,
        });
        return i + 1;
    }
    let mut segs = prefix.to_vec();
    let mut end = i;
    while let Some(id) = ident_at(code, i) {
        segs.push(id.to_string());
        i += id.len();
        end = i;
        let j = skip_space(code, i);
        if !code[j..].starts_with("::") {
            break;
        }
        let k = skip_space(code, j + 2);
        if matches!(b.get(k), Some(b'{' | b'*')) {
            return parse_tree(code, k, &segs, out);
        }
        if ident_at(code, k).is_none() {
            // `::<` of a turbofish, or the end of the path.
            break;
        }
        i = k;
    }
    if segs.len() == prefix.len() {
        return at;
    }
    if segs.last().is_some_and(|s| s == "self") && segs.len() > 1 {
        segs.pop();
    }
    let mut name = segs.last().cloned();
    let j = skip_space(code, end);
    if code[j..].starts_with("as") && b.get(j + 2).is_some_and(u8::is_ascii_whitespace) {
        let k = skip_space(code, j + 2);
        if let Some(alias) = ident_at(code, k) {
            name = Some(alias.to_string());
            end = k + alias.len();
        }
    }
    out.push(Leaf {
        segs,
        name,
        glob: false,
        end,
    });
    end
}

/// The inline modules of a file (`mod tests { ... }`): where each one's body opens and
/// closes, and its name.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut spans = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while let Some(found) = code[i..].find("mod ") {
        let at = i + found;
        i = at + 4;
        if at > 0 && is_ident_char(b[at - 1]) {
            continue;
        }
        let Some(name) = ident_at(code, skip_space(code, at + 4)) else {
            continue;
        };
        let after = code[skip_space(code, at + 4) + name.len()..].trim_start();
        if !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        let mut close = code.len();
        for (j, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + j;
                        break;
                    }
                }
                _ => {}
            }
        }
        spans.push((open, close, name.to_string()));
    }
    spans
}

/// A path found in a file: in which module (the file's, plus the inline modules open there),
/// whether in a `use` item, and one at module level (not in a function's body), and the path.
struct Found {
    module: ModPath,
    in_use: bool,
    module_level_use: bool,
    leaf: Leaf,
}

/// Every path of a file that can name a module of the crate: `use` items, and paths in code
/// that start with `crate::`, `super::`, `self::` or any other identifier followed by `::`
/// (which of those name something of the crate is decided later, by [`Crate::absolute`]).
fn paths_of(file: &SourceFile) -> Vec<Found> {
    let code = &file.code;
    let b = code.as_bytes();
    let inline = inline_modules(code);
    // Brace depth before each offset: a `use` at the depth of the inline modules around it is
    // an item of that module, deeper it is in a function's body.
    let mut depth_at = Vec::with_capacity(b.len() + 1);
    let mut depth = 0usize;
    for &c in b {
        depth_at.push(depth);
        match c {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    depth_at.push(depth);
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let preceded = i > 0 && (is_ident_char(b[i - 1]) || b[i - 1] == b':');
        let id = if preceded || !b[i].is_ascii() {
            None
        } else {
            ident_at(code, i)
        };
        let Some(id) = id else {
            i += 1;
            while i < b.len() && !b[i].is_ascii() {
                i += 1;
            }
            continue;
        };
        let mut module = file.module.clone();
        let open: Vec<&(usize, usize, String)> = inline
            .iter()
            .filter(|(open, close, _)| *open < i && i < *close)
            .collect();
        module.extend(open.iter().map(|(_, _, name)| name.clone()));
        let is_use = id == "use" && b.get(i + 3).is_some_and(u8::is_ascii_whitespace);
        let starts_path = code[i + id.len()..].starts_with("::");
        if !is_use && !starts_path {
            i += id.len();
            continue;
        }
        let mut leaves = Vec::new();
        let end = if is_use {
            parse_tree(code, i + 3, &[], &mut leaves)
        } else {
            parse_tree(code, i, &[], &mut leaves)
        };
        let module_level_use = is_use && depth_at[i] == open.len();
        for leaf in leaves {
            found.push(Found {
                module: module.clone(),
                in_use: is_use,
                module_level_use,
                leaf,
            });
        }
        i = end.max(i + id.len());
    }
    found
}

/// A crate's module tree, the `use` items of each module, and the paths of each file.
struct Crate {
    files: Vec<SourceFile>,
    /// The child modules that are files or folders, of each module that has any.
    children: BTreeMap<ModPath, BTreeSet<String>>,
    /// The names each module's `use` items bring into scope, and the paths they name.
    imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
    /// The paths found in each file (same order as `files`).
    paths: Vec<Vec<Found>>,
}

/// Where a path leads: the module of the crate it reaches, and how, written out absolute.
struct Resolved {
    module: ModPath,
    path: Vec<String>,
}

impl Crate {
    /// Reads the crate whose sources are in `src` (`shown` is how messages name `src`).
    fn read(src: &Path, shown: &str) -> Crate {
        let mut files = Vec::new();
        source_files(src, shown, &[], &mut files);
        let roots = files.iter().filter(|f| f.module.is_empty()).count();
        assert_eq!(roots, 1, "{shown}: one lib.rs or main.rs");
        let mut children: BTreeMap<ModPath, BTreeSet<String>> = BTreeMap::new();
        for f in &files {
            for n in 0..f.module.len() {
                children
                    .entry(f.module[..n].to_vec())
                    .or_default()
                    .insert(f.module[n].clone());
            }
        }
        let paths: Vec<Vec<Found>> = files.iter().map(paths_of).collect();
        let mut imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for found in paths.iter().flatten() {
            if let (true, Some(name)) = (found.module_level_use, &found.leaf.name) {
                imports
                    .entry(found.module.clone())
                    .or_default()
                    .insert(name.clone(), found.leaf.segs.clone());
            }
        }
        Crate {
            files,
            children,
            imports,
            paths,
        }
    }

    /// The path `segs`, written in `module`, from the crate root; `None` if it does not start
    /// in the crate (another crate, a prelude or local name). `file_module` is the module of
    /// the file it is written in: a name is looked up from `module` out to `file_module`, for
    /// the `use super::*` of inline test modules.
    fn absolute(
        &self,
        module: &[String],
        file_module: &[String],
        segs: &[String],
        depth: usize,
    ) -> Option<Vec<String>> {
        if depth > 16 {
            return None;
        }
        let (mut path, rest) = match segs.first()?.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (module.to_vec(), &segs[1..]),
            "super" => {
                let mut m = module.to_vec();
                let supers = segs.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    m.pop()?;
                }
                (m, &segs[supers..])
            }
            first => {
                // A child module, or a name a `use` brought into scope: in this module, or
                // in one around it in the same file.
                let mut scope = module.to_vec();
                loop {
                    if self.children.get(&scope).is_some_and(|c| c.contains(first)) {
                        break (scope, segs);
                    }
                    if let Some(target) = self.imports.get(&scope).and_then(|i| i.get(first)) {
                        let mut p = self.absolute(&scope, &scope, target, depth + 1)?;
                        p.extend_from_slice(&segs[1..]);
                        return Some(p);
                    }
                    if scope.len() <= file_module.len() {
                        return None;
                    }
                    scope.pop();
                }
            }
        };
        path.extend_from_slice(rest);
        Some(path)
    }

    /// Follows an absolute path down the module tree and through the `use` items of the
    /// modules it passes, to the module that holds what it names.
    fn resolve(&self, path: &[String], depth: usize) -> Resolved {
        let mut module: ModPath = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            if self.children.get(&module).is_some_and(|c| c.contains(seg)) {
                module.push(seg.clone());
                continue;
            }
            if depth < 16 {
                if let Some(target) = self.imports.get(&module).and_then(|m| m.get(seg)) {
                    if let Some(mut p) = self.absolute(&module, &module, target, depth + 1) {
                        p.extend_from_slice(&path[i + 1..]);
                        return self.resolve(&p, depth + 1);
                    }
                }
            }
            break;
        }
        Resolved {
            module,
            path: path.to_vec(),
        }
    }

    /// The import graph of each folder module (the crate root included): for each pair of its
    /// children, the paths by which the first imports from the second.
    fn graphs(&self) -> BTreeMap<ModPath, Graph> {
        let mut graphs: BTreeMap<ModPath, Graph> = BTreeMap::new();
        for folder in self.children.keys() {
            graphs.insert(folder.clone(), Graph::new());
        }
        for (file, paths) in self.files.iter().zip(&self.paths) {
            for found in paths {
                if found.leaf.glob {
                    continue;
                }
                let Some(abs) = self.absolute(&found.module, &file.module, &found.leaf.segs, 0)
                else {
                    continue;
                };
                let to = self.resolve(&abs, 0);
                let first = found.leaf.segs[0].as_str();
                if !found.in_use && !matches!(first, "crate" | "super" | "self") {
                    // A path in code through a name a `use` brought in: the `use` is the edge's
                    // place, unless the path goes on to another module (`db::stats::X` after
                    // `use crate::db`).
                    let name = [first.to_string()];
                    let through = self.absolute(&found.module, &file.module, &name, 0);
                    if through.is_some_and(|t| self.resolve(&t, 0).module == to.module) {
                        continue;
                    }
                }
                let shared = file
                    .module
                    .iter()
                    .zip(&to.module)
                    .take_while(|(a, b)| a == b)
                    .count();
                if shared == file.module.len() || shared == to.module.len() {
                    // Within one child, or an item of a folder's own module file.
                    continue;
                }
                let line = 1 + file.code[..found.leaf.end].matches('\n').count();
                let mut text = found.leaf.text();
                let resolved = format!("crate::{}", to.path.join("::"));
                if text != resolved {
                    write!(text, " (= {resolved})").unwrap();
                }
                graphs
                    .get_mut(&file.module[..shared])
                    .unwrap()
                    .entry(file.module[shared].clone())
                    .or_default()
                    .entry(to.module[shared].clone())
                    .or_default()
                    .insert((file.shown.clone(), line, text));
            }
        }
        graphs
    }
}

/// A folder's import graph: for each child, the children it imports from, each with the
/// places (file, line, path) that import it.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<(String, usize, String)>>>;

/// The import graph of each folder of the crate whose sources are in `src`.
fn import_graphs(src: &Path) -> BTreeMap<ModPath, Graph> {
    Crate::read(src, "src").graphs()
}

/// The graph of the folder `folder` as plain edges, for tests.
fn edges(graphs: &BTreeMap<ModPath, Graph>, folder: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let folder: ModPath = folder.iter().map(|s| s.to_string()).collect();
    graphs[&folder]
        .iter()
        .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
        .collect()
}

/// Most cycles one folder's report lists.
const MOST_CYCLES: usize = 100;

/// The elementary cycles of a graph (each once, starting at its least module, the first
/// repeated at the end), at most [`MOST_CYCLES`] of them.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // What each module reaches, so the search for cycles through a module keeps to the
    // modules that reach it back.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for next in graph.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    fn walk(
        start: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        within: &BTreeSet<&str>,
        path: &mut Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) {
        let last = path.last().unwrap().clone();
        for next in graph.get(&last).into_iter().flatten() {
            if out.len() >= MOST_CYCLES {
                return;
            }
            if next == start {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                out.push(cycle);
            } else if next.as_str() > start
                && within.contains(next.as_str())
                && !path.contains(next)
            {
                path.push(next.clone());
                walk(start, graph, within, path, out);
                path.pop();
            }
        }
    }
    let mut out = Vec::new();
    for start in graph.keys() {
        // The modules on a cycle through `start`: those it reaches that reach it back.
        let within: BTreeSet<&str> = reaches[start]
            .iter()
            .filter(|n| reaches.get(n).is_some_and(|r| r.contains(start)))
            .map(String::as_str)
            .collect();
        walk(start, graph, &within, &mut vec![start.clone()], &mut out);
    }
    out
}

/// The report of a folder's cycles: each cycle, and the places that make each edge of it.
fn cycle_report(crate_name: &str, folder: &[String], graph: &Graph) -> Option<String> {
    let plain: BTreeMap<String, BTreeSet<String>> = graph
        .iter()
        .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
        .collect();
    let found = cycles(&plain);
    if found.is_empty() {
        return None;
    }
    let folder_shown = if folder.is_empty() {
        "src/".to_string()
    } else {
        format!("src/{}/", folder.join("/"))
    };
    let mut r = format!(
        "crate {crate_name}, folder {folder_shown}: {} import cycle(s){}\n",
        found.len(),
        if found.len() >= MOST_CYCLES {
            " (the first listed only)"
        } else {
            ""
        }
    );
    for cycle in &found {
        writeln!(r, "  cycle: {}", cycle.join(" -> ")).unwrap();
        for pair in cycle.windows(2) {
            writeln!(r, "    {} -> {}, by:", pair[0], pair[1]).unwrap();
            for (file, line, path) in &graph[&pair[0]][&pair[1]] {
                writeln!(r, "      {file}:{line}: {path}").unwrap();
            }
        }
    }
    Some(r)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's crates (each directory of `crates/` with a `src/`): name and sources.
fn workspace_crates() -> Vec<(String, PathBuf)> {
    let mut crates: Vec<(String, PathBuf)> = std::fs::read_dir(workspace_root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                p.join("src"),
            )
        })
        .collect();
    crates.sort();
    crates
}

fn crate_graphs(name: &str, src: &Path) -> BTreeMap<ModPath, Graph> {
    Crate::read(src, &format!("crates/{name}/src")).graphs()
}

#[test]
fn no_folder_of_any_crate_imports_in_a_cycle() {
    let mut failures = String::new();
    for (name, src) in &workspace_crates() {
        for (folder, graph) in &crate_graphs(name, src) {
            failures.extend(cycle_report(name, folder, graph));
        }
    }
    assert!(
        failures.is_empty(),
        "the modules of a folder must import each other one way (move the piece two modules \
         share down to the lower one):\n{failures}"
    );
}

#[test]
fn the_scan_sees_the_imports_it_must() {
    // A scan that saw nothing would find no cycle either: check it sees imports of each kind,
    // in the crate root's folder and in folders below it.
    let crates = workspace_crates();
    let names: Vec<&str> = crates.iter().map(|(n, _)| n.as_str()).collect();
    let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    for member in manifest.split('"').filter(|s| s.starts_with("crates/")) {
        let member = member.trim_start_matches("crates/");
        assert!(names.contains(&member), "workspace member {member} scanned");
    }
    let stitchdb = crates.iter().find(|(n, _)| n == "stitchdb").unwrap();
    let graphs = crate_graphs("stitchdb", &stitchdb.1);
    let root = edges(&graphs, &[]);
    let imports = |g: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str| {
        g.get(from).is_some_and(|t| t.contains(to))
    };
    assert!(
        imports(&root, "db", "layout"),
        "`use crate::layout::vtree::run::...` in db/"
    );
    assert!(
        imports(&root, "txn", "db"),
        "`crate::db::...` in code of txn/"
    );
    assert!(
        imports(&root, "db", "error"),
        "`crate::Error` through the root's re-export"
    );
    assert!(
        imports(&root, "layout", "entry"),
        "a `use crate::entry::{{...}}` group in layout/vtree/memtable.rs"
    );
    let db = edges(&graphs, &["db"]);
    assert!(
        imports(&db, "background", "checkpoint"),
        "`use super::checkpoint::{{self, Trigger}}` in db/background.rs"
    );
    assert!(
        imports(&db, "repair", "read"),
        "`use super::{{Db, DbIter}}` in db/repair.rs, through db/mod.rs's `pub use read::DbIter`"
    );
    assert!(
        imports(&db, "repair", "snapshot"),
        "`super::Snapshot` in code of db/repair.rs, through db/mod.rs's re-export"
    );
    let run = edges(&graphs, &["layout", "vtree", "run"]);
    assert!(
        imports(&run, "stitch", "cursor"),
        "`use super::cursor::{{...}}` in layout/vtree/run/stitch.rs"
    );
    let wal = crates.iter().find(|(n, _)| n == "stitch-wal").unwrap();
    let wal = edges(&crate_graphs("stitch-wal", &wal.1), &[]);
    assert!(
        imports(&wal, "error", "end"),
        "`crate::LogEnd` in code of stitch-wal's error.rs, through its root's re-export"
    );
    let cli = crates.iter().find(|(n, _)| n == "stitchdb-cli").unwrap();
    let bench = edges(
        &crate_graphs("stitchdb-cli", &cli.1),
        &["commands", "bench"],
    );
    assert!(
        imports(&bench, "runner", "workload"),
        "`use super::workload::Benchmark` in stitchdb-cli's commands/bench/runner.rs (a \
         main.rs crate, two folders down)"
    );
}

/// Writes a synthetic crate's files (`path`, text) under a new temporary directory.
fn synthetic_crate(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn plain(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
    edges
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
        .collect()
}

#[test]
fn the_cycle_finder_names_every_cycle() {
    let graph = plain(&[
        ("a", &["b"]),
        ("b", &["a", "c"]),
        ("c", &["a", "d"]),
        ("d", &[]),
    ]);
    let names = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        cycles(&graph),
        vec![names(&["a", "b", "a"]), names(&["a", "b", "c", "a"])]
    );
    let mut acyclic = graph.clone();
    acyclic.get_mut("c").unwrap().remove("a");
    acyclic.get_mut("b").unwrap().remove("a");
    assert!(cycles(&acyclic).is_empty());
}

#[test]
fn use_trees_expand_to_their_paths() {
    let code = code_only("pub(crate) use crate::{a::{self, B as C}, d::*, e};\nfn f() {}\n");
    let file = SourceFile {
        shown: "x.rs".to_string(),
        module: vec!["x".to_string()],
        code,
    };
    let found = paths_of(&file);
    let leaves: Vec<(String, Option<String>, bool, bool)> = found
        .iter()
        .map(|f| {
            (
                f.leaf.text(),
                f.leaf.name.clone(),
                f.leaf.glob,
                f.module_level_use,
            )
        })
        .collect();
    let s = |t: &str| t.to_string();
    assert_eq!(
        leaves,
        vec![
            (s("crate::a"), Some(s("a")), false, true),
            (s("crate::a::B"), Some(s("C")), false, true),
            (s("crate::d::*"), None, true, true),
            (s("crate::e"), Some(s("e")), false, true),
        ]
    );
}

#[test]
fn super_paths_resolve_to_the_module_they_name() {
    let dir = synthetic_crate(&[
        ("lib.rs", "mod low;\nmod outer;\npub use low::Thing;\n"),
        ("low.rs", "pub struct Thing;\n"),
        // `super::` from a file of a folder stays in the folder; from the folder's `mod.rs` it
        // reaches the root; inside an inline module it names the file's own module.
        (
            "outer/mod.rs",
            "mod inner;\nuse super::Thing;\n#[cfg(test)]\nmod tests { use super::inner; }\n",
        ),
        (
            "outer/inner.rs",
            "use super::super::low::Thing as T; // crate::ignored::in_comments\nfn f() { let _ = \"crate::in_strings\"; }\n",
        ),
    ]);
    let graphs = import_graphs(dir.path());
    assert_eq!(edges(&graphs, &[]), plain(&[("outer", &["low"])]));
    assert_eq!(edges(&graphs, &["outer"]), plain(&[]));
}

#[test]
fn paths_resolve_to_the_child_of_each_folder_they_reach() {
    let dir = synthetic_crate(&[
        (
            "lib.rs",
            "mod db;\nmod error;\npub use error::Error;\npub use db::Stats;\n",
        ),
        ("error.rs", "pub struct Error;\n"),
        (
            "db/mod.rs",
            "mod checkpoint;\nmod compact;\nmod nested;\nmod read;\nmod space;\nmod defrag;\n\
             mod stats;\nmod write;\npub use stats::Stats;\n\
             pub(crate) use {write::Committer, read::{get_at as read_at}};\n\
             pub struct Inner;\n",
        ),
        ("db/stats.rs", "pub struct Stats;\n"),
        ("db/defrag.rs", "pub struct Report;\n"),
        // A `crate::` path through the folder's re-export; a comment names nothing.
        (
            "db/compact.rs",
            "use super::Inner; // super::write::X\nfn f(_: crate::db::Stats) {}\n",
        ),
        // A group, `self` in a group, and a renamed re-export in a group of the folder's.
        (
            "db/write.rs",
            "use super::{Inner, read_at, stats::{self}};\npub struct Committer;\n",
        ),
        // A re-export of the root's that is one of the folder's; `super::` in code; `self::`.
        (
            "db/checkpoint.rs",
            "use crate::Stats;\nmod helper {}\nuse self::helper::X;\n\
             fn f() { super::write::commit(); }\n",
        ),
        // `super::super::` inside an inline test module; `crate::Error` is an edge of the root.
        (
            "db/read.rs",
            "use crate::Error;\npub fn get_at() {}\n\
             #[cfg(test)]\nmod tests {\n    use super::super::compact::f;\n}\n",
        ),
        // A path in code through a name a `use` brought in.
        (
            "db/space.rs",
            "use crate::db;\nfn g(_: db::defrag::Report) {}\n",
        ),
        (
            "db/nested/mod.rs",
            "mod deep;\nmod other;\npub use self::deep::Y;\n",
        ),
        // Deeper down: an edge of `db/` (nested -> write), and one of `db/nested/`.
        (
            "db/nested/deep.rs",
            "pub struct Y;\nuse crate::db::write::Committer;\n",
        ),
        ("db/nested/other.rs", "use super::Y;\n"),
    ]);
    let graphs = import_graphs(dir.path());
    assert_eq!(edges(&graphs, &[]), plain(&[("db", &["error"])]));
    assert_eq!(
        edges(&graphs, &["db"]),
        plain(&[
            ("checkpoint", &["stats", "write"]),
            ("compact", &["stats"]),
            ("nested", &["write"]),
            ("read", &["compact"]),
            ("space", &["defrag"]),
            ("write", &["read", "stats"]),
        ])
    );
    assert_eq!(
        edges(&graphs, &["db", "nested"]),
        plain(&[("other", &["deep"])])
    );
}

#[test]
fn the_report_names_each_cycle_and_the_places_of_its_edges() {
    let dir = synthetic_crate(&[
        ("main.rs", "mod x;\nfn main() {}\n"),
        ("x/mod.rs", "mod a;\nmod b;\nmod c;\npub use b::B;\n"),
        ("x/a.rs", "pub struct A;\nfn f(_: super::B) {}\n"),
        (
            "x/b.rs",
            "pub struct B;\n\nuse crate::x::a::{\n    A,\n};\n",
        ),
        ("x/c.rs", "use super::a::A;\n"),
    ]);
    let graphs = import_graphs(dir.path());
    assert!(cycle_report("demo", &[], &graphs[&vec![]]).is_none());
    let report = cycle_report("demo", &["x".to_string()], &graphs[&vec!["x".to_string()]]);
    assert_eq!(
        report.as_deref(),
        Some(
            "crate demo, folder src/x/: 1 import cycle(s)\n\
             \x20 cycle: a -> b -> a\n\
             \x20   a -> b, by:\n\
             \x20     src/x/a.rs:2: super::B (= crate::x::b::B)\n\
             \x20   b -> a, by:\n\
             \x20     src/x/b.rs:4: crate::x::a::A\n"
        )
    );
}

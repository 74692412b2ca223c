//! The engine's interior layers: the imports between the top-level modules and folders of
//! `crates/stitchdb/src` form no cycle, so every import goes one way (down the order the crate
//! docs list). Reads the sources, collects every `crate::` path (in `use` items and in code)
//! and every `super::` path resolved to the module it names, and fails naming a cycle.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A source file of the crate and the module path it is (`["db", "write"]` for
/// `db/write.rs`, `["db"]` for `db/mod.rs`, `[]` for `lib.rs`).
struct SourceFile {
    module: Vec<String>,
    text: String,
}

fn source_files(dir: &Path, module: &[String], out: &mut Vec<SourceFile>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.is_dir() {
            let mut sub = module.to_vec();
            sub.push(name);
            source_files(&path, &sub, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut m = module.to_vec();
            if name != "mod" && name != "lib" {
                m.push(name);
            }
            out.push(SourceFile {
                module: m,
                text: std::fs::read_to_string(&path).unwrap(),
            });
        }
    }
}

/// The text with comments, string literals and character literals blanked out, so that
/// only code is scanned.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
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
        } else if b[i] == b'"' || (b[i] == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#'))) {
            // A string literal (raw strings with their hashes included).
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

fn ident_at(s: &str, at: usize) -> Option<&str> {
    let rest = &s[at..];
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The first segments of a `{...}` group's items, from just after its `{`.
fn group_heads(s: &str, open: usize) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_item = true;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    expect_item = true;
                }
            }
            '}' if depth == 1 => break,
            '}' => depth -= 1,
            ',' if depth == 1 => expect_item = true,
            c if c.is_whitespace() => {}
            _ if depth == 1 && expect_item => {
                if let Some(id) = ident_at(s, open + i) {
                    heads.push(id.to_string());
                }
                expect_item = false;
            }
            _ => {}
        }
    }
    heads
}

/// The top-level modules (or, for names the crate root re-exports, the modules they come
/// from) that the paths starting at `at` in `code` (just after `crate::`) name.
fn heads_at(code: &str, at: usize) -> Vec<String> {
    if code[at..].starts_with('{') {
        group_heads(code, at)
    } else {
        ident_at(code, at).map(str::to_string).into_iter().collect()
    }
}

/// The module a file's inline `mod name {` blocks put each byte offset in: the file's own
/// module path plus the inline modules open there.
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
        let Some(name) = ident_at(code, at + 4) else {
            continue;
        };
        let after = code[at + 4 + name.len()..].trim_start();
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

/// What each top-level module imports from the others: the graph of its `crate::` and
/// `super::` paths.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    source_files(src, &[], &mut files);
    let root = files.iter().find(|f| f.module.is_empty()).unwrap();
    let root_code = code_only(&root.text);
    // Top-level modules, and where the names the root re-exports come from.
    let mut modules = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    for f in &files {
        if let Some(top) = f.module.first() {
            modules.insert(top.clone());
        }
    }
    let mut i = 0;
    while let Some(found) = root_code[i..].find("pub use ") {
        let at = i + found + "pub use ".len();
        i = at;
        let Some(module) = ident_at(&root_code, at) else {
            continue;
        };
        if !modules.contains(module) {
            continue;
        }
        let rest = at + module.len() + 2;
        for name in heads_at(&root_code, rest) {
            reexports.insert(name, module.to_string());
        }
    }
    let top_of = |name: &str| -> Option<String> {
        if modules.contains(name) {
            Some(name.to_string())
        } else {
            reexports.get(name).cloned()
        }
    };

    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files.iter().filter(|f| !f.module.is_empty()) {
        let from = f.module[0].clone();
        let code = code_only(&f.text);
        let inline = inline_modules(&code);
        let b = code.as_bytes();
        let mut edges = BTreeSet::new();
        let mut i = 0;
        while i < code.len() {
            let rest = &code[i..];
            let preceded_by_ident = i > 0 && (is_ident_char(b[i - 1]) || b[i - 1] == b':');
            if rest.starts_with("crate::") && !preceded_by_ident {
                edges.extend(heads_at(&code, i + 7).iter().filter_map(|h| top_of(h)));
                i += 7;
            } else if rest.starts_with("super::") && !preceded_by_ident {
                // The module this `super` is in: the file's, plus the inline modules open here.
                let mut module = f.module.clone();
                module.extend(
                    inline
                        .iter()
                        .filter(|(open, close, _)| *open < i && i < *close)
                        .map(|(_, _, name)| name.clone()),
                );
                let mut at = i;
                while code[at..].starts_with("super::") {
                    module.pop();
                    at += 7;
                }
                match module.first() {
                    Some(top) => edges.insert(top.clone()),
                    None => {
                        edges.extend(heads_at(&code, at).iter().filter_map(|h| top_of(h)));
                        false
                    }
                };
                i = at;
            } else {
                i += rest.chars().next().map_or(1, char::len_utf8);
            }
        }
        edges.remove(&from);
        graph.entry(from).or_default().extend(edges);
    }
    graph
}

/// A cycle of the graph, as the list of modules along it (the first repeated at the end).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|n| n == node).unwrap();
                let mut cycle = path[from..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_string(), Mark::Open);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_top_level_modules_import_each_other_without_a_cycle() {
    let graph = import_graph(&src_dir());
    if let Some(cycle) = find_cycle(&graph) {
        let edges: Vec<String> = graph
            .iter()
            .map(|(from, to)| format!("  {from} -> {to:?}"))
            .collect();
        panic!(
            "import cycle between the modules of stitchdb: {}\nthe imports:\n{}",
            cycle.join(" -> "),
            edges.join("\n")
        );
    }
}

#[test]
fn the_scan_sees_the_imports_it_must() {
    // A scan that saw nothing would find no cycle either: check it sees imports of each kind.
    let graph = import_graph(&src_dir());
    let imports = |from: &str, to: &str| graph.get(from).is_some_and(|t| t.contains(to));
    assert!(imports("db", "run"), "`use crate::run::...` in db/");
    assert!(imports("txn", "db"), "`crate::db::...` in code of txn/");
    assert!(
        imports("db", "error"),
        "`crate::Error` through the root's re-export"
    );
    assert!(
        imports("memtable", "entry"),
        "a `use crate::entry::{{...}}` group"
    );
}

#[test]
fn the_cycle_finder_names_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a", "d"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(
            vec!["a", "b", "c", "a"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    let mut acyclic = graph.clone();
    acyclic.get_mut("c").unwrap().remove("a");
    assert_eq!(find_cycle(&acyclic), None);
}

#[test]
fn super_paths_resolve_to_the_module_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("outer")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod low;\nmod outer;\npub use low::Thing;\n",
    )
    .unwrap();
    std::fs::write(src.join("low.rs"), "pub struct Thing;\n").unwrap();
    // `super::` from a file of a folder stays in the folder; from the folder's `mod.rs` it
    // reaches the root; inside an inline module it names the file's own module.
    std::fs::write(
        src.join("outer/mod.rs"),
        "mod inner;\nuse super::Thing;\n#[cfg(test)]\nmod tests { use super::inner; }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("outer/inner.rs"),
        "use super::super::low::Thing as T; // crate::ignored::in_comments\nfn f() { let _ = \"crate::in_strings\"; }\n",
    )
    .unwrap();
    let graph = import_graph(src);
    assert_eq!(
        graph.get("outer"),
        Some(&["low".to_string()].into_iter().collect())
    );
}

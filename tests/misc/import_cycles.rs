//! No two files of forge/src import each other, directly or around a longer
//! loop: every import between files points one way (CONTRIBUTING.md, "One
//! way imports"). A loop means a concept has no file of its own; give it
//! one below both users instead of allowing the loop.
//!
//! The graph is read from the source text, as `scripts/import_graph.py`
//! reads it (keep the two in step; the script also prints or draws the
//! graph):
//!
//! - the module tree comes from the `mod` declarations, from lib.rs down
//!   (`#[path]` followed; an inline `mod name { .. }` is a module of the
//!   file that holds it);
//! - with comments, strings and char literals blanked, every path that
//!   starts with `crate`, `super`, `self` or a child module's name is an
//!   import, in a `use` tree (braces expanded) or in code;
//! - a path goes to the file of its longest module prefix, and on through
//!   that file's `use` of the next name (a re-export, or an import its
//!   children reach by `super::`) to where the name comes from;
//! - `mod` declarations are not imports; an import from a file into the
//!   file of one of its ancestor modules (a submodule reaching its
//!   parent's items) is how one module's files share its items and is not
//!   counted; a cycle is a strongly connected set of two or more files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cycles that exist on purpose for now, each with the reason. The test
/// fails when one of them is gone, so a fixed loop is also taken off here.
const KNOWN: &[(&[&str], &str)] = &[];

/// Comments, string and char literals blanked; a `#[path = "..."]` string
/// is kept (it names a module's file).
pub(super) fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let n = c.len();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < n {
        let ch = c[i];
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 1;
            i += 2;
            while i < n && depth > 0 {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                } else {
                    i += 1;
                }
            }
        } else if ch == 'r'
            && (i == 0 || !ident_char(c[i - 1]))
            && raw_string_hashes(&c[i..]).is_some()
        {
            let hashes = raw_string_hashes(&c[i..]).unwrap_or(0);
            let mut j = i + 2 + hashes;
            loop {
                if j >= n {
                    break;
                }
                if c[j] == '"'
                    && c[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == '#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if ch == '"' {
            let mut j = i + 1;
            while j < n && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            let before: String = c[i.saturating_sub(40)..i].iter().collect();
            if after_path_attr(&before) {
                out.extend(&c[i..(j + 1).min(n)]);
            } else {
                out.push_str("\"\"");
            }
            i = j + 1;
        } else if ch == '\'' {
            match char_literal_len(&c[i..]) {
                Some(len) => {
                    out.push_str("' '");
                    i += len;
                }
                None => {
                    out.push(ch);
                    i += 1;
                }
            }
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

/// `Some(#s)` when `s` starts a raw string `r#*"`.
fn raw_string_hashes(s: &[char]) -> Option<usize> {
    let hashes = s[1..].iter().take_while(|&&h| h == '#').count();
    (s.get(1 + hashes) == Some(&'"') && hashes < 128).then_some(hashes)
}

/// Whether `before` ends with `#[path =` (and blanks).
fn after_path_attr(before: &str) -> bool {
    before
        .trim_end()
        .strip_suffix('=')
        .is_some_and(|t| t.trim_end().ends_with("#[path"))
}

/// The length of the char literal `s` starts with, or `None` (a lifetime).
fn char_literal_len(s: &[char]) -> Option<usize> {
    if s.get(1) == Some(&'\\') {
        // '\n', '\'', '\x41', '\u{1F600}'
        let end = s.iter().skip(3).position(|&ch| ch == '\'')? + 3;
        (end < 16).then_some(end + 1)
    } else {
        (s.len() > 2 && s[1] != '\'' && s[2] == '\'').then_some(3)
    }
}

pub(super) fn is_ident(t: &str) -> bool {
    t.starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_')
}

/// Identifiers, numbers (a digit and the letters, digits and `_` after
/// it), `::`, string literals and single other characters.
pub(super) fn tokens(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '"' {
            let j = c[i + 1..]
                .iter()
                .position(|&q| q == '"')
                .map_or(c.len(), |p| i + 1 + p);
            out.push(c[i..(j + 1).min(c.len())].iter().collect());
            i = j + 1;
        } else if ch.is_ascii_alphanumeric() || ch == '_' {
            let j = c[i..]
                .iter()
                .position(|&q| !(q.is_ascii_alphanumeric() || q == '_'))
                .map_or(c.len(), |p| i + p);
            out.push(c[i..j].iter().collect());
            i = j;
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(ch.to_string());
            i += 1;
        }
    }
    out
}

type Path_ = Vec<String>;

struct Module {
    path: Path_,
    file: String,
    children: BTreeSet<String>,
    /// name -> (module the `use` is written in, its path)
    bindings: BTreeMap<String, (usize, Path_)>,
    /// (module the path is written in, the path)
    refs: Vec<(usize, Path_)>,
}

struct Tree {
    src: PathBuf,
    modules: Vec<Module>,
    by_path: BTreeMap<Path_, usize>,
}

/// Parses a use tree at `t[i]` into `(path, bound name)` pairs; returns
/// the index after it.
pub(super) fn use_tree(
    t: &[String],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<(Path_, String)>,
) -> usize {
    let mut path = prefix.to_vec();
    while i < t.len() {
        let tok = t[i].as_str();
        if tok == "{" {
            i += 1;
            while i < t.len() && t[i] != "}" {
                i = use_tree(t, i, &path, out);
                if i < t.len() && t[i] == "," {
                    i += 1;
                }
            }
            return i + 1;
        }
        if tok == "*" {
            out.push((path, "*".into()));
            return i + 1;
        }
        if tok == "::" {
            i += 1;
            continue;
        }
        if is_ident(tok) {
            path.push(tok.to_string());
            i += 1;
            if i < t.len() && t[i] == "::" {
                continue;
            }
            let mut name = tok.to_string();
            if i + 1 < t.len() && t[i] == "as" {
                name = t[i + 1].clone();
                i += 2;
            }
            if path.last().map(String::as_str) == Some("self") {
                path.pop();
                if name == "self" {
                    name = path.last().cloned().unwrap_or_else(|| "self".into());
                }
            }
            out.push((path, name));
            return i;
        }
        return i + 1;
    }
    i
}

impl Tree {
    fn read(src: &Path) -> Tree {
        let mut tree = Tree {
            src: src.to_path_buf(),
            modules: Vec::new(),
            by_path: BTreeMap::new(),
        };
        let root = tree.add(Vec::new(), "lib.rs".into());
        tree.parse(root, "lib.rs");
        tree
    }

    fn add(&mut self, path: Path_, file: String) -> usize {
        self.modules.push(Module {
            path: path.clone(),
            file,
            children: BTreeSet::new(),
            bindings: BTreeMap::new(),
            refs: Vec::new(),
        });
        let id = self.modules.len() - 1;
        self.by_path.insert(path, id);
        id
    }

    fn parse(&mut self, module: usize, rel: &str) {
        let text =
            std::fs::read_to_string(self.src.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let t = tokens(&strip(&text));
        let rel_path = Path::new(rel);
        let base_dir = rel_path.parent().unwrap_or(Path::new("")).to_path_buf();
        let stem = rel_path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let child_dir = if stem == "lib" || stem == "mod" {
            base_dir.clone()
        } else {
            base_dir.join(stem)
        };
        let mut stack = vec![(module, 0usize)];
        let mut depth = 0usize;
        let mut pending_path: Option<String> = None;
        let mut i = 0;
        while i < t.len() {
            let cur = stack.last().expect("the file's module").0;
            let tok = t[i].as_str();
            if tok == "#" && i + 4 < t.len() && t[i + 1] == "[" && t[i + 2] == "path" {
                pending_path = Some(t[i + 4].trim_matches('"').to_string());
                i += 5;
                continue;
            }
            if tok == "mod"
                && i + 2 < t.len()
                && is_ident(&t[i + 1])
                && (t[i + 2] == ";" || t[i + 2] == "{")
            {
                let name = t[i + 1].clone();
                let mut path = self.modules[cur].path.clone();
                path.push(name.clone());
                self.modules[cur].children.insert(name.clone());
                if t[i + 2] == ";" {
                    let mut inner = child_dir.clone();
                    for &(m, _) in &stack[1..] {
                        inner.push(self.modules[m].path.last().expect("inline module name"));
                    }
                    let file = match pending_path.take() {
                        Some(p) => normalize(&base_dir.join(p)),
                        None => {
                            let f = inner.join(format!("{name}.rs"));
                            if self.src.join(&f).exists() {
                                f
                            } else {
                                inner.join(&name).join("mod.rs")
                            }
                        }
                    };
                    let file = file.to_string_lossy().replace('\\', "/");
                    let child = self.add(path, file.clone());
                    self.parse(child, &file);
                } else {
                    let child = self.add(path, rel.to_string());
                    depth += 1;
                    stack.push((child, depth));
                }
                pending_path = None;
                i += 3;
                continue;
            }
            if tok == "use" {
                let mut pairs = Vec::new();
                i = use_tree(&t, i + 1, &[], &mut pairs);
                for (path, name) in pairs {
                    self.modules[cur].refs.push((cur, path.clone()));
                    if name != "*" {
                        self.modules[cur].bindings.insert(name, (cur, path));
                    }
                }
                continue;
            }
            if tok == "{" {
                depth += 1;
            } else if tok == "}" {
                if stack.len() > 1 && stack.last().map(|s| s.1) == Some(depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
            } else if is_ident(tok)
                && i + 2 < t.len()
                && t[i + 1] == "::"
                && (i == 0 || t[i - 1] != "::")
            {
                let mut path = vec![tok.to_string()];
                let mut j = i + 1;
                while j + 1 < t.len() && t[j] == "::" && is_ident(&t[j + 1]) {
                    path.push(t[j + 1].clone());
                    j += 2;
                }
                self.modules[cur].refs.push((cur, path));
                i = j;
                continue;
            }
            i += 1;
        }
    }

    /// The path from the crate root, or `None` when it starts outside.
    fn absolute(&self, ctx: usize, path: &[String]) -> Option<Path_> {
        let head = path.first()?.as_str();
        let m = &self.modules[ctx];
        match head {
            "crate" => Some(path[1..].to_vec()),
            "super" | "self" => relative(&m.path, path),
            _ if m.children.contains(head) => {
                let mut p = m.path.clone();
                p.extend_from_slice(path);
                Some(p)
            }
            _ => None,
        }
    }

    /// The file a path written in module `ctx` points to.
    fn resolve(&self, ctx: usize, path: &[String], seen: usize) -> Option<&str> {
        let abs = self.absolute(ctx, path)?;
        if seen > 16 {
            return None;
        }
        let mut k = 0;
        while k < abs.len() && self.by_path.contains_key(&abs[..k + 1]) {
            k += 1;
        }
        let m = &self.modules[self.by_path[&abs[..k]]];
        if let Some((bctx, bpath)) = abs.get(k).and_then(|name| m.bindings.get(name)) {
            let mut next = bpath.clone();
            next.extend_from_slice(&abs[k + 1..]);
            return self.resolve(*bctx, &next, seen + 1);
        }
        Some(&m.file)
    }

    /// File -> the files it imports (ancestors' files and itself left out).
    fn edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for m in &self.modules {
            let ancestors: BTreeSet<&str> = (0..m.path.len())
                .map(|k| self.modules[self.by_path[&m.path[..k]]].file.as_str())
                .collect();
            for (ctx, path) in &m.refs {
                match self.resolve(*ctx, path, 0) {
                    Some(target) if target != m.file && !ancestors.contains(target) => {
                        edges
                            .entry(m.file.clone())
                            .or_default()
                            .insert(target.to_string());
                    }
                    _ => {}
                }
            }
        }
        edges
    }

    fn files(&self) -> BTreeSet<String> {
        self.modules.iter().map(|m| m.file.clone()).collect()
    }
}

/// `path`, which starts with `super` or `self` segments, written in the
/// module at `base`: from the crate root, or `None` above it.
pub(super) fn relative(base: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut out = base.to_vec();
    let mut k = 0;
    while k < path.len() && (path[k] == "super" || path[k] == "self") {
        if path[k] == "super" {
            out.pop()?;
        }
        k += 1;
    }
    out.extend_from_slice(&path[k..]);
    Some(out)
}

/// `a/./b/../c` -> `a/c`.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Strongly connected sets of two or more files (Tarjan), each sorted.
fn cycles(
    files: &BTreeSet<String>,
    edges: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        on: BTreeSet<&'a str>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(ws) = s.edges.get(v) {
            for w in ws {
                if !s.index.contains_key(w.as_str()) {
                    visit(s, w);
                    let lw = s.low[w.as_str()];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if s.on.contains(w.as_str()) {
                    let iw = s.index[w.as_str()];
                    let lv = s.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on: BTreeSet::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for f in files {
        if !s.index.contains_key(f.as_str()) {
            visit(&mut s, f);
        }
    }
    s.out.sort();
    s.out
}

fn graph() -> (BTreeSet<String>, BTreeMap<String, BTreeSet<String>>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("forge/src");
    let tree = Tree::read(&src);
    (tree.files(), tree.edges())
}

#[test]
fn no_two_files_of_forge_import_each_other() {
    let (files, edges) = graph();
    let n_edges: usize = edges.values().map(BTreeSet::len).sum();
    println!("{} files, {n_edges} edges", files.len());
    // The reading must find the crate (a parser that saw nothing would
    // find no cycle either).
    assert!(
        files.len() > 100 && n_edges > 500,
        "{} files, {n_edges} edges",
        files.len()
    );
    let found = cycles(&files, &edges);
    let known: Vec<Vec<String>> = KNOWN
        .iter()
        .map(|(c, _)| c.iter().map(|f| f.to_string()).collect())
        .collect();
    let mut problems = Vec::new();
    for comp in &found {
        if !known.contains(comp) {
            let mut lines = vec![format!("cycle: {}", comp.join(" <-> "))];
            for a in comp {
                for b in edges
                    .get(a)
                    .into_iter()
                    .flatten()
                    .filter(|b| comp.contains(b))
                {
                    lines.push(format!("    {a} -> {b}"));
                }
            }
            problems.push(lines.join("\n"));
        }
    }
    for (c, why) in KNOWN {
        let c: Vec<String> = c.iter().map(|f| f.to_string()).collect();
        if !found.contains(&c) {
            problems.push(format!(
                "the known cycle {} ({why}) is gone: take it off KNOWN in tests/misc/import_cycles.rs",
                c.join(" <-> ")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "files of forge/src that import each other (give the shared concept a file of its own \
         below both; `python3 scripts/import_graph.py` prints the same graph):\n{}",
        problems.join("\n")
    );
}

/// The reader on a small tree: a re-export is followed to where the name
/// is defined, an import of an ancestor's item is not an edge, and a loop
/// between two siblings is found.
#[test]
fn the_reader_follows_re_exports_and_finds_a_sibling_loop() {
    let dir = std::env::temp_dir().join(format!("forge_import_cycles_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    let write = |f: &str, s: &str| std::fs::write(dir.join(f), s).unwrap();
    write("lib.rs", "pub mod a;\n// use crate::a::c; (a comment)\n");
    write(
        "a/mod.rs",
        "mod b;\nmod c;\npub use b::Thing;\npub(crate) struct Own;\nconst S: &str = \"crate::a::c::X\";\n",
    );
    write(
        "a/b.rs",
        "use super::Own;\npub struct Thing;\nfn f() { super::c::g() }\n",
    );
    write("a/c.rs", "use crate::a::Thing;\npub fn g() {}\n");
    let tree = Tree::read(&dir);
    let edges = tree.edges();
    let of = |f: &str| -> Vec<&str> {
        edges
            .get(f)
            .map_or(vec![], |s| s.iter().map(String::as_str).collect())
    };
    assert_eq!(of("lib.rs"), Vec::<&str>::new(), "comments are not imports");
    assert_eq!(of("a/mod.rs"), ["a/b.rs"], "the re-export, not the string");
    assert_eq!(
        of("a/b.rs"),
        ["a/c.rs"],
        "super::Own is the parent's own item"
    );
    assert_eq!(
        of("a/c.rs"),
        ["a/b.rs"],
        "crate::a::Thing is followed to b.rs"
    );
    assert_eq!(
        cycles(&tree.files(), &edges),
        vec![vec!["a/b.rs".to_string(), "a/c.rs".into()]]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

//! forge's public API is the one listed in `forge/public-api.txt`: this
//! test lists it again from the source and fails on any difference, so
//! every addition, removal or signature change is made on purpose, in the
//! same commit as the listing. After a deliberate change, regenerate the
//! file with `scripts/public_api.sh` (which runs this test with
//! `FORGE_WRITE_PUBLIC_API=1`) and commit it.
//!
//! The listing is read from the source text (no rustdoc JSON on a stable
//! toolchain, no parser crate): one line per public path, `path: decl`,
//! sorted.
//!
//! - Public modules are those reached from lib.rs through `pub mod` and
//!   through `pub use` of a module; an item is public when it is `pub` in
//!   one of them or `pub use`d there. Each item is listed in full (its
//!   declaration up to the body, its `pub` fields, its variants, its trait
//!   items) at its shortest public path; every other public path to it is
//!   a `use` line.
//! - The `pub` methods of every inherent `impl` of a public type, and the
//!   header of every trait `impl` for it (or, for a foreign type, of a
//!   public trait), wherever in the crate they are written.
//! - What a source reading cannot expand is listed by its call: macro
//!   invocations at module level or in an `impl` (`crate::<module>:` lines),
//!   so a change to them shows as well.
//! - `#[cfg(test)]` and `#[cfg(doctest)]` items are left out; `#[doc(hidden)]` ones are marked.

use super::import_cycles::{is_ident, relative, strip, tokens, use_tree};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

type Segs = Vec<String>;

/// A declaration: `kind`, its rendered header, and its members
/// (`(name, rendered)`: fields, variants, trait items).
struct Item {
    decl: String,
    hidden: bool,
    public: bool,
    members: Vec<(String, String)>,
}

struct Impl {
    self_ty: Option<Segs>,
    trait_: Option<Segs>,
    header: String,
    /// `pub` methods (inherent impls) and macro calls, `(name, rendered)`.
    members: Vec<(String, String)>,
}

struct Use {
    name: String,
    path: Segs,
    public: bool,
    hidden: bool,
}

#[derive(Default)]
struct Module {
    path: Segs,
    children: BTreeMap<String, (usize, bool, bool)>,
    items: BTreeMap<String, Item>,
    uses: Vec<Use>,
    impls: Vec<Impl>,
    /// `(macro name, rendered call)` at module level.
    macro_calls: Vec<(String, String)>,
    /// The `macro_rules!` written here whose body can make API (a `pub`
    /// item or an `impl`).
    api_macros: BTreeSet<String>,
}

struct Crate {
    src: PathBuf,
    modules: Vec<Module>,
    by_path: BTreeMap<Segs, usize>,
}

/// `(` `[` `{` `<` depth changes for one token (a `>` after `-` or `=` is
/// an arrow, not a bracket).
fn depth_change(t: &[String], i: usize, angles: bool) -> i32 {
    match t[i].as_str() {
        "(" | "[" | "{" => 1,
        ")" | "]" | "}" => -1,
        "<" if angles => 1,
        ">" if angles && !(i > 0 && (t[i - 1] == "-" || t[i - 1] == "=")) => -1,
        _ => 0,
    }
}

/// The index after the group that opens at `t[i]`.
fn skip_group(t: &[String], i: usize) -> usize {
    let mut d = 0;
    let mut j = i;
    while j < t.len() {
        d += depth_change(t, j, false);
        j += 1;
        if d == 0 {
            break;
        }
    }
    j
}

/// The index of the first `{` or `;` at depth 0 from `i`.
fn header_end(t: &[String], mut i: usize) -> usize {
    let mut d = 0;
    while i < t.len() {
        if d == 0 && (t[i] == "{" || t[i] == ";") {
            return i;
        }
        d += depth_change(t, i, false);
        i += 1;
    }
    i
}

fn is_word(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '"')
}

/// Tokens as one line of Rust, spaced as rustfmt would in the common cases.
fn render(t: &[String]) -> String {
    let mut toks: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if (t[i] == "-" || t[i] == "=") && t.get(i + 1).map(String::as_str) == Some(">") {
            toks.push(if t[i] == "-" { "->" } else { "=>" });
            i += 2;
        } else {
            toks.push(&t[i]);
            i += 1;
        }
    }
    // a trailing comma depends on how rustfmt broke the line: drop it
    let toks: Vec<&str> = toks
        .iter()
        .enumerate()
        .filter(|&(k, s)| {
            !(*s == ","
                && toks
                    .get(k + 1)
                    .is_none_or(|n| matches!(*n, ")" | "]" | "}" | ">")))
        })
        .map(|(_, s)| *s)
        .collect();
    let mut out = String::new();
    for (k, b) in toks.iter().enumerate() {
        if k > 0 {
            let a = toks[k - 1];
            let spaced_op = |x: &str| matches!(x, "->" | "=" | "+" | "=>");
            if (is_word(a) && is_word(b))
                || matches!(a, "," | ";" | ":")
                || spaced_op(a)
                || spaced_op(b)
                || (*b == "'" && is_word(a))
                || (matches!(a, "mut" | "dyn" | "for" | "where" | "as" | "in")
                    && !matches!(*b, "," | ")" | ">" | "]" | "<"))
                || (a == ">" && is_word(b))
            {
                out.push(' ');
            }
        }
        out.push_str(b);
    }
    out
}

/// Splits the tokens between `t[open]` and its close at commas of depth 0.
fn split_commas(t: &[String], open: usize) -> (Vec<(usize, usize)>, usize) {
    let close = skip_group(t, open) - 1;
    let mut parts = Vec::new();
    let mut d = 0;
    let mut start = open + 1;
    for i in open + 1..close {
        if d == 0 && t[i] == "," {
            parts.push((start, i));
            start = i + 1;
        } else {
            d += depth_change(t, i, true);
        }
    }
    if start < close {
        parts.push((start, close));
    }
    (parts, close + 1)
}

/// Attributes from `t[i]`: `(index after them, cfg(test), doc(hidden),
/// macro_export)`.
fn attributes(t: &[String], mut i: usize) -> (usize, bool, bool, bool) {
    let (mut test, mut hidden, mut export) = (false, false, false);
    while i < t.len() && t[i] == "#" {
        let open = if t.get(i + 1).map(String::as_str) == Some("!") {
            i + 2
        } else {
            i + 1
        };
        let end = skip_group(t, open);
        let text = t[open..end].concat();
        test |= text == "[cfg(test)]" || text == "[cfg(doctest)]";
        hidden |= text == "[doc(hidden)]";
        export |= text == "[macro_export]";
        i = end;
    }
    (i, test, hidden, export)
}

/// The path of a type written at `t[a..b]` (`&'a mut Tensor<E>` ->
/// `Tensor`), or `None` for tuples, arrays, slices and pointers.
fn type_path(t: &[String], mut a: usize, b: usize) -> Option<Segs> {
    while a < b && matches!(t[a].as_str(), "&" | "mut" | "dyn" | "'") {
        a += if t[a] == "'" { 2 } else { 1 };
    }
    let mut segs = Vec::new();
    while a < b && is_ident(&t[a]) {
        segs.push(t[a].clone());
        if t.get(a + 1).map(String::as_str) == Some("::") && a + 2 < b && is_ident(&t[a + 2]) {
            a += 2;
        } else {
            break;
        }
    }
    (!segs.is_empty()).then_some(segs)
}

impl Crate {
    fn read(src: &Path) -> Crate {
        let mut c = Crate {
            src: src.to_path_buf(),
            modules: Vec::new(),
            by_path: BTreeMap::new(),
        };
        let root = c.add(Vec::new());
        let t = c.file_tokens("lib.rs");
        c.items(&t, 0, t.len(), root, "lib.rs", &[], false);
        c
    }

    fn add(&mut self, path: Segs) -> usize {
        self.modules.push(Module {
            path: path.clone(),
            ..Module::default()
        });
        self.by_path.insert(path, self.modules.len() - 1);
        self.modules.len() - 1
    }

    /// A module outside the tree, to read a trait's or an impl's body into.
    fn scratch(&mut self) -> usize {
        self.modules.push(Module::default());
        self.modules.len() - 1
    }

    fn file_tokens(&self, rel: &str) -> Vec<String> {
        let text =
            std::fs::read_to_string(self.src.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        tokens(&strip(&text))
    }

    /// Reads the items of `t[i..end]` into module `m` (written in file
    /// `rel`, inside the inline modules `inline`); `in_trait`: a trait's
    /// body, whose items are all public.
    #[allow(clippy::too_many_arguments)]
    fn items(
        &mut self,
        t: &[String],
        mut i: usize,
        end: usize,
        m: usize,
        rel: &str,
        inline: &[String],
        in_trait: bool,
    ) {
        while i < end {
            let (j, test, hidden, export) = attributes(t, i);
            i = j;
            if i >= end {
                break;
            }
            let mut public = in_trait;
            if t[i] == "pub" {
                if t.get(i + 1).map(String::as_str) == Some("(") {
                    i = skip_group(t, i + 1);
                } else {
                    public = true;
                    i += 1;
                }
            }
            let decl_start = i;
            while i < end
                && (matches!(t[i].as_str(), "unsafe" | "async" | "default")
                    || (t[i] == "const" && t.get(i + 1).map(String::as_str) == Some("fn"))
                    || (t[i] == "extern" && t.get(i + 1).is_some_and(|s| s.starts_with('"'))))
            {
                i += if t[i] == "extern" { 2 } else { 1 };
            }
            if i >= end {
                break;
            }
            let kw = t[i].clone();
            match kw.as_str() {
                "fn" | "type" | "const" | "static" | "struct" | "union" | "enum" | "trait" => {
                    let name = t[i + 1].clone();
                    let h = header_end(t, i);
                    let mut members = Vec::new();
                    let mut next = if t.get(h).map(String::as_str) == Some("{") {
                        skip_group(t, h)
                    } else {
                        h + 1
                    };
                    let decl_end = if matches!(kw.as_str(), "const" | "static") {
                        (decl_start..h).find(|&k| t[k] == "=").unwrap_or(h)
                    } else {
                        h
                    };
                    if t.get(h).map(String::as_str) == Some("{") {
                        match kw.as_str() {
                            "struct" | "union" => {
                                let (parts, _) = split_commas(t, h);
                                for (a, b) in parts {
                                    let (a, ftest, fhidden, _) = attributes(t, a);
                                    if !ftest
                                        && t[a] == "pub"
                                        && t.get(a + 1).map(String::as_str) != Some("(")
                                    {
                                        let mark = if fhidden { "#[doc(hidden)] " } else { "" };
                                        members.push((
                                            t[a + 1].clone(),
                                            format!("{mark}field {}", render(&t[a + 1..b])),
                                        ));
                                    }
                                }
                            }
                            "enum" => {
                                let (parts, _) = split_commas(t, h);
                                for (a, b) in parts {
                                    let (a, _, vhidden, _) = attributes(t, a);
                                    if a < b {
                                        let mark = if vhidden { "#[doc(hidden)] " } else { "" };
                                        members.push((
                                            t[a].clone(),
                                            format!("{mark}variant {}", render(&t[a..b])),
                                        ));
                                    }
                                }
                            }
                            "trait" => {
                                let inner = self.scratch();
                                self.items(t, h + 1, next - 1, inner, rel, inline, true);
                                let trait_items = std::mem::take(&mut self.modules[inner].items);
                                for (n, item) in trait_items {
                                    members.push((n, item.decl));
                                }
                            }
                            _ => {}
                        }
                    }
                    if kw == "fn" && t.get(h).map(String::as_str) == Some(";") {
                        next = h + 1;
                    }
                    if !test {
                        let item = Item {
                            decl: render(&t[decl_start..decl_end]),
                            hidden,
                            public,
                            members,
                        };
                        self.modules[m].items.entry(name).or_insert(item);
                    }
                    i = next;
                }
                "impl" => {
                    let h = header_end(t, i);
                    let mut a = i + 1;
                    if t.get(a).map(String::as_str) == Some("<") {
                        let mut d = 0;
                        loop {
                            d += depth_change(t, a, true);
                            a += 1;
                            if d == 0 {
                                break;
                            }
                        }
                    }
                    let stop = (a..h).find(|&k| t[k] == "where").unwrap_or(h);
                    let mut d = 0;
                    let mut for_at = None;
                    for k in a..stop {
                        if d == 0 && t[k] == "for" && t.get(k + 1).map(String::as_str) != Some("<")
                        {
                            for_at = Some(k);
                        }
                        d += depth_change(t, k, true);
                    }
                    let (trait_, self_ty) = match for_at {
                        Some(f) => (type_path(t, a, f), type_path(t, f + 1, stop)),
                        None => (None, type_path(t, a, stop)),
                    };
                    let next = skip_group(t, h);
                    let mut members = Vec::new();
                    if !test {
                        let inner = self.scratch();
                        self.items(t, h + 1, next - 1, inner, rel, inline, false);
                        let body = std::mem::take(&mut self.modules[inner]);
                        if for_at.is_none() {
                            for (n, item) in body.items {
                                if item.public {
                                    let mark = if item.hidden { "#[doc(hidden)] " } else { "" };
                                    members.push((n, format!("{mark}{}", item.decl)));
                                }
                            }
                        }
                        for (name, call) in body.macro_calls {
                            members.push((format!("!{name}"), call));
                        }
                        self.modules[m].impls.push(Impl {
                            self_ty,
                            trait_,
                            header: render(&t[decl_start..h]),
                            members,
                        });
                    }
                    i = next;
                }
                "mod" => {
                    let name = t[i + 1].clone();
                    let mut path = self.modules[m].path.clone();
                    path.push(name.clone());
                    if test {
                        i = if t[i + 2] == "{" {
                            skip_group(t, i + 2)
                        } else {
                            i + 3
                        };
                        continue;
                    }
                    let child = self.add(path);
                    self.modules[m]
                        .children
                        .insert(name.clone(), (child, public, hidden));
                    if t[i + 2] == "{" {
                        let next = skip_group(t, i + 2);
                        let mut inner = inline.to_vec();
                        inner.push(name);
                        self.items(t, i + 3, next - 1, child, rel, &inner, false);
                        i = next;
                    } else {
                        let file = self.child_file(rel, inline, &name, t, decl_start);
                        let ct = self.file_tokens(&file);
                        self.items(&ct, 0, ct.len(), child, &file, &[], false);
                        i += 3;
                    }
                }
                "use" => {
                    let mut pairs = Vec::new();
                    let e = (i..end).find(|&k| t[k] == ";").unwrap_or(end);
                    use_pairs(&t[i + 1..e], &mut pairs);
                    for (path, name) in pairs {
                        self.modules[m].uses.push(Use {
                            name,
                            path,
                            public,
                            hidden,
                        });
                    }
                    i = e + 1;
                }
                "macro_rules" => {
                    let name = t[i + 2].clone();
                    let next = skip_group(t, i + 3);
                    let makes_api = (i + 3..next).any(|k| {
                        t[k] == "impl"
                            || (t[k] == "pub" && t.get(k + 1).map(String::as_str) != Some("("))
                    });
                    if makes_api {
                        self.modules[m].api_macros.insert(name.clone());
                    }
                    if export && !test {
                        self.modules[0].items.insert(
                            name.clone(),
                            Item {
                                decl: format!("macro_rules! {name}"),
                                hidden,
                                public: true,
                                members: Vec::new(),
                            },
                        );
                    }
                    i = if t.get(next).map(String::as_str) == Some(";") {
                        next + 1
                    } else {
                        next
                    };
                }
                "extern" => {
                    let h = header_end(t, i);
                    i = if t.get(h).map(String::as_str) == Some("{") {
                        skip_group(t, h)
                    } else {
                        h + 1
                    };
                }
                _ if is_ident(&kw) && t.get(i + 1).map(String::as_str) == Some("!") => {
                    let next = skip_group(t, i + 2);
                    if !test {
                        self.modules[m]
                            .macro_calls
                            .push((kw.clone(), render(&t[i..next])));
                    }
                    i = if t.get(next).map(String::as_str) == Some(";") {
                        next + 1
                    } else {
                        next
                    };
                }
                _ => i += 1,
            }
        }
    }

    /// The file of `mod name;` written in `rel` inside inline modules
    /// `inline` (`#[path]` followed).
    fn child_file(
        &self,
        rel: &str,
        inline: &[String],
        name: &str,
        t: &[String],
        decl_start: usize,
    ) -> String {
        let rel_path = Path::new(rel);
        let base = rel_path.parent().unwrap_or(Path::new("")).to_path_buf();
        // a `#[path = "..."]` just before the declaration
        let back = decl_start.saturating_sub(12);
        if let Some(k) = (back..decl_start)
            .find(|&k| t[k] == "path" && t.get(k + 1).map(String::as_str) == Some("="))
        {
            return base
                .join(t[k + 2].trim_matches('"'))
                .to_string_lossy()
                .into_owned();
        }
        let stem = rel_path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let mut dir = if stem == "lib" || stem == "mod" {
            base
        } else {
            base.join(stem)
        };
        for seg in inline {
            dir.push(seg);
        }
        let f = dir.join(format!("{name}.rs"));
        if self.src.join(&f).exists() {
            f.to_string_lossy().into_owned()
        } else {
            dir.join(name).join("mod.rs").to_string_lossy().into_owned()
        }
    }

    /// A path written in module `m`, from the crate root; `None` outside
    /// the crate. A bare name is looked up among `m`'s items and `use`s.
    fn absolute(&self, m: usize, path: &[String], depth: usize) -> Option<Segs> {
        let md = &self.modules[m];
        let head = path.first()?.as_str();
        match head {
            "crate" => Some(path[1..].to_vec()),
            "super" | "self" => relative(&md.path, path),
            _ if md.children.contains_key(head) || md.items.contains_key(head) => {
                let mut p = md.path.clone();
                p.extend_from_slice(path);
                Some(p)
            }
            _ => {
                let u = md.uses.iter().find(|u| u.name == head)?;
                if depth > 16 {
                    return None;
                }
                let mut p = self.absolute(m, &u.path, depth + 1)?;
                p.extend_from_slice(&path[1..]);
                Some(p)
            }
        }
    }

    /// What a path written in module `m` names: `Ok((module, Some(item)))`,
    /// `Ok((module, None))` for a module, `Err(path)` outside the crate or
    /// not found.
    fn resolve(
        &self,
        m: usize,
        path: &[String],
        depth: usize,
    ) -> Result<(usize, Option<String>), String> {
        let written = path.join("::");
        let abs = self.absolute(m, path, 0).ok_or_else(|| written.clone())?;
        let mut k = 0;
        while k < abs.len() && self.by_path.contains_key(&abs[..k + 1]) {
            // `use m::f` of a function `f` beside a private module `f`
            // (re-exported from it) takes the function
            let parent = &self.modules[self.by_path[&abs[..k]]];
            let last = k + 1 == abs.len();
            let private_mod = parent.children.get(&abs[k]).is_some_and(|c| !c.1);
            let also_item =
                parent.items.contains_key(&abs[k]) || parent.uses.iter().any(|u| u.name == abs[k]);
            if last && private_mod && also_item {
                break;
            }
            k += 1;
        }
        let target = self.by_path[&abs[..k]];
        match abs.len() - k {
            0 => Ok((target, None)),
            1 => {
                let name = &abs[k];
                if self.modules[target].items.contains_key(name) {
                    return Ok((target, Some(name.clone())));
                }
                match self.modules[target].uses.iter().find(|u| &u.name == name) {
                    Some(u) if depth < 16 => self.resolve(target, &u.path, depth + 1),
                    _ => Err(written),
                }
            }
            _ => Err(written),
        }
    }

    /// The listing, one line per public path, sorted.
    fn listing(&self) -> Vec<String> {
        let mut lines = BTreeSet::new();
        // public paths of every item: (module, name) -> [(path, hidden)]
        let mut paths: BTreeMap<(usize, String), Vec<(String, bool)>> = BTreeMap::new();
        let mut module_path: BTreeMap<usize, String> = BTreeMap::new();
        let mut queue = VecDeque::from([(0usize, "forge".to_string(), false)]);
        let mut uses = Vec::new();
        while let Some((m, p, hidden)) = queue.pop_front() {
            if module_path.contains_key(&m) {
                continue;
            }
            module_path.insert(m, p.clone());
            let mark = if hidden { "#[doc(hidden)] " } else { "" };
            lines.insert(format!("{p}: {mark}mod"));
            let md = &self.modules[m];
            for (name, &(child, public, h)) in &md.children {
                if public {
                    queue.push_back((child, format!("{p}::{name}"), hidden || h));
                }
            }
            for (name, item) in &md.items {
                if item.public {
                    paths
                        .entry((m, name.clone()))
                        .or_default()
                        .push((format!("{p}::{name}"), hidden || item.hidden));
                }
            }
            for u in md.uses.iter().filter(|u| u.public && u.name != "*") {
                let at = format!("{p}::{}", u.name);
                match self.resolve(m, &u.path, 0) {
                    Ok((target, Some(name))) => {
                        paths
                            .entry((target, name))
                            .or_default()
                            .push((at, hidden || u.hidden));
                    }
                    Ok((target, None)) => {
                        queue.push_back((target, at.clone(), hidden || u.hidden));
                        uses.push((at, target));
                    }
                    Err(_) => {
                        lines.insert(format!("{at}: use {}", u.path.join("::")));
                    }
                }
            }
        }
        for (at, target) in uses {
            if module_path[&target] != at {
                lines.insert(format!("{at}: use {}", module_path[&target]));
            }
        }
        // the primary path of each public item
        let mut primary: BTreeMap<(usize, String), String> = BTreeMap::new();
        for (key, ps) in &paths {
            // where it is defined when that module is public, else its
            // shortest path
            let best = match module_path.get(&key.0) {
                Some(p) => format!("{p}::{}", key.1),
                None => ps
                    .iter()
                    .map(|(s, _)| s.clone())
                    .min_by_key(|s| (s.matches("::").count(), s.clone()))
                    .expect("at least one path"),
            };
            let item = &self.modules[key.0].items[&key.1];
            let hidden = ps.iter().all(|(_, h)| *h);
            let mark = if hidden { "#[doc(hidden)] " } else { "" };
            lines.insert(format!("{best}: {mark}{}", item.decl));
            for (n, decl) in &item.members {
                lines.insert(format!("{best}::{n}: {decl}"));
            }
            for (s, _) in ps {
                if *s != best {
                    lines.insert(format!("{s}: use {best}"));
                }
            }
            primary.insert(key.clone(), best);
        }
        // impls, wherever they are written, and the calls of macros that
        // can make API
        let api_macros: BTreeSet<&str> = self
            .modules
            .iter()
            .flat_map(|md| md.api_macros.iter().map(String::as_str))
            .collect();
        for (m, md) in self.modules.iter().enumerate() {
            if md.path.is_empty() && m != 0 {
                continue; // a trait's or an impl's body
            }
            for im in &md.impls {
                let find = |p: &Option<Segs>| -> Option<&String> {
                    let p = p.as_ref()?;
                    match self.resolve(m, p, 0) {
                        Ok((t, Some(n))) => primary.get(&(t, n)),
                        _ => None,
                    }
                };
                let owner = find(&im.self_ty).or_else(|| find(&im.trait_));
                let Some(owner) = owner else { continue };
                if im.trait_.is_some() {
                    lines.insert(format!("{owner}: {}", im.header));
                }
                for (n, decl) in &im.members {
                    match n.strip_prefix('!') {
                        Some(mac) if api_macros.contains(mac) => {
                            lines.insert(format!("{owner}: {}: {decl}", im.header));
                        }
                        Some(_) => {}
                        None => {
                            lines.insert(format!("{owner}::{n}: {decl}"));
                        }
                    }
                }
            }
            for (mac, call) in &md.macro_calls {
                if api_macros.contains(mac.as_str()) {
                    lines.insert(format!("crate::{}: {call}", md.path.join("::")));
                }
            }
        }
        lines.into_iter().collect()
    }
}

/// `(path, bound name)` pairs of a use tree (without `use` and `;`).
fn use_pairs(t: &[String], out: &mut Vec<(Segs, String)>) {
    let mut i = 0;
    while i < t.len() {
        i = use_tree(t, i, &[], out);
    }
}

fn listing() -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("forge/src");
    let mut s = Crate::read(&src).listing().join("\n");
    s.push('\n');
    s
}

#[test]
fn the_public_api_is_the_listed_one() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("forge/public-api.txt");
    let now = listing();
    if std::env::var_os("FORGE_WRITE_PUBLIC_API").is_some() {
        std::fs::write(&file, &now).expect("write forge/public-api.txt");
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    if committed == now {
        return;
    }
    let old: BTreeSet<&str> = committed.lines().collect();
    let new: BTreeSet<&str> = now.lines().collect();
    let mut diff: Vec<String> = old.difference(&new).map(|l| format!("- {l}")).collect();
    diff.extend(new.difference(&old).map(|l| format!("+ {l}")));
    let shown = diff.len().min(60);
    panic!(
        "forge's public API differs from forge/public-api.txt ({} lines; `-` listed, `+` now):\n{}{}\n\
         If the change is meant, regenerate the listing with `scripts/public_api.sh` \
         (FORGE_WRITE_PUBLIC_API=1 cargo test --test suite public_api) and commit it.",
        diff.len(),
        diff[..shown].join("\n"),
        if shown < diff.len() { "\n..." } else { "" }
    );
}

/// The reader on a small crate: a re-exported item from a private module,
/// its methods and trait impl, a `pub(crate)` item left out.
#[test]
fn the_reader_lists_re_exports_methods_and_impls() {
    let dir = std::env::temp_dir().join(format!("forge_public_api_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |f: &str, s: &str| std::fs::write(dir.join(f), s).unwrap();
    write(
        "lib.rs",
        "pub mod a;\nmod b;\npub use b::Thing;\n#[cfg(test)]\nmod tests;\n",
    );
    write(
        "a.rs",
        "pub fn f<E: Copy>(x: &[E], n: [u8; 16]) -> Option<E> { None }\npub(crate) fn g() {}\n",
    );
    write(
        "b.rs",
        "pub struct Thing { pub size: usize, secret: u8 }\n\
         impl Thing { pub fn new() -> Self { todo!() } fn hidden(&self) {} }\n\
         impl Clone for Thing { fn clone(&self) -> Self { todo!() } }\n",
    );
    let got = Crate::read(&dir).listing();
    assert_eq!(
        got,
        [
            "forge: mod",
            "forge::Thing: struct Thing",
            "forge::Thing::new: fn new() -> Self",
            "forge::Thing::size: field size: usize",
            "forge::Thing: impl Clone for Thing",
            "forge::a: mod",
            "forge::a::f: fn f<E: Copy>(x: &[E], n: [u8; 16]) -> Option<E>",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

//! The user guide (`docs/src/*.md`) and `CONTRIBUTING.md` hold together:
//! every relative link names a file that exists (and, for a `#anchor`, a
//! heading of that file, with mdBook's heading ids), every chapter is listed
//! in `docs/src/SUMMARY.md`, and every chapter is compiled as a doc test
//! through `forge/src/guide.rs`; and the runtime chapter lists every
//! `FORGE_*` variable the library reads. Web links are not checked (no
//! network in tests).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The guide's Markdown files, sorted.
fn chapters() -> Vec<PathBuf> {
    let dir = root().join("docs/src");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The lines outside fenced code blocks, with their numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match fence {
            Some(f) if t.starts_with(f) => fence = None,
            Some(_) => {}
            None if t.starts_with("```") => fence = Some("```"),
            None if t.starts_with("~~~") => fence = Some("~~~"),
            None => out.push((i + 1, line)),
        }
    }
    out
}

/// `line` without its inline code spans (`` `a](b)` `` is not a link).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + run..];
        match after.find(&"`".repeat(run)) {
            Some(end) => rest = &after[end + run..],
            None => {
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The link targets of one line of prose: `[text](target "title")` and
/// reference definitions `[name]: target`.
fn links(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(
            target
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string(),
        );
        rest = &after[end..];
    }
    let t = line.trim_start();
    if let Some((_, target)) = t.split_once("]: ").filter(|_| t.starts_with('[')) {
        out.push(target.split_whitespace().next().unwrap_or("").to_string());
    }
    out
}

/// The id mdBook gives a heading: its text without Markdown (code spans
/// keep their text, links their label), lowercased, spaces as `-`, other
/// punctuation dropped; a repeated id gets `-1`, `-2`, ...
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let mut title = line[hashes..]
            .trim()
            .trim_end_matches('#')
            .trim()
            .to_string();
        // [label](target) -> label
        while let (Some(open), Some(mid)) = (title.find('['), title.find("](")) {
            let Some(close) = title[mid..].find(')').map(|c| mid + c) else {
                break;
            };
            if open > mid {
                break;
            }
            title = format!(
                "{}{}{}",
                &title[..open],
                &title[open + 1..mid],
                &title[close + 1..]
            );
        }
        let id: String = title
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_ascii_lowercase())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 1;
        while ids.contains(&unique) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        ids.insert(unique);
    }
    ids
}

/// Every broken relative link of `doc`, as `doc:line: target (why)`.
fn broken_links(doc: &Path) -> Vec<String> {
    let text = read(doc);
    let dir = doc.parent().unwrap();
    let mut broken = Vec::new();
    for (n, line) in prose_lines(&text) {
        for target in links(line) {
            if target.is_empty() {
                broken.push(format!("{}:{n}: an empty link", doc.display()));
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.to_path_buf()
            } else {
                dir.join(file)
            };
            if !path.exists() {
                broken.push(format!("{}:{n}: {target} (no such file)", doc.display()));
                continue;
            }
            let is_md = path.extension().is_some_and(|x| x == "md");
            if let Some(anchor) =
                anchor.filter(|a| is_md && !heading_ids(&read(&path)).contains(*a))
            {
                broken.push(format!(
                    "{}:{n}: {target} (no heading with id `{anchor}` in {})",
                    doc.display(),
                    path.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn relative_links_of_the_guide_and_contributing_resolve() {
    let mut docs = chapters();
    docs.push(root().join("CONTRIBUTING.md"));
    let broken: Vec<String> = docs.iter().flat_map(|d| broken_links(d)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_chapter_is_in_the_summary() {
    let summary_path = root().join("docs/src/SUMMARY.md");
    let summary = read(&summary_path);
    let listed: BTreeSet<String> = prose_lines(&summary)
        .into_iter()
        .flat_map(|(_, l)| links(l))
        .collect();
    for chapter in chapters() {
        let name = chapter.file_name().unwrap().to_string_lossy().to_string();
        if name != "SUMMARY.md" {
            assert!(
                listed.contains(&name),
                "docs/src/{name} is not listed in docs/src/SUMMARY.md"
            );
        }
    }
}

#[test]
fn every_chapter_is_compiled_as_a_doc_test() {
    let guide = read(&root().join("forge/src/guide.rs"));
    for chapter in chapters() {
        let name = chapter.file_name().unwrap().to_string_lossy().to_string();
        if name == "SUMMARY.md" {
            continue;
        }
        let include = format!("include_str!(\"../../docs/src/{name}\")");
        assert!(
            guide.contains(&include),
            "docs/src/{name} is not included in forge/src/guide.rs, so its Rust blocks are not tested"
        );
    }
}

/// The helpers above find what they should (a checker that finds nothing
/// passes everything).
#[test]
fn the_link_and_heading_parsers_work() {
    assert_eq!(
        links("see [a](a.md), [b](b.md#x \"t\") and `[c](c.md)`"),
        ["a.md", "b.md#x"]
    );
    assert_eq!(
        links("[tch-rs]: https://example.org/x"),
        ["https://example.org/x"]
    );
    let ids = heading_ids("# Layers and `#[derive(Layer)]`\n```text\n# not a heading\n```\n## The [runtime](r.md): threads\n## Data\n## Data\n");
    let want: BTreeSet<String> = [
        "layers-and-derivelayer",
        "the-runtime-threads",
        "data",
        "data-1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(ids, want);
    assert!(chapters().len() > 5, "the guide's chapters were not found");
}

/// Every `FORGE_*` environment variable the library reads is in the
/// runtime chapter's table: the names are the string literals
/// `"FORGE_..."` of `forge/src/`.
#[test]
fn every_forge_variable_is_in_the_runtime_chapter() {
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    rust_files(&root().join("forge/src"), &mut files);
    let mut names = BTreeSet::new();
    for file in files {
        let text = read(&file);
        for (i, _) in text.match_indices("\"FORGE_") {
            let name: String = text[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    assert!(
        names.contains("FORGE_NUM_THREADS"),
        "the scan found {names:?}"
    );
    let chapter = read(&root().join("docs/src/runtime.md"));
    for name in names {
        assert!(
            chapter.contains(&format!("| `{name}` |")),
            "forge reads {name}, which docs/src/runtime.md's table does not list"
        );
    }
}

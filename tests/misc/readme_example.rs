//! The README is the five-minute page: its Rust blocks are compiled and
//! run as doc tests (`forge`'s `ReadmeDoctests`, under `cfg(doctest)`);
//! these tests keep it short, free of dated measurement logs, and its
//! relative links pointing at files that exist. The longer examples it
//! used to carry (`forge/src/training_example.md`,
//! `forge/src/nn/example.md`) are compiled where the API docs include them.

use std::path::Path;

const README: &str = include_str!("../../README.md");

/// The issue that set the README's shape asks for at most 250 lines.
#[test]
fn readme_is_at_most_250_lines() {
    let lines = README.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; the guide in docs/ holds the rest"
    );
}

/// Dated logs (`12:34 UTC`) belong in bench/results/ and bench/EXPERIMENTS.md.
#[test]
fn readme_holds_no_dated_log() {
    for (i, line) in README.lines().enumerate() {
        let b = line.as_bytes();
        let timed = b.windows(9).any(|w| {
            w[0].is_ascii_digit()
                && w[1].is_ascii_digit()
                && w[2] == b':'
                && w[3].is_ascii_digit()
                && w[4].is_ascii_digit()
                && &w[5..9] == b" UTC"
        });
        assert!(!timed, "README.md line {}: a dated log line: {line}", i + 1);
    }
}

/// Every relative link `](path)` and `]: path` of the README names a file or
/// folder of the repository (web links are not checked).
#[test]
fn readme_links_point_at_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut targets = Vec::new();
    for line in README.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let end = after.find(')').unwrap_or(after.len());
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
        if let Some(t) = line.strip_prefix('[').and_then(|l| l.split_once("]: ")) {
            targets.push(t.1.trim().to_string());
        }
    }
    assert!(!targets.is_empty(), "no links found: the parser is broken");
    for t in targets {
        if t.starts_with("http://") || t.starts_with("https://") || t.starts_with('#') {
            continue;
        }
        let file = t.split('#').next().unwrap();
        assert!(
            root.join(file).exists(),
            "README.md links to {t}, which does not exist"
        );
    }
}

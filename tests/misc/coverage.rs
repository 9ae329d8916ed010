//! The PyTorch coverage table holds: every forge path that `docs/coverage.tsv`
//! (written by `scripts/coverage.py`, committed) lists for a name it calls
//! present is in forge's public API (`forge/public-api.txt`, itself checked
//! against the source by `public_api.rs`), and the chapter
//! `docs/src/coverage.md` shows the same rows. No PyTorch needed: the list
//! is committed. After an API change that removes or renames an operator,
//! rerun `python3 scripts/coverage.py --offline` (or with PyTorch, without
//! `--offline`) and commit both files.

use std::collections::BTreeSet;
use std::path::Path;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The public paths without `forge::`, with `Tensor::x` for the methods of
/// `tensor::Tensor` and for each identifier of a macro call in forge/src/ops
/// (the methods such a macro writes are listed by the call), as
/// `scripts/coverage.py` reads them.
fn public_paths(listing: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for line in listing.lines() {
        if line.starts_with("crate::ops::") {
            let args = line.split_once('!').map_or("", |(_, a)| a);
            for word in args.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                    paths.insert(format!("Tensor::{word}"));
                }
            }
            continue;
        }
        let Some(rest) = line.strip_prefix("forge::") else {
            continue;
        };
        let path = rest
            .split_once(": ")
            .map_or(rest, |(p, _)| p)
            .trim_end_matches(':');
        if let Some(method) = path.strip_prefix("tensor::") {
            if method.starts_with("Tensor::") {
                paths.insert(method.to_string());
            }
        }
        paths.insert(path.to_string());
    }
    paths
}

struct Row<'a> {
    section: &'a str,
    name: &'a str,
    present: bool,
    paths: Vec<&'a str>,
}

fn rows(tsv: &str) -> Vec<Row<'_>> {
    tsv.lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#'))
        .map(|(i, line)| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 4, "docs/coverage.tsv:{}: expected 4 tab-separated columns: {line:?}", i + 1);
            let present = match cols[2] {
                "present" => true,
                "missing" => false,
                other => panic!("docs/coverage.tsv:{}: status {other:?} (present or missing)", i + 1),
            };
            let paths: Vec<&str> = cols[3].split_whitespace().collect();
            assert_eq!(
                present,
                !paths.is_empty(),
                "docs/coverage.tsv:{}: a present name lists its forge paths, a missing one none: {line:?}",
                i + 1
            );
            Row { section: cols[0], name: cols[1], present, paths }
        })
        .collect()
}

#[test]
fn every_name_the_table_calls_present_is_in_the_public_api() {
    let tsv = read("docs/coverage.tsv");
    let known = public_paths(&read("forge/public-api.txt"));
    let rows = rows(&tsv);
    // Several hundred names: a truncated or emptied list fails here.
    assert!(
        rows.len() >= 400,
        "docs/coverage.tsv lists {} names, expected several hundred",
        rows.len()
    );
    let mut absent = Vec::new();
    for row in rows.iter().filter(|r| r.present) {
        for path in &row.paths {
            if !known.contains(*path) {
                absent.push(format!("{}.{} -> {path}", row.section, row.name));
            }
        }
    }
    assert!(
        absent.is_empty(),
        "docs/coverage.tsv calls these present but forge's public API has no such item \
         (rerun `python3 scripts/coverage.py --offline` after renaming or removing an op):\n{}",
        absent.join("\n")
    );
}

/// The operators issue 34 lists, by PyTorch name (`torch.x` or `F.x`:
/// either of those sections; `nn.X`: torch.nn), all of which the table must
/// call present.
const ISSUE_34: &[&str] = &[
    "interpolate",
    "topk",
    "cat",
    "softmax",
    "sort",
    "argsort",
    "cumsum",
    "cumprod",
    "einsum",
    "norm",
    "normalize",
    "cosine_similarity",
    "pairwise_distance",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sign",
    "isnan",
    "isinf",
    "isfinite",
    "nan_to_num",
    "masked_select",
    "nonzero",
    "repeat_interleave",
    "unbind",
    "roll",
    "flip",
    "prod",
    "scatter",
    "index_put",
    "index_copy",
    "unfold",
    "fold",
    "pad",
    "rms_norm",
    "instance_norm",
    "hardswish",
    "hardsigmoid",
    "relu6",
    "hardtanh",
    "prelu",
    "selu",
    "celu",
    "glu",
    "logsigmoid",
    "softsign",
    "pixel_shuffle",
    "pixel_unshuffle",
    "conv3d",
    "max_pool3d",
    "avg_pool3d",
    "conv_transpose1d",
    "adaptive_max_pool2d",
    "bilinear",
    "embedding_bag",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "margin_ranking_loss",
    "multilabel_soft_margin_loss",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "ctc_loss",
    "nn.Upsample",
    "nn.RMSNorm",
    "nn.InstanceNorm1d",
    "nn.InstanceNorm2d",
    "nn.LSTMCell",
    "nn.GRUCell",
    "nn.RNNCell",
    "nn.Hardswish",
    "nn.Hardsigmoid",
    "nn.ReLU6",
    "nn.Hardtanh",
    "nn.PReLU",
    "nn.SELU",
    "nn.CELU",
    "nn.GLU",
    "nn.LogSigmoid",
    "nn.Softsign",
    "nn.PixelShuffle",
    "nn.PixelUnshuffle",
    "nn.Conv3d",
    "nn.MaxPool3d",
    "nn.AvgPool3d",
    "nn.ConvTranspose1d",
    "nn.AdaptiveMaxPool2d",
    "nn.Identity",
    "nn.Unflatten",
    "nn.Bilinear",
    "nn.EmbeddingBag",
    "nn.CosineEmbeddingLoss",
    "nn.TripletMarginLoss",
    "nn.MarginRankingLoss",
    "nn.MultiLabelSoftMarginLoss",
    "nn.PoissonNLLLoss",
    "nn.GaussianNLLLoss",
    "nn.CTCLoss",
    "nn.ReflectionPad2d",
    "nn.ReplicationPad2d",
    "nn.CircularPad2d",
    "nn.BatchNorm2d",
];

#[test]
fn every_operator_of_issue_34_is_present() {
    let tsv = read("docs/coverage.tsv");
    let rows = rows(&tsv);
    let mut missing = Vec::new();
    for want in ISSUE_34 {
        let found = match want.strip_prefix("nn.") {
            Some(name) => rows
                .iter()
                .find(|r| r.section == "torch.nn" && r.name == name),
            None => rows.iter().find(|r| {
                (r.section == "torch" || r.section == "torch.nn.functional") && r.name == *want
            }),
        };
        match found {
            Some(r) if r.present => {}
            Some(_) => missing.push(format!("{want}: listed missing")),
            None => missing.push(format!("{want}: not in the table")),
        }
    }
    assert!(
        missing.is_empty(),
        "issue 34's operators not present:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_chapter_shows_the_rows_of_the_list() {
    let tsv = read("docs/coverage.tsv");
    let md = read("docs/src/coverage.md");
    let rows = rows(&tsv);
    let short = |section: &str| match section {
        "torch" => "torch",
        "torch.nn" => "nn",
        "torch.nn.functional" => "F",
        other => panic!("docs/coverage.tsv: unknown section {other:?}"),
    };
    for row in &rows {
        let head = format!("| `{}.{}` | ", short(row.section), row.name);
        let line = md
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| {
                panic!(
                    "docs/src/coverage.md has no row for {}.{}",
                    row.section, row.name
                )
            });
        if row.present {
            for path in &row.paths {
                assert!(
                    line.contains(&format!("`{path}`")),
                    "docs/src/coverage.md: {line:?} does not show {path}"
                );
            }
        } else {
            assert!(
                line.contains("| missing"),
                "docs/src/coverage.md: {line:?} should say missing"
            );
        }
    }
    let present = rows.iter().filter(|r| r.present).count();
    let total = format!("**{present} of {}**", rows.len());
    assert!(
        md.contains(&total),
        "docs/src/coverage.md does not state {total}"
    );
}

#[test]
fn public_paths_reads_methods_items_and_macro_calls() {
    let listing = "crate::ops::compare: comparisons!{eq, eq_scalar, = = }\n\
                   forge::nn::Relu: use activation::Relu\n\
                   forge::tensor::Tensor::abs: fn abs(&self) -> Self\n\
                   forge::nn: mod\n";
    let paths = public_paths(listing);
    for p in [
        "Tensor::eq",
        "Tensor::eq_scalar",
        "nn::Relu",
        "Tensor::abs",
        "tensor::Tensor::abs",
        "nn",
    ] {
        assert!(paths.contains(p), "{p} missing from {paths:?}");
    }
    assert!(!paths.contains("Tensor::Relu"));
}

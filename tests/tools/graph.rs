//! Graph export: the DOT text parses (balanced braces, every statement a
//! node or an edge, every edge endpoint declared) and holds one node per
//! recorded op, one per leaf and one per untracked input.

use forge::prelude::*;
use forge::tools::{Graph, NodeKind};
use std::collections::{BTreeMap, BTreeSet};

/// A parsed DOT graph: node key -> its attribute text, and the edges.
struct Dot {
    nodes: BTreeMap<String, String>,
    edges: Vec<(String, String)>,
}

/// A small DOT reader for what `to_dot` writes: one `digraph name { ... }`,
/// statements ending in `;`, quoted strings with `\` escapes, graph-wide
/// `key=value` and `node [...]` defaults. Panics on anything else.
fn parse_dot(s: &str) -> Dot {
    let s = s.trim();
    assert!(s.starts_with("digraph "), "not a digraph: {s}");
    // Braces balance outside quoted strings, and the body closes at the end.
    let (mut depth, mut in_str, mut esc, mut close_at) = (0i32, false, false, None);
    for (i, c) in s.char_indices() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                assert!(depth >= 0, "unbalanced at byte {i}");
                if depth == 0 && c == '}' {
                    close_at = Some(i);
                }
            }
            _ => {}
        }
    }
    assert!(!in_str && depth == 0, "unbalanced braces or quotes");
    assert_eq!(close_at, Some(s.len() - 1), "text after the closing brace");
    let body = &s[s.find('{').unwrap() + 1..s.len() - 1];
    let mut dot = Dot {
        nodes: BTreeMap::new(),
        edges: Vec::new(),
    };
    for stmt in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let stmt = stmt
            .strip_suffix(';')
            .unwrap_or_else(|| panic!("no ';': {stmt}"));
        if let Some((a, b)) = stmt.split_once(" -> ") {
            dot.edges.push((a.trim().to_string(), b.trim().to_string()));
        } else if let Some((key, attrs)) = stmt.split_once(" [") {
            let attrs = attrs.strip_suffix(']').expect("attribute list closes");
            if key != "node" && key != "edge" {
                assert!(
                    key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "node id {key}"
                );
                assert!(
                    dot.nodes
                        .insert(key.to_string(), attrs.to_string())
                        .is_none(),
                    "{key} twice"
                );
            }
        } else {
            assert!(stmt.contains('='), "unknown statement {stmt}");
        }
    }
    for (a, b) in &dot.edges {
        assert!(
            dot.nodes.contains_key(a) && dot.nodes.contains_key(b),
            "edge {a} -> {b} to an undeclared node"
        );
    }
    dot
}

fn label(attrs: &str) -> &str {
    let start = attrs.find("label=\"").unwrap() + 7;
    let rest = &attrs[start..];
    &rest[..rest.find("\\n").unwrap()]
}

#[test]
fn dot_of_a_chain_has_one_box_per_op_run() {
    let x = Tensor::<f32>::from_vec((0..12).map(|i| i as f32 * 0.1).collect(), &[3, 4]);
    let w = Tensor::<f32>::ones(&[4, 2]).requires_grad();
    let mut h = x.matmul(&w);
    let mut ran = vec!["matmul"];
    for i in 0..40 {
        h = match i % 4 {
            0 => h.tanh(),
            1 => &h * 0.5,
            2 => h.exp(),
            _ => &h * &h, // one op reading the same tensor twice
        };
        ran.push(["tanh", "mul_scalar", "exp", "mul"][i % 4]);
    }
    let loss = h.sum();
    ran.push("sum");
    let g = Graph::of(&loss);
    let dot = parse_dot(&g.to_dot());
    let boxes: Vec<&str> = dot
        .nodes
        .values()
        .filter(|a| a.contains("shape=box"))
        .map(|a| label(a))
        .collect();
    assert_eq!(boxes.len(), ran.len());
    assert_eq!(g.op_count(), ran.len());
    // Node order is tape order, which is the order the ops ran.
    let ops: Vec<&str> = g
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Op)
        .map(|n| n.label.as_str())
        .collect();
    assert_eq!(ops, ran);
    // One leaf (w), one constant (x); each `h * h` has two edges from h.
    assert_eq!(g.nodes.len(), ran.len() + 2);
    let squares = ran.iter().filter(|s| **s == "mul").count();
    assert_eq!(dot.edges.len(), 2 + (ran.len() - 1) + squares);
    // The shapes: the matmul and everything after it is [3, 2], the sum [].
    assert!(g
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Op)
        .all(|n| n.shape == [3, 2] || n.label == "sum"));
    let sum = g.nodes.last().unwrap();
    assert_eq!(
        (sum.label.as_str(), sum.shape.len(), sum.dtype),
        ("sum", 0, "float32")
    );
    assert_eq!(sum.site.unwrap().file, file!());
}

#[test]
fn a_models_leaves_carry_their_parameter_paths() {
    let mut rng = Rng::new(1);
    let model = forge::sequential![
        forge::f32::Linear::new(4, 8, &mut rng),
        forge::nn::Relu,
        forge::f32::Linear::new(8, 3, &mut rng)
    ];
    let x = Tensor::<f32>::ones(&[2, 4]);
    let loss = model.forward(x).square().mean();
    let g = Graph::of(&loss).with_layer(&model);
    let dot = parse_dot(&g.to_dot());
    let leaves: BTreeSet<&str> = dot
        .nodes
        .values()
        .filter(|a| a.contains("#cfe2ff"))
        .map(|a| label(a))
        .collect();
    let paths: BTreeSet<String> = model
        .named_parameters()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(leaves, paths.iter().map(String::as_str).collect());
    assert!(
        paths.contains("0.weight") && paths.contains("2.bias"),
        "{paths:?}"
    );
    // Every op of the step is in the graph once, whatever the layers record.
    assert_eq!(
        g.op_count(),
        dot.nodes
            .values()
            .filter(|a| a.contains("shape=box"))
            .count()
    );
}

#[test]
fn an_untracked_tensor_is_one_constant() {
    let t = Tensor::<f64>::zeros(&[2, 2]);
    let dot = parse_dot(&forge::tools::to_dot(&t));
    assert_eq!(dot.nodes.len(), 1);
    assert!(dot.edges.is_empty());
}

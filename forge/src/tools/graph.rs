//! Graph export: the recorded graph of a tensor (every op that led to it,
//! its leaves and the untracked inputs) as data and as Graphviz DOT.

use super::anomaly::CallSite;
use crate::nn::Layer;
use crate::tensor::node::Node;
use crate::tensor::{Device, Element, Float, Tensor};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// What a [`GraphNode`] stands for.
///
/// ```
/// use forge::tools::{Graph, NodeKind};
/// let w = forge::Tensor::<f32>::ones(&[2]).requires_grad();
/// let g = Graph::of(&(&w * &forge::Tensor::ones(&[2])));
/// let kinds: Vec<NodeKind> = g.nodes.iter().map(|n| n.kind.clone()).collect();
/// assert_eq!(kinds, [NodeKind::Leaf, NodeKind::Constant, NodeKind::Op]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A recorded op (its name in [`GraphNode::label`]).
    Op,
    /// A tensor that requires a gradient (a parameter or an input leaf).
    Leaf,
    /// An input of an op that is not tracked (data, a constant).
    Constant,
}

/// One node of an exported graph.
///
/// ```
/// let w = forge::Tensor::<f64>::ones(&[2, 3]).requires_grad();
/// let g = forge::tools::Graph::of(&w.tanh());
/// let op = &g.nodes[1];
/// assert_eq!((op.label.as_str(), op.shape.as_slice(), op.dtype), ("tanh", &[2, 3][..], "float64"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GraphNode {
    /// The node's name in the DOT text: `n<tape id>` for ops and leaves,
    /// `c<k>` for untracked inputs.
    pub key: String,
    /// What the node stands for.
    pub kind: NodeKind,
    /// The op's name (`matmul`), the leaf's parameter path when known
    /// (`fc1.weight`, else `leaf`), or `const`.
    pub label: String,
    /// The shape of the node's value.
    pub shape: Vec<usize>,
    /// The element type's name (`float32`, as PyTorch prints it).
    pub dtype: &'static str,
    /// Where the op was called (ops only).
    pub site: Option<CallSite>,
}

/// The recorded graph of a tensor: nodes in ascending tape order (inputs
/// before the ops that read them), and edges from input to op.
///
/// ```
/// use forge::tools::{Graph, NodeKind};
/// use forge::Tensor;
/// let w = Tensor::<f32>::ones(&[3]).requires_grad();
/// let x = Tensor::<f32>::ones(&[3]);
/// let loss = (&w * &x).relu().sum();
/// let g = Graph::of(&loss);
/// let ops: Vec<&str> = g.nodes.iter().filter(|n| n.kind == NodeKind::Op).map(|n| n.label.as_str()).collect();
/// assert_eq!(ops, ["mul", "relu", "sum"]);
/// assert!(g.to_dot().starts_with("digraph forge {"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// Every node, leaves and constants before the ops that read them.
    pub nodes: Vec<GraphNode>,
    /// `(from, to)` indices into `nodes`: an input flowing into an op, one
    /// edge per input slot (an op reading a tensor twice has two edges).
    pub edges: Vec<(usize, usize)>,
    /// Leaf tape id -> index into `nodes`, for naming leaves.
    leaves: BTreeMap<u64, usize>,
}

impl Graph {
    /// The graph recorded for `t`: every op and leaf it was computed from.
    /// An untracked tensor gives a graph with one constant node.
    ///
    /// ```
    /// let x = forge::Tensor::<f64>::ones(&[2]).requires_grad();
    /// let g = forge::tools::Graph::of(&x.exp());
    /// assert_eq!(g.nodes.len(), 2);
    /// assert_eq!(g.edges, vec![(0, 1)]);
    /// ```
    pub fn of<E: Element, D: Device>(t: &Tensor<E, D>) -> Graph {
        let dtype = t.dtype().torch_name();
        let mut g = Graph::default();
        let Some(root) = t.node.clone() else {
            g.nodes.push(constant(0, t.shape(), dtype));
            return g;
        };
        // Every node reachable from the root, and each one's shape (known
        // from any tensor handle that points at it).
        let mut shapes: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        shapes.insert(root.id, t.shape().to_vec());
        let mut seen: HashSet<u64> = HashSet::from([root.id]);
        let mut all: Vec<Arc<Node<E, D>>> = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            for input in &n.inputs {
                if let Some(p) = &input.node {
                    shapes.entry(p.id).or_insert_with(|| input.shape().to_vec());
                    if seen.insert(p.id) {
                        stack.push(p.clone());
                    }
                }
            }
            all.push(n);
        }
        all.sort_unstable_by_key(|n| n.id);
        let mut index: BTreeMap<u64, usize> = BTreeMap::new();
        let mut constants = 0;
        for n in &all {
            let mut edges_in = Vec::new();
            for input in &n.inputs {
                match &input.node {
                    Some(p) => edges_in.push(index[&p.id]),
                    None => {
                        g.nodes.push(constant(constants, input.shape(), dtype));
                        constants += 1;
                        edges_in.push(g.nodes.len() - 1);
                    }
                }
            }
            let is_leaf = n.backward.is_none();
            g.nodes.push(GraphNode {
                key: format!("n{}", n.id),
                kind: if is_leaf {
                    NodeKind::Leaf
                } else {
                    NodeKind::Op
                },
                label: if is_leaf {
                    "leaf".into()
                } else {
                    n.name.into()
                },
                shape: shapes[&n.id].clone(),
                dtype,
                site: n.origin.map(CallSite::of),
            });
            let me = g.nodes.len() - 1;
            index.insert(n.id, me);
            if is_leaf {
                g.leaves.insert(n.id, me);
            }
            g.edges.extend(edges_in.into_iter().map(|from| (from, me)));
        }
        g
    }

    /// Labels the leaves that are `model`'s parameters with their paths
    /// (`fc1.weight`).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::tools::Graph;
    /// let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// let y = fc.forward(Tensor::ones(&[1, 3])).sum();
    /// let dot = Graph::of(&y).with_layer(&fc).to_dot();
    /// assert!(dot.contains("weight\\n[2, 3] float32"));
    /// ```
    pub fn with_layer<E: Float, L: Layer<E> + ?Sized>(self, model: &L) -> Graph {
        self.with_names(model.named_parameters())
    }

    /// Labels the leaves found among `named` with the given names.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// let g = forge::tools::Graph::of(&w.exp()).with_names([("w".to_string(), w.clone())]);
    /// assert_eq!(g.nodes[0].label, "w");
    /// ```
    pub fn with_names<E: Element, D: Device>(
        mut self,
        named: impl IntoIterator<Item = (String, Tensor<E, D>)>,
    ) -> Graph {
        for (name, t) in named {
            if let Some(&i) = t.id().and_then(|id| self.leaves.get(&id)) {
                self.nodes[i].label = name;
            }
        }
        self
    }

    /// How many nodes are recorded ops.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// assert_eq!(forge::tools::Graph::of(&w.exp().sum()).op_count(), 2);
    /// ```
    pub fn op_count(&self) -> usize {
        self.nodes.iter().filter(|n| n.kind == NodeKind::Op).count()
    }

    /// The graph in Graphviz's DOT language (`dot -Tsvg graph.dot`): ops as
    /// boxes labelled with name, shape and dtype (the call site as a
    /// tooltip), leaves as blue ellipses with their parameter path,
    /// untracked inputs as grey ellipses, edges from input to op.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// let dot = forge::tools::Graph::of(&w.exp()).to_dot();
    /// assert!(dot.contains("[label=\"exp\\n[2] float32\""));
    /// ```
    pub fn to_dot(&self) -> String {
        let mut s =
            String::from("digraph forge {\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n");
        for n in &self.nodes {
            let label = escape(&format!("{}\n{:?} {}", n.label, n.shape, n.dtype));
            let style = match n.kind {
                NodeKind::Op => "shape=box".to_string(),
                NodeKind::Leaf => "shape=ellipse, style=filled, fillcolor=\"#cfe2ff\"".to_string(),
                NodeKind::Constant => {
                    "shape=ellipse, style=filled, fillcolor=\"#eeeeee\"".to_string()
                }
            };
            let tip = match &n.site {
                Some(site) if n.kind == NodeKind::Op => {
                    format!(", tooltip=\"{}\"", escape(&site.to_string()))
                }
                _ => String::new(),
            };
            let _ = writeln!(s, "  {} [label=\"{label}\", {style}{tip}];", n.key);
        }
        for &(a, b) in &self.edges {
            let _ = writeln!(s, "  {} -> {};", self.nodes[a].key, self.nodes[b].key);
        }
        s.push_str("}\n");
        s
    }
}

fn constant(k: usize, shape: &[usize], dtype: &'static str) -> GraphNode {
    GraphNode {
        key: format!("c{k}"),
        kind: NodeKind::Constant,
        label: "const".into(),
        shape: shape.to_vec(),
        dtype,
        site: None,
    }
}

/// Escapes a DOT string's quotes, backslashes and line breaks.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The recorded graph of `t` as Graphviz DOT: [`Graph::of`] then
/// [`Graph::to_dot`].
///
/// ```
/// let w = forge::Tensor::<f32>::ones(&[2]).requires_grad();
/// let dot = forge::tools::to_dot(&(&w * &w).sum());
/// assert_eq!(dot.matches(" -> ").count(), 3); // w -> mul twice, mul -> sum
/// ```
pub fn to_dot<E: Element, D: Device>(t: &Tensor<E, D>) -> String {
    Graph::of(t).to_dot()
}

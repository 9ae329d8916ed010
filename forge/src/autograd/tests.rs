//! Unit tests of the tape that need its private parts: the graph is freed
//! when the loss (and any gradient that holds the graph) is dropped.

use crate::cpu::memory::Storage;
use crate::tensor::node::Node;
use crate::tensor::{Device, Element, Float, Tensor};
use std::collections::HashSet;
use std::sync::{Arc, Weak};

type Handles<E, D> = (Vec<Weak<Node<E, D>>>, Vec<Weak<Storage<E>>>);

/// Weak handles to every node reachable from `t` (itself included) and to
/// the data of every tensor the graph holds as an op input.
fn graph_handles<E: Element, D: Device>(t: &Tensor<E, D>) -> Handles<E, D> {
    let mut nodes = Vec::new();
    let mut data = vec![Arc::downgrade(&t.storage)];
    let mut seen = HashSet::new();
    let mut stack: Vec<Arc<Node<E, D>>> = t.node.iter().cloned().collect();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.id) {
            continue;
        }
        nodes.push(Arc::downgrade(&n));
        for input in &n.inputs {
            data.push(Arc::downgrade(&input.storage));
            if let Some(p) = &input.node {
                stack.push(p.clone());
            }
        }
    }
    (nodes, data)
}

/// The distinct buffers still alive.
fn survivors<E: Copy>(data: &[Weak<Storage<E>>]) -> HashSet<*const Storage<E>> {
    data.iter()
        .filter_map(|d| d.upgrade().map(|a| Arc::as_ptr(&a)))
        .collect()
}

fn buffers<E: Element>(ts: &[&Tensor<E>]) -> HashSet<*const Storage<E>> {
    ts.iter().map(|t| Arc::as_ptr(&t.storage)).collect()
}

fn alive<T>(w: &[Weak<T>]) -> usize {
    w.iter().filter(|w| w.upgrade().is_some()).count()
}

/// A loss through every op family the tape has, from leaves `w`, `b`.
fn loss_of<E: Float>(w: &Tensor<E>, b: &Tensor<E>, x: &Tensor<E>) -> Tensor<E> {
    let h = x.matmul_t(w).add(b).tanh();
    let h = h.exp().sigmoid().mul(&h.maximum(&h.sqrt_abs()));
    let h = h.permute(&[1, 0]).reshape(&[-1]).view(&[h.numel()]);
    let s = h.var_dim(&[0], 1, false) + h.std(0) + h.max_dim(&[0], false) + h.min();
    s.add(&h.mean()).square().sum()
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `sqrt(|x| + 1)`: a test-only composition of unary ops with saved
    /// outputs.
    fn sqrt_abs(&self) -> Self {
        self.abs().add_scalar(E::one()).sqrt()
    }
}

fn leaves() -> (Tensor<f64>, Tensor<f64>, Tensor<f64>) {
    let w = Tensor::<f64>::from_fn(&[4, 3], |i| (i as f64 * 0.37).sin()).requires_grad();
    let b = Tensor::<f64>::from_fn(&[4], |i| i as f64 * 0.1).requires_grad();
    let x = Tensor::<f64>::from_fn(&[5, 3], |i| (i as f64 * 0.11).cos());
    (w, b, x)
}

#[test]
fn dropping_the_loss_frees_the_graph() {
    let (w, b, x) = leaves();
    let loss = loss_of(&w, &b, &x);
    let (nodes, data) = graph_handles(&loss);
    assert!(nodes.len() > 20, "the graph has {} nodes", nodes.len());
    let g = loss.backward();
    assert!(g.get(&w).is_some() && g.get(&b).is_some());
    drop(g);
    // The leaves' own nodes and data stay alive through `w`, `b`, `x`.
    let live_leaves = 2;
    assert_eq!(alive(&nodes), nodes.len());
    drop(loss);
    assert_eq!(alive(&nodes), live_leaves, "op nodes outlived the loss");
    // Only the buffers of w, b and x survive.
    assert_eq!(
        survivors(&data),
        buffers(&[&w, &b, &x]),
        "intermediate buffers outlived the loss"
    );
}

#[test]
fn gradients_with_graph_hold_it_until_dropped() {
    let (w, b, x) = leaves();
    let loss = loss_of(&w, &b, &x);
    let (nodes, _) = graph_handles(&loss);
    let g = loss.backward_with_graph();
    let gw = g.get(&w).unwrap().clone();
    let (grad_nodes, grad_data) = graph_handles(&gw);
    assert!(gw.is_tracked() && grad_nodes.len() > nodes.len());
    drop(loss);
    // The first-order gradient's graph still uses the forward graph.
    assert!(alive(&grad_nodes) > 2);
    let hv = (&gw * &gw).sum().backward();
    assert!(hv.get(&w).is_some());
    drop((g, gw, hv));
    assert_eq!(alive(&nodes), 2, "forward nodes outlived every handle");
    assert_eq!(
        alive(&grad_nodes),
        2,
        "backward nodes outlived every handle"
    );
    assert_eq!(
        survivors(&grad_data),
        buffers(&[&w, &b, &x]),
        "intermediate buffers outlived every handle"
    );
}

#[test]
fn an_intermediate_is_freed_with_its_loss() {
    let w = Tensor::<f32>::ones(&[3]).requires_grad();
    let h = w.exp();
    let node = Arc::downgrade(h.node.as_ref().unwrap());
    let data = Arc::downgrade(&h.storage);
    let loss = (&h * &w).sum();
    drop(h);
    assert!(node.upgrade().is_some() && data.upgrade().is_some());
    let _ = loss.backward();
    drop(loss);
    assert!(node.upgrade().is_none(), "the exp node outlived the loss");
    assert!(data.upgrade().is_none(), "exp's output outlived the loss");
}

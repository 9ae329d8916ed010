//! Recording ops and the reverse pass.

use super::grad_mode::{is_grad_enabled, NoGradGuard};
use crate::tensor::node::{BackwardCtx, Node};
use crate::tensor::{Device, Element, Float, Tensor};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Gradients of a backward pass, looked up by the tensor they belong to.
///
/// Only leaves (tensors made with [`Tensor::requires_grad`]) are kept.
/// The gradients are detached unless they came from
/// [`Tensor::backward_with_graph`].
///
/// ```
/// use forge::Tensor;
/// let w = Tensor::<f64>::from_vec(vec![3.0], &[1]).requires_grad();
/// let g = (&w * &w).sum().backward();
/// assert_eq!(g.get(&w).unwrap().item(), 6.0);
/// ```
pub struct Gradients<E: Element = f32, D: Device = crate::Cpu> {
    map: BTreeMap<u64, Tensor<E, D>>,
}

impl<E: Element, D: Device> Gradients<E, D> {
    /// An empty set of gradients.
    ///
    /// ```
    /// let g = forge::Gradients::<f32>::new();
    /// assert!(g.is_empty());
    /// ```
    pub fn new() -> Self {
        Gradients {
            map: BTreeMap::new(),
        }
    }

    /// The gradient of `t`, or `None` if `t` is not a leaf that the loss
    /// depends on.
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// let b = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// let g = (&a * 2.0).sum().backward();
    /// assert!(g.get(&a).is_some() && g.get(&b).is_none());
    /// ```
    pub fn get(&self, t: &Tensor<E, D>) -> Option<&Tensor<E, D>> {
        t.id().and_then(|id| self.map.get(&id))
    }

    /// Sets (replaces) the gradient of a tracked tensor; used by gradient
    /// clipping and by users who combine gradients.
    ///
    /// # Panics
    /// When `t` is not tracked or the shapes differ.
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// let mut g = forge::Gradients::new();
    /// g.insert(&a, forge::Tensor::zeros(&[1]));
    /// assert_eq!(g.len(), 1);
    /// ```
    pub fn insert(&mut self, t: &Tensor<E, D>, grad: Tensor<E, D>) {
        let id = t
            .id()
            .expect("Gradients::insert: the tensor is not tracked");
        assert_eq!(
            t.shape(),
            grad.shape(),
            "Gradients::insert: gradient shape {:?} differs from tensor shape {:?}",
            grad.shape(),
            t.shape()
        );
        self.map.insert(id, grad);
    }

    /// Removes and returns the gradient of `t`.
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// let mut g = (&a * 1.0).sum().backward();
    /// assert!(g.remove(&a).is_some());
    /// ```
    pub fn remove(&mut self, t: &Tensor<E, D>) -> Option<Tensor<E, D>> {
        t.id().and_then(|id| self.map.remove(&id))
    }

    /// Number of gradients held.
    ///
    /// ```
    /// assert_eq!(forge::Gradients::<f32>::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no gradient is held.
    ///
    /// ```
    /// assert!(forge::Gradients::<f32>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every gradient, in ascending tensor-id order (a fixed order).
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// let g = (&a * 1.0).sum().backward();
    /// assert_eq!(g.iter().count(), 1);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = &Tensor<E, D>> {
        self.map.values()
    }

    /// Mutable access to every gradient, in ascending tensor-id order.
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// let mut g = (&a * 1.0).sum().backward();
    /// for t in g.iter_mut() { *t = t.detach(); }
    /// ```
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Tensor<E, D>> {
        self.map.values_mut()
    }
}

impl<E: Element, D: Device> Default for Gradients<E, D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Element, D: Device> Tensor<E, D> {
    /// Wraps an op's result, recording a node with `inputs` and the backward
    /// rule `f` when recording is enabled and any input is tracked.
    /// This is how every differentiable op is written; see
    /// `forge/src/ops/README.md`.
    ///
    /// ```
    /// use forge::Tensor;
    /// // y = 3x, written as a custom op.
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]).requires_grad();
    /// let y = Tensor::from_vec(x.to_vec().iter().map(|v| 3.0 * v).collect(), x.shape())
    ///     .record("triple", vec![x.clone()], |ctx| vec![Some(ctx.grad * 3.0)]);
    /// let g = y.sum().backward();
    /// assert_eq!(g.get(&x).unwrap().to_vec(), vec![3.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn record(
        self,
        name: &'static str,
        inputs: Vec<Tensor<E, D>>,
        f: impl Fn(&BackwardCtx<'_, E, D>) -> Vec<Option<Tensor<E, D>>> + Send + Sync + 'static,
    ) -> Self {
        let origin = std::panic::Location::caller();
        if crate::tools::hooks::active() {
            crate::tools::hooks::forward(name, &self, &inputs, origin);
        }
        if !is_grad_enabled() || !inputs.iter().any(|t| t.is_tracked()) {
            return self;
        }
        let node = Node::op(name, inputs, Box::new(f), origin);
        if crate::tools::hooks::active() {
            crate::tools::hooks::node_made(node.id);
        }
        self.with_node(Some(Arc::new(node)))
    }

    /// Shows the tools (the profiler, anomaly detection) the result of an
    /// op that takes a path recording nothing: a fast path outside autograd
    /// (the direct convolution, a convolution with its activation or folded
    /// batch norm, max pooling without positions) returns its output
    /// without [`record`](Self::record), which is where the tools see every
    /// other op. Without this the profiler credited such an op's time to
    /// the next op recorded (a VGG-style net's inference profiled as 99%
    /// `reshape`). One relaxed load when no tool is on.
    #[track_caller]
    pub(crate) fn seen<'a>(
        self,
        name: &'static str,
        inputs: impl IntoIterator<Item = &'a Tensor<E, D>>,
    ) -> Self
    where
        E: 'a,
        D: 'a,
    {
        if crate::tools::hooks::active() {
            let inputs: Vec<Tensor<E, D>> = inputs.into_iter().cloned().collect();
            let origin = std::panic::Location::caller();
            crate::tools::hooks::forward(name, &self, &inputs, origin);
        }
        self
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Reverse-mode differentiation of a one-element tensor (a loss):
    /// the gradient of `self` with respect to every leaf it depends on.
    /// The gradients are detached.
    ///
    /// # Panics
    /// When `self` has more than one element (use
    /// [`backward_with`](Self::backward_with) to give an upstream gradient).
    ///
    /// ```
    /// let x = forge::Tensor::<f64>::scalar(3.0).requires_grad();
    /// let g = x.exp().backward();
    /// assert!((g.get(&x).unwrap().item() - 3f64.exp()).abs() < 1e-12);
    /// ```
    pub fn backward(&self) -> Gradients<E, D> {
        assert!(
            self.numel() == 1,
            "backward: called on a tensor of shape {:?}; it needs one element (use backward_with)",
            self.shape()
        );
        self.run_backward(Tensor::ones_in(self.shape()), false)
    }

    /// Like [`backward`](Self::backward), but the returned gradients are
    /// themselves recorded on the tape, so they can be differentiated again
    /// (Hessian-vector products, gradient penalties).
    ///
    /// # Panics
    /// When `self` has more than one element.
    ///
    /// ```
    /// let x = forge::Tensor::<f64>::scalar(3.0).requires_grad();
    /// let g = (&x * &x * &x).backward_with_graph();  // 3x^2
    /// let gg = g.get(&x).unwrap().backward();        // 6x
    /// assert_eq!(gg.get(&x).unwrap().item(), 18.0);
    /// ```
    pub fn backward_with_graph(&self) -> Gradients<E, D> {
        assert!(
            self.numel() == 1,
            "backward_with_graph: called on a tensor of shape {:?}; it needs one element",
            self.shape()
        );
        self.run_backward(Tensor::ones_in(self.shape()), true)
    }

    /// The vector-Jacobian product with an upstream gradient `gout` of
    /// `self`'s shape; `create_graph` records the backward pass.
    ///
    /// # Panics
    /// When `gout`'s shape differs from `self`'s.
    ///
    /// ```
    /// let x = forge::Tensor::<f64>::from_vec(vec![1.0, 2.0], &[2]).requires_grad();
    /// let y = &x * 3.0;
    /// let g = y.backward_with(&forge::Tensor::from_vec(vec![1.0, 10.0], &[2]), false);
    /// assert_eq!(g.get(&x).unwrap().to_vec(), vec![3.0, 30.0]);
    /// ```
    pub fn backward_with(&self, gout: &Tensor<E, D>, create_graph: bool) -> Gradients<E, D> {
        assert_eq!(
            self.shape(),
            gout.shape(),
            "backward_with: upstream gradient shape {:?} differs from output shape {:?}",
            gout.shape(),
            self.shape()
        );
        self.run_backward(gout.clone(), create_graph)
    }

    fn run_backward(&self, seed: Tensor<E, D>, create_graph: bool) -> Gradients<E, D> {
        let _mode = NoGradGuard::set(create_graph);
        let mut out = Gradients::new();
        let Some(root) = self.node.clone() else {
            return out;
        };
        // Collect every node reachable from the root. The set only answers
        // membership; the order comes from sorting by id.
        let mut seen: HashSet<u64> = HashSet::new();
        let mut order: Vec<Arc<Node<E, D>>> = Vec::new();
        let mut stack = vec![root.clone()];
        seen.insert(root.id);
        while let Some(n) = stack.pop() {
            for t in &n.inputs {
                if let Some(p) = &t.node
                    && seen.insert(p.id)
                {
                    stack.push(p.clone());
                }
            }
            order.push(n);
        }
        order.sort_unstable_by_key(|n| std::cmp::Reverse(n.id));

        let mut pending: BTreeMap<u64, Tensor<E, D>> = BTreeMap::new();
        let seed = if create_graph { seed } else { seed.detach() };
        pending.insert(root.id, seed);
        for node in &order {
            let Some(grad) = pending.remove(&node.id) else {
                continue;
            };
            let Some(rule) = &node.backward else {
                out.map.insert(node.id, grad);
                continue;
            };
            let ctx = BackwardCtx {
                grad: &grad,
                inputs: &node.inputs,
                create_graph,
            };
            let grads = if crate::tools::hooks::active() {
                crate::tools::hooks::backward(node, &ctx, rule)
            } else {
                rule(&ctx)
            };
            debug_assert_eq!(grads.len(), node.inputs.len(), "{}: rule arity", node.name);
            for (input, g) in node.inputs.iter().zip(grads) {
                let (Some(p), Some(g)) = (&input.node, g) else {
                    continue;
                };
                assert_eq!(
                    g.shape(),
                    input.shape(),
                    "backward of {}: gradient shape {:?} differs from input shape {:?}",
                    node.name,
                    g.shape(),
                    input.shape()
                );
                let g = if create_graph { g } else { g.detach() };
                match pending.remove(&p.id) {
                    Some(acc) => pending.insert(p.id, accumulate(acc, &g)),
                    None => pending.insert(p.id, g),
                };
            }
        }
        out
    }
}

/// `acc + g` for two gradients of the same shape. When `acc` is untracked
/// and the tape holds the only handle on its buffer, the sum is written into
/// that buffer in place; otherwise a new tensor is made. Both compute
/// `acc[i] + g[i]` for every `i`, so the result is bit-identical either way.
fn accumulate<E: Float, D: Device>(mut acc: Tensor<E, D>, g: &Tensor<E, D>) -> Tensor<E, D> {
    if acc.node.is_none()
        && g.node.is_none()
        && let Some(buf) = acc.values_mut()
    {
        D::zip_assign(buf, g.as_slice(), |a, b| a + b);
        return acc;
    }
    &acc + g
}

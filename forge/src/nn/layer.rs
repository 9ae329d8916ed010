//! The [`Layer`] trait: the derived traversal and everything built on it,
//! and [`enter_layer`] / [`enter_layer_mut`], how a layer is walked as a
//! field of another. The visitor vocabulary it walks with is in `visit.rs`,
//! which knows nothing of layers.

use super::visit::{Scoped, TensorKind, TensorVisitor, TensorVisitorMut};
use crate::autograd::Gradients;
use crate::error::{ForgeError, Result};
use crate::tensor::{Float, Rng, Tensor};
use std::collections::BTreeMap;

/// A value that stores tensors (directly or in sublayers) and can walk them.
///
/// The two required methods are written by `#[derive(Layer)]`; every other
/// method (parameters, freezing, state dicts, train/eval mode) is built on
/// them. There are two because Rust separates shared from exclusive access:
/// reading (`parameters()`, `state_dict()`, `is_training()`) works through
/// `&self`, so a model being evaluated by several threads can still be
/// inspected, while replacing tensors (`freeze()`, `load_state_dict()`, an
/// optimizer step, `train()`) needs `&mut self`. One method generic over
/// the kind of reference would force every caller to hold `&mut`.
///
/// Paths are the field names joined by `.` ([`join_path`](super::join_path));
/// indices of `Vec`s, arrays and `Sequential`s are segments
/// (`blocks.3.attn.wq`, `0.weight`).
///
/// A weight is *trainable* when its kind is [`TensorKind::Weight`] and it is
/// tracked ([`Tensor::is_tracked`]); freezing detaches it. `#[frozen]`
/// tensors are never trainable but are saved and loaded.
///
/// ```
/// use forge::prelude::*;
///
/// #[derive(Layer)]
/// struct Mlp {
///     fc1: Linear,
///     fc2: Linear,
///     #[frozen]
///     scale: Tensor,
///     #[skip]
///     hidden: usize,
/// }
///
/// let mut rng = Rng::new(0);
/// let mut m = Mlp {
///     fc1: Linear::new(4, 8, &mut rng),
///     fc2: Linear::new(8, 2, &mut rng),
///     scale: Tensor::ones(&[2]),
///     hidden: 8,
/// };
/// let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
/// assert_eq!(m.state_dict().len(), 5); // + scale
/// m.freeze_prefix("fc1");
/// assert_eq!(m.num_parameters(), 8 * 2 + 2);
/// ```
pub trait Layer<E: Float = f32> {
    /// Reports every stored tensor with its path and kind (and every
    /// `#[training]` flag and sublayer) to `v`, in field order.
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>);

    /// Like [`visit_tensors`](Layer::visit_tensors), with each tensor (and
    /// `#[training]` flag) handed out mutably so that `v` can replace it.
    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>);

    /// The trainable weights (kind `Weight` and tracked), in traversal order.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// assert_eq!(fc.parameters().len(), 2);
    /// ```
    fn parameters(&self) -> Vec<Tensor<E>> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// The trainable weights with their paths, in traversal order.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f32>::new_no_bias(3, 2, &mut Rng::new(0));
    /// assert_eq!(fc.named_parameters()[0].0, "weight");
    /// ```
    fn named_parameters(&self) -> Vec<(String, Tensor<E>)> {
        let mut out = Vec::new();
        self.visit_tensors(&mut |p: &str, t: &Tensor<E>, k: TensorKind| {
            if k == TensorKind::Weight && t.is_tracked() {
                out.push((p.to_string(), t.clone()));
            }
        });
        out
    }

    /// Every stored tensor (weights, frozen or not, and `#[frozen]` tensors)
    /// with its path and kind, in traversal order.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::TensorKind;
    /// let mut fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// fc.freeze();
    /// let all = fc.named_tensors();
    /// assert_eq!(all.len(), 2);
    /// assert_eq!(all[1].0, "bias");
    /// assert_eq!(all[1].2, TensorKind::Weight);
    /// ```
    fn named_tensors(&self) -> Vec<(String, Tensor<E>, TensorKind)> {
        let mut out = Vec::new();
        self.visit_tensors(&mut |p: &str, t: &Tensor<E>, k: TensorKind| {
            out.push((p.to_string(), t.clone(), k));
        });
        out
    }

    /// The paths and type names of the sublayers, outermost first (the
    /// layer itself is not listed).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let m = sequential![Linear::<f32>::new(2, 2, &mut Rng::new(0)), Relu];
    /// let layers = m.named_layers();
    /// assert_eq!(layers[0].0, "0");
    /// assert!(layers[1].1.ends_with("Relu"));
    /// ```
    fn named_layers(&self) -> Vec<(String, &'static str)> {
        struct Layers(Vec<(String, &'static str)>);
        impl<E: Float> TensorVisitor<E> for Layers {
            fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
            fn visit_layer(&mut self, path: &str, type_name: &'static str) {
                self.0.push((path.to_string(), type_name));
            }
        }
        let mut v = Layers(Vec::new());
        self.visit_tensors(&mut v);
        v.0
    }

    /// The number of trainable scalars.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// assert_eq!(fc.num_parameters(), 3 * 2 + 2);
    /// ```
    fn num_parameters(&self) -> usize {
        let mut n = 0;
        self.visit_tensors(&mut |_: &str, t: &Tensor<E>, k: TensorKind| {
            if k == TensorKind::Weight && t.is_tracked() {
                n += t.numel();
            }
        });
        n
    }

    /// Stops training every weight: each is detached (untracked), so no
    /// gradient reaches it and [`for_each_parameter_mut`](Layer::for_each_parameter_mut)
    /// skips it. Values are unchanged.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// fc.freeze();
    /// assert!(fc.parameters().is_empty());
    /// ```
    fn freeze(&mut self) {
        self.freeze_prefix("")
    }

    /// Makes every weight trainable again (tracked). `#[frozen]` tensors
    /// stay frozen.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// fc.freeze();
    /// fc.unfreeze();
    /// assert_eq!(fc.parameters().len(), 2);
    /// ```
    fn unfreeze(&mut self) {
        self.unfreeze_prefix("")
    }

    /// [`freeze`](Layer::freeze)s the weights whose path is `prefix` or
    /// starts with `prefix` followed by `.` (segment boundaries: `"enc"`
    /// does not match `"encoder.weight"`). An empty prefix matches all.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut rng = Rng::new(0);
    /// let mut m = sequential![Linear::<f32>::new(2, 2, &mut rng), Linear::new(2, 2, &mut rng)];
    /// m.freeze_prefix("0");
    /// let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["1.weight", "1.bias"]);
    /// ```
    fn freeze_prefix(&mut self, prefix: &str) {
        self.visit_tensors_mut(&mut |p: &str, t: &mut Tensor<E>, k: TensorKind| {
            if k == TensorKind::Weight && t.is_tracked() && path_has_prefix(p, prefix) {
                *t = t.detach();
            }
        });
    }

    /// Makes the weights under `prefix` (at segment boundaries, as in
    /// [`freeze_prefix`](Layer::freeze_prefix)) trainable again.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut rng = Rng::new(0);
    /// let mut m = sequential![Linear::<f32>::new(2, 2, &mut rng), Linear::new(2, 2, &mut rng)];
    /// m.freeze();
    /// m.unfreeze_prefix("1.bias");
    /// assert_eq!(m.named_parameters()[0].0, "1.bias");
    /// ```
    fn unfreeze_prefix(&mut self, prefix: &str) {
        self.visit_tensors_mut(&mut |p: &str, t: &mut Tensor<E>, k: TensorKind| {
            if k == TensorKind::Weight && !t.is_tracked() && path_has_prefix(p, prefix) {
                *t = t.requires_grad();
            }
        });
    }

    /// Every stored tensor (weights and `#[frozen]` tensors), detached,
    /// keyed by path: what a checkpoint saves.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// let sd = fc.state_dict();
    /// assert_eq!(sd.keys().collect::<Vec<_>>(), ["bias", "weight"]);
    /// assert!(!sd["weight"].is_tracked());
    /// ```
    fn state_dict(&self) -> BTreeMap<String, Tensor<E>> {
        let mut out = BTreeMap::new();
        self.visit_tensors(&mut |p: &str, t: &Tensor<E>, _: TensorKind| {
            out.insert(p.to_string(), t.detach());
        });
        out
    }

    /// Replaces every stored tensor by the entry of `dict` with its path.
    ///
    /// Nothing is changed unless the whole dict fits: the same set of
    /// names, and for each the same shape (the element type is fixed by the
    /// map's type). Loaded weights keep the tracked (trainable) or untracked
    /// (frozen) status of the tensors they replace; `#[frozen]` tensors are
    /// loaded untracked.
    ///
    /// # Errors
    /// [`ForgeError::StateDict`] listing every missing key, every unexpected
    /// key and every mis-shaped key at once.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut rng = Rng::new(0);
    /// let a = Linear::<f32>::new(3, 2, &mut rng);
    /// let mut b = Linear::<f32>::new(3, 2, &mut rng);
    /// b.load_state_dict(&a.state_dict()).unwrap();
    /// assert_eq!(b.weight.to_vec(), a.weight.to_vec());
    /// assert!(b.weight.is_tracked());
    ///
    /// let mut c = Linear::<f32>::new(4, 2, &mut rng);
    /// let err = c.load_state_dict(&a.state_dict()).unwrap_err();
    /// assert!(err.to_string().contains("weight: model has shape [2, 4], file has [2, 3]"));
    /// ```
    fn load_state_dict(&mut self, dict: &BTreeMap<String, Tensor<E>>) -> Result<()> {
        let mut missing = Vec::new();
        let mut mismatched = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        self.visit_tensors(&mut |p: &str, t: &Tensor<E>, _: TensorKind| {
            seen.insert(p.to_string());
            match dict.get(p) {
                None => missing.push(p.to_string()),
                Some(new) if new.shape() != t.shape() => {
                    mismatched.push((p.to_string(), t.shape().to_vec(), new.shape().to_vec()))
                }
                Some(_) => {}
            }
        });
        let unexpected: Vec<String> = dict
            .keys()
            .filter(|k| !seen.contains(k.as_str()))
            .cloned()
            .collect();
        if !(missing.is_empty() && unexpected.is_empty() && mismatched.is_empty()) {
            return Err(ForgeError::StateDict {
                missing,
                unexpected,
                mismatched,
            });
        }
        self.visit_tensors_mut(&mut |p: &str, t: &mut Tensor<E>, k: TensorKind| {
            let new = &dict[p];
            *t = if k == TensorKind::Weight && t.is_tracked() {
                new.requires_grad()
            } else {
                new.detach()
            };
        });
        Ok(())
    }

    /// The state of every random generator the model's layers own (each
    /// [`Dropout`](crate::nn::Dropout)'s), keyed by the layer's path plus
    /// `.rng`: what a training checkpoint saves so that a resumed run drops
    /// the same elements as the uninterrupted one.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let m = sequential![Linear::<f32>::new(2, 2, &mut Rng::new(0)), Dropout::new(0.5, 7)];
    /// assert_eq!(m.rng_states().keys().collect::<Vec<_>>(), ["1.rng"]);
    /// ```
    fn rng_states(&self) -> BTreeMap<String, Rng> {
        struct Collect<'a>(&'a mut BTreeMap<String, Rng>);
        impl<E: Float> TensorVisitor<E> for Collect<'_> {
            fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
            fn visit_rng(&mut self, path: &str, rng: &Rng) {
                self.0.insert(path.to_string(), rng.clone());
            }
        }
        let mut out = BTreeMap::new();
        self.visit_tensors(&mut Collect(&mut out));
        out
    }

    /// Sets the model's random generators from [`rng_states`](Self::rng_states).
    /// Nothing changes unless `states` has exactly the model's generators.
    ///
    /// # Errors
    /// [`ForgeError::State`] naming the missing and unexpected paths.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let a = Dropout::new(0.5, 1);
    /// let mut b = Dropout::new(0.5, 2);
    /// Layer::<f32>::load_rng_states(&mut b, &Layer::<f32>::rng_states(&a)).unwrap();
    /// let x = Tensor::<f32>::ones(&[64]);
    /// assert_eq!(a.forward(x.clone()).to_vec(), b.forward(x).to_vec());
    /// ```
    fn load_rng_states(&mut self, states: &BTreeMap<String, Rng>) -> Result<()> {
        let mine = self.rng_states();
        if mine.keys().ne(states.keys()) {
            let missing: Vec<&String> = mine.keys().filter(|k| !states.contains_key(*k)).collect();
            let unexpected: Vec<&String> =
                states.keys().filter(|k| !mine.contains_key(*k)).collect();
            return Err(ForgeError::state("rng", format!(
                "random generators do not match the model: missing {missing:?}, unexpected {unexpected:?}"
            )));
        }
        struct Set<'a>(&'a BTreeMap<String, Rng>);
        impl<E: Float> TensorVisitorMut<E> for Set<'_> {
            fn visit(&mut self, _: &str, _: &mut Tensor<E>, _: TensorKind) {}
            fn visit_rng(&mut self, path: &str, rng: &mut Rng) {
                if let Some(r) = self.0.get(path) {
                    *rng = r.clone();
                }
            }
        }
        self.visit_tensors_mut(&mut Set(states));
        Ok(())
    }

    /// Calls `f` on every trainable weight (kind `Weight` and tracked) with
    /// its path, in traversal order, so that it can be replaced: what an
    /// optimizer step uses. Assign a tracked tensor (`.requires_grad()`) to
    /// keep the weight trainable.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut fc = Linear::<f64>::from_weights(Tensor::ones(&[1, 2]).requires_grad(), None).unwrap();
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[1, 2]);
    /// let grads = fc.forward(x).sum().backward();
    /// fc.for_each_parameter_mut(&mut |_, w| {
    ///     let g = grads.get(w).unwrap();
    ///     *w = (&*w - &g.mul_scalar(0.5)).detach().requires_grad();
    /// });
    /// assert_eq!(fc.weight.to_vec(), vec![0.5, 0.0]);
    /// ```
    fn for_each_parameter_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor<E>)) {
        self.visit_tensors_mut(&mut |p: &str, t: &mut Tensor<E>, k: TensorKind| {
            if k == TensorKind::Weight && t.is_tracked() {
                f(p, t)
            }
        });
    }

    /// Switches every layer with a `#[training]` flag to training mode (the
    /// mode layers start in, as in PyTorch).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut m = sequential![Linear::<f32>::new(2, 2, &mut Rng::new(0))];
    /// m.eval();
    /// m.train();
    /// assert!(m.is_training());
    /// ```
    fn train(&mut self) {
        set_mode(self, true)
    }

    /// Switches every layer with a `#[training]` flag to evaluation mode.
    /// See [`Layer::is_training`] for how a layer uses its flag.
    ///
    /// ```
    /// use forge::prelude::*;
    ///
    /// /// Adds noise while training only.
    /// #[derive(Layer)]
    /// struct Noisy {
    ///     #[training]
    ///     training: bool,
    /// }
    ///
    /// let mut m = sequential![Linear::<f32>::new(2, 2, &mut Rng::new(0)), Noisy { training: true }];
    /// assert!(m.is_training());
    /// m.eval();
    /// assert!(!m.is_training());
    /// ```
    fn eval(&mut self) {
        set_mode(self, false)
    }

    /// Whether the layer is in training mode: true when any `#[training]`
    /// flag in it is set, and true when it has no flag at all (a layer
    /// whose behaviour does not depend on the mode).
    ///
    /// A mode-dependent layer stores its mode in a `bool` field marked
    /// `#[training]` (initialised to `true`) and reads it in `forward`;
    /// `train()`/`eval()` set every such flag in a model:
    ///
    /// ```
    /// use forge::prelude::*;
    ///
    /// #[derive(Layer)]
    /// struct HalfInEval {
    ///     #[training]
    ///     training: bool,
    /// }
    /// impl Forward<Tensor> for HalfInEval {
    ///     type Output = Tensor;
    ///     fn forward(&self, x: Tensor) -> Tensor {
    ///         if self.training { x } else { x.mul_scalar(0.5) }
    ///     }
    /// }
    ///
    /// let mut m = sequential![HalfInEval { training: true }];
    /// let x = Tensor::ones(&[1]);
    /// assert_eq!(m.forward(x.clone()).item(), 1.0);
    /// // A model without tensors does not fix its element type: name it.
    /// Layer::<f32>::eval(&mut m);
    /// assert_eq!(m.forward(x).item(), 0.5);
    /// ```
    fn is_training(&self) -> bool {
        struct Mode {
            any: bool,
            seen: bool,
        }
        impl<E: Float> TensorVisitor<E> for Mode {
            fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
            fn visit_mode(&mut self, _: &str, training: bool) {
                self.seen = true;
                self.any |= training;
            }
        }
        let mut m = Mode {
            any: false,
            seen: false,
        };
        self.visit_tensors(&mut m);
        m.any || !m.seen
    }

    /// The gradients of `loss` with respect to this model's weights, as an
    /// optimizer step takes them: `loss.backward()`. A wrapper overrides it
    /// to do more, as
    /// [`DistributedDataParallel`](crate::distributed::DistributedDataParallel)
    /// averages the gradients over its ranks; what
    /// [`Optimizer::backward_step`](crate::optim::Optimizer::backward_step)
    /// calls.
    ///
    /// # Errors
    /// Whatever the override reports (the default never fails).
    ///
    /// # Panics
    /// When `loss` is not a single value (as [`Tensor::backward`]).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut fc = Linear::<f64>::from_weights(Tensor::ones(&[1, 2]).requires_grad(), None).unwrap();
    /// let loss = fc.forward(Tensor::from_vec(vec![1.0, 2.0], &[1, 2])).sum();
    /// let grads = fc.loss_gradients(&loss).unwrap();
    /// assert_eq!(grads.get(&fc.weight).unwrap().to_vec(), vec![1.0, 2.0]);
    /// ```
    fn loss_gradients(&mut self, loss: &Tensor<E>) -> Result<Gradients<E>> {
        Ok(loss.backward())
    }
}

/// The body of [`Visit::visit`](super::Visit::visit) for a layer:
/// announces the layer at `name` (with its type) and reports its own
/// tensors under `name`. The derive,
/// [`Sequential`](crate::nn::Sequential) and the recurrent layers all use
/// it; a hand-written layer does too (see [`Visit`](super::Visit)).
///
/// ```
/// use forge::nn::{enter_layer, Linear};
/// use forge::prelude::*;
/// let l = Linear::<f32>::new(2, 3, &mut Rng::new(0));
/// let mut paths = vec![];
/// enter_layer(&l, "fc", &mut |p: &str, _: &Tensor, _| paths.push(p.to_string()));
/// assert_eq!(paths, ["fc.weight", "fc.bias"]);
/// ```
pub fn enter_layer<E: Float, L: Layer<E> + ?Sized>(
    layer: &L,
    name: &str,
    v: &mut dyn TensorVisitor<E>,
) {
    let address = (layer as *const L).cast::<()>() as usize;
    v.visit_layer_at(name, std::any::type_name::<L>(), address);
    layer.visit_tensors(&mut Scoped::new(name, v))
}

/// The body of [`Visit::visit_mut`](super::Visit::visit_mut) for a layer:
/// reports its own tensors under `name` for replacement (see
/// [`enter_layer`]).
///
/// ```
/// use forge::nn::{enter_layer_mut, Linear, TensorKind};
/// use forge::prelude::*;
/// let mut l = Linear::<f32>::new(2, 3, &mut Rng::new(0));
/// enter_layer_mut(&mut l, "fc", &mut |p: &str, t: &mut Tensor, _: TensorKind| {
///     if p == "fc.bias" { *t = Tensor::ones(&[3]) }
/// });
/// assert_eq!(l.bias.unwrap().to_vec(), vec![1.0; 3]);
/// ```
pub fn enter_layer_mut<E: Float, L: Layer<E> + ?Sized>(
    layer: &mut L,
    name: &str,
    v: &mut dyn TensorVisitorMut<E>,
) {
    layer.visit_tensors_mut(&mut Scoped::new(name, v))
}

/// Whether `path` is `prefix` or lies under it at a segment boundary.
fn path_has_prefix(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'.'))
}

fn set_mode<E: Float, L: Layer<E> + ?Sized>(layer: &mut L, training: bool) {
    struct SetMode(bool);
    impl<E: Float> TensorVisitorMut<E> for SetMode {
        fn visit(&mut self, _: &str, _: &mut Tensor<E>, _: TensorKind) {}
        fn visit_mode(&mut self, _: &str, flag: &mut bool) {
            *flag = self.0;
        }
    }
    layer.visit_tensors_mut(&mut SetMode(training));
}

#[cfg(test)]
mod tests {
    use super::path_has_prefix;

    #[test]
    fn prefixes_match_at_segment_boundaries() {
        assert!(path_has_prefix("encoder.weight", "encoder"));
        assert!(path_has_prefix("encoder", "encoder"));
        assert!(path_has_prefix("encoder.0.weight", "encoder.0"));
        assert!(!path_has_prefix("encoder2.weight", "encoder"));
        assert!(!path_has_prefix("enc", "encoder"));
        assert!(path_has_prefix("anything", ""));
    }
}

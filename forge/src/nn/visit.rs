//! The traversal vocabulary: [`TensorKind`], the visitors, [`Visit`] (how a
//! field is walked), [`Visitable`] (the compile-time check on field types)
//! and [`join_path`], the one function that builds tensor paths.

use crate::quant::{Fp8Weight, Int8Weight, Quantizable};
use crate::tensor::{Element, Float, Rng, Tensor};
use std::sync::Arc;

/// The role of a stored tensor.
///
/// ```
/// use forge::nn::TensorKind;
/// assert_ne!(TensorKind::Weight, TensorKind::Frozen);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// A learnable weight. It is trainable while it is tracked (see
    /// [`Tensor::is_tracked`]); [`Layer::freeze`](crate::nn::Layer::freeze)
    /// detaches it, [`Layer::unfreeze`](crate::nn::Layer::unfreeze) tracks it
    /// again.
    Weight,
    /// A `#[frozen]` tensor (a batch norm's running mean, a fixed mask):
    /// saved and loaded with the state dict, never trained, never unfrozen.
    Frozen,
}

/// Joins a parent path and a child segment with `.`; an empty parent gives
/// the segment alone. Every path forge builds goes through this function, so
/// every key has the same shape.
///
/// ```
/// use forge::nn::join_path;
/// assert_eq!(join_path("", "fc1"), "fc1");
/// assert_eq!(join_path("blocks.3", "attn"), "blocks.3.attn");
/// ```
pub fn join_path(parent: &str, segment: &str) -> String {
    if parent.is_empty() {
        segment.to_string()
    } else {
        let mut s = String::with_capacity(parent.len() + 1 + segment.len());
        s.push_str(parent);
        s.push('.');
        s.push_str(segment);
        s
    }
}

/// Receives every tensor of a layer by shared reference, with its full path
/// and kind: what [`Layer::visit_tensors`](crate::nn::Layer::visit_tensors)
/// drives. `parameters()`, `state_dict()` and friends are visitors.
///
/// A closure `FnMut(&str, &Tensor<E>, TensorKind)` is a visitor.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::TensorKind;
/// let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
/// let mut seen = Vec::new();
/// fc.visit_tensors(&mut |path: &str, t: &Tensor, kind: TensorKind| {
///     seen.push((path.to_string(), t.shape().to_vec(), kind));
/// });
/// assert_eq!(seen[0], ("weight".to_string(), vec![2, 3], TensorKind::Weight));
/// assert_eq!(seen[1], ("bias".to_string(), vec![2], TensorKind::Weight));
/// ```
pub trait TensorVisitor<E: Float> {
    /// One stored tensor.
    fn visit(&mut self, path: &str, tensor: &Tensor<E>, kind: TensorKind);

    /// A `#[training]` flag at `path` and its value (does nothing by default).
    fn visit_mode(&mut self, path: &str, training: bool) {
        let _ = (path, training);
    }

    /// A sublayer (a field whose type is itself a derived layer, or an
    /// element of a `Sequential`) is entered at `path` (does nothing by
    /// default). `type_name` is [`std::any::type_name`] of the layer.
    fn visit_layer(&mut self, path: &str, type_name: &'static str) {
        let _ = (path, type_name);
    }

    /// What [`enter_layer`](crate::nn::enter_layer) calls: [`visit_layer`](Self::visit_layer) with
    /// the layer's address in memory as well (how
    /// [`summary`](crate::nn::summary) matches the output shapes recorded
    /// in the forward pass to the paths). The default forgets the address
    /// and calls `visit_layer`; a visitor that wraps another forwards both.
    fn visit_layer_at(&mut self, path: &str, type_name: &'static str, address: usize) {
        let _ = address;
        self.visit_layer(path, type_name)
    }

    /// A [`Buffer`](crate::nn::Buffer) at `path`: state a layer updates
    /// from `forward` (batch norm's running statistics), neither a weight
    /// nor a `#[frozen]` tensor. The default reports it as
    /// [`TensorKind::Frozen`] through [`visit`](Self::visit) (how the state
    /// dict saves it); [`summary`](crate::nn::summary) counts it apart.
    fn visit_buffer(&mut self, path: &str, tensor: &Tensor<E>) {
        self.visit(path, tensor, TensorKind::Frozen)
    }

    /// A layer's own random generator (a [`Dropout`](crate::nn::Dropout)'s
    /// mask generator) at `path` and its state (does nothing by default):
    /// what [`Layer::rng_states`](crate::nn::Layer::rng_states) collects for
    /// training checkpoints.
    fn visit_rng(&mut self, path: &str, rng: &Rng) {
        let _ = (path, rng);
    }

    /// An int8 weight at `path` (a quantized [`Linear`](crate::nn::Linear)'s,
    /// see [`crate::quant`]). The default reports its integer values as a
    /// frozen tensor of `E` to [`visit`](Self::visit) (exact), which is how
    /// it appears in a state dict; a checkpoint writer overrides it to
    /// store the bytes as `I8`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{quantize_dynamic, Granularity};
    /// let mut fc = Linear::<f32>::from_weights(Tensor::from_vec(vec![1.0, -0.5], &[1, 2]), None).unwrap();
    /// quantize_dynamic(&mut fc, Granularity::PerTensor);
    /// let dict = fc.state_dict();
    /// assert_eq!(dict["weight"].to_vec(), vec![127.0, -64.0]);
    /// assert_eq!(dict["weight_scale"].to_vec(), vec![1.0 / 127.5]);
    /// ```
    fn visit_int8(&mut self, path: &str, weight: &Int8Weight) {
        self.visit(path, &weight.values_tensor::<E>(), TensorKind::Frozen)
    }

    /// An 8-bit float weight at `path` (a [`Linear`](crate::nn::Linear)
    /// converted by [`to_fp8`](crate::quant::to_fp8)). The default reports
    /// its values decoded (exact, unscaled) as a frozen tensor at `path`
    /// and its scales as a frozen tensor at `<path>_scale` to
    /// [`visit`](Self::visit), which is how it appears in a state dict; a
    /// checkpoint writer overrides it to store the bytes as `F8_E4M3` /
    /// `F8_E5M2`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{to_fp8, Fp8Format, Granularity};
    /// let mut fc = Linear::<f32>::from_weights(Tensor::from_vec(vec![448.0, -0.5], &[1, 2]), None).unwrap();
    /// to_fp8(&mut fc, Fp8Format::E4M3, Granularity::PerTensor);
    /// let dict = fc.state_dict();
    /// assert_eq!(dict["weight"].to_vec(), vec![448.0, -0.5]);
    /// assert_eq!(dict["weight_scale"].to_vec(), vec![1.0]);
    /// ```
    fn visit_fp8(&mut self, path: &str, weight: &Fp8Weight) {
        self.visit(path, &weight.values_tensor::<E>(), TensorKind::Frozen);
        self.visit(
            &format!("{path}_scale"),
            &weight.scale_tensor::<E>(),
            TensorKind::Frozen,
        );
    }
}

impl<E: Float, F: FnMut(&str, &Tensor<E>, TensorKind)> TensorVisitor<E> for F {
    fn visit(&mut self, path: &str, tensor: &Tensor<E>, kind: TensorKind) {
        self(path, tensor, kind)
    }
}

/// Receives every tensor of a layer by mutable reference, so it can replace
/// it (tensors are immutable values: "changing a weight" means storing a new
/// handle): what [`Layer::visit_tensors_mut`](crate::nn::Layer::visit_tensors_mut)
/// drives. Freezing, loading and optimizer steps are such visitors.
///
/// A closure `FnMut(&str, &mut Tensor<E>, TensorKind)` is a visitor.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::TensorKind;
/// let mut fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
/// fc.visit_tensors_mut(&mut |_: &str, t: &mut Tensor, _: TensorKind| {
///     *t = Tensor::zeros_like(t);
/// });
/// assert_eq!(fc.weight.to_vec(), vec![0.0; 6]);
/// ```
pub trait TensorVisitorMut<E: Float> {
    /// One stored tensor; assign to `*tensor` to replace it.
    fn visit(&mut self, path: &str, tensor: &mut Tensor<E>, kind: TensorKind);

    /// A `#[training]` flag at `path` (does nothing by default); assign to
    /// `*training` to switch the layer's mode.
    fn visit_mode(&mut self, path: &str, training: &mut bool) {
        let _ = (path, training);
    }

    /// A layer's own random generator at `path` (does nothing by default);
    /// assign to `*rng` to restore its state.
    fn visit_rng(&mut self, path: &str, rng: &mut Rng) {
        let _ = (path, rng);
    }

    /// A layer that can be quantized to int8, at `path` (does nothing by
    /// default): what [`quantize_dynamic`](crate::quant::quantize_dynamic)
    /// converts. A layer reports itself before its tensors.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{TensorKind, TensorVisitorMut};
    /// use forge::quant::Quantizable;
    /// struct Paths(Vec<String>);
    /// impl TensorVisitorMut<f32> for Paths {
    ///     fn visit(&mut self, _: &str, _: &mut Tensor, _: TensorKind) {}
    ///     fn visit_quantizable(&mut self, path: &str, _: &mut dyn Quantizable) {
    ///         self.0.push(path.to_string());
    ///     }
    /// }
    /// let mut rng = Rng::new(0);
    /// let mut m = sequential![Linear::<f32>::new(2, 2, &mut rng), Relu, Linear::new(2, 1, &mut rng)];
    /// let mut v = Paths(vec![]);
    /// m.visit_tensors_mut(&mut v);
    /// assert_eq!(v.0, ["0", "2"]);
    /// ```
    fn visit_quantizable(&mut self, path: &str, layer: &mut dyn Quantizable) {
        let _ = (path, layer);
    }

    /// An 8-bit float weight at `path`; assign to `*weight` to replace it.
    /// The default reports it as two frozen tensors to
    /// [`visit`](Self::visit), `path` (the decoded values) and
    /// `<path>_scale`, and rebuilds the weight from them when either is
    /// replaced (the values encoded back to the weight's format).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{to_fp8, Fp8Format, Granularity};
    /// let mut fc = Linear::<f32>::new(2, 2, &mut Rng::new(0));
    /// to_fp8(&mut fc, Fp8Format::E4M3, Granularity::PerTensor);
    /// let mut dict = fc.state_dict();
    /// dict.insert("weight".into(), Tensor::from_vec(vec![1.0, 2.0, -3.0, 0.5], &[2, 2]));
    /// fc.load_state_dict(&dict).unwrap();
    /// let scale = dict["weight_scale"].item();
    /// assert_eq!(fc.fp8().unwrap().dequantize(), vec![scale, 2.0 * scale, -3.0 * scale, 0.5 * scale]);
    /// ```
    fn visit_fp8(&mut self, path: &str, weight: &mut Arc<Fp8Weight>) {
        let (values, scales) = (weight.values_tensor::<E>(), weight.scale_tensor::<E>());
        let (mut w, mut s) = (values.clone(), scales.clone());
        self.visit(path, &mut w, TensorKind::Frozen);
        self.visit(&format!("{path}_scale"), &mut s, TensorKind::Frozen);
        if !w.shares_data(&values) || !s.shares_data(&scales) {
            let format = weight.format();
            *weight = Arc::new(crate::quant::fp8_from_float_tensors(&w, &s, format));
        }
    }
}

impl<E: Float, F: FnMut(&str, &mut Tensor<E>, TensorKind)> TensorVisitorMut<E> for F {
    fn visit(&mut self, path: &str, tensor: &mut Tensor<E>, kind: TensorKind) {
        self(path, tensor, kind)
    }
}

/// A visitor that prefixes every path with a parent path: how a container
/// or a sublayer puts its own name in front of its children's names.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{Scoped, TensorKind, TensorVisitor};
/// let mut paths = Vec::new();
/// let mut v = |p: &str, _: &Tensor, _: TensorKind| paths.push(p.to_string());
/// let mut scoped = Scoped::new("encoder", &mut v);
/// scoped.visit("weight", &Tensor::zeros(&[1]), TensorKind::Weight);
/// assert_eq!(paths, ["encoder.weight"]);
/// ```
pub struct Scoped<'a, V: ?Sized> {
    prefix: &'a str,
    inner: &'a mut V,
}

impl<'a, V: ?Sized> Scoped<'a, V> {
    /// Wraps `inner` so that every path it receives starts with `prefix`.
    ///
    /// ```
    /// use forge::nn::{Scoped, TensorKind, TensorVisitorMut};
    /// use forge::Tensor;
    /// let mut v = |p: &str, _: &mut Tensor, _: TensorKind| assert_eq!(p, "a.b");
    /// Scoped::new("a", &mut v).visit("b", &mut Tensor::zeros(&[1]), TensorKind::Weight);
    /// ```
    pub fn new(prefix: &'a str, inner: &'a mut V) -> Self {
        Scoped { prefix, inner }
    }
}

impl<E: Float, V: TensorVisitor<E> + ?Sized> TensorVisitor<E> for Scoped<'_, V> {
    fn visit(&mut self, path: &str, tensor: &Tensor<E>, kind: TensorKind) {
        self.inner
            .visit(&join_path(self.prefix, path), tensor, kind)
    }
    fn visit_mode(&mut self, path: &str, training: bool) {
        self.inner
            .visit_mode(&join_path(self.prefix, path), training)
    }
    fn visit_layer(&mut self, path: &str, type_name: &'static str) {
        self.inner
            .visit_layer(&join_path(self.prefix, path), type_name)
    }
    fn visit_layer_at(&mut self, path: &str, type_name: &'static str, address: usize) {
        self.inner
            .visit_layer_at(&join_path(self.prefix, path), type_name, address)
    }
    fn visit_rng(&mut self, path: &str, rng: &Rng) {
        self.inner.visit_rng(&join_path(self.prefix, path), rng)
    }
    fn visit_buffer(&mut self, path: &str, tensor: &Tensor<E>) {
        self.inner
            .visit_buffer(&join_path(self.prefix, path), tensor)
    }
    fn visit_int8(&mut self, path: &str, weight: &Int8Weight) {
        self.inner.visit_int8(&join_path(self.prefix, path), weight)
    }
    fn visit_fp8(&mut self, path: &str, weight: &Fp8Weight) {
        self.inner.visit_fp8(&join_path(self.prefix, path), weight)
    }
}

impl<E: Float, V: TensorVisitorMut<E> + ?Sized> TensorVisitorMut<E> for Scoped<'_, V> {
    fn visit(&mut self, path: &str, tensor: &mut Tensor<E>, kind: TensorKind) {
        self.inner
            .visit(&join_path(self.prefix, path), tensor, kind)
    }
    fn visit_mode(&mut self, path: &str, training: &mut bool) {
        self.inner
            .visit_mode(&join_path(self.prefix, path), training)
    }
    fn visit_rng(&mut self, path: &str, rng: &mut Rng) {
        self.inner.visit_rng(&join_path(self.prefix, path), rng)
    }
    fn visit_quantizable(&mut self, path: &str, layer: &mut dyn Quantizable) {
        let full = if path.is_empty() {
            self.prefix.to_string()
        } else {
            join_path(self.prefix, path)
        };
        self.inner.visit_quantizable(&full, layer)
    }
    fn visit_fp8(&mut self, path: &str, weight: &mut Arc<Fp8Weight>) {
        self.inner.visit_fp8(&join_path(self.prefix, path), weight)
    }
}

/// A visitor that reports every tensor as [`TensorKind::Frozen`]: what the
/// derive wraps around a `#[frozen]` field.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{AsFrozen, TensorKind, TensorVisitor};
/// let mut v = |_: &str, _: &Tensor, k: TensorKind| assert_eq!(k, TensorKind::Frozen);
/// AsFrozen::new(&mut v).visit("scale", &Tensor::zeros(&[1]), TensorKind::Weight);
/// ```
pub struct AsFrozen<'a, V: ?Sized> {
    inner: &'a mut V,
}

impl<'a, V: ?Sized> AsFrozen<'a, V> {
    /// Wraps `inner` so that every tensor it receives is frozen.
    ///
    /// ```
    /// use forge::nn::{AsFrozen, TensorKind, TensorVisitorMut};
    /// use forge::Tensor;
    /// let mut v = |_: &str, _: &mut Tensor, k: TensorKind| assert_eq!(k, TensorKind::Frozen);
    /// AsFrozen::new(&mut v).visit("m", &mut Tensor::zeros(&[1]), TensorKind::Weight);
    /// ```
    pub fn new(inner: &'a mut V) -> Self {
        AsFrozen { inner }
    }
}

impl<E: Float, V: TensorVisitor<E> + ?Sized> TensorVisitor<E> for AsFrozen<'_, V> {
    fn visit(&mut self, path: &str, tensor: &Tensor<E>, _kind: TensorKind) {
        self.inner.visit(path, tensor, TensorKind::Frozen)
    }
    fn visit_mode(&mut self, path: &str, training: bool) {
        self.inner.visit_mode(path, training)
    }
    fn visit_layer(&mut self, path: &str, type_name: &'static str) {
        self.inner.visit_layer(path, type_name)
    }
    fn visit_layer_at(&mut self, path: &str, type_name: &'static str, address: usize) {
        self.inner.visit_layer_at(path, type_name, address)
    }
    fn visit_rng(&mut self, path: &str, rng: &Rng) {
        self.inner.visit_rng(path, rng)
    }
    fn visit_buffer(&mut self, path: &str, tensor: &Tensor<E>) {
        self.inner.visit_buffer(path, tensor)
    }
    fn visit_int8(&mut self, path: &str, weight: &Int8Weight) {
        self.inner.visit_int8(path, weight)
    }
    fn visit_fp8(&mut self, path: &str, weight: &Fp8Weight) {
        self.inner.visit_fp8(path, weight)
    }
}

impl<E: Float, V: TensorVisitorMut<E> + ?Sized> TensorVisitorMut<E> for AsFrozen<'_, V> {
    fn visit(&mut self, path: &str, tensor: &mut Tensor<E>, _kind: TensorKind) {
        self.inner.visit(path, tensor, TensorKind::Frozen)
    }
    fn visit_mode(&mut self, path: &str, training: &mut bool) {
        self.inner.visit_mode(path, training)
    }
    fn visit_rng(&mut self, path: &str, rng: &mut Rng) {
        self.inner.visit_rng(path, rng)
    }
    fn visit_quantizable(&mut self, path: &str, layer: &mut dyn Quantizable) {
        self.inner.visit_quantizable(path, layer)
    }
    fn visit_fp8(&mut self, path: &str, weight: &mut Arc<Fp8Weight>) {
        self.inner.visit_fp8(path, weight)
    }
}

/// How one field of a layer is walked: the trait behind every non-`#[skip]`
/// field of a `#[derive(Layer)]` struct. Implemented by [`Tensor`], every
/// derived layer, [`Sequential`](crate::nn::Sequential), and `Option<T>`,
/// `Vec<T>`, `[T; N]`, `Box<T>` of those.
///
/// `name` is the field's segment (`"fc1"`, `"3"`); the implementation
/// reports its tensors under it, prefixing deeper segments with
/// [`Scoped`]. A hand-written layer implements it by entering itself:
///
/// ```
/// use forge::nn::{enter_layer, enter_layer_mut, Layer, TensorVisitor, TensorVisitorMut, Visit, Visitable};
/// use forge::{Float, Tensor};
///
/// /// A layer written without the derive.
/// struct Scale<E: Float> { s: Tensor<E> }
/// impl<E: Float> Layer<E> for Scale<E> {
///     fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
///         self.s.visit("s", v)
///     }
///     fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
///         self.s.visit_mut("s", v)
///     }
/// }
/// impl<E: Float> Visit<E> for Scale<E> {
///     fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
///         enter_layer(self, name, v)
///     }
///     fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
///         enter_layer_mut(self, name, v)
///     }
/// }
/// impl<E: Float> Visitable for Scale<E> {}
///
/// let l = Scale { s: Tensor::<f32>::ones(&[2]).requires_grad() };
/// assert_eq!(l.named_parameters()[0].0, "s");
/// let nested = vec![l];
/// let mut paths = vec![];
/// nested.visit("layers", &mut |p: &str, _: &Tensor, _| paths.push(p.to_string()));
/// assert_eq!(paths, ["layers.0.s"]);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be visited as a part of a `Layer<{E}>`",
    label = "not a tensor, a layer, or an Option/Vec/array/Box of them",
    note = "add #[skip] to fields that hold no tensors",
    note = "if `{Self}` holds tensors, add #[derive(Layer)] to it"
)]
pub trait Visit<E: Float> {
    /// Reports this value's tensors (and `#[training]` flags) under `name`.
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>);
    /// Reports this value's tensors (and `#[training]` flags) under `name`
    /// for replacement.
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>);
}

/// The element-type-free marker of types that [`Visit`] can walk. The
/// derive checks every concrete field type against it, so a field that
/// holds no tensors is an error at the field itself, with a hint to add
/// `#[skip]`. The derive implements it for every derived layer; a
/// hand-written layer implements it (empty) next to [`Visit`].
///
/// ```
/// fn check<T: forge::nn::Visitable>() {}
/// check::<forge::Tensor>();
/// check::<Vec<Option<forge::nn::Linear>>>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` holds no tensors a `Layer` can visit",
    label = "not a tensor, a layer, or an Option/Vec/array/Box of them",
    note = "add #[skip] to fields that hold no tensors",
    note = "if `{Self}` holds tensors, add #[derive(Layer)] to it"
)]
pub trait Visitable {}

// `do_not_recommend` keeps rustc from listing "other types that implement
// Visitable" (every layer) under a bad field: the note to add #[skip] is the
// useful part, and the error text stays stable as layers are added.
#[diagnostic::do_not_recommend]
impl<E: Element, D: crate::tensor::Device> Visitable for Tensor<E, D> {}
#[diagnostic::do_not_recommend]
impl<T: Visitable> Visitable for Option<T> {}
#[diagnostic::do_not_recommend]
impl<T: Visitable> Visitable for Vec<T> {}
#[diagnostic::do_not_recommend]
impl<T: Visitable, const N: usize> Visitable for [T; N] {}
#[diagnostic::do_not_recommend]
impl<T: Visitable + ?Sized> Visitable for Box<T> {}

impl<E: Float> Visit<E> for Tensor<E> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        v.visit(name, self, TensorKind::Weight)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        v.visit(name, self, TensorKind::Weight)
    }
}

impl<E: Float, T: Visit<E>> Visit<E> for Option<T> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        if let Some(x) = self {
            x.visit(name, v)
        }
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        if let Some(x) = self {
            x.visit_mut(name, v)
        }
    }
}

fn visit_slice<E: Float, T: Visit<E>>(xs: &[T], name: &str, v: &mut dyn TensorVisitor<E>) {
    let mut scoped = Scoped::new(name, v);
    for (i, x) in xs.iter().enumerate() {
        x.visit(&i.to_string(), &mut scoped);
    }
}

fn visit_slice_mut<E: Float, T: Visit<E>>(
    xs: &mut [T],
    name: &str,
    v: &mut dyn TensorVisitorMut<E>,
) {
    let mut scoped = Scoped::new(name, v);
    for (i, x) in xs.iter_mut().enumerate() {
        x.visit_mut(&i.to_string(), &mut scoped);
    }
}

impl<E: Float, T: Visit<E>> Visit<E> for Vec<T> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        visit_slice(self, name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        visit_slice_mut(self, name, v)
    }
}

impl<E: Float, T: Visit<E>, const N: usize> Visit<E> for [T; N] {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        visit_slice(self, name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        visit_slice_mut(self, name, v)
    }
}

impl<E: Float, T: Visit<E> + ?Sized> Visit<E> for Box<T> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        (**self).visit(name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        (**self).visit_mut(name, v)
    }
}

/// Items the derive's generated code names; not part of the public API.
#[doc(hidden)]
pub mod __private {
    /// Compile-time check that a field type can be visited.
    pub fn assert_visitable<T: ?Sized + super::Visitable>() {}
}

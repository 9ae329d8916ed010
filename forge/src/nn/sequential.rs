//! [`Sequential`]: layers applied one after the other, typed as a nested
//! tuple, and the [`sequential!`](crate::sequential) macro that builds one.

use super::forward::Forward;
use super::layer::{enter_layer, enter_layer_mut, Layer};
use super::summary::{key_of, record_last_as, recording_mark};
use super::visit::{TensorVisitor, TensorVisitorMut, Visit, Visitable};
use crate::base::context::enter;
use crate::tensor::Float;

/// Layers applied in order, stored as a cons list `(A, (B, (C, ())))` so that
/// a model of any length is one static type (no fixed maximum arity). Build
/// it with [`sequential!`](crate::sequential), name its type with
/// [`sequential_type!`](crate::sequential_type).
///
/// It implements [`Forward<I>`] when `A: Forward<I>`, `B: Forward<A::Output>`,
/// and so on: layers that do not fit together do not compile. Its tensors
/// are visited as `0.…`, `1.…`, `2.…` whatever the nesting of the tuple, and
/// it is itself a [`Layer`], usable as a field of a derived struct or as an
/// element of another `Sequential`.
///
/// ```
/// use forge::prelude::*;
/// let mut rng = Rng::new(0);
/// let model = sequential![Linear::<f32>::new(4, 8, &mut rng), Relu, Linear::new(8, 2, &mut rng)];
/// let y = model.forward(Tensor::zeros(&[5, 4]));
/// assert_eq!(y.shape(), &[5, 2]);
/// let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// // The first layer is `model.0.0`, the second `model.0.1.0`, ...
/// assert_eq!(model.0 .0.weight.shape(), &[8, 4]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Sequential<T>(pub T);

impl<T> Sequential<T> {
    /// Wraps a cons list `(A, (B, ()))`; [`sequential!`](crate::sequential)
    /// writes that for you.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let m = Sequential::new((Relu, (Tanh, ())));
    /// assert_eq!(m.len(), 2);
    /// ```
    pub fn new(layers: T) -> Self {
        Sequential(layers)
    }
}

impl<T> Sequential<T> {
    /// Applies the layers in order (the same as [`Forward::forward`]; this
    /// inherent method makes a mismatch between layers a readable error
    /// naming the layer and the input it cannot take).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let m = sequential![Relu, Lambda::new(|x: Tensor| x.sum())];
    /// assert_eq!(m.forward(Tensor::ones(&[3])).item(), 3.0);
    /// ```
    #[track_caller]
    pub fn forward<I>(&self, x: I) -> T::Output
    where
        T: SeqForward<I> + SeqChain,
    {
        let mark = recording_mark();
        let y = self.0.forward_chain(x);
        if let (Some(mark), Some(last)) = (mark, self.0.last_key()) {
            record_last_as(self, mark, last);
        }
        y
    }
}

impl<T: SeqChain> Sequential<T> {
    /// The number of layers.
    ///
    /// ```
    /// use forge::prelude::*;
    /// assert_eq!(sequential![Relu, Relu, Relu].len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        T::LEN
    }

    /// Whether there is no layer at all (the identity).
    ///
    /// ```
    /// use forge::prelude::*;
    /// assert!(sequential![].is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        T::LEN == 0
    }
}

/// A cons list of layers `()` or `(Head, Tail)`: the storage of a
/// [`Sequential`]. Implemented for `()` and `(H, T)` with `T: SeqChain`.
///
/// ```
/// use forge::nn::SeqChain;
/// assert_eq!(<(u8, (u8, ())) as SeqChain>::LEN, 2);
/// ```
pub trait SeqChain {
    /// The number of elements.
    const LEN: usize;
    /// The address and full type name of the last element, under which it
    /// records its output for [`summary`](crate::nn::summary); `None` for
    /// the empty list.
    fn last_key(&self) -> Option<(usize, &'static str)>;
}

impl SeqChain for () {
    const LEN: usize = 0;
    fn last_key(&self) -> Option<(usize, &'static str)> {
        None
    }
}

impl<H, T: SeqChain> SeqChain for (H, T) {
    const LEN: usize = 1 + T::LEN;
    fn last_key(&self) -> Option<(usize, &'static str)> {
        self.1.last_key().or(Some(key_of(&self.0)))
    }
}

/// A cons list whose elements apply one after the other to an `Input`:
/// what makes [`Sequential`] implement [`Forward`].
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::SeqForward;
/// let y = (Relu, (Tanh, ())).forward_chain(Tensor::<f32>::zeros(&[1]));
/// assert_eq!(y.item(), 0.0);
/// ```
#[diagnostic::on_unimplemented(
    message = "the layers of this `Sequential` do not fit together: `{Self}` cannot take `{Input}`",
    label = "some layer does not accept the previous layer's output",
    note = "each layer must implement `Forward<previous layer's Output>`; the first takes `{Input}`"
)]
pub trait SeqForward<Input> {
    /// What the last element returns.
    type Output;
    /// Applies the elements in order.
    ///
    /// # Panics
    /// When a layer panics (a shape mismatch). forge's own shape messages
    /// raised inside are prefixed with the layer's index and type
    /// (`Sequential layer 2 (Linear): ...`) and reported at the caller's
    /// line; the panic itself is not caught.
    #[track_caller]
    fn forward_chain(&self, x: Input) -> Self::Output {
        self.forward_from(x, 0)
    }
    /// Applies the elements in order, the first being element `index` of
    /// the whole `Sequential` (for messages).
    #[track_caller]
    fn forward_from(&self, x: Input, index: usize) -> Self::Output;
}

impl<I> SeqForward<I> for () {
    type Output = I;
    fn forward_from(&self, x: I, _: usize) -> I {
        x
    }
}

impl<I, H: Forward<I>, T: SeqForward<H::Output>> SeqForward<I> for (H, T) {
    type Output = T::Output;
    fn forward_from(&self, x: I, index: usize) -> T::Output {
        let y = {
            // The profiler's layer path (nothing while no tool is on).
            let _frame = crate::tools::scope::enter_index(index);
            forward_named(&self.0, x, index)
        };
        self.1.forward_from(y, index + 1)
    }
}

/// The last path segment of a type name without generics
/// (`forge::nn::Linear<f32>` -> `Linear`).
fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// `layer.forward(x)` inside the layer context's frame for element
/// `index` ([`crate::base::context`]): forge's shape messages raised
/// inside start with `Sequential layer {index} ({type}): `. Nothing is
/// caught, and the panic hook is left alone.
#[track_caller]
fn forward_named<I, H: Forward<I>>(layer: &H, x: I, index: usize) -> H::Output {
    let _frame = enter(index, short_type_name::<H>());
    layer.forward(x)
}

impl<I, T: SeqForward<I> + SeqChain> Forward<I> for Sequential<T> {
    type Output = T::Output;
    fn forward(&self, x: I) -> T::Output {
        Sequential::forward(self, x)
    }
}

/// A cons list whose elements can be visited, each under its index:
/// what makes [`Sequential`] a [`Layer`].
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{SeqVisit, TensorKind};
/// let chain = (Linear::<f32>::new(1, 1, &mut Rng::new(0)), ());
/// let mut paths = vec![];
/// chain.visit_from(3, &mut |p: &str, _: &Tensor, _: TensorKind| paths.push(p.to_string()));
/// assert_eq!(paths, ["3.weight", "3.bias"]);
/// ```
pub trait SeqVisit<E: Float> {
    /// Visits the elements, the first under the segment `index`.
    fn visit_from(&self, index: usize, v: &mut dyn TensorVisitor<E>);
    /// Visits the elements mutably, the first under the segment `index`.
    fn visit_from_mut(&mut self, index: usize, v: &mut dyn TensorVisitorMut<E>);
}

impl<E: Float> SeqVisit<E> for () {
    fn visit_from(&self, _: usize, _: &mut dyn TensorVisitor<E>) {}
    fn visit_from_mut(&mut self, _: usize, _: &mut dyn TensorVisitorMut<E>) {}
}

impl<E: Float, H: Visit<E>, T: SeqVisit<E>> SeqVisit<E> for (H, T) {
    fn visit_from(&self, index: usize, v: &mut dyn TensorVisitor<E>) {
        self.0.visit(&index.to_string(), v);
        self.1.visit_from(index + 1, v);
    }
    fn visit_from_mut(&mut self, index: usize, v: &mut dyn TensorVisitorMut<E>) {
        self.0.visit_mut(&index.to_string(), v);
        self.1.visit_from_mut(index + 1, v);
    }
}

impl<E: Float, T: SeqVisit<E>> Layer<E> for Sequential<T> {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        self.0.visit_from(0, v)
    }
    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        self.0.visit_from_mut(0, v)
    }
}

impl<E: Float, T: SeqVisit<E>> Visit<E> for Sequential<T> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        enter_layer(self, name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        enter_layer_mut(self, name, v)
    }
}

#[diagnostic::do_not_recommend]
impl<T> Visitable for Sequential<T> {}

/// Builds a [`Sequential`] from any number of layers:
/// `sequential![a, b, c]` is `Sequential::new((a, (b, (c, ()))))`.
///
/// ```
/// use forge::prelude::*;
/// let mut rng = Rng::new(0);
/// let model = sequential![
///     Linear::<f32>::new(2, 3, &mut rng),
///     Tanh,
///     sequential![Linear::new(3, 3, &mut rng), Relu], // nests: paths 2.0.weight, ...
///     Linear::new(3, 1, &mut rng),
/// ];
/// assert_eq!(model.forward(Tensor::zeros(&[4, 2])).shape(), &[4, 1]);
/// assert_eq!(model.named_parameters()[2].0, "2.0.weight");
/// ```
#[macro_export]
macro_rules! sequential {
    ($($layer:expr),* $(,)?) => {
        $crate::nn::Sequential::new($crate::__seq_cons!($($layer),*))
    };
}

/// Names the type of a [`Sequential`]: `sequential_type![A, B, C]` is
/// `Sequential<(A, (B, (C, ())))>`. Useful for a `Sequential` field of a
/// derived struct.
///
/// ```
/// use forge::prelude::*;
///
/// #[derive(Layer)]
/// struct Net {
///     body: sequential_type![Linear, Relu, Linear],
/// }
///
/// let mut rng = Rng::new(0);
/// let net = Net { body: sequential![Linear::new(2, 2, &mut rng), Relu, Linear::new(2, 1, &mut rng)] };
/// assert_eq!(net.named_parameters()[2].0, "body.2.weight");
/// ```
#[macro_export]
macro_rules! sequential_type {
    ($($layer:ty),* $(,)?) => {
        $crate::nn::Sequential<$crate::__seq_cons_type!($($layer),*)>
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __seq_cons {
    () => { () };
    ($head:expr $(, $tail:expr)*) => { ($head, $crate::__seq_cons!($($tail),*)) };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __seq_cons_type {
    () => { () };
    ($head:ty $(, $tail:ty)*) => { ($head, $crate::__seq_cons_type!($($tail),*)) };
}

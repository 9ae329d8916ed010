//! [`Tensor`]: an immutable, reference-counted n-dimensional array that can
//! record the operations applied to it for reverse-mode differentiation.

mod create;
mod device;
mod display;
mod layout;
pub(crate) mod node;
mod random;

pub use crate::base::{broadcast_shapes, norm_axis, numel, strides, Dims};
pub use crate::base::{DType, Element, Float};
pub use device::{Cpu, Device};
pub use random::Rng;

use crate::cpu::memory::Storage;
use node::Node;
use std::marker::PhantomData;
use std::sync::Arc;

/// An n-dimensional array of `E` on device `D`.
///
/// A `Tensor` is a cheap handle: cloning it copies reference counts, not
/// the data. Values never change after creation; every operation returns a
/// new tensor. View ops ([`slice`](Tensor::slice), [`narrow`](Tensor::narrow),
/// [`select`](Tensor::select), [`permute`](Tensor::permute),
/// [`transpose`](Tensor::transpose), [`t`](Tensor::t),
/// [`expand`](Tensor::expand), [`unsqueeze`](Tensor::unsqueeze),
/// [`diagonal`](Tensor::diagonal), and reshapes) return a tensor that shares
/// its input's storage with an offset and strides, as in PyTorch (see
/// [`stride`](Tensor::stride) and [`contiguous`](Tensor::contiguous)). A tensor that [requires a gradient](Tensor::requires_grad),
/// and every tensor computed from one, carries a node of the autograd tape.
///
/// ```
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0], &[3]).requires_grad();
/// let y = (&x * &x).sum();
/// let g = y.backward();
/// assert_eq!(g.get(&x).unwrap().to_vec(), vec![2.0, 4.0, 6.0]);
/// ```
pub struct Tensor<E: Element = f32, D: Device = Cpu> {
    /// The values; a view reads them through `layout`.
    pub(crate) storage: Arc<Storage<E>>,
    pub(crate) shape: Arc<[usize]>,
    /// `None` for a plain tensor (its storage holds exactly its elements,
    /// row-major); the offset and strides of a view otherwise.
    pub(crate) layout: Option<Arc<layout::Strided<E>>>,
    pub(crate) node: Option<Arc<Node<E, D>>>,
    _device: PhantomData<D>,
}

impl<E: Element, D: Device> Clone for Tensor<E, D> {
    fn clone(&self) -> Self {
        Tensor {
            storage: self.storage.clone(),
            shape: self.shape.clone(),
            layout: self.layout.clone(),
            node: self.node.clone(),
            _device: PhantomData,
        }
    }
}

// The constructors are written for the one device, `Cpu`, so that a call
// without a turbofish (`Tensor::from_vec(vec![1.0f32, 2.0], &[2])`) has
// its device: Rust does not use a type parameter's default to infer one.
impl<E: Element> Tensor<E, Cpu> {
    /// Builds a tensor from row-major data and a shape.
    ///
    /// # Panics
    /// When `data.len()` differs from the product of `shape`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.shape(), &[2, 2]);
    /// ```
    #[track_caller]
    pub fn from_vec(data: Vec<E>, shape: &[usize]) -> Self {
        let n = numel(shape);
        shape_assert!(
            data.len() == n,
            "from_vec: {} values do not fill shape {:?} ({} elements)",
            data.len(),
            shape,
            n
        );
        Self::from_parts(data, shape.into(), None)
    }

    /// Builds a tensor from data in a pooled [`Storage`] and a shape,
    /// without copying.
    ///
    /// # Panics
    /// When `data.len()` differs from the product of `shape`.
    ///
    /// ```
    /// use forge::{runtime::Storage, Tensor};
    /// let t = Tensor::<f32>::from_storage(Storage::map(&[1.0f32, 2.0], |x| x * 3.0), &[2]);
    /// assert_eq!(t.to_vec(), vec![3.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn from_storage(data: Storage<E>, shape: &[usize]) -> Self {
        let n = numel(shape);
        shape_assert!(
            data.len() == n,
            "from_storage: {} values do not fill shape {:?} ({} elements)",
            data.len(),
            shape,
            n
        );
        Self::from_parts(data, shape.into(), None)
    }
}

impl<E: Element, D: Device> Tensor<E, D> {
    /// The constructor every op ends with. `data` is a pooled [`Storage`]
    /// (preferred), a shared one, or a `Vec` (wrapped, not pooled).
    pub(crate) fn from_parts(
        data: impl IntoStorage<E>,
        shape: Arc<[usize]>,
        node: Option<Arc<Node<E, D>>>,
    ) -> Self {
        let data = data.into_storage();
        debug_assert_eq!(data.len(), numel(&shape));
        Tensor {
            storage: data,
            shape,
            layout: None,
            node,
            _device: PhantomData,
        }
    }

    /// The shape, outermost dimension first.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[2, 3]).shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of dimensions.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[2, 3]).rank(), 2);
    /// ```
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The size of dimension `axis` (negative counts from the end).
    ///
    /// # Panics
    /// When the axis is out of range.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[2, 3]).dim(-1), 3);
    /// ```
    #[track_caller]
    pub fn dim(&self, axis: isize) -> usize {
        self.shape[norm_axis("dim", axis, self.rank())]
    }

    /// The number of elements.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[2, 3]).numel(), 6);
    /// ```
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// The element type tag.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).dtype(), forge::DType::F64);
    /// ```
    pub fn dtype(&self) -> DType {
        E::DTYPE
    }

    /// The device the tensor lives on.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[1]).device(), forge::Cpu);
    /// ```
    pub fn device(&self) -> D {
        D::default()
    }

    /// The elements in row-major order, copied out.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::ones(&[2]).to_vec(), vec![1.0, 1.0]);
    /// ```
    pub fn to_vec(&self) -> Vec<E> {
        self.as_slice().to_vec()
    }

    /// The elements in row-major order, borrowed. A view that is not
    /// [contiguous](Self::is_contiguous) is copied on its first call (once:
    /// the copy is kept with the view and its clones).
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::ones(&[2]).as_slice(), &[1.0, 1.0]);
    /// ```
    pub fn as_slice(&self) -> &[E] {
        self.values()
    }

    /// The value of a one-element tensor.
    ///
    /// # Panics
    /// When the tensor has more or fewer than one element.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::scalar(4.0).item(), 4.0);
    /// ```
    #[track_caller]
    pub fn item(&self) -> E {
        shape_assert!(
            self.numel() == 1,
            "item: tensor of shape {:?} has {} elements, not 1",
            self.shape(),
            self.numel()
        );
        self.as_slice()[0]
    }

    /// Whether this tensor is recorded on the tape (it requires a gradient
    /// or was computed from one that does).
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::zeros(&[1]);
    /// assert!(!t.is_tracked());
    /// assert!(t.requires_grad().is_tracked());
    /// ```
    pub fn is_tracked(&self) -> bool {
        self.node.is_some()
    }

    /// The same values with no tape history: gradients do not flow through
    /// the result. Shares the data, copies nothing.
    ///
    /// ```
    /// let x = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// assert!(!x.detach().is_tracked());
    /// ```
    pub fn detach(&self) -> Self {
        self.with_node(None)
    }

    /// The same values as a leaf of the tape, so that `backward` computes
    /// the gradient with respect to it. Shares the data.
    ///
    /// ```
    /// let w = forge::Tensor::<f32>::ones(&[2]).requires_grad();
    /// assert!(w.is_tracked());
    /// ```
    pub fn requires_grad(&self) -> Self {
        self.with_node(Some(Arc::new(Node::leaf())))
    }

    /// The same values and layout with another tape node.
    pub(crate) fn with_node(&self, node: Option<Arc<Node<E, D>>>) -> Self {
        Tensor {
            storage: self.storage.clone(),
            shape: self.shape.clone(),
            layout: self.layout.clone(),
            node,
            _device: PhantomData,
        }
    }

    /// The tape id of this tensor, if it is tracked. Ids grow with creation
    /// order; the backward pass visits nodes in descending id order.
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// let b = forge::Tensor::<f32>::ones(&[1]).requires_grad();
    /// assert!(a.id().unwrap() < b.id().unwrap());
    /// ```
    pub fn id(&self) -> Option<u64> {
        self.node.as_ref().map(|n| n.id)
    }

    /// Whether two handles share the same data buffer (a view shares its
    /// base's).
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[2, 2]);
    /// assert!(a.shares_data(&a.clone()));
    /// assert!(a.t().shares_data(&a));
    /// ```
    pub fn shares_data(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// Converts every element to another element type. Not differentiable:
    /// the result is detached.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.5, -2.0], &[2]);
    /// assert_eq!(t.cast::<f64>().to_vec(), vec![1.5, -2.0]);
    /// ```
    pub fn cast<F: Element>(&self) -> Tensor<F, D> {
        let data = Storage::map(self.as_slice(), |x| F::from_f64(x.to_f64()));
        Tensor::from_parts(data, self.shape.clone(), None)
    }
}

/// What [`Tensor::from_parts`] accepts as data: pooled storage, shared
/// pooled storage, or a vector (wrapped, not pooled; `Arc<Vec<_>>` is
/// unwrapped when unshared and copied otherwise).
pub(crate) trait IntoStorage<E: Copy> {
    fn into_storage(self) -> Arc<Storage<E>>;
}

impl<E: Copy> IntoStorage<E> for Arc<Storage<E>> {
    fn into_storage(self) -> Arc<Storage<E>> {
        self
    }
}

impl<E: Copy> IntoStorage<E> for Storage<E> {
    fn into_storage(self) -> Arc<Storage<E>> {
        Arc::new(self)
    }
}

impl<E: Copy> IntoStorage<E> for Vec<E> {
    fn into_storage(self) -> Arc<Storage<E>> {
        Arc::new(Storage::from_vec(self))
    }
}

impl<E: Copy> IntoStorage<E> for Arc<Vec<E>> {
    fn into_storage(self) -> Arc<Storage<E>> {
        let v = Arc::try_unwrap(self).unwrap_or_else(|a| a.to_vec());
        Arc::new(Storage::from_vec(v))
    }
}

// Tensors are shared across threads; this is part of the public contract.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor<f32>>();
    assert_send_sync::<Tensor<f64>>();
    assert_send_sync::<Tensor<i64>>();
};

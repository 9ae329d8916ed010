//! [`Buffer`]: a frozen tensor that a layer replaces while computing its
//! output (a batch norm's running statistics).

use super::summary::summary_running;
use super::visit::{TensorKind, TensorVisitor, TensorVisitorMut, Visit, Visitable};
use crate::tensor::{Float, Tensor};
use std::sync::{RwLock, RwLockReadGuard};

/// A tensor that is saved and loaded with the state dict, never trained,
/// and that a layer may replace from `forward(&self)`: batch norm updates
/// its running statistics while it computes its output, and
/// [`Forward::forward`](super::Forward::forward) takes `&self` (so models
/// can be shared by threads). The traversal reports it through
/// [`TensorVisitor::visit_buffer`], which visitors that do not tell buffers
/// apart take as [`TensorKind::Frozen`] under the field's name, like a
/// `#[frozen]` tensor; replacing it through the traversal (`load_state_dict`) needs
/// `&mut`, updating it from `forward` goes through a lock.
///
/// ```
/// use forge::nn::{Buffer, Layer};
/// use forge::Tensor;
///
/// #[derive(forge::nn::Layer)]
/// struct Counter { calls: Buffer<f32> }
///
/// let c = Counter { calls: Buffer::new(Tensor::scalar(0.0)) };
/// c.calls.set(c.calls.get().add_scalar(1.0));
/// assert_eq!(c.state_dict()["calls"].item(), 1.0);
/// assert!(c.parameters().is_empty());
/// ```
pub struct Buffer<E: Float = f32>(RwLock<Tensor<E>>);

impl<E: Float> Buffer<E> {
    /// A buffer holding `t`, detached.
    ///
    /// ```
    /// let b = forge::nn::Buffer::new(forge::Tensor::<f32>::ones(&[2]).requires_grad());
    /// assert!(!b.get().is_tracked());
    /// ```
    pub fn new(t: Tensor<E>) -> Self {
        Buffer(RwLock::new(t.detach()))
    }

    fn read(&self) -> RwLockReadGuard<'_, Tensor<E>> {
        // A panic while the lock was held cannot leave a half-written
        // tensor (tensors are replaced whole), so a poisoned lock is usable.
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The current value (a cheap handle).
    ///
    /// ```
    /// let b = forge::nn::Buffer::new(forge::Tensor::<f32>::zeros(&[3]));
    /// assert_eq!(b.get().shape(), &[3]);
    /// ```
    pub fn get(&self) -> Tensor<E> {
        self.read().clone()
    }

    /// Replaces the value (stored detached). While
    /// [`summary`](super::summary) runs its forward pass on this thread, it
    /// does nothing: a summary leaves the model as it was.
    ///
    /// ```
    /// let b = forge::nn::Buffer::new(forge::Tensor::<f32>::zeros(&[1]));
    /// b.set(forge::Tensor::ones(&[1]));
    /// assert_eq!(b.get().item(), 1.0);
    /// ```
    pub fn set(&self, t: Tensor<E>) {
        if summary_running() {
            return;
        }
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = t.detach();
    }
}

impl<E: Float> Clone for Buffer<E> {
    fn clone(&self) -> Self {
        Buffer::new(self.get())
    }
}

impl<E: Float> std::fmt::Debug for Buffer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Buffer").field(&*self.read()).finish()
    }
}

#[diagnostic::do_not_recommend]
impl<E: Float> Visitable for Buffer<E> {}

impl<E: Float> Visit<E> for Buffer<E> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        v.visit_buffer(name, &self.read())
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        let t = self.0.get_mut().unwrap_or_else(|e| e.into_inner());
        v.visit(name, t, TensorKind::Frozen);
        *t = t.detach();
    }
}

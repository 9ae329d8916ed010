//! Mixed-precision inference, as PyTorch's CPU autocast does it: inside
//! [`autocast`] (or while an [`Autocast`] guard lives) the matrix products
//! of linear layers and convolutions run with bf16 inputs and f32
//! accumulation, and everything else stays in f32.
//!
//! Which op runs in which dtype under `autocast(DType::BF16, ..)`:
//!
//! | ops | dtype | PyTorch's CPU autocast |
//! | --- | --- | --- |
//! | [`Tensor::linear`](crate::Tensor::linear) (every [`Linear`](crate::nn::Linear)), [`Tensor::conv2d`](crate::Tensor::conv2d) and [`Tensor::conv1d`](crate::Tensor::conv1d) (every `Conv2d`, `Conv1d`) | bf16 inputs (the weight converted once per scope and cached), f32 accumulation, f32 output | `linear`, `conv1d`, `conv2d` in its bf16 list |
//! | softmax, layer/batch/RMS norms, losses, activations, reductions, elementwise ops | f32 | losses and reductions in its f32 list; softmax and norms run in their input's dtype (bf16 after a bf16 op) |
//! | `matmul`, `bmm`, attention products, transposed convolutions, RNN cells | f32 | in its bf16 list; not converted by forge yet |
//!
//! The outputs of the bf16 ops are f32 tensors holding the f32 sums
//! (PyTorch rounds them to bf16 tensors, so that the ops after them work on
//! bf16 values): forge's results are therefore at least as close to f32 as
//! PyTorch's.
//!
//! The bf16 products need a CPU with AVX-512 BF16 to be fast (`vdpbf16ps`);
//! elsewhere a portable path gives the same bits, slowly. Autocast applies
//! to inference: an op that records a tape (recording on and a tracked
//! input) runs in f32 as usual. Each thread has its own autocast state, as
//! in PyTorch.
//!
//! # The weight cache
//! The first bf16 product of a weight within a scope converts it to bf16
//! and packs it; later products of the same weight (same buffer) in the
//! same scope reuse it. The cache is dropped when the outermost scope ends,
//! so a weight changed in place inside a scope keeps its old bf16 copy
//! until then (PyTorch's autocast cache behaves the same). Hold one
//! [`Autocast`] guard around a serving loop to convert the weights once.
//!
//! ```
//! use forge::prelude::*;
//! let mut rng = Rng::new(0);
//! let model = sequential![Linear::<f32>::new(64, 32, &mut rng), Relu, Linear::new(32, 10, &mut rng)];
//! let x = Tensor::<f32>::normal(&[4, 64], 0.0, 1.0, &mut rng);
//! let exact = forge::no_grad(|| model.forward(x.clone()));
//! let mixed = forge::no_grad(|| forge::autocast(DType::BF16, || model.forward(x.clone())));
//! let err = exact.sub(&mixed).abs().max().item();
//! assert!(err > 0.0 && err < 0.05, "{err}");
//! ```

mod cache;
mod ops;

use crate::base::DType;
use std::cell::Cell;

pub(crate) use ops::{conv2d_hook, linear_hook};

thread_local! {
    /// The autocast dtype in force on this thread (`None`: off).
    static MODE: Cell<Option<DType>> = const { Cell::new(None) };
    /// How many scopes are open on this thread (the cache lives while
    /// this is above zero).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// The autocast dtype in force on this thread, if any.
///
/// ```
/// use forge::DType;
/// assert_eq!(forge::autocast::current(), None);
/// forge::autocast(DType::BF16, || assert_eq!(forge::autocast::current(), Some(DType::BF16)));
/// ```
pub fn current() -> Option<DType> {
    MODE.with(Cell::get)
}

/// Turns autocast to `dtype` on for this thread until dropped (then the
/// previous state is back, and the weight cache is dropped with the
/// outermost guard). `Autocast::new(DType::F32)` turns it off inside an
/// autocast scope, like `torch.autocast(.., enabled=False)`.
///
/// ```
/// use forge::autocast::Autocast;
/// use forge::DType;
/// {
///     let _bf16 = Autocast::new(DType::BF16);
///     assert_eq!(forge::autocast::current(), Some(DType::BF16));
///     {
///         let _off = Autocast::new(DType::F32);
///         assert_eq!(forge::autocast::current(), None);
///     }
///     assert_eq!(forge::autocast::current(), Some(DType::BF16));
/// }
/// assert_eq!(forge::autocast::current(), None);
/// ```
#[must_use = "autocast ends when the guard is dropped"]
pub struct Autocast {
    prev: Option<DType>,
}

impl Autocast {
    /// Starts an autocast scope on this thread.
    ///
    /// # Panics
    /// When `dtype` is neither `BF16` (lower precision) nor `F32` (off):
    /// forge's autocast has bf16 kernels only.
    ///
    /// ```
    /// let _g = forge::autocast::Autocast::new(forge::DType::BF16);
    /// ```
    pub fn new(dtype: DType) -> Self {
        let mode = match dtype {
            DType::BF16 => Some(DType::BF16),
            DType::F32 => None,
            other => panic!("autocast: dtype {other:?} is not supported (BF16, or F32 for off)"),
        };
        DEPTH.with(|d| d.set(d.get() + 1));
        Autocast {
            prev: MODE.with(|m| m.replace(mode)),
        }
    }
}

impl Drop for Autocast {
    fn drop(&mut self) {
        MODE.with(|m| m.set(self.prev));
        let depth = DEPTH.with(|d| {
            d.set(d.get() - 1);
            d.get()
        });
        if depth == 0 {
            cache::clear();
        }
    }
}

/// Runs `f` with autocast to `dtype` on this thread (see the module docs):
/// `forge::autocast(DType::BF16, || model.forward(x))` is PyTorch's
/// `with torch.autocast("cpu", dtype=torch.bfloat16): model(x)`.
///
/// # Panics
/// As [`Autocast::new`].
///
/// ```
/// use forge::{DType, Tensor};
/// let x = Tensor::<f32>::from_vec(vec![1.0, 1.0 / 3.0], &[1, 2]);
/// let w = Tensor::<f32>::from_vec(vec![1.0, 1.0], &[1, 2]);
/// let y = forge::autocast(DType::BF16, || x.linear(&w, None));
/// // 1/3 rounded to bf16 (8 significant bits) before the product
/// assert_eq!(y.item(), 1.0 + 0.333_984_4);
/// ```
pub fn autocast<R>(dtype: DType, f: impl FnOnce() -> R) -> R {
    let _g = Autocast::new(dtype);
    f()
}

/// Whether an op on this thread should run in bf16 now: autocast to bf16
/// is on and the op would not record (recording off, or no tracked input).
fn bf16_now(tracked: bool) -> bool {
    current() == Some(DType::BF16) && !(tracked && crate::autograd::is_grad_enabled())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    #[test]
    fn the_weight_cache_lives_as_long_as_the_outermost_scope() {
        let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]);
        let w = Tensor::<f32>::from_vec(vec![0.5; 6], &[2, 3]);
        assert_eq!(cache::len(), 0);
        {
            let _outer = Autocast::new(DType::BF16);
            let a = x.linear(&w, None);
            assert_eq!(cache::len(), 1);
            let b = autocast(DType::BF16, || x.linear(&w, None));
            assert_eq!(cache::len(), 1, "the inner scope reuses the entry");
            assert_eq!(a.to_vec(), b.to_vec());
            assert_eq!(a.to_vec(), vec![3.0, 3.0]);
        }
        assert_eq!(cache::len(), 0);
    }
}

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
//! | the attention products (`QK^T`, `PV`) of [`Bert::encode`](crate::hub::Bert::encode)'s inference path | bf16 inputs, f32 accumulation, softmax in f32 | `matmul` / `bmm` in its bf16 list |
//! | other `matmul`, `bmm`, attention products, transposed convolutions, RNN cells | f32 | in its bf16 list; not converted by forge yet |
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
//! The first bf16 product of a weight converts it to bf16 and packs it;
//! every later product of the same weight on the same thread reuses that
//! copy, in this scope and the next ones, so a serving loop that enters
//! autocast at every call converts its weights once. Writing the weight
//! (an optimizer step, `load_weights`, any in-place op) makes the next
//! product convert it again: the cache shares the weight's f32 buffer, so
//! a write copies it first (copy-on-write) and the copy's address misses
//! the cache. A dropped or rewritten weight's entry is evicted at the next
//! conversion; [`clear_cache`] drops them all (the cache holds one bf16
//! copy, half the f32 size, of every weight used under autocast, plus
//! the old f32 buffers of weights written since, until their eviction).
//! The activations are converted at every call with vector code
//! (`vcvtne2ps2bf16` on CPUs with AVX-512 BF16), into pooled buffers.
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
mod convert;
mod ops;

use crate::base::DType;
use std::cell::Cell;

pub(crate) use convert::{rows_to_bf16, to_bf16_slice, Bf16Rounder};
pub(crate) use ops::{conv2d_hook, linear_hook, packed_weight};

thread_local! {
    /// The autocast dtype in force on this thread (`None`: off).
    static MODE: Cell<Option<DType>> = const { Cell::new(None) };
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
/// previous state is back). `Autocast::new(DType::F32)` turns it off inside an
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
        Autocast {
            prev: MODE.with(|m| m.replace(mode)),
        }
    }
}

impl Drop for Autocast {
    fn drop(&mut self) {
        MODE.with(|m| m.set(self.prev));
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

/// Drops this thread's cached bf16 weights (see [the weight
/// cache](self#the-weight-cache)); returns how many there were.
///
/// ```
/// use forge::{DType, Tensor};
/// let x = Tensor::<f32>::ones(&[1, 2]);
/// let w = Tensor::<f32>::ones(&[3, 2]);
/// forge::autocast(DType::BF16, || x.linear(&w, None));
/// assert_eq!(forge::autocast::clear_cache(), 1);
/// assert_eq!(forge::autocast::clear_cache(), 0);
/// ```
pub fn clear_cache() -> usize {
    let n = cache::len();
    cache::clear();
    n
}

/// Whether an op on this thread should run in bf16 now: autocast to bf16
/// is on and the op would not record (recording off, or no tracked input).
pub(crate) fn bf16_now(tracked: bool) -> bool {
    current() == Some(DType::BF16) && !(tracked && crate::autograd::is_grad_enabled())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    #[test]
    fn the_weight_cache_outlives_scopes_and_misses_after_a_write() {
        clear_cache();
        let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[1, 3]);
        let mut w = Tensor::<f32>::from_vec(vec![0.5; 6], &[2, 3]);
        let a = autocast(DType::BF16, || x.linear(&w, None));
        assert_eq!(cache::len(), 1);
        let b = autocast(DType::BF16, || x.linear(&w, None));
        assert_eq!(cache::len(), 1, "the next scope reuses the entry");
        assert_eq!(a.to_vec(), b.to_vec());
        assert_eq!(a.to_vec(), vec![3.0, 3.0]);
        // the cache shares the buffer, so no writer gets it in place: the
        // optimizer then writes a copy (`Optimizer::step`'s shared case)
        assert!(w.values_mut().is_none());
        let mut copy = w.to_vec();
        copy[0] = 2.5;
        w = Tensor::from_vec(copy, &[2, 3]);
        let c = autocast(DType::BF16, || x.linear(&w, None));
        assert_eq!(
            c.to_vec(),
            vec![5.0, 3.0],
            "the written weight is converted again"
        );
        assert_eq!(cache::len(), 1, "the old buffer's entry is evicted");
        drop(w);
        let w2 = Tensor::<f32>::from_vec(vec![1.0; 6], &[2, 3]);
        autocast(DType::BF16, || x.linear(&w2, None));
        assert_eq!(cache::len(), 1, "the dropped weight's entry is evicted");
        assert_eq!(clear_cache(), 1);
    }
}

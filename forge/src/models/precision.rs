//! Half precision for whole models: weights stored as `f16` or `bf16`
//! ([`half`]), arithmetic in `f32` (or `f64`).
//!
//! [`round_weights`] rounds every stored tensor of a model to a storage
//! type and back, in place: the model then computes exactly what the same
//! model loaded from a half-precision checkpoint computes
//! ([`LayerIo::save_as`](crate::checkpoint::LayerIo::save_as) with `DType::BF16`
//! or `DType::F16` writes one, half the size of an f32 file, and
//! [`LayerIo::load_weights`](crate::checkpoint::LayerIo::load_weights) reads it
//! into a model of any float type).
//!
//! ```
//! use forge::half::bf16;
//! use forge::models::precision::round_weights;
//! use forge::prelude::*;
//! let mut fc = Linear::<f32>::from_weights(Tensor::from_vec(vec![1.0 / 3.0], &[1, 1]), None).unwrap();
//! round_weights::<bf16, _, _>(&mut fc);
//! assert_eq!(fc.weight.item(), 0.333984375); // 1/3 in bf16's 8-bit significand
//! ```

use crate::nn::{Layer, TensorKind};
use crate::tensor::{Element, Float, Tensor};

/// Rounds every stored tensor of `model` (weights, frozen tensors and
/// buffers such as batch-norm statistics) to the storage type `H` and back
/// to `E`, keeping each tensor trainable or not as it was.
///
/// ```
/// use forge::half::f16;
/// use forge::models::precision::round_weights;
/// use forge::prelude::*;
/// let mut fc = Linear::<f64>::new(3, 2, &mut Rng::new(0));
/// let before = fc.weight.to_vec();
/// round_weights::<f16, _, _>(&mut fc);
/// for (a, b) in before.iter().zip(fc.weight.as_slice()) {
///     assert!((a - b).abs() <= a.abs() * 2f64.powi(-11)); // f16 keeps 11 bits
/// }
/// assert!(fc.weight.is_tracked());
/// ```
pub fn round_weights<H: Element, E: Float, L: Layer<E> + ?Sized>(model: &mut L) {
    model.visit_tensors_mut(&mut |_: &str, t: &mut Tensor<E>, _: TensorKind| {
        let r = t.cast::<H>().cast::<E>();
        *t = if t.is_tracked() { r.requires_grad() } else { r };
    });
}

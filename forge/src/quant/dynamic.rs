//! [`quantize_dynamic`]: every quantizable layer of a model to int8.

use super::int8::{Granularity, Int8Weight, Quantizable};
use crate::nn::{Layer, TensorKind, TensorVisitor, TensorVisitorMut};
use crate::tensor::{Float, Tensor};

/// Quantizes every [`Linear`](crate::nn::Linear),
/// [`Lstm`](crate::nn::Lstm), [`Gru`](crate::nn::Gru) and one-group
/// [`Conv2d`](crate::nn::Conv2d) of `model` to int8 in place (PyTorch's
/// `quantize_dynamic` with its default set of layer types, plus the
/// convolutions) and returns how many layers it converted. The layers
/// then run in int8 (see the [module docs](super)); they are inference
/// only: their weights are no longer trainable.
///
/// ```
/// use forge::prelude::*;
/// use forge::quant::{quantize_dynamic, Granularity};
/// let mut fc = Linear::<f32>::new(4, 2, &mut Rng::new(0));
/// assert_eq!(quantize_dynamic(&mut fc, Granularity::PerTensor), 1);
/// assert!(fc.int8().is_some());
/// assert_eq!(fc.parameters().len(), 1); // the bias stays f32
/// ```
pub fn quantize_dynamic<E: Float, L: Layer<E> + ?Sized>(
    model: &mut L,
    granularity: Granularity,
) -> usize {
    struct Convert {
        granularity: Granularity,
        count: usize,
    }
    impl<E: Float> TensorVisitorMut<E> for Convert {
        fn visit(&mut self, _: &str, _: &mut Tensor<E>, _: TensorKind) {}
        fn visit_quantizable(&mut self, _: &str, layer: &mut dyn Quantizable) {
            if layer.quantize_int8(self.granularity) {
                self.count += 1;
            }
        }
    }
    let mut v = Convert {
        granularity,
        count: 0,
    };
    model.visit_tensors_mut(&mut v);
    v.count
}

/// The bytes a model's stored tensors hold in memory: `numel x
/// size_of::<E>()` for each float tensor, [`Int8Weight::bytes`] for
/// each int8 weight (how much [`quantize_dynamic`] saves) and
/// [`Fp8Weight::bytes`](super::Fp8Weight::bytes) for each 8-bit float
/// weight ([`to_fp8`](super::to_fp8)).
///
/// ```
/// use forge::prelude::*;
/// use forge::quant::{quantize_dynamic, resident_bytes, Granularity};
/// let mut fc = Linear::<f32>::new(64, 32, &mut Rng::new(0));
/// assert_eq!(resident_bytes(&fc), (64 * 32 + 32) * 4);
/// quantize_dynamic(&mut fc, Granularity::PerChannel);
/// // int8 values, their row sums and scales, the f32 bias
/// assert_eq!(resident_bytes(&fc), 64 * 32 + 32 * 4 + 32 * 4 + 32 * 4);
/// ```
pub fn resident_bytes<E: Float, L: Layer<E> + ?Sized>(model: &L) -> usize {
    struct Count<E>(usize, std::marker::PhantomData<E>);
    impl<E: Float> TensorVisitor<E> for Count<E> {
        fn visit(&mut self, _: &str, t: &Tensor<E>, _: TensorKind) {
            self.0 += t.numel() * std::mem::size_of::<E>();
        }
        fn visit_int8(&mut self, _: &str, weight: &Int8Weight) {
            self.0 += weight.bytes();
        }
        fn visit_fp8(&mut self, _: &str, weight: &super::Fp8Weight) {
            self.0 += weight.bytes();
        }
    }
    let mut v = Count(0, std::marker::PhantomData);
    model.visit_tensors(&mut v);
    v.0
}

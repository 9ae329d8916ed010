//! The bf16 versions of the ops autocast converts: `linear` and `conv2d`.
//! Each hook returns `None` (the caller then runs its f32 code) unless
//! autocast to bf16 is on, the op would not record, and the tensors are
//! f32 on the CPU.

use super::cache::{get_or_make, Entry, Keeper, Key, Layout};
use super::convert::rows_to_bf16;
use crate::cpu::bgemm::{self, PackedBf16};
use crate::cpu::conv::ConvGeom;
use crate::cpu::memory::Storage;
use crate::tensor::{Cpu, Device, Float, Tensor};
use std::any::Any;
use std::sync::Arc;

/// `t` as an f32 CPU tensor, when it is one.
fn as_f32<E: Float, D: Device>(t: &Tensor<E, D>) -> Option<&Tensor<f32, Cpu>> {
    (t as &dyn Any).downcast_ref::<Tensor<f32, Cpu>>()
}

/// An f32 CPU tensor as `Tensor<E, D>` (which the caller knows it is).
fn back<E: Float, D: Device>(t: Tensor<f32, Cpu>) -> Option<Tensor<E, D>> {
    (Box::new(t) as Box<dyn Any>)
        .downcast::<Tensor<E, D>>()
        .ok()
        .map(|b| *b)
}

/// The cache key of a contiguous weight and the buffer the entry keeps
/// (see `cache`), or `None` for a strided view (converted at every call).
fn key(w: &Tensor<f32, Cpu>, layout: Layout) -> Option<(Key, Keeper)> {
    if !w.is_contiguous() {
        return None;
    }
    let s = w.as_slice();
    let key = Key {
        addr: s.as_ptr() as usize,
        len: s.len(),
        layout,
    };
    Some((key, Arc::clone(&w.storage)))
}

/// The cached entry of `w` for `layout`, or a fresh one for a view.
fn cached(w: &Tensor<f32, Cpu>, layout: Layout, make: impl FnOnce() -> Entry) -> Entry {
    match key(w, layout) {
        Some((k, keep)) => get_or_make(k, &keep, make),
        None => make(),
    }
}

/// The `f32` input, weight and bias of a product autocast runs in bf16
/// now (autocast on and its rule for tracked operands met), else `None`.
#[allow(clippy::type_complexity)]
fn operands<'a, E: Float, D: Device>(
    x: &'a Tensor<E, D>,
    weight: &'a Tensor<E, D>,
    bias: Option<&'a Tensor<E, D>>,
) -> Option<(
    &'a Tensor<f32, Cpu>,
    &'a Tensor<f32, Cpu>,
    Option<&'a Tensor<f32, Cpu>>,
)> {
    let tracked = x.is_tracked() || weight.is_tracked() || bias.is_some_and(|b| b.is_tracked());
    if !super::bf16_now(tracked) {
        return None;
    }
    let b = match bias {
        Some(b) => Some(as_f32(b)?),
        None => None,
    };
    Some((as_f32(x)?, as_f32(weight)?, b))
}

/// The bf16 packing of a linear weight `w` (`[out, in]`), from this
/// thread's cache (see [the weight cache](super#the-weight-cache)): what
/// [`linear_hook`] multiplies by, for callers that convert their
/// activations themselves (a fused model path).
pub(crate) fn packed_weight(w: &Tensor<f32, Cpu>) -> Arc<PackedBf16> {
    let (n, k) = (w.shape()[0], w.shape()[1]);
    match cached(w, Layout::Packed, || {
        Entry::Packed(Arc::new(PackedBf16::new(n, k, w.as_slice())))
    }) {
        Entry::Packed(p) => p,
        Entry::Rows(_) => unreachable!("the key names the layout"),
    }
}

/// `x W^T + b` with bf16 inputs and f32 accumulation, if autocast applies
/// (shapes already checked by [`Tensor::linear`]).
pub(crate) fn linear_hook<E: Float, D: Device>(
    x: &Tensor<E, D>,
    weight: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
) -> Option<Tensor<E, D>> {
    let (x, w, b) = operands(x, weight, bias)?;
    let (n, k) = (w.shape()[0], w.shape()[1]);
    let packed = packed_weight(w);
    let m: usize = x.shape()[..x.rank() - 1].iter().product();
    let rows = rows_to_bf16(x.as_slice(), m, k);
    // the product writes every element
    let mut out = Storage::<f32>::stale(m * n);
    packed.gemm(m, &rows, b.map(|b| b.as_slice()), &mut out);
    let mut shape = x.shape()[..x.rank() - 1].to_vec();
    shape.push(n);
    back(Tensor::from_storage(out, &shape))
}

/// The convolution of `geom` with bf16 inputs and f32 accumulation, if
/// autocast applies (shapes already checked by [`Tensor::conv2d`]).
pub(crate) fn conv2d_hook<E: Float, D: Device>(
    x: &Tensor<E, D>,
    weight: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
    geom: &ConvGeom,
) -> Option<Tensor<E, D>> {
    let (x, w, b) = operands(x, weight, bias)?;
    let k = w.as_slice().len() / geom.o.max(1);
    let rows = match cached(w, Layout::Rows, || {
        Entry::Rows(Arc::new(bgemm::rows_to_bf16(w.as_slice(), geom.o, k)))
    }) {
        Entry::Rows(r) => r,
        Entry::Packed(_) => unreachable!("the key names the layout"),
    };
    let y = bgemm::conv2d(geom, x.as_slice(), &rows, b.map(|b| b.as_slice()));
    back(Tensor::from_storage(y, &[geom.n, geom.o, geom.oh, geom.ow]))
}

//! The bf16 versions of the ops autocast converts: `linear` and `conv2d`.
//! Each hook returns `None` (the caller then runs its f32 code) unless
//! autocast to bf16 is on, the op would not record, and the tensors are
//! f32 on the CPU.

use super::cache::{get_or_make, Entry, Key, Layout};
use crate::cpu::bgemm::{self, PackedBf16};
use crate::cpu::conv::ConvGeom;
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

fn key(w: &Tensor<f32, Cpu>, layout: Layout) -> Key {
    let s = w.as_slice();
    Key {
        addr: s.as_ptr() as usize,
        len: s.len(),
        layout,
    }
}

/// The weight itself (its storage, and the contiguous copy a strided view
/// reads through), kept alive in the cache so that the key's address is
/// never reused while the entry exists.
fn keeper(w: &Tensor<f32, Cpu>) -> Arc<dyn Any> {
    Arc::new(w.detach())
}

/// `x W^T + b` with bf16 inputs and f32 accumulation, if autocast applies
/// (shapes already checked by [`Tensor::linear`]).
pub(crate) fn linear_hook<E: Float, D: Device>(
    x: &Tensor<E, D>,
    weight: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
) -> Option<Tensor<E, D>> {
    let tracked = x.is_tracked() || weight.is_tracked() || bias.is_some_and(|b| b.is_tracked());
    if !super::bf16_now(tracked) {
        return None;
    }
    let (x, w) = (as_f32(x)?, as_f32(weight)?);
    let b = match bias {
        Some(b) => Some(as_f32(b)?),
        None => None,
    };
    let (n, k) = (w.shape()[0], w.shape()[1]);
    let packed = match get_or_make(
        key(w, Layout::Packed),
        || keeper(w),
        || Entry::Packed(Arc::new(PackedBf16::new(n, k, w.as_slice()))),
    ) {
        Entry::Packed(p) => p,
        Entry::Rows(_) => unreachable!("the key names the layout"),
    };
    let m: usize = x.shape()[..x.rank() - 1].iter().product();
    let rows = bgemm::rows_to_bf16(x.as_slice(), m, k);
    let mut out = vec![0f32; m * n];
    packed.gemm(m, &rows, b.map(|b| b.as_slice()), &mut out);
    let mut shape = x.shape()[..x.rank() - 1].to_vec();
    shape.push(n);
    back(Tensor::from_vec(out, &shape))
}

/// The convolution of `geom` with bf16 inputs and f32 accumulation, if
/// autocast applies (shapes already checked by [`Tensor::conv2d`]).
pub(crate) fn conv2d_hook<E: Float, D: Device>(
    x: &Tensor<E, D>,
    weight: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
    geom: &ConvGeom,
) -> Option<Tensor<E, D>> {
    let tracked = x.is_tracked() || weight.is_tracked() || bias.is_some_and(|b| b.is_tracked());
    if !super::bf16_now(tracked) {
        return None;
    }
    let (x, w) = (as_f32(x)?, as_f32(weight)?);
    let b = match bias {
        Some(b) => Some(as_f32(b)?),
        None => None,
    };
    let k = w.as_slice().len() / geom.o.max(1);
    let rows = match get_or_make(
        key(w, Layout::Rows),
        || keeper(w),
        || Entry::Rows(Arc::new(bgemm::rows_to_bf16(w.as_slice(), geom.o, k))),
    ) {
        Entry::Rows(r) => r,
        Entry::Packed(_) => unreachable!("the key names the layout"),
    };
    let y = bgemm::conv2d(geom, x.as_slice(), &rows, b.map(|b| b.as_slice()));
    back(Tensor::from_vec(y, &[geom.n, geom.o, geom.oh, geom.ow]))
}

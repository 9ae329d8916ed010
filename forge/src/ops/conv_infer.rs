//! The inference path of `conv2d`: outside autograd, `f32` convolutions
//! the direct kernel prefers (`cpu/conv/direct.rs`: one group, small
//! batches) run it with the weight packed once per write version of its
//! storage; the evaluation-mode fused convolution, batch norm, residual
//! and ReLU of `nn/conv_bn_act.rs` runs it with the batch norm folded into
//! the packed weights (PyTorch's `fuse_conv_bn_eval`, `nn/fuse.rs`) and
//! the bias, residual sum and ReLU in its output pass.
//!
//! Under bf16 autocast both take the direct kernel's bf16 version
//! (`cpu/conv/direct/bf16.rs`: channel pairs into `vdpbf16ps`, f32 sums),
//! the batch norm folded into the f32 weights before they are rounded to
//! bf16; elsewhere autocast's convolution is im2col in bf16 and its
//! product (`cpu/bgemm/conv.rs`).
//!
//! The direct kernel sums in another order than im2col + gemm (see its
//! module docs), so a no-grad `f32` forward may differ from the recording
//! one by rounding, and a bf16 one from autocast's im2col product; each is
//! the same for 1 and 2 threads and every CPU class.

use crate::autograd::is_grad_enabled;
use crate::cpu::conv::{
    conv2d_forward_act, direct_forward, direct_forward_bf16, direct_preferred,
    direct_preferred_f32, packed_folded, packed_plain, packed_plain_bf16, ConvGeom,
};
use crate::cpu::memory::Storage;
use crate::tensor::{Cpu, Device, Float, Tensor};
use std::any::Any;

/// `t` as an `f32` CPU tensor, when it is one.
pub(super) fn as_f32<E: Float, D: Device>(t: &Tensor<E, D>) -> Option<&Tensor<f32, Cpu>> {
    (t as &dyn Any).downcast_ref::<Tensor<f32, Cpu>>()
}

/// An `f32` CPU tensor back as `Tensor<E, D>` (when `E, D` are those).
pub(super) fn back<E: Float, D: Device>(t: Tensor<f32, Cpu>) -> Option<Tensor<E, D>> {
    (Box::new(t) as Box<dyn Any>)
        .downcast::<Tensor<E, D>>()
        .ok()
        .map(|b| *b)
}

/// The packed-weight storage of `w` (a plain tensor), when the
/// direct path takes `geom` outside autograd (in f32 not where im2col +
/// gemm is faster: `direct_preferred_f32`).
fn weight_storage<'a>(w: &'a Tensor<f32, Cpu>, geom: &ConvGeom) -> Option<&'a Storage<f32>> {
    (!is_grad_enabled() && w.layout.is_none() && direct_takes(geom)).then_some(&*w.storage)
}

/// Whether the direct kernel is the path for `geom` outside autograd:
/// under bf16 autocast wherever it applies (`direct_preferred`), in f32 not
/// where im2col + gemm is faster (`direct_preferred_f32`). The fp8 layers
/// (`conv_fp8.rs`) ask the same, so that they take the f32 layer's path.
pub(super) fn direct_takes(geom: &ConvGeom) -> bool {
    if bf16_now() {
        direct_preferred(geom)
    } else {
        direct_preferred_f32(geom)
    }
}

/// Whether autocast runs this (non-recording) convolution in bf16.
pub(super) fn bf16_now() -> bool {
    crate::autocast::bf16_now(false)
}

/// `conv2d(x, w) + b` by the direct kernel when it applies (see the module
/// docs), in bf16 under autocast; `None` otherwise (the caller runs the
/// recording path, or autocast's bf16 product).
pub(crate) fn conv2d_direct<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w: &Tensor<E, D>,
    b: Option<&Tensor<E, D>>,
    geom: &ConvGeom,
) -> Option<Tensor<E, D>> {
    let (x, w) = (as_f32(x)?, as_f32(w)?);
    let b = match b {
        Some(b) => Some(as_f32(b)?),
        None => None,
    };
    let y = direct_storage(x, w, b, geom)?;
    back(Tensor::from_storage(y, &[geom.n, geom.o, geom.oh, geom.ow]))
}

/// [`conv2d_direct`]'s output values.
fn direct_storage(
    x: &Tensor<f32, Cpu>,
    w: &Tensor<f32, Cpu>,
    b: Option<&Tensor<f32, Cpu>>,
    geom: &ConvGeom,
) -> Option<Storage<f32>> {
    let ws = weight_storage(w, geom)?;
    let bias = b.map(|b| b.to_vec());
    Some(if bf16_now() {
        let packed = packed_plain_bf16(geom, ws)?;
        direct_forward_bf16(geom, x.as_slice(), packed, bias.as_deref(), None, false)
    } else {
        let packed = packed_plain(geom, ws)?;
        direct_forward(geom, x.as_slice(), packed, bias.as_deref(), None, false)
    })
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `act(self.conv2d(weight, bias, ...))` outside autograd for an `f32`
    /// CPU convolution (not under bf16 autocast), with `act` run by the
    /// convolution itself: on the im2col path in the product's epilogue,
    /// on each block of outputs after its bias while it is in cache
    /// (`cpu::conv::conv2d_forward_act`), on the direct kernel's output in
    /// place; no tensor for the convolution's own output. `act` computes
    /// each element on its own (a ReLU, `vmath::gelu`), so the values are
    /// those of the two ops, bit for bit. Not recorded. `None` where it
    /// does not apply; the caller then runs the ops one by one.
    ///
    /// # Panics
    /// As [`conv2d`](Self::conv2d).
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub(crate) fn conv2d_then(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        groups: usize,
        act: fn(&mut [f32]),
    ) -> Option<Self> {
        if is_grad_enabled() || bf16_now() {
            return None;
        }
        let (xf, wf) = (as_f32(self)?, as_f32(weight)?);
        let bf = match bias {
            Some(b) => Some(as_f32(b)?),
            None => None,
        };
        let geom = self.conv2d_geom(weight, bias, stride, padding, dilation, groups);
        let y = match direct_storage(xf, wf, bf, &geom) {
            Some(mut y) => {
                act(&mut y);
                y
            }
            None if wf.layout.is_none() => conv2d_forward_act(
                &geom,
                xf.as_slice(),
                &wf.storage,
                bf.map(|b| b.as_slice()),
                act,
            ),
            None => return None,
        };
        // the tools see it as the convolution (its activation included)
        let y: Self = back(Tensor::from_storage(y, &[geom.n, geom.o, geom.oh, geom.ow]))?;
        Some(y.seen("conv2d", [self, weight].into_iter().chain(bias)))
    }
}

/// `relu?(conv(x, w') + b' + residual?)` with the weight `w` folded into
/// `w'` and `b'` by `fold` (called when the weight was last folded from
/// other values: when `key.0` does not match the kept key; `key.1` makes
/// the key to keep with a new fold), by the direct kernel (in bf16
/// under autocast: `w'` rounded after the fold, `b'`, the residual and the
/// ReLU in f32): `None` where it does not apply (the caller runs the
/// layers).
pub(crate) fn conv2d_folded<E: Float>(
    x: &Tensor<E>,
    w: &Tensor<E>,
    geom: &ConvGeom,
    key: (impl Fn(&[u64]) -> bool, impl FnOnce() -> Vec<u64>),
    fold: impl FnOnce() -> (Vec<E>, Vec<E>),
    residual: Option<&Tensor<E>>,
    relu: bool,
) -> Option<Tensor<E>> {
    let (xf, wf) = (as_f32(x)?, as_f32(w)?);
    let r = match residual {
        Some(r) => Some(as_f32(r)?),
        None => None,
    };
    let folded = packed_folded(geom, weight_storage(wf, geom)?, key, || {
        let (fw, fb) = fold();
        let cast = |v: Vec<E>| {
            v.into_iter()
                .map(|e| e.to_f32().unwrap_or(f32::NAN))
                .collect()
        };
        (cast(fw), cast(fb))
    })?;
    let res = r.map(|r| r.as_slice());
    let (xs, b) = (xf.as_slice(), Some(&folded.bias[..]));
    let y = if bf16_now() {
        direct_forward_bf16(geom, xs, folded.packed_bf16(), b, res, relu)
    } else {
        direct_forward(geom, xs, &folded.packed, b, res, relu)
    };
    // the tools see it as the convolution (the folded batch norm, residual
    // and ReLU included)
    let y: Tensor<E> = back(Tensor::from_storage(y, &[geom.n, geom.o, geom.oh, geom.ow]))?;
    Some(y.seen("conv2d", [x, w].into_iter().chain(residual)))
}

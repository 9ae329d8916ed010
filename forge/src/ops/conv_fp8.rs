//! `conv2d` with an 8-bit float weight (`nn/conv2d_fp8.rs`), the bytes
//! decoded in the packing step of the kernel that runs, so that no f32
//! copy of the weight exists besides the packed one, which is made in a
//! pooled buffer for the call and dropped after it (the bytes stay the
//! only resident copy):
//!
//! - outside autograd, where the direct kernel takes the convolution
//!   (`ops/conv_infer.rs`'s choice, `cpu/conv/direct.rs`), its blocks are
//!   packed from the bytes (in bf16 under autocast, rounded after the
//!   decode as the f32 weight's packing is rounded), with an evaluation
//!   batch norm folded in by [`conv2d_fp8_folded`];
//! - elsewhere, im2col and gemm with the weight packed once for the call
//!   from the bytes (`cpu::conv::conv2d_forward_fp8`; a grouped
//!   convolution packs each group's rows), where that path runs with
//!   every product on the packed kernel.
//!
//! Each is the f32 path the decoded weight takes, on the same values in
//! the same order, so the bits are the same. Where neither applies (the
//! small-channel kernels, whose weights are small; one output channel a
//! group (depthwise); tap classes; thin planes; autocast's bf16 im2col
//! product; `f64`) these
//! return `None` and the caller decodes the whole weight into a pooled f32
//! tensor for the call.

use super::conv_infer::{as_f32, back, bf16_now, direct_takes};
use crate::autograd::is_grad_enabled;
use crate::cpu::conv::{conv2d_forward_fp8, direct_forward_fp8, ConvGeom};
use crate::cpu::gemm::Fp8Panels;
use crate::tensor::{Float, Tensor};

/// `conv2d(x, w) + b` with the fp8 weight `w` (`[geom.o, geom.k_len()]`)
/// by the path the f32 weight holding its decoded values would take,
/// decoded in that path's packing step (see the module docs); `None`
/// where that path is not one of those (the caller decodes the weight).
pub(crate) fn conv2d_fp8<E: Float>(
    x: &Tensor<E>,
    w: &Fp8Panels,
    b: Option<&Tensor<E>>,
    geom: &ConvGeom,
) -> Option<Tensor<E>> {
    let xf = as_f32(x)?;
    let bf = match b {
        Some(b) => Some(as_f32(b)?),
        None => None,
    };
    let shape = [geom.n, geom.o, geom.oh, geom.ow];
    // `conv2d`'s first choice, the direct kernel (`conv2d_direct`)
    if !is_grad_enabled() && direct_takes(geom) {
        let bias = bf.map(|b| b.to_vec());
        let y = direct_forward_fp8(
            geom,
            xf.as_slice(),
            w,
            None,
            bias.as_deref(),
            None,
            false,
            bf16_now(),
        );
        return back(Tensor::from_storage(y, &shape));
    }
    // then autocast's bf16 product, which reads an f32 weight
    let tracked = x.is_tracked() || b.is_some_and(|b| b.is_tracked());
    if crate::autocast::bf16_now(tracked) {
        return None;
    }
    let y = conv2d_forward_fp8(geom, xf.as_slice(), w, bf.map(|b| b.as_slice()))?;
    back(Tensor::from_storage(y, &shape))
}

/// `relu?(conv(x, w') + b' + residual?)` with the batch norm folded into
/// the fp8 weight `w` as `conv_infer::conv2d_folded` folds it into an f32
/// one: `w' = decoded(w) x scale[o]` (one rounding per element, in the
/// packing step) and `b'` the folded bias, by the direct kernel (in bf16
/// under autocast); `None` where the direct kernel would not take the
/// convolution. Packed for this call only: caching the folded panels
/// would keep an f32 copy of the weight resident.
pub(crate) fn conv2d_fp8_folded<E: Float>(
    x: &Tensor<E>,
    w: &Fp8Panels,
    geom: &ConvGeom,
    fold: impl FnOnce() -> (Vec<E>, Vec<E>),
    residual: Option<&Tensor<E>>,
    relu: bool,
) -> Option<Tensor<E>> {
    let xf = as_f32(x)?;
    let r = match residual {
        Some(r) => Some(as_f32(r)?),
        None => None,
    };
    if is_grad_enabled() || !direct_takes(geom) {
        return None;
    }
    let (scale, bias) = fold();
    let cast = |v: Vec<E>| -> Vec<f32> {
        v.into_iter()
            .map(|e| e.to_f32().unwrap_or(f32::NAN))
            .collect()
    };
    let (scale, bias) = (cast(scale), cast(bias));
    let y = direct_forward_fp8(
        geom,
        xf.as_slice(),
        w,
        Some(&scale),
        Some(&bias),
        r.map(|r| r.as_slice()),
        relu,
        bf16_now(),
    );
    back(Tensor::from_storage(y, &[geom.n, geom.o, geom.oh, geom.ow]))
}

//! `linear`: `x W^T + b` as one product (PyTorch's `addmm`): the output
//! starts as the bias in every row and the product is accumulated onto it
//! (`beta = 1`), instead of a zeroed product followed by a broadcast add,
//! which wrote and read the whole output once more (the add was 3% of a GPT
//! training step, the zeroing 3%). Where the packed f32 kernel runs, the
//! kernel itself adds the bias, held in registers, to each tile's first
//! block of products as it stores them (`cpu::gemm::gemm_bias`, the same
//! bits), so the output is neither filled in a pass of its own nor written
//! twice.

use super::softmax::{row_blocks_mut, ROW_BLOCK_ELEMS};
use crate::autograd::BackwardCtx;
use crate::cpu::gemm::{gemm_batched, gemm_bias, gemm_bias_into, gemm_weight_t, Mat};
use crate::cpu::memory::Storage;
use crate::cpu::vmath;
use crate::tensor::{Device, Float, Tensor};
use std::any::TypeId;
use std::mem::MaybeUninit;

impl<E: Float, D: Device> Tensor<E, D> {
    /// `self @ weight^T + bias` over the last dimension (`torch.nn.functional.linear`):
    /// `self` is `[.., in]`, `weight` `[out, in]`, `bias` `[out]`; the
    /// result is `[.., out]`. Differentiable in all three.
    ///
    /// Each output element is the bias plus the dot product, the bias added
    /// first ([`Tensor::matmul_t`] then `+ bias` adds it last: the two agree
    /// to rounding, exactly when the inner dimension fits one block of the
    /// product).
    ///
    /// # Panics
    /// When `self` is 0-d, `weight` is not 2-d, the inner dimensions differ,
    /// or `bias` is not `[out]`. The message names the shapes.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 2]);
    /// let w = Tensor::from_vec(vec![1.0, 0.0, 1.0, 1.0, 0.0, -1.0], &[3, 2]);
    /// let b = Tensor::from_vec(vec![0.5, 0.0, -0.5], &[3]);
    /// assert_eq!(x.linear(&w, Some(&b)).to_vec(), vec![1.5, 3.0, -2.5]);
    /// assert_eq!(x.linear(&w, None).shape(), &[1, 3]);
    /// ```
    #[track_caller]
    pub fn linear(&self, weight: &Self, bias: Option<&Self>) -> Self {
        shape_assert!(
            self.rank() >= 1
                && weight.rank() == 2
                && self.shape()[self.rank() - 1] == weight.shape()[1],
            "linear: input {:?} x weight {:?}: expected [.., in] and [out, in]",
            self.shape(),
            weight.shape()
        );
        let (out_f, in_f) = (weight.shape()[0], weight.shape()[1]);
        if let Some(b) = bias {
            shape_assert!(
                b.shape() == [out_f],
                "linear: bias {:?} for weight {:?}: expected [{out_f}]",
                b.shape(),
                weight.shape()
            );
        }
        if let Some(y) = crate::autocast::linear_hook(self, weight, bias) {
            return y;
        }
        let rows: usize = self.shape()[..self.rank() - 1].iter().product();
        let (x, w) = (self.as_slice(), weight.as_slice());
        // Outside autograd a plain weight is packed once and kept on its
        // storage until it is next written (`cpu::gemm::gemm_weight_t`),
        // and the bias is added to each tile of the output by the product
        // itself as it stores it: the same bits as packing it here over an
        // output prefilled with the bias, without that pass over the output.
        let cached = self.linear_cached(weight, bias, None);
        let out = cached.unwrap_or_else(|| {
            if let Some(b) = bias {
                // the bias added to each tile by the packed kernel, where
                // it runs: the bits of the prefilled output below
                let mut out = Storage::<E>::stale(rows * out_f);
                let (a, wt) = (Mat::row_major(x, in_f), Mat::transposed(w, in_f));
                if gemm_bias(rows, in_f, out_f, a, wt, b.as_slice(), &mut out) {
                    return out;
                }
            }
            let (mut out, beta) = match bias {
                Some(b) => (bias_rows(b.as_slice(), rows), E::one()),
                None => (Storage::<E>::stale(rows * out_f), E::zero()),
            };
            gemm_batched(
                1,
                rows,
                in_f,
                out_f,
                |_| Mat::row_major(x, in_f),
                |_| Mat::transposed(w, in_f),
                beta,
                &mut out,
            );
            out
        });
        let mut shape = self.shape()[..self.rank() - 1].to_vec();
        shape.push(out_f);
        let mut inputs = vec![self.clone(), weight.clone()];
        inputs.extend(bias.cloned());
        Tensor::from_parts(out, shape.into(), None)
            .record("linear", inputs, move |ctx| linear_grads(ctx, ctx.grad))
    }
}

/// `linear`'s backward rule on the gradient `g` of its output (`[..,
/// out]`): the gradients of the input, the weight and the bias, those
/// `ctx`'s inputs (`x`, `w`, the bias if any) need.
fn linear_grads<E: Float, D: Device>(
    ctx: &BackwardCtx<'_, E, D>,
    g: &Tensor<E, D>,
) -> Vec<Option<Tensor<E, D>>> {
    let (x, w) = (&ctx.inputs[0], &ctx.inputs[1]);
    let (out_f, in_f) = (w.shape()[0], w.shape()[1]);
    let rows: usize = x.shape()[..x.rank() - 1].iter().product();
    // the rows of x and of g as matrices: [rows, in] and [rows, out]
    let g2 = g.view(&[rows, out_f]);
    let gx = ctx.needs(0).then(|| {
        g2.bmm_ex(w, false, false, "linear backward")
            .view(x.shape())
    });
    let gw = ctx
        .needs(1)
        .then(|| g2.bmm_ex(&x.view(&[rows, in_f]), true, false, "linear backward"));
    let mut grads = vec![gx, gw];
    if ctx.inputs.len() == 3 {
        grads.push(ctx.needs(2).then(|| g2.sum_to(&[out_f])));
    }
    grads
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `gelu_tanh(self.linear(weight, bias))` recorded as one node, for
    /// training GPT's feed-forward block (`Linear::forward_gelu_tanh`): the
    /// product writes both the pre-activation `h` (kept for the backward
    /// pass) and `gelu_tanh(h)` as each block of outputs is finished, while
    /// it is in cache, instead of `h` written by one op and read back by
    /// the next. The backward pass computes `dH = grad * gelu_tanh'(h)` in
    /// one pass and then `linear`'s gradients from it. The values and all
    /// the gradients are those of the two ops (the same kernels in the
    /// same order); under `create_graph` the rule recomputes `h` with
    /// `linear` and differentiates the two ops' composed rules.
    ///
    /// `None` where the fused node does not apply (the caller then runs
    /// the two ops): not `f32`, autograd off or nothing tracked, strided
    /// operands, shapes the packed kernel does not take. The shapes are
    /// the caller's to check.
    pub(crate) fn linear_gelu_tanh(&self, weight: &Self, bias: Option<&Self>) -> Option<Self> {
        let tracked =
            self.is_tracked() || weight.is_tracked() || bias.is_some_and(Tensor::is_tracked);
        // (tracked and recording: autocast leaves the product in f32)
        if !crate::autograd::is_grad_enabled()
            || !tracked
            || self.layout.is_some()
            || weight.layout.is_some()
            || bias.is_some_and(|b| b.layout.is_some())
        {
            return None;
        }
        let (out_f, in_f) = (weight.shape()[0], weight.shape()[1]);
        let rows: usize = self.shape()[..self.rank() - 1].iter().product();
        let (x, w) = (as_f32(self.as_slice())?, as_f32(weight.as_slice())?);
        let b = match bias {
            Some(b) => Some(as_f32(b.as_slice())?),
            None => None,
        };
        let mut h = Storage::<E>::stale(rows * out_f);
        let mut a = Storage::<E>::with_capacity(rows * out_f);
        let (hf, af) = (as_f32_mut(&mut h)?, as_f32_uninit(&mut a, rows * out_f)?);
        let (xm, wm) = (Mat::row_major(x, in_f), Mat::transposed(w, in_f));
        if !gemm_bias_into(rows, in_f, out_f, xm, wm, b, hf, af, gelu_tanh_f32_into) {
            return None;
        }
        // SAFETY: the capacity is `rows * out_f`, every element of which
        // the product wrote (`gemm_bias_into` returned true).
        unsafe { a.set_len(rows * out_f) };
        let mut shape = self.shape()[..self.rank() - 1].to_vec();
        shape.push(out_f);
        let h = Tensor::<E, D>::from_parts(h, shape.clone().into(), None);
        let mut inputs = vec![self.clone(), weight.clone()];
        inputs.extend(bias.cloned());
        let y = Tensor::from_parts(a, shape.into(), None);
        Some(y.record("linear_gelu_tanh", inputs, move |ctx| {
            if ctx.create_graph {
                let (x, w) = (&ctx.inputs[0], &ctx.inputs[1]);
                let h = x.linear(w, ctx.inputs.get(2));
                return linear_grads(ctx, &h.gelu_tanh_grad_composed(ctx.grad));
            }
            let dh = ctx.grad.zip_slice_into(&h, vmath::gelu_tanh_grad_into);
            linear_grads(ctx, &dh)
        }))
    }
}

/// `vmath::gelu_tanh_into` for `f32`, the second output's epilogue.
fn gelu_tanh_f32_into(x: &[f32], out: &mut [MaybeUninit<f32>]) {
    vmath::gelu_tanh_into(x, out)
}

/// `x` as `&[f32]` when `E` is `f32`.
fn as_f32<E: Float>(x: &[E]) -> Option<&[f32]> {
    (TypeId::of::<E>() == TypeId::of::<f32>()).then(|| {
        // SAFETY: `E` is `f32` (checked), so this is the same slice under
        // its own type.
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()) }
    })
}

/// `x` as `&mut [f32]` when `E` is `f32`.
fn as_f32_mut<E: Float>(x: &mut [E]) -> Option<&mut [f32]> {
    (TypeId::of::<E>() == TypeId::of::<f32>()).then(|| {
        // SAFETY: as in `as_f32`.
        unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<f32>(), x.len()) }
    })
}

/// The first `n` elements of `s`'s spare capacity as `f32`s not yet
/// written, when `E` is `f32`.
fn as_f32_uninit<E: Float>(s: &mut Storage<E>, n: usize) -> Option<&mut [MaybeUninit<f32>]> {
    let spare = &mut s.spare_capacity_mut()[..n];
    (TypeId::of::<E>() == TypeId::of::<f32>()).then(|| {
        // SAFETY: as in `as_f32`: `MaybeUninit<E>` is `MaybeUninit<f32>`.
        unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), n) }
    })
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `act(self @ weight^T + bias)` outside autograd, with the weight's
    /// packed copy kept on its storage and the bias and `act` applied by
    /// the product to each block of outputs while it is in cache
    /// (`cpu::gemm::gemm_weight_t`): the bits of [`Tensor::linear`]
    /// followed by `act` over its output (`act` computes each element on
    /// its own: `vmath::gelu`, a ReLU). Not recorded (no gradient flows
    /// through it). `None` where that path does not apply: autograd
    /// recording, a strided weight, shapes or an element type the packed
    /// f32 kernel does not take; the caller then runs the ops one by one.
    /// The shapes are the caller's to check.
    pub(crate) fn linear_then(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        act: fn(&mut [f32]),
    ) -> Option<Self> {
        let out = self.linear_cached(weight, bias, Some(act))?;
        let mut shape = self.shape()[..self.rank() - 1].to_vec();
        shape.push(weight.shape()[0]);
        Some(Tensor::from_parts(out, shape.into(), None))
    }

    /// The output of `self @ weight^T + bias` (then `act`) through the
    /// no-grad weight cache, or `None` where it does not apply (see
    /// [`Tensor::linear_then`]).
    fn linear_cached(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        act: Option<fn(&mut [f32])>,
    ) -> Option<Storage<E>> {
        if crate::autograd::is_grad_enabled() || weight.layout.is_some() {
            return None;
        }
        let (out_f, in_f) = (weight.shape()[0], weight.shape()[1]);
        let rows: usize = self.shape()[..self.rank() - 1].iter().product();
        let mut out = Storage::<E>::stale(rows * out_f);
        gemm_weight_t(
            rows,
            in_f,
            out_f,
            self.as_slice(),
            &weight.storage,
            E::zero(),
            bias.map(|b| b.as_slice()),
            act,
            &mut out,
        )
        .then_some(out)
    }
}

/// A pooled `rows x bias.len()` buffer with `bias` in every row, written
/// over fixed blocks of whole rows (in parallel when the pass is long
/// enough, as `zeroed_output` is).
fn bias_rows<E: Float>(bias: &[E], rows: usize) -> Storage<E> {
    let width = bias.len();
    let n = rows * width;
    let mut s = Storage::<E>::with_capacity(n);
    if width > 0 {
        let block = ROW_BLOCK_ELEMS.div_ceil(width).max(1) * width;
        row_blocks_mut(
            &mut s.spare_capacity_mut()[..n],
            block,
            n / 4,
            |_, chunk| {
                for row in chunk.chunks_exact_mut(width) {
                    for (v, &b) in row.iter_mut().zip(bias) {
                        v.write(b);
                    }
                }
            },
        );
    }
    // SAFETY: the capacity is at least `n`, and the loop above wrote each
    // of the first `n` elements (blocks of whole rows, each row once).
    unsafe { s.set_len(n) };
    s
}

#[cfg(test)]
mod tests;

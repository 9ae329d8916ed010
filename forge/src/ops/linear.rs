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
use crate::cpu::gemm::{gemm_batched, gemm_bias, gemm_weight_t, Mat};
use crate::cpu::memory::Storage;
use crate::tensor::{Device, Float, Tensor};

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
            // bf16 products, nothing recorded: the tools still see the op
            return y.seen("linear", [self, weight].into_iter().chain(bias));
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
        Tensor::from_parts(out, shape.into(), None).record("linear", inputs, move |ctx| {
            let (x, w, g) = (&ctx.inputs[0], &ctx.inputs[1], ctx.grad);
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
        })
    }
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
    /// The shapes are the caller's to check. The tools (profiler, anomaly
    /// detection) see the result as a `linear` ([`Tensor::seen`]), `act`
    /// counted in it.
    #[track_caller]
    pub(crate) fn linear_then(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        act: fn(&mut [f32]),
    ) -> Option<Self> {
        let out = self.linear_cached(weight, bias, Some(act))?;
        let mut shape = self.shape()[..self.rank() - 1].to_vec();
        shape.push(weight.shape()[0]);
        let inputs = [Some(self), Some(weight), bias];
        Some(
            Tensor::from_parts(out, shape.into(), None)
                .seen("linear", inputs.into_iter().flatten()),
        )
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

//! `linear`: `x W^T + b` as one product (PyTorch's `addmm`): the output
//! starts as the bias in every row and the product is accumulated onto it
//! (`beta = 1`), instead of a zeroed product followed by a broadcast add,
//! which wrote and read the whole output once more (the add was 3% of a GPT
//! training step, the zeroing 3%).

use super::softmax::{row_blocks_mut, ROW_BLOCK_ELEMS};
use crate::cpu::gemm::{gemm_batched, gemm_weight_t, Mat};
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
            return y;
        }
        let rows: usize = self.shape()[..self.rank() - 1].iter().product();
        let (mut out, beta) = match bias {
            Some(b) => (bias_rows(b.as_slice(), rows), E::one()),
            None => (Storage::<E>::stale(rows * out_f), E::zero()),
        };
        let (x, w) = (self.as_slice(), weight.as_slice());
        // Outside autograd a plain weight is packed once and kept on its
        // storage until it is next written (`cpu::gemm::gemm_weight_t`):
        // the same bits as packing it here.
        let cached = !crate::autograd::is_grad_enabled()
            && weight.layout.is_none()
            && gemm_weight_t(rows, in_f, out_f, x, &weight.storage, beta, &mut out);
        if !cached {
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
        }
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

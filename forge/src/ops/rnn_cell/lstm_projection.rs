//! The input projection `xp = x W_ih^T` of one LSTM layer and direction
//! as an op of its own, for `lstm_layer` (`lstm.rs`), which records it and
//! the fused sequence ([`lstm_sequence`]) as `matmul_t` and
//! [`lstm_sequence`] are, but with the weight gradients in one place: the
//! projection's rule, which receives the
//! whole gradient of `xp` (the gate gradients `da`, `[T N, 4H]`, 4 MiB at
//! `T = 32, N = 64, H = 128`; summed over the sequence op's two rules when
//! both `out` and `c_n` have gradients), computes `dW_ih = da^T x` and
//! `dW_hh = da^T h_prev` as one product `da^T [x | h_prev]`
//! ([`gemm_side_by_side`]), which packs `da^T` once instead of once in
//! each product.
//!
//! Bits: the outputs and the gradients of `x`, `W_ih`, `h0`, `c0` and the
//! bias are those of `matmul_t` and [`lstm_sequence`] (the same products
//! and kernels on the same values). `dW_hh` is one product over the `T N`
//! rows in time order, `h_prev` stacked as `[h0; out[..T-1]]`
//! (`[out[1..]; h0]` in reverse), where [`lstm_sequence`] sums the steps
//! after the first in one product and adds the first step's after, in
//! each of its rules: the same terms in another order
//! (`lstm_layer_tests.rs`). Under `backward_with_graph` the sequence op's
//! rule gives `dW_hh` as it does for [`lstm_sequence`], from `xp`
//! recomputed on the tape as a `matmul_t` (the projection op's rule would
//! add a `dW_hh` term for any gradient that reaches `xp`, and a later
//! backward pass through the recorded reverse pass would send it one),
//! and the projection's rule is `matmul_t`'s.
//!
//! [`lstm_sequence`]: super::lstm_sequence

use super::{grad_tensor, Seq};
use crate::cpu::gemm::side_by_side::{gemm_side_by_side, Rhs};
use crate::cpu::gemm::{gemm, Mat};
use crate::cpu::Storage;
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

/// The layer's input and input weight, handed to the sequence op.
#[derive(Clone, Copy)]
pub(super) struct Proj<'a, E: Float, D: Device> {
    /// The input `[T, N, I]` as recorded.
    pub(super) x: &'a Tensor<E, D>,
    /// Its values, contiguous and untracked.
    pub(super) xc: &'a Tensor<E, D>,
    /// `W_ih`, `[4H, I]`.
    pub(super) w_ih: &'a Tensor<E, D>,
}

impl<E: Float, D: Device> Proj<'_, E, D> {
    /// `xp` (the projection's values) recorded as the projection of `x`
    /// by `W_ih`, with `W_hh` as a third input whose gradient the rule
    /// gives outside `backward_with_graph`, from `h0` and the sequence's
    /// outputs `ys`.
    pub(super) fn record(
        self,
        xp: &Tensor<E, D>,
        h0: &Tensor<E, D>,
        w_hh: &Tensor<E, D>,
        seq: Seq,
        ys: Arc<Storage<E>>,
    ) -> Tensor<E, D> {
        let (xc, h0) = (self.xc.clone(), h0.detach());
        let inputs = vec![self.x.clone(), self.w_ih.clone(), w_hh.clone()];
        xp.clone()
            .record("lstm_input_projection", inputs, move |ctx| {
                let (x, w_ih) = (&ctx.inputs[0], &ctx.inputs[1]);
                let (t_len, n, fan_in) = (x.dim(0), x.dim(1), x.dim(2));
                let (rows, g4) = (t_len * n, w_ih.dim(0));
                if ctx.create_graph {
                    // `matmul_t`'s rule; `dW_hh` is the sequence op's
                    let g = ctx.grad.view(&[rows, g4]);
                    let dx = ctx
                        .needs(0)
                        .then(|| g.matmul(w_ih).view(&[t_len, n, fan_in]));
                    let dw = ctx.needs(1).then(|| g.t().matmul(&x.view(&[rows, fan_in])));
                    return vec![dx, dw, None];
                }
                let da = ctx.grad.contiguous();
                let need = [ctx.needs(0), ctx.needs(1), ctx.needs(2)];
                let g = Grads {
                    seq,
                    da: da.as_slice(),
                    x: xc.as_slice(),
                    w_ih: &w_ih.detach().contiguous(),
                    ys: &ys,
                    h0: h0.as_slice(),
                };
                g.all(need).into()
            })
    }
}

/// `x W_ih^T` (`x` `[T, N, I]`) in tensor ops, recorded as the
/// composed layer records it.
pub(super) fn projection<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w_ih: &Tensor<E, D>,
) -> Tensor<E, D> {
    let (t_len, n, fan_in) = (x.dim(0), x.dim(1), x.dim(2));
    x.view(&[t_len * n, fan_in])
        .matmul_t(w_ih)
        .view(&[t_len, n, w_ih.dim(0)])
}

/// What the projection's rule computes its gradients from.
struct Grads<'a, E: Float, D: Device> {
    seq: Seq,
    /// The gradient of `xp`, `[T N, 4H]`.
    da: &'a [E],
    /// The input's values, `[T N, I]`.
    x: &'a [E],
    w_ih: &'a Tensor<E, D>,
    /// The sequence's outputs, `[T, N, H]`.
    ys: &'a [E],
    h0: &'a [E],
}

impl<E: Float, D: Device> Grads<'_, E, D> {
    /// The gradients of `x`, `W_ih` and `W_hh`, each where `need` asks
    /// (in that order): `dx = da W_ih` as `matmul_t`'s rule computes it,
    /// and the two weight gradients side by side, `da^T` packed once for
    /// both.
    fn all(&self, need: [bool; 3]) -> [Option<Tensor<E, D>>; 3] {
        let Seq {
            t_len,
            n,
            h,
            reverse,
        } = self.seq;
        let (rows, g4, fan_in) = (t_len * n, 4 * h, self.w_ih.dim(1));
        let dx = need[0].then(|| {
            let mut dx = Storage::<E>::stale(rows * fan_in);
            let (a, b) = (
                Mat::row_major(self.da, g4),
                Mat::row_major(self.w_ih.as_slice(), fan_in),
            );
            gemm(rows, g4, fan_in, a, b, E::zero(), &mut dx);
            grad_tensor(dx, &[t_len, n, fan_in])
        });
        // h_prev of the rows in time order: h0 at the first step, the
        // previous step's output at the others
        let prev = (t_len - 1) * n;
        let outs = Mat::row_major(&self.ys[if reverse { n } else { 0 } * h..][..prev * h], h);
        let first = Mat::row_major(self.h0, h);
        let stack = if reverse {
            [(prev, outs), (n, first)]
        } else {
            [(n, first), (prev, outs)]
        };
        let xs = [(rows, Mat::row_major(self.x, fan_in))];
        let mut rhs = Vec::with_capacity(2);
        let mut bufs = Vec::with_capacity(2);
        if need[1] {
            rhs.push(Rhs {
                cols: fan_in,
                parts: &xs,
            });
            bufs.push(Storage::<E>::stale(g4 * fan_in));
        }
        if need[2] {
            rhs.push(Rhs {
                cols: h,
                parts: &stack,
            });
            bufs.push(Storage::<E>::stale(g4 * h));
        }
        if !rhs.is_empty() {
            let mut c: Vec<&mut [E]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
            gemm_side_by_side(g4, rows, Mat::transposed(self.da, g4), &rhs, &mut c);
        }
        let mut bufs = bufs.into_iter();
        let dw_ih = need[1].then(|| grad_tensor(bufs.next().expect("dW_ih"), &[g4, fan_in]));
        let dw_hh = need[2].then(|| grad_tensor(bufs.next().expect("dW_hh"), &[g4, h]));
        [dx, dw_ih, dw_hh]
    }
}

//! Softmax over the last axis of attention scores `(..., L, S)` with the
//! masks applied inside the kernel: boolean masks read in place through
//! broadcast strides (an attention mask `(L, S)`, a per-head mask, a key
//! padding mask `(N, S)` seen as `(N, 1, 1, S)`) and the causal mask
//! `j > i`, with no mask tensor built.
//!
//! Math: `y = softmax(x + m)` with `m = 0` where every mask allows the
//! score and `-inf` elsewhere, i.e. masked entries are set to `-inf` and
//! the row's softmax runs over the rest (over the prefix `j <= i` only when
//! causal: the entries after it are exactly 0). A row with nothing left
//! (every score masked or `-inf`) is NaN throughout, as `0 / 0` is in the
//! composed ops and in PyTorch. Backward: `dx = y (g - sum(g y))`, one pass
//! per row; masked entries have `y = 0` and get 0.

use super::softmax::{
    exp_cost, lane_sum, line_max_raw, row_blocks_mut, softmax_backward_rows, zeroed_output,
    ROW_BLOCK_ELEMS,
};
use crate::cpu::vmath;
use crate::tensor::{Device, Float, Tensor};

/// One boolean mask read in place over scores of a given shape: score
/// `(a_0, ..., a_{r-1})` reads `mask[sum_k a_k strides[k]]` and is masked
/// where that value equals `blocked`.
#[derive(Clone, Debug)]
pub(crate) struct MaskTerm<D: Device> {
    mask: Tensor<bool, D>,
    strides: Vec<usize>,
    blocked: bool,
}

impl<D: Device> MaskTerm<D> {
    /// `mask` broadcast (aligned on the right, as in NumPy) over scores of
    /// shape `scores`, or `None` when it does not broadcast to that shape.
    #[track_caller]
    pub(crate) fn broadcast(
        mask: &Tensor<bool, D>,
        scores: &[usize],
        blocked: bool,
    ) -> Option<Self> {
        let (mr, sr) = (mask.rank(), scores.len());
        if mr > sr {
            return None;
        }
        let mut strides = vec![0; sr];
        let mut step = 1;
        for k in (0..mr).rev() {
            let (m, s) = (mask.shape()[k], scores[sr - mr + k]);
            if m != 1 && m != s {
                return None;
            }
            if m != 1 {
                strides[sr - mr + k] = step;
            }
            step *= m;
        }
        Some(MaskTerm {
            mask: mask.clone(),
            strides,
            blocked,
        })
    }

    /// `mask` read with explicit `strides` (one per score axis; 0 repeats
    /// the mask along that axis). The caller checks that every index stays
    /// inside the mask.
    #[track_caller]
    pub(crate) fn with_strides(mask: &Tensor<bool, D>, strides: Vec<usize>, blocked: bool) -> Self {
        MaskTerm {
            mask: mask.clone(),
            strides,
            blocked,
        }
    }

    /// Sets `row[j] = -inf` where this mask blocks score `(r, j)`, `r`
    /// being the row's index among the `(..., L)` leading positions of
    /// scores shaped `lead x S`.
    fn apply<E: Float>(&self, row: &mut [E], r: usize, lead: &[usize]) {
        let (mut rest, mut at) = (r, 0);
        for (&d, &st) in lead.iter().zip(&self.strides).rev() {
            at += (rest % d) * st;
            rest /= d;
        }
        let step = self.strides[lead.len()];
        let m = self.mask.as_slice();
        for (j, v) in row.iter_mut().enumerate() {
            if m[at + j * step] == self.blocked {
                *v = E::neg_infinity();
            }
        }
    }
}

/// The masks of a masked softmax: boolean terms, all of which must allow
/// a score, and the causal mask.
#[derive(Clone, Debug)]
pub(crate) struct ScoreMask<D: Device> {
    /// Boolean masks over the scores.
    pub(crate) terms: Vec<MaskTerm<D>>,
    /// Hide keys after the query (`j > i`).
    pub(crate) causal: bool,
}

/// `row = softmax(row)` in place, the arithmetic of `softmax_line`; a
/// row with no finite score (all `-inf`) becomes NaN, as `0 / 0` does.
#[inline(always)]
pub(crate) fn softmax_row_in_place<E: Float>(row: &mut [E]) -> bool {
    softmax_row_from_max(row, line_max_raw(row))
}

/// [`softmax_row_in_place`] given the row's maximum `m` (its
/// `line_max_raw`, computed by the caller in a pass of its own, such as
/// the attention's scaling): `e^(x - m)` in one pass, the sum, the
/// division.
#[inline(always)]
pub(crate) fn softmax_row_from_max<E: Float>(row: &mut [E], m: E) -> bool {
    if m == E::neg_infinity() {
        return false;
    }
    vmath::exp_sub(row, m);
    let s = lane_sum(row);
    for v in row.iter_mut() {
        *v /= s;
    }
    true
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Softmax over the last axis of scores `(..., L, S)` with `mask`
    /// applied inside the kernel (see the module docs): the same values as
    /// adding the `-inf` mask and calling `softmax(-1)`, bit for bit.
    /// Under `create_graph` the backward rule recomputes the masked softmax
    /// and writes `y (g - sum(g y))` in tensor ops.
    ///
    /// # Panics
    /// When the rank is below 2 or a mask term's strides do not match it.
    #[track_caller]
    pub(crate) fn softmax_masked(&self, mask: &ScoreMask<D>) -> Self {
        shape_assert!(
            self.rank() >= 2 && mask.terms.iter().all(|t| t.strides.len() == self.rank()),
            "softmax_masked: scores of shape {:?} need rank >= 2 and masks of the same rank",
            self.shape()
        );
        let (l, s) = (self.dim(-2), self.dim(-1));
        let lead = &self.shape()[..self.rank() - 1];
        let x = self.as_slice();
        let mut out = zeroed_output(x.len());
        if s > 0 {
            let rows = ROW_BLOCK_ELEMS.div_ceil(s).max(1);
            row_blocks_mut(
                &mut out,
                rows * s,
                exp_cost(x.len()),
                #[inline(always)]
                |b, chunk| {
                    let src = &x[b * rows * s..][..chunk.len()];
                    for (k, (xr, or)) in src.chunks(s).zip(chunk.chunks_mut(s)).enumerate() {
                        let r = b * rows + k;
                        let n = if mask.causal { (r % l + 1).min(s) } else { s };
                        let row = &mut or[..n];
                        row.copy_from_slice(&xr[..n]);
                        for t in &mask.terms {
                            t.apply(row, r, lead);
                        }
                        if !softmax_row_in_place(row) {
                            or.fill(E::nan());
                        }
                    }
                },
            );
        }
        let y = Tensor::from_parts(out, self.shape.clone(), None);
        let saved = y.clone();
        let mask = mask.clone();
        y.record("softmax_masked", vec![self.clone()], move |ctx| {
            if !ctx.create_graph {
                let gx = softmax_backward_rows(saved.as_slice(), ctx.grad.as_slice(), s);
                return vec![Some(Tensor::from_parts(gx, saved.shape.clone(), None))];
            }
            let y = ctx.inputs[0].softmax_masked(&mask);
            let gy = ctx.grad.mul(&y);
            let sum = gy.sum_dim(&[-1], true);
            vec![Some(gy.sub(&y.mul(&sum)))]
        })
    }
}

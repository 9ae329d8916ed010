//! Layer normalisation, fused: the row statistics and
//! `(x - mean) rstd * w + b` in one op, and one backward pass, both over
//! fixed blocks of rows that run in parallel when the op is large enough.
//!
//! **Threads.** Blocks hold `ROW_BLOCK_ELEMS / m` rows (at least one),
//! whatever the thread count. Each row's output and input gradient come
//! from that row alone; the weight and bias gradients are summed per block
//! (rows in order) and then over the blocks in order. So every result is
//! the same for any number of threads.

use super::stats::normalize;
use crate::cpu::Storage;
use crate::ops::softmax::{lane_dot, lane_sum, row_blocks_mut, ROW_BLOCK_ELEMS};
use crate::tensor::{Device, Float, Tensor};

/// Layer normalisation over the trailing dimensions `normalized_shape`
/// (biased variance, `eps` inside the square root), then elementwise
/// `* weight + bias` (both of shape `normalized_shape`).
///
/// # Panics
/// When the shape of `x` does not end with `normalized_shape`, or a weight
/// or bias has another shape.
///
/// ```
/// use forge::nn::functional::layer_norm;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 10.0, 20.0], &[2, 2]);
/// let y = layer_norm(&x, &[2], None, None, 0.0);
/// assert_eq!(y.to_vec(), vec![-1.0, 1.0, -1.0, 1.0]);
/// ```
#[track_caller]
pub fn layer_norm<E: Float, D: Device>(
    x: &Tensor<E, D>,
    normalized_shape: &[usize],
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    let shape = x.shape();
    let k = normalized_shape.len();
    shape_assert!(
        k >= 1 && shape.len() >= k && &shape[shape.len() - k..] == normalized_shape,
        "layer_norm: input of shape {shape:?} does not end with normalized_shape {normalized_shape:?}"
    );
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            shape_assert!(
                t.shape() == normalized_shape,
                "layer_norm: {what} of shape {:?} differs from normalized_shape {normalized_shape:?}",
                t.shape()
            );
        }
    }
    layer_norm_fused(x, normalized_shape.iter().product(), weight, bias, eps)
}

/// `(mean, 1 / sqrt(var + eps))` of one row of length `m`, biased variance
/// from the centred values (two passes, eight interleaved partial sums
/// each).
#[inline(always)]
fn row_stat<E: Float>(row: &[E], inv_m: E, eps: E) -> (E, E) {
    let mean = lane_sum(row) * inv_m;
    // lane `j` sums the squares of elements `j, j + 8, ...` in increasing
    // order (whole groups of 8 first, so the loop vectorises)
    let mut acc = [E::zero(); 8];
    let groups = row.chunks_exact(8);
    let tail = groups.remainder();
    for g in groups {
        for (a, &v) in acc.iter_mut().zip(g) {
            let d = v - mean;
            *a += d * d;
        }
    }
    for (a, &v) in acc.iter_mut().zip(tail) {
        let d = v - mean;
        *a += d * d;
    }
    let var = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    (mean, (var * inv_m + eps).sqrt().recip())
}

/// Estimated single-thread cost of a layer-norm pass over `len` elements,
/// in nanoseconds (three reads and a write per element forward, about the
/// same backward).
fn pass_cost(len: usize) -> usize {
    len
}

/// Layer norm over rows of length `m` (the trailing `normalized_shape`),
/// fused: statistics and `(x - mean) rstd * w + b` in one op, and one
/// backward pass for `x` (`rstd (gw - mean(gw) - xhat mean(gw xhat))`,
/// `gw = g w`) plus column sums for `w` and `b`. Under `create_graph` the
/// same formulas are written in tensor ops.
#[track_caller]
fn layer_norm_fused<E: Float, D: Device>(
    x: &Tensor<E, D>,
    m: usize,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    let xs = x.as_slice();
    let mut inputs = vec![x.clone()];
    inputs.extend(weight.cloned());
    inputs.extend(bias.cloned());
    if m == 0 || xs.is_empty() {
        let out = Storage::<E>::zeroed(xs.len());
        return Tensor::from_parts(out, x.shape.clone(), None).record(
            "layer_norm",
            inputs,
            |ctx| {
                ctx.inputs
                    .iter()
                    .map(|t| Some(t.mul_scalar(E::zero())))
                    .collect()
            },
        );
    }
    let rows = xs.len() / m;
    let rb = (ROW_BLOCK_ELEMS / m).max(1);
    let (inv_m, e) = (E::one() / E::from_f64(m as f64), E::from_f64(eps));
    // (mean, rstd) of every row, interleaved: written whole, block by
    // block, in the pass below (each block's rows' statistics, then its
    // rows' outputs while they are in cache)
    let mut stats = Storage::<E>::stale(2 * rows);
    let stats_ptr = PartPtr(stats.as_mut_ptr());
    let (w, b) = (weight.map(|t| t.as_slice()), bias.map(|t| t.as_slice()));
    // every element is written below (stale: no zeroing pass first)
    let mut out = Storage::<E>::stale(xs.len());
    row_blocks_mut(
        &mut out,
        rb * m,
        2 * pass_cost(xs.len()),
        #[inline(always)]
        |blk, ob| {
            let src = &xs[blk * rb * m..blk * rb * m + ob.len()];
            let p = stats_ptr;
            // SAFETY: block `blk` alone writes the statistics of its rows,
            // `stats[2 blk rb..2 blk rb + 2 rows]` (`ob.len() = rows m`), inside
            // `stats`, which outlives the call.
            let st =
                unsafe { std::slice::from_raw_parts_mut(p.0.add(blk * rb * 2), ob.len() / m * 2) };
            for (s, row) in st.chunks_exact_mut(2).zip(src.chunks_exact(m)) {
                let (mean, rstd) = row_stat(row, inv_m, e);
                s[0] = mean;
                s[1] = rstd;
            }
            let st: &[E] = st;
            for ((o, row), s) in ob.chunks_mut(m).zip(src.chunks(m)).zip(st.chunks(2)) {
                let (mean, rstd) = (s[0], s[1]);
                let o = &mut o[..row.len()];
                // `((v - mean) rstd) w + b`, each factor only when present; one
                // loop per case so that each vectorises
                match (w, b) {
                    (Some(w), Some(b)) => {
                        for ((o, &v), (&w, &b)) in o.iter_mut().zip(row).zip(w.iter().zip(b)) {
                            *o = (v - mean) * rstd * w + b;
                        }
                    }
                    (Some(w), None) => {
                        for ((o, &v), &w) in o.iter_mut().zip(row).zip(w) {
                            *o = (v - mean) * rstd * w;
                        }
                    }
                    (None, Some(b)) => {
                        for ((o, &v), &b) in o.iter_mut().zip(row).zip(b) {
                            *o = (v - mean) * rstd + b;
                        }
                    }
                    (None, None) => {
                        for (o, &v) in o.iter_mut().zip(row) {
                            *o = (v - mean) * rstd;
                        }
                    }
                }
            }
        },
    );
    let has_w = weight.is_some();
    let b_shape: Option<Vec<usize>> = bias.map(|b| b.shape().to_vec());
    Tensor::from_parts(out, x.shape.clone(), None).record("layer_norm", inputs, move |ctx| {
        let x = &ctx.inputs[0];
        let w = has_w.then(|| &ctx.inputs[1]);
        if ctx.create_graph {
            return layer_norm_backward_graph(x, w, b_shape.as_deref(), m, eps, ctx.grad);
        }
        let (xs, g) = (x.as_slice(), ctx.grad.as_slice());
        let wv = w.map(|w| w.as_slice());
        // every element is written below
        let mut gx = Storage::<E>::stale(xs.len());
        // per block: the block's sums of g xhat (w) and g (b), 2m each
        let blocks = rows.div_ceil(rb);
        let mut part = Storage::<E>::zeroed(blocks * 2 * m);
        let part_ptr = PartPtr(part.as_mut_ptr());
        row_blocks_mut(
            &mut gx,
            rb * m,
            pass_cost(xs.len()),
            #[inline(always)]
            |blk, ob| {
                let at = blk * rb * m;
                let (src, gb, st) = (&xs[at..], &g[at..], &stats[blk * rb * 2..]);
                let p = part_ptr;
                // SAFETY: block `blk` alone writes `part[blk * 2m..(blk + 1) *
                // 2m]`, inside `part` (blk < blocks); `part` outlives the call.
                let sums = unsafe { std::slice::from_raw_parts_mut(p.0.add(blk * 2 * m), 2 * m) };
                let (sw, sb) = sums.split_at_mut(m);
                let mut xhat = Storage::<E>::zeroed(m);
                let mut gwr = Storage::<E>::zeroed(m);
                for (((o, row), gr), s) in ob
                    .chunks_mut(m)
                    .zip(src.chunks(m))
                    .zip(gb.chunks(m))
                    .zip(st.chunks(2))
                {
                    let (mean, rstd) = (s[0], s[1]);
                    for (h, &v) in xhat.iter_mut().zip(row) {
                        *h = (v - mean) * rstd;
                    }
                    match wv {
                        Some(w) => {
                            for ((q, &gv), &w) in gwr.iter_mut().zip(gr).zip(w) {
                                *q = gv * w;
                            }
                        }
                        None => gwr.copy_from_slice(&gr[..m]),
                    }
                    let a = lane_sum(&gwr) * inv_m;
                    let c = lane_dot(&gwr, &xhat) * inv_m;
                    for ((o, &q), &h) in o.iter_mut().zip(gwr.iter()).zip(xhat.iter()) {
                        *o = rstd * (q - a - h * c);
                    }
                    for ((acc, &gv), &h) in sw.iter_mut().zip(gr).zip(xhat.iter()) {
                        *acc += gv * h;
                    }
                    for (acc, &gv) in sb.iter_mut().zip(gr) {
                        *acc += gv;
                    }
                }
            },
        );
        // the blocks' sums, added in block order
        let mut gw = Storage::<E>::zeroed(m);
        let mut gbias = Storage::<E>::zeroed(m);
        for sums in part.chunks_exact(2 * m) {
            for (acc, &v) in gw.iter_mut().zip(&sums[..m]) {
                *acc += v;
            }
            for (acc, &v) in gbias.iter_mut().zip(&sums[m..]) {
                *acc += v;
            }
        }
        let mut grads = vec![Some(Tensor::from_parts(gx, x.shape.clone(), None))];
        if let Some(w) = w {
            grads.push(Some(Tensor::from_parts(gw, w.shape.clone(), None)));
        }
        if let Some(bs) = &b_shape {
            grads.push(Some(Tensor::from_parts(gbias, bs.as_slice().into(), None)));
        }
        grads
    })
}

/// The per-block sums buffer, shared by the backward blocks (each writes
/// only its own `2m` entries).
#[derive(Clone, Copy)]
struct PartPtr<E>(*mut E);
// SAFETY: only used to hand disjoint ranges of one buffer to the row
// blocks, which finish before the buffer is read or dropped.
unsafe impl<E: Send> Send for PartPtr<E> {}
// SAFETY: as above; the pointer is copied, never dereferenced jointly.
unsafe impl<E: Send> Sync for PartPtr<E> {}

/// The layer-norm gradients in tensor ops (differentiable in `x`, `w` and
/// the incoming gradient), for `create_graph`.
#[track_caller]
fn layer_norm_backward_graph<E: Float, D: Device>(
    x: &Tensor<E, D>,
    w: Option<&Tensor<E, D>>,
    b_shape: Option<&[usize]>,
    m: usize,
    eps: f64,
    g: &Tensor<E, D>,
) -> Vec<Option<Tensor<E, D>>> {
    // View as [rows, m] so one axis holds the normalised values.
    let rows = x.numel() / m;
    let x2 = x.reshape(&[rows as isize, m as isize]);
    let g2 = g.reshape(&[rows as isize, m as isize]);
    let (xhat, _, var) = normalize(&x2, &[1], eps);
    let rstd = var.add_scalar(E::from_f64(eps)).rsqrt();
    let gw = match w {
        Some(w) => g2.mul(&w.reshape(&[1, m as isize])),
        None => g2.clone(),
    };
    let gx = gw
        .sub(&gw.mean_dim(&[1], true))
        .sub(&xhat.mul(&gw.mul(&xhat).mean_dim(&[1], true)))
        .mul(&rstd);
    let mut out = vec![Some(gx.view(x.shape()))];
    if let Some(w) = w {
        out.push(Some(g2.mul(&xhat).sum_dim(&[0], false).view(w.shape())));
    }
    if let Some(bs) = b_shape {
        out.push(Some(g2.sum_dim(&[0], false).view(bs)));
    }
    out
}

/// `y = layer_norm(y + residual) * weight + bias` over rows of `m`, in
/// place, for inference (nothing recorded): the residual add and the
/// normalisation in one pass per row block instead of an add op and a
/// layer-norm op. Each row's arithmetic is the composed ops' (the sum
/// `y + residual`, then [`layer_norm`]'s statistics and affine step), so
/// the values equal `layer_norm(&y.add(&residual), ..)` bit for bit, for
/// any thread count. `each_block(first_row, rows)` then sees every
/// finished block of rows while it is in cache (to round it to bf16 for
/// the next product, say).
///
/// # Panics
/// When `residual` differs in length from `y`, `y` is not whole rows of
/// `m`, or `weight` / `bias` do not have `m` elements.
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub(crate) fn add_layer_norm_in_place<E: Float>(
    y: &mut [E],
    residual: &[E],
    m: usize,
    weight: &[E],
    bias: &[E],
    eps: f64,
    each_block: impl Fn(usize, &[E]) + Sync,
) {
    shape_assert!(
        m > 0
            && y.len() == residual.len()
            && y.len().is_multiple_of(m)
            && weight.len() == m
            && bias.len() == m,
        "add_layer_norm: {} values, residual {}, rows of {m}, weight {}, bias {}",
        y.len(),
        residual.len(),
        weight.len(),
        bias.len()
    );
    let rb = (ROW_BLOCK_ELEMS / m).max(1);
    let (inv_m, e) = (E::one() / E::from_f64(m as f64), E::from_f64(eps));
    row_blocks_mut(
        y,
        rb * m,
        2 * pass_cost(residual.len()),
        #[inline(always)]
        |blk, ob| {
            let src = &residual[blk * rb * m..];
            for (o, r) in ob.chunks_exact_mut(m).zip(src.chunks_exact(m)) {
                for (o, &r) in o.iter_mut().zip(r) {
                    *o += r;
                }
                let (mean, rstd) = row_stat(o, inv_m, e);
                for (o, (&w, &b)) in o.iter_mut().zip(weight.iter().zip(bias)) {
                    *o = (*o - mean) * rstd * w + b;
                }
            }
            each_block(blk * rb, ob);
        },
    );
}

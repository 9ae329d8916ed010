//! Multi-head self-attention straight from a packed `qkv` projection
//! (`[B, T, 3C]`, the GPT layout: queries, keys, values side by side, each
//! `n_head` heads of `C / n_head`), as one op: each head's products read
//! `q`, `k` and `v` in place through strides and write the output heads
//! into `[B, T, C]` directly, so none of the composed form's copies is made
//! (three splits and three head permutes of `qkv`, the scaled scores, the
//! output permute; backward: the permutes again, three zero-filled `qkv`
//! gradients and their sum).
//!
//! Math, per batch entry and head, with `d = C / n_head` and `s = 1/sqrt(d)`:
//! `S = (Q K^T) s`, `P = softmax(S)` over keys (`j <= i` only when causal,
//! the rest 0), `O = P V`. Backward from `G = dO`: `dV = P^T G`,
//! `dP = G V^T`, `dS = (P * (dP - rowsum(dP * P))) s`, `dQ = dS K`,
//! `dK = dS^T Q`. Every product is the same gemm call, and every
//! elementwise step the same arithmetic in the same order, as the composed
//! ops (`matmul_t`, `mul_scalar`, `softmax_masked`, `matmul`), so values and
//! gradients equal the composed form's exactly (tests/ops/ops_attention_qkv.rs).
//!
//! A causal head whose products run on the packed kernel in one block of
//! `k` ([`causal_blocks`]) multiplies in row blocks of [`CAUSAL_ROWS`]
//! queries, each against only the keys up to its last query: the terms it
//! leaves out are products with a probability (or a `dS` entry) that is
//! exactly zero, which a chain of fused multiply-adds from `+0` passes
//! through unchanged for finite operands. So the values and gradients
//! are still the composed form's, bit for bit, for finite inputs; a
//! non-finite key, value or query after a query's position no longer
//! reaches that query's outputs through `0 * inf` (as in PyTorch's fused
//! causal kernels, unlike its composed form).

use super::attention::attention_probs;
use super::softmax::{lane_dot, scale_line_max_raw};
use super::softmax_masked::{softmax_row_from_max, ScoreMask};
use crate::autograd::is_grad_enabled;
use crate::cpu::elementwise::widest;
use crate::cpu::gemm::{
    gemm_batched, gemm_serial_into, serial_into_applies, serial_scratch, Mat, K_BLOCK,
};
use crate::cpu::memory::Storage;
use crate::cpu::softmax_rows::scaled_softmax_rows;
use crate::cpu::threads::{num_threads, parallel_for_cost};
use crate::tensor::{Device, Float, Tensor};

/// A raw pointer shared by the per-head chunks of one call.
#[derive(Clone, Copy)]
struct Shared<E>(*mut E);
// SAFETY: each chunk (one batch entry and head) writes a part of the
// buffers that no other chunk touches (its own probabilities, its own
// columns of the output), and the buffers outlive the parallel loop.
unsafe impl<E> Send for Shared<E> {}
// SAFETY: as above.
unsafe impl<E> Sync for Shared<E> {}

impl<E> Shared<E> {
    /// The pointer `offset` elements on, computed without dereferencing (a
    /// method, so that closures capture the `Sync` wrapper, not the bare
    /// pointer field).
    fn at(self, offset: usize) -> *mut E {
        self.0.wrapping_add(offset)
    }
}

/// The shape of one call: batch, sequence, model width, heads, head width.
#[derive(Clone, Copy)]
struct Dims {
    b: usize,
    t: usize,
    c: usize,
    heads: usize,
    d: usize,
}

impl Dims {
    /// Head `h`'s `t x d` block of part `part` (0 queries, 1 keys, 2
    /// values) of batch entry `bi` of `qkv`, rows `3C` apart.
    fn part<'a, E>(&self, qkv: &'a [E], bi: usize, part: usize, h: usize) -> &'a [E] {
        let at = bi * self.t * 3 * self.c + part * self.c + h * self.d;
        &qkv[at..at + (self.t - 1) * 3 * self.c + self.d]
    }

    /// Rows `t`, columns `d`, contiguous rows `ld` apart: as a `t x d`
    /// matrix, or (`transposed`) its `d x t` transpose.
    fn mat<E>(data: &[E], ld: usize, transposed: bool) -> Mat<'_, E> {
        if transposed {
            Mat {
                data,
                rs: 1,
                cs: ld,
            }
        } else {
            Mat {
                data,
                rs: ld,
                cs: 1,
            }
        }
    }
}

/// `out = a b` for one product on the calling thread's share (the same
/// kernel and bits as the composed ops' batched products).
fn product<E: Float>(m: usize, k: usize, n: usize, a: Mat<E>, b: Mat<E>, out: &mut [E]) {
    gemm_batched(1, m, k, n, |_| a, |_| b, E::zero(), out);
}

/// `out = a b` (`m x n`, rows `ld` apart from `dst`) for one head: written
/// by the kernel itself, its packing in `pack`, where `direct` and
/// [`gemm_serial_into`] applies (an f32 product on the packed kernel);
/// else [`product`] into `tmp` (`m x n`) and a copy. The same bits either
/// way.
///
/// # Safety
/// The `m x n` elements at `dst` (rows `ld >= n` apart) are writable and
/// written by no one else during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn product_to<E: Float>(
    (m, k, n): (usize, usize, usize),
    a: Mat<E>,
    b: Mat<E>,
    dst: *mut E,
    ld: usize,
    pack: &mut [E],
    tmp: &mut [E],
    direct: bool,
) {
    // SAFETY: the caller's contract.
    if direct && unsafe { gemm_serial_into(m, k, n, a, b, dst, ld, pack) } {
        return;
    }
    let tmp = &mut tmp[..m * n];
    product(m, k, n, a, b, tmp);
    // SAFETY: the caller's contract.
    unsafe { scatter_rows(tmp, n, dst, ld, 0) };
}

/// Whether a call's heads multiply on their own threads with their
/// packing in the chunk's scratch ([`gemm_serial_into`]): when there are
/// at least as many heads as threads. With fewer (one long sequence, one
/// head), each product may be split across the threads, as before.
fn heads_direct(pairs: usize) -> bool {
    pairs >= num_threads()
}

/// Queries per row block of a causal head's products: one column panel of
/// the packed kernel, so that a block's scores cover whole panels.
const CAUSAL_ROWS: usize = 32;

/// The row blocks `[r0, r1)` of a causal head of `t` queries and width
/// `d`, or `None` where blocking would change a bit or gain nothing: not
/// causal, not `direct`, fewer than two blocks, more than one block of `k`
/// (a product starting at key `r0` would then sum in other blocks), or a
/// whole product or a block's product outside the packed kernel (whose
/// chain per output from `+0`, in `k` order, is what makes the left-out
/// zero terms invisible). A last block of one row joins the one before.
fn causal_blocks<E: Float>(
    t: usize,
    d: usize,
    is_causal: bool,
    direct: bool,
) -> Option<Vec<(usize, usize)>> {
    if !is_causal || !direct || !(2 * CAUSAL_ROWS..=K_BLOCK).contains(&t) {
        return None;
    }
    let mut blocks: Vec<(usize, usize)> = (0..t)
        .step_by(CAUSAL_ROWS)
        .map(|r0| (r0, (r0 + CAUSAL_ROWS).min(t)))
        .collect();
    if let Some(&(r0, r1)) = blocks.last()
        && r1 - r0 < 2
    {
        blocks.pop();
        if let Some(prev) = blocks.last_mut() {
            prev.1 = r1;
        }
    }
    let whole = serial_into_applies::<E>(t, d, t) && serial_into_applies::<E>(t, t, d);
    let parts = blocks.iter().all(|&(r0, r1)| {
        let m = r1 - r0;
        serial_into_applies::<E>(m, d, r1)
            && serial_into_applies::<E>(m, r1, d)
            && serial_into_applies::<E>(m, t - r0, d)
    });
    (whole && parts).then_some(blocks)
}

/// `rows x d` (rows `d` apart) into columns `col..col + d` of rows `ld`
/// apart at `dst`.
///
/// # Safety
/// Those elements of `dst` are writable and written by no one else.
unsafe fn scatter_rows<E: Copy>(src: &[E], d: usize, dst: *mut E, ld: usize, col: usize) {
    for (i, row) in src.chunks_exact(d).enumerate() {
        // SAFETY: the caller's contract; `src` and `dst` do not overlap
        // (`src` is this chunk's scratch).
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), dst.add(i * ld + col), d) };
    }
}

/// Multi-head self-attention from packed projections: `qkv` is `[B, T, 3C]`
/// (queries, keys and values along the last axis, each split into `n_head`
/// heads of `C / n_head`, as a GPT's `c_attn` produces them); the result
/// is `[B, T, C]` with the heads side by side, the same values as
/// splitting, permuting to `[B, n_head, T, C / n_head]`, calling
/// [`scaled_dot_product_attention`](crate::nn::functional::scaled_dot_product_attention)
/// and permuting back, without the copies. `is_causal` hides keys after
/// each query. Differentiable (gradients of gradients through the composed
/// ops).
///
/// # Panics
/// When `qkv` is not 3-d, its last dimension is not `3C` with `C` a
/// positive multiple of `n_head`, or `n_head` is 0.
///
/// ```
/// use forge::nn::functional::qkv_attention;
/// use forge::Tensor;
/// // one head of width 1, two positions: q = k = 0 (uniform), v = 1, 3
/// let qkv = Tensor::<f64>::from_vec(vec![0.0, 0.0, 1.0, 0.0, 0.0, 3.0], &[1, 2, 3]);
/// assert_eq!(qkv_attention(&qkv, 1, true).to_vec(), vec![1.0, 2.0]);
/// assert_eq!(qkv_attention(&qkv, 1, false).to_vec(), vec![2.0, 2.0]);
/// ```
#[track_caller]
pub fn qkv_attention<E: Float, D: Device>(
    qkv: &Tensor<E, D>,
    n_head: usize,
    is_causal: bool,
) -> Tensor<E, D> {
    let shape = qkv.shape();
    shape_assert!(
        qkv.rank() == 3 && n_head > 0 && shape[2].is_multiple_of(3) && (shape[2] / 3).is_multiple_of(n_head) && shape[2] > 0,
        "qkv_attention: qkv of shape {shape:?} with {n_head} heads: expected [B, T, 3C] with C a positive multiple of the heads"
    );
    let c = shape[2] / 3;
    let dims = Dims {
        b: shape[0],
        t: shape[1],
        c,
        heads: n_head,
        d: c / n_head,
    };
    let Dims { b, t, d, .. } = dims;
    let keep = is_grad_enabled() && qkv.is_tracked();
    let x = qkv.as_slice();
    // every buffer below is written whole before it is read (the heads
    // cover every column; each product writes its whole output), so they
    // come from the pool unzeroed
    let mut out = Storage::<E>::stale(b * t * c);
    // the probabilities, kept for backward (scratch per head otherwise)
    let mut probs = if keep {
        Storage::<E>::stale(b * n_head * t * t)
    } else {
        Storage::with_capacity(0)
    };
    if t > 0 {
        let (po, pp) = (Shared(out.as_mut_ptr()), Shared(probs.as_mut_ptr()));
        let scale = E::from_f64(1.0 / (d as f64).sqrt());
        // about 4 t^2 d multiply-adds per head at ~30 per ns, plus the softmax
        let cost = b * n_head * (4 * t * t * d / 30 + 2 * t * t);
        let direct = heads_direct(b * n_head);
        let blocks = causal_blocks::<E>(t, d, is_causal, direct);
        // the products' packing, in each chunk's scratch
        let pack_len = if direct {
            serial_scratch::<E>(t, d, t).max(serial_scratch::<E>(t, t, d))
        } else {
            0
        };
        parallel_for_cost(b * n_head, cost, |pair| {
            let (bi, h) = (pair / n_head, pair % n_head);
            let mut scratch = Storage::<E>::stale(if keep { 0 } else { t * t } + t * d + pack_len);
            let (p_own, rest) = scratch.split_at_mut(if keep { 0 } else { t * t });
            let (o, pack) = rest.split_at_mut(t * d);
            let p: &mut [E] = if keep {
                // SAFETY: head `pair`'s `t x t` probabilities, inside the
                // buffer and written by this chunk only.
                unsafe { std::slice::from_raw_parts_mut(pp.at(pair * t * t), t * t) }
            } else {
                p_own
            };
            let (q, k, v) = (
                dims.part(x, bi, 0, h),
                dims.part(x, bi, 1, h),
                dims.part(x, bi, 2, h),
            );
            let ld = 3 * c;
            let (qm, km) = (Dims::mat(q, ld, false), Dims::mat(k, ld, true));
            if let Some(blocks) = &blocks {
                // the scores of each block's queries against the keys up to
                // its last query (the rest is zeroed by the softmax below)
                for &(r0, r1) in blocks {
                    let qb = Dims::mat(&q[r0 * ld..], ld, false);
                    // SAFETY: rows `r0..r1` of this chunk's `t x t`, rows
                    // `t` apart, `r1 <= t` columns each.
                    let ran = unsafe {
                        gemm_serial_into(
                            r1 - r0,
                            d,
                            r1,
                            qb,
                            km,
                            p.as_mut_ptr().add(r0 * t),
                            t,
                            pack,
                        )
                    };
                    assert!(ran, "qkv_attention: a causal block left the packed kernel");
                }
            } else {
                // SAFETY: `p` is this chunk's `t x t`, rows `t` apart.
                let ran =
                    direct && unsafe { gemm_serial_into(t, d, t, qm, km, p.as_mut_ptr(), t, pack) };
                if !ran {
                    product(t, d, t, qm, km, p);
                }
            }
            // f32 on AVX-512: every row pass in whole vectors, the tail
            // masked (`cpu::softmax_rows`: the same bits); otherwise the
            // row passes at the widest vector width (the same bits: see
            // `widest`)
            if !scaled_softmax_rows(p, t, scale, is_causal) {
                widest(
                    #[inline(always)]
                    || {
                        for (i, row) in p.chunks_exact_mut(t).enumerate() {
                            let n = if is_causal { i + 1 } else { t };
                            // the scaling and the maximum in one pass
                            let m = scale_line_max_raw(&mut row[..n], scale);
                            row[n..].fill(E::zero());
                            if !softmax_row_from_max(&mut row[..n], m) {
                                row.fill(E::nan());
                            }
                        }
                    },
                );
            }
            let out_at = bi * t * c + h * d;
            if let Some(blocks) = &blocks {
                // each block's outputs from the values up to its last query
                for &(r0, r1) in blocks {
                    // SAFETY: rows `r0..r1`, columns `h d..(h + 1) d` of
                    // batch entry `bi`'s output belong to this chunk alone.
                    let ran = unsafe {
                        gemm_serial_into(
                            r1 - r0,
                            r1,
                            d,
                            Mat::row_major(&p[r0 * t..], t),
                            Dims::mat(v, ld, false),
                            po.at(out_at + r0 * c),
                            c,
                            pack,
                        )
                    };
                    assert!(ran, "qkv_attention: a causal block left the packed kernel");
                }
                return;
            }
            // SAFETY: columns `h d..(h + 1) d` of batch entry `bi`'s rows
            // of the output belong to this chunk alone.
            unsafe {
                product_to(
                    (t, t, d),
                    Mat::row_major(p, t),
                    Dims::mat(v, ld, false),
                    po.at(out_at),
                    c,
                    pack,
                    o,
                    direct,
                )
            };
        });
    }
    let y = Tensor::from_parts(out, vec![b, t, c].into(), None);
    if !keep {
        // nothing recorded: the tools still see the op
        return y.seen("qkv_attention", [qkv]);
    }
    let saved = Tensor::<E, D>::from_parts(probs, vec![b, n_head, t, t].into(), None);
    y.record("qkv_attention", vec![qkv.clone()], move |ctx| {
        let qkv = &ctx.inputs[0];
        if ctx.create_graph {
            return vec![Some(composed_backward(qkv, ctx.grad, dims, is_causal))];
        }
        let gq = qkv_backward(
            qkv.as_slice(),
            saved.as_slice(),
            ctx.grad.as_slice(),
            dims,
            is_causal,
        );
        vec![Some(Tensor::from_parts(gq, qkv.shape.clone(), None))]
    })
}

/// The `qkv` gradient in one pass per head from the saved probabilities
/// `p` (`[B, heads, T, T]`) and the output gradient `g` (`[B, T, C]`).
fn qkv_backward<E: Float>(x: &[E], p: &[E], g: &[E], dims: Dims, is_causal: bool) -> Storage<E> {
    let Dims { b, t, c, heads, d } = dims;
    // written whole: every head's q, k and v columns (unzeroed, as above)
    let mut gx = Storage::<E>::stale(b * t * 3 * c);
    if t == 0 {
        return gx;
    }
    let pg = Shared(gx.as_mut_ptr());
    let scale = E::from_f64(1.0 / (d as f64).sqrt());
    let cost = b * heads * (8 * t * t * d / 30 + 3 * t * t);
    let direct = heads_direct(b * heads);
    let blocks = causal_blocks::<E>(t, d, is_causal, direct);
    let pack_len = if direct {
        serial_scratch::<E>(t, d, t).max(serial_scratch::<E>(t, t, d))
    } else {
        0
    };
    parallel_for_cost(b * heads, cost, |pair| {
        let (bi, h) = (pair / heads, pair % heads);
        let pr = &p[pair * t * t..(pair + 1) * t * t];
        let go = &g[bi * t * c + h * d..bi * t * c + (t - 1) * c + h * d + d];
        let (q, k, v) = (
            dims.part(x, bi, 0, h),
            dims.part(x, bi, 1, h),
            dims.part(x, bi, 2, h),
        );
        let ld = 3 * c;
        let mut scratch = Storage::<E>::stale(t * t + t * d + pack_len);
        let (ds, rest) = scratch.split_at_mut(t * t);
        let (o, pack) = rest.split_at_mut(t * d);
        let dst = pg.at(bi * t * ld);
        if let Some(blocks) = &blocks {
            // SAFETY: head `h`'s query, key and value columns of batch
            // entry `bi`'s rows of the gradient belong to this chunk alone.
            unsafe { causal_head_backward((q, k, v), pr, go, ds, dst, dims, h, blocks, pack) };
            return;
        }
        // dV = P^T G
        // SAFETY: head `h`'s value columns of batch entry `bi`'s rows of
        // the gradient belong to this chunk alone (so do the query and key
        // columns below).
        unsafe {
            product_to(
                (t, t, d),
                Mat::transposed(pr, t),
                Dims::mat(go, c, false),
                dst.wrapping_add(2 * c + h * d),
                ld,
                pack,
                o,
                direct,
            )
        };
        // dP = G V^T, then dS = P (dP - rowsum(dP P)) s in place
        let (gm, vm) = (Dims::mat(go, c, false), Dims::mat(v, ld, true));
        // SAFETY: `ds` is this chunk's `t x t`, rows `t` apart.
        if !(direct && unsafe { gemm_serial_into(t, d, t, gm, vm, ds.as_mut_ptr(), t, pack) }) {
            product(t, d, t, gm, vm, ds);
        }
        widest(
            #[inline(always)]
            || {
                for (dr, yr) in ds.chunks_exact_mut(t).zip(pr.chunks_exact(t)) {
                    let s = lane_dot(dr, yr);
                    for (o, &y) in dr.iter_mut().zip(yr) {
                        *o = y * (*o - s) * scale;
                    }
                }
            },
        );
        // dQ = dS K
        // SAFETY: as above.
        unsafe {
            product_to(
                (t, t, d),
                Mat::row_major(ds, t),
                Dims::mat(k, ld, false),
                dst.wrapping_add(h * d),
                ld,
                pack,
                o,
                direct,
            )
        };
        // dK = dS^T Q
        // SAFETY: as above.
        unsafe {
            product_to(
                (t, t, d),
                Mat::transposed(ds, t),
                Dims::mat(q, ld, false),
                dst.wrapping_add(c + h * d),
                ld,
                pack,
                o,
                direct,
            )
        };
    });
    gx
}

/// One causal head's `qkv` gradient in row blocks ([`causal_blocks`]):
/// `dV` and `dK` for a block's keys from the queries at or after its first
/// key, `dP` and `dQ` for a block's queries against the keys up to its
/// last query, each with the packed kernel; the terms left out are
/// exactly-zero probabilities or `dS` entries (see the module docs).
///
/// # Safety
/// Head `h`'s query, key and value columns of the `t` rows (`3 C` apart)
/// at `dst` are writable and written by no one else during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn causal_head_backward<E: Float>(
    (q, k, v): (&[E], &[E], &[E]),
    pr: &[E],
    go: &[E],
    ds: &mut [E],
    dst: *mut E,
    dims: Dims,
    h: usize,
    blocks: &[(usize, usize)],
    pack: &mut [E],
) {
    let Dims { t, c, d, .. } = dims;
    let ld = 3 * c;
    let scale = E::from_f64(1.0 / (d as f64).sqrt());
    let ran = |ok: bool| assert!(ok, "qkv_attention: a causal block left the packed kernel");
    for &(r0, r1) in blocks {
        let m = r1 - r0;
        // dV[r0..r1] = P[r0.., r0..r1]^T G[r0..]
        // SAFETY: rows `r0..r1` of head `h`'s value columns (the caller's
        // contract).
        ran(unsafe {
            gemm_serial_into(
                m,
                t - r0,
                d,
                Mat::transposed(&pr[r0 * t + r0..], t),
                Dims::mat(&go[r0 * c..], c, false),
                dst.wrapping_add(r0 * ld + 2 * c + h * d),
                ld,
                pack,
            )
        });
        // dP[r0..r1, ..r1] = G[r0..r1] V[..r1]^T
        // SAFETY: rows `r0..r1` of this head's `t x t` scratch, `r1`
        // columns each.
        ran(unsafe {
            gemm_serial_into(
                m,
                d,
                r1,
                Dims::mat(&go[r0 * c..], c, false),
                Dims::mat(v, ld, true),
                ds.as_mut_ptr().add(r0 * t),
                t,
                pack,
            )
        });
    }
    // dS = P (dP - rowsum(dP P)) s on each row's first `r1` entries (its
    // block's keys; the probabilities after are zero, and no product below
    // reads those entries)
    widest(
        #[inline(always)]
        || {
            for &(r0, r1) in blocks {
                for i in r0..r1 {
                    let (dr, yr) = (&mut ds[i * t..i * t + r1], &pr[i * t..i * t + r1]);
                    let s = lane_dot(dr, yr);
                    for (o, &y) in dr.iter_mut().zip(yr) {
                        *o = y * (*o - s) * scale;
                    }
                }
            }
        },
    );
    for &(r0, r1) in blocks {
        let m = r1 - r0;
        // dQ[r0..r1] = dS[r0..r1, ..r1] K[..r1]
        // SAFETY: rows `r0..r1` of head `h`'s query columns.
        ran(unsafe {
            gemm_serial_into(
                m,
                r1,
                d,
                Mat::row_major(&ds[r0 * t..], t),
                Dims::mat(k, ld, false),
                dst.wrapping_add(r0 * ld + h * d),
                ld,
                pack,
            )
        });
        // dK[r0..r1] = dS[r0.., r0..r1]^T Q[r0..]
        // SAFETY: rows `r0..r1` of head `h`'s key columns.
        ran(unsafe {
            gemm_serial_into(
                m,
                t - r0,
                d,
                Mat::transposed(&ds[r0 * t + r0..], t),
                Dims::mat(&q[r0 * ld..], ld, false),
                dst.wrapping_add(r0 * ld + c + h * d),
                ld,
                pack,
            )
        });
    }
}

/// The `qkv` gradient written in tensor ops (recorded under
/// `backward_with_graph`, so it can be differentiated again): the same
/// formulas on the composed form's split and permuted heads.
#[track_caller]
fn composed_backward<E: Float, D: Device>(
    qkv: &Tensor<E, D>,
    g: &Tensor<E, D>,
    dims: Dims,
    is_causal: bool,
) -> Tensor<E, D> {
    let Dims { b, t, c, heads, d } = dims;
    let (b, t, c, nh, d) = (
        b as isize,
        t as isize,
        c as isize,
        heads as isize,
        d as isize,
    );
    let split = |z: &Tensor<E, D>| z.reshape(&[b, t, nh, d]).permute(&[0, 2, 1, 3]);
    let merge = |z: Tensor<E, D>| z.permute(&[0, 2, 1, 3]).reshape(&[b, t, c]);
    let parts = qkv.split(c as usize, -1);
    let (q, k, v) = (split(&parts[0]), split(&parts[1]), split(&parts[2]));
    let mask = ScoreMask {
        terms: Vec::new(),
        causal: is_causal,
    };
    let p = attention_probs(&q, &k, &mask);
    let go = split(g);
    let dv = p.transpose(-2, -1).matmul(&go);
    let dp = go.matmul_t(&v);
    let ds = p
        .mul(&dp.sub(&dp.mul(&p).sum_dim(&[-1], true)))
        .mul_scalar(E::from_f64(1.0 / (d as f64).sqrt()));
    let dq = ds.matmul(&k);
    let dk = ds.transpose(-2, -1).matmul(&q);
    Tensor::cat(&[&merge(dq), &merge(dk), &merge(dv)], -1)
}

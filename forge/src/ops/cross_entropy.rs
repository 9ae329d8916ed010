//! The fused cross-entropy behind [`cross_entropy_with`] (any logits
//! `(N, C)`, `(N, C, d1, ..., dk)` or `(C,)`, a constant or no class
//! weight): log-softmax and the negative log-likelihood with
//! `ignore_index` and label smoothing in one forward pass, and one
//! backward pass from the saved log-sum-exp.
//!
//! Per position `p` (a row of `(N, C)` logits, or `(i, d)` of K-d ones,
//! the classes `C` apart in memory), with `w` the class weights (all 1
//! without), `W = sum(w)`, `ls` the label smoothing and `t` the target:
//!
//! ```text
//! lse = log(sum_k exp(x_k));  loss = (1 - ls) w_t (lse - x_t) + ls / C sum_k w_k (lse - x_k)
//! d loss / d x_k = (1 - ls) w_t (p_k - [k = t]) + ls / C (W p_k - w_k),  p_k = exp(x_k - lse)
//! ```
//!
//! An ignored position has loss 0 and gradient 0; the mean divides by the
//! summed `w_t` of the positions not ignored.
//!
//! **Threads.** `(N, C)` logits run over blocks of rows, K-d ones over
//! blocks of positions (about 16K logits each) forward and blocks of whole
//! class runs of `d1 ... dk` values backward; each position's values come
//! from its own logits, in a fixed order, so every result is the same for
//! any number of threads.
//!
//! [`cross_entropy_with`]: super::loss::cross_entropy_with

use super::loss::{CrossEntropyOptions, Reduction};
use super::softmax::{exp_cost, lane_sum, row_blocks_mut, ROW_BLOCK_ELEMS};
use crate::cpu::{vmath, Storage};
use crate::tensor::{Device, Float, Tensor};

/// The loss's constants, shared by the passes.
struct Spec<E> {
    /// Images (1 for `(C,)` logits), classes, positions per image.
    n: usize,
    c: usize,
    inner: usize,
    ignore: i64,
    w: Option<Vec<E>>,
    /// `sum(w)` (`C` without weights).
    w_sum: E,
    /// `1 - ls` and `ls / C`.
    keep: E,
    smooth: E,
    smoothing: bool,
}

impl<E: Float> Spec<E> {
    /// The weight of class `k` (1 without weights).
    fn wc(&self, k: usize) -> E {
        self.w.as_ref().map_or(E::one(), |w| w[k])
    }
}

/// [`cross_entropy_with`](super::loss::cross_entropy_with) with a constant
/// (or no) weight, fused (see the module docs); `axis` and `c` are the
/// class axis and count of the checked `targets`. Under `create_graph` the
/// backward is the same formula in tensor ops (with `softmax` on the
/// tape), so gradients of gradients work.
pub(super) fn cross_entropy_fused<E: Float, D: Device>(
    logits: &Tensor<E, D>,
    targets: &Tensor<i64, D>,
    (axis, c): (usize, usize),
    options: &CrossEntropyOptions<E, D>,
) -> Tensor<E, D> {
    let shape = logits.shape();
    let ls = options.label_smoothing;
    let w: Option<Vec<E>> = options.weight.as_ref().map(|w| {
        assert!(
            w.shape() == [c],
            "cross_entropy: weight of shape {:?} does not match {c} classes (input shape {shape:?})",
            w.shape()
        );
        w.to_vec()
    });
    let w_sum = w.as_ref().map_or(E::from_f64(c as f64), |w| lane_sum(w));
    let spec = Spec {
        n: if axis == 0 { 1 } else { shape[0] },
        c,
        inner: shape[axis + 1..].iter().product(),
        ignore: options.ignore_index,
        w,
        w_sum,
        keep: E::from_f64(1.0 - ls),
        smooth: E::from_f64(ls / c as f64),
        smoothing: ls > 0.0,
    };
    let tv = targets.as_slice();
    for &t in tv {
        assert!(
            t == spec.ignore || (0..c as i64).contains(&t),
            "cross_entropy: target {t} is out of range for {c} classes (input shape {shape:?})"
        );
    }
    let x = logits.as_slice();
    let (lse, per) = if spec.inner == 1 {
        forward_rows(&spec, x, tv)
    } else {
        forward_tiles(&spec, x, tv)
    };
    let total_w = tv
        .iter()
        .filter(|&&t| t != spec.ignore)
        .fold(E::zero(), |a, &t| a + spec.wc(t as usize));
    let reduction = options.reduction;
    let out = match reduction {
        Reduction::None => Tensor::from_vec(per, targets.shape()),
        Reduction::Sum => Tensor::scalar(per.iter().fold(E::zero(), |a, &v| a + v)),
        Reduction::Mean => Tensor::scalar(per.iter().fold(E::zero(), |a, &v| a + v) / total_w),
    };
    let targets = targets.clone();
    out.record("cross_entropy", vec![logits.clone()], move |ctx| {
        let tv = targets.as_slice();
        if ctx.create_graph {
            return vec![Some(backward_graph(
                &ctx.inputs[0],
                ctx.grad,
                tv,
                &spec,
                total_w,
                reduction,
            ))];
        }
        let gs = ctx.grad.as_slice();
        let scale = |p: usize| match reduction {
            Reduction::None => gs[p],
            Reduction::Sum => gs[0],
            Reduction::Mean => gs[0] / total_w,
        };
        // per position: (a, b) = (s (1 - ls) w_t, s ls / C), s the scale
        let coef: Vec<(E, E)> = tv
            .iter()
            .enumerate()
            .map(|(p, &t)| match t == spec.ignore {
                true => (E::zero(), E::zero()),
                false => {
                    let s = scale(p);
                    (s * spec.keep * spec.wc(t as usize), s * spec.smooth)
                }
            })
            .collect();
        let x = ctx.inputs[0].as_slice();
        let mut gx = Storage::filled(x.len(), E::zero());
        if spec.inner == 1 {
            backward_rows(&spec, x, tv, &lse, &coef, &mut gx);
        } else {
            backward_tiles(&spec, x, tv, &lse, &coef, &mut gx);
        }
        vec![Some(Tensor::from_parts(
            gx,
            ctx.inputs[0].shape.clone(),
            None,
        ))]
    })
}

/// `(lse, loss)` of every row of `(N, C)` logits, in parallel over fixed
/// blocks of rows: per row the max, `exp` by the vector kernel, the
/// log-sum-exp, the target and smoothing terms (ignored rows: 0, 0).
fn forward_rows<E: Float>(s: &Spec<E>, x: &[E], tv: &[i64]) -> (Vec<E>, Vec<E>) {
    let (n, c) = (s.n, s.c);
    let rows = ROW_BLOCK_ELEMS.div_ceil(c.max(1)).max(1);
    // each block's chunk: its rows' (lse, loss) pairs, then a scratch row
    // (one buffer taken before the blocks run, so the pool traffic does not
    // depend on how the blocks are scheduled)
    let chunk_len = 2 * rows + c;
    let mut stats = Storage::<E>::zeroed(n.div_ceil(rows) * chunk_len);
    row_blocks_mut(&mut stats, chunk_len, exp_cost(x.len()), |b, chunk| {
        let (pairs, scratch) = chunk.split_at_mut(2 * rows);
        for (r, st) in pairs.chunks_mut(2).take(rows.min(n - b * rows)).enumerate() {
            let i = b * rows + r;
            let t = tv[i];
            if t == s.ignore {
                continue;
            }
            let row = &x[i * c..(i + 1) * c];
            let m = row.iter().fold(E::neg_infinity(), |a, &b| a.max(b));
            let m = if m.is_finite() { m } else { E::zero() };
            for (o, &v) in scratch.iter_mut().zip(row) {
                *o = v - m;
            }
            vmath::exp(scratch);
            let l = m + lane_sum(scratch).ln();
            let mut loss = s.keep * s.wc(t as usize) * (l - row[t as usize]);
            if s.smoothing {
                let sm = match &s.w {
                    Some(w) => w
                        .iter()
                        .zip(row)
                        .fold(E::zero(), |a, (&wk, &v)| a + wk * (l - v)),
                    None => row.iter().fold(E::zero(), |a, &v| a + (l - v)),
                };
                loss += s.smooth * sm;
            }
            st[0] = l;
            st[1] = loss;
        }
    });
    let pair = |i: usize| (i / rows) * chunk_len + 2 * (i % rows);
    let lse = (0..n).map(|i| stats[pair(i)]).collect();
    let per = (0..n).map(|i| stats[pair(i) + 1]).collect();
    (lse, per)
}

/// `(lse, loss)` of every position `(i, d)` of K-d logits, in parallel
/// over fixed blocks of about 16K logits' positions; a block takes its
/// positions image by image as tiles of consecutive `d`, and each pass over
/// a tile runs along the class runs (contiguous in `d`, so it vectorises).
fn forward_tiles<E: Float>(s: &Spec<E>, x: &[E], tv: &[i64]) -> (Vec<E>, Vec<E>) {
    let (c, inner) = (s.c, s.inner);
    let all = s.n * inner;
    let pb = (ROW_BLOCK_ELEMS / c.max(1)).max(1);
    // each block's chunk: its positions' (lse, loss) pairs, then three
    // scratch rows of one tile (taken before the blocks run, as above)
    let chunk_len = 5 * pb;
    let mut stats = Storage::<E>::zeroed(all.div_ceil(pb) * chunk_len);
    row_blocks_mut(&mut stats, chunk_len, exp_cost(x.len()), |b, chunk| {
        let (pairs, scratch) = chunk.split_at_mut(2 * pb);
        let (p0, p1) = (b * pb, ((b + 1) * pb).min(all));
        let mut p = p0;
        while p < p1 {
            let (img, d0) = (p / inner, p % inner);
            let len = (inner - d0).min(p1 - p);
            let runs = |k: usize| {
                let at = (img * c + k) * inner + d0;
                &x[at..at + len]
            };
            let pr = &mut pairs[2 * (p - p0)..2 * (p - p0 + len)];
            tile_forward(s, runs, &tv[p..p + len], pr, scratch);
            p += len;
        }
    });
    let pair = |p: usize| (p / pb) * chunk_len + 2 * (p % pb);
    let lse = (0..all).map(|p| stats[pair(p)]).collect();
    let per = (0..all).map(|p| stats[pair(p) + 1]).collect();
    (lse, per)
}

/// One tile of [`forward_tiles`]: `runs(k)` is class `k`'s logits at the
/// tile's positions, `t` their targets; writes `(lse, loss)` pairs
/// (ignored positions keep 0, 0). Passes along the runs: the max, then
/// `exp(x - max)` summed class by class, then (with smoothing) `sum_k w_k
/// (lse - x_k)`.
fn tile_forward<'a, E: Float>(
    s: &Spec<E>,
    runs: impl Fn(usize) -> &'a [E],
    t: &[i64],
    pairs: &mut [E],
    scratch: &mut [E],
) {
    let len = t.len();
    let (mx, rest) = scratch.split_at_mut(scratch.len() / 3);
    let (acc, tmp) = rest.split_at_mut(rest.len() / 2);
    let (mx, acc, tmp) = (&mut mx[..len], &mut acc[..len], &mut tmp[..len]);
    // the max per position (0 when not finite)
    mx.fill(E::neg_infinity());
    for k in 0..s.c {
        for (m, &v) in mx.iter_mut().zip(runs(k)) {
            *m = m.max(v);
        }
    }
    for m in mx.iter_mut() {
        if !m.is_finite() {
            *m = E::zero();
        }
    }
    acc.fill(E::zero());
    for k in 0..s.c {
        for ((o, &v), &m) in tmp.iter_mut().zip(runs(k)).zip(mx.iter()) {
            *o = v - m;
        }
        vmath::exp(tmp);
        for (a, &e) in acc.iter_mut().zip(tmp.iter()) {
            *a += e;
        }
    }
    for (m, &a) in mx.iter_mut().zip(acc.iter()) {
        *m += a.ln();
    }
    let lse = mx;
    if s.smoothing {
        acc.fill(E::zero());
        for k in 0..s.c {
            let wk = s.wc(k);
            for ((a, &v), &l) in acc.iter_mut().zip(runs(k)).zip(lse.iter()) {
                *a += wk * (l - v);
            }
        }
    }
    for (j, &tj) in t.iter().enumerate() {
        if tj == s.ignore {
            continue;
        }
        let l = lse[j];
        let mut loss = s.keep * s.wc(tj as usize) * (l - runs(tj as usize)[j]);
        if s.smoothing {
            loss += s.smooth * acc[j];
        }
        pairs[2 * j] = l;
        pairs[2 * j + 1] = loss;
    }
}

/// `gx` of `(N, C)` logits in parallel over the forward pass's blocks of
/// rows: `p = exp(x - lse)` by the vector kernel, then `a p + b (W p -
/// w_k)`, minus `a` at the target (`coef` = `(a, b)` per row; ignored rows
/// stay 0).
fn backward_rows<E: Float>(
    s: &Spec<E>,
    x: &[E],
    tv: &[i64],
    lse: &[E],
    coef: &[(E, E)],
    gx: &mut [E],
) {
    let c = s.c;
    let rows = ROW_BLOCK_ELEMS.div_ceil(c.max(1)).max(1);
    row_blocks_mut(gx, rows * c, exp_cost(x.len()), |b, chunk| {
        for (r, g) in chunk.chunks_mut(c).enumerate() {
            let i = b * rows + r;
            if tv[i] == s.ignore {
                continue;
            }
            let row = &x[i * c..(i + 1) * c];
            for (o, &v) in g.iter_mut().zip(row) {
                *o = v - lse[i];
            }
            vmath::exp(g);
            let (a, bb) = coef[i];
            for (k, o) in g.iter_mut().enumerate() {
                let p = *o;
                *o = a * p + bb * (s.w_sum * p - s.wc(k));
            }
            g[tv[i] as usize] -= a;
        }
    });
}

/// `gx` of K-d logits in parallel over fixed blocks of whole class runs
/// (`(i, k)`, `d1 ... dk` values each, about 16K values per block): per
/// run `p = exp(x - lse)` by the vector kernel, then the formula of
/// [`backward_rows`] with each position's `(a, b)`; ignored positions 0.
fn backward_tiles<E: Float>(
    s: &Spec<E>,
    x: &[E],
    tv: &[i64],
    lse: &[E],
    coef: &[(E, E)],
    gx: &mut [E],
) {
    let (c, inner) = (s.c, s.inner);
    let rb = (ROW_BLOCK_ELEMS / inner.max(1)).max(1);
    row_blocks_mut(gx, rb * inner, exp_cost(x.len()), |b, chunk| {
        for (r, g) in chunk.chunks_mut(inner).enumerate() {
            let run = b * rb + r;
            let (k, at) = (run % c, (run / c) * inner);
            let pos = at..at + inner;
            for ((o, &v), &l) in g.iter_mut().zip(&x[run * inner..]).zip(&lse[pos.clone()]) {
                *o = v - l;
            }
            vmath::exp(g);
            let wk = s.wc(k);
            for ((o, &(a, bb)), &t) in g.iter_mut().zip(&coef[pos.clone()]).zip(&tv[pos]) {
                let p = *o;
                *o = if t == s.ignore {
                    E::zero()
                } else if t == k as i64 {
                    a * p + bb * (s.w_sum * p - wk) - a
                } else {
                    a * p + bb * (s.w_sum * p - wk)
                };
            }
        }
    });
}

/// The input gradient in tensor ops (differentiable in the logits and in
/// the incoming gradient), for `create_graph`: the logits viewed as `[N,
/// C]` or `[N, C, d1 ... dk]` (flattened), the constants (`w_t` at the
/// target, `w_t` and validity per position, `w` per class) as tensors.
fn backward_graph<E: Float, D: Device>(
    x: &Tensor<E, D>,
    g: &Tensor<E, D>,
    targets: &[i64],
    s: &Spec<E>,
    total_w: E,
    reduction: Reduction,
) -> Tensor<E, D> {
    let (n, c, inner) = (s.n, s.c, s.inner);
    let dims: Vec<usize> = if inner == 1 {
        vec![n, c]
    } else {
        vec![n, c, inner]
    };
    let (mut per_pos, mut per_class) = (dims.clone(), vec![1; dims.len()]);
    per_pos[1] = 1;
    per_class[1] = c;
    let mut onehot = vec![E::zero(); n * c * inner];
    let mut wt = vec![E::zero(); n * inner];
    let mut valid = vec![E::zero(); n * inner];
    for (p, &t) in targets.iter().enumerate() {
        if t != s.ignore {
            let (i, d) = (p / inner, p % inner);
            onehot[(i * c + t as usize) * inner + d] = s.wc(t as usize);
            wt[p] = s.wc(t as usize);
            valid[p] = E::one();
        }
    }
    let onehot = Tensor::<E, D>::from_vec(onehot, &dims);
    let wt = Tensor::<E, D>::from_vec(wt, &per_pos);
    let valid = Tensor::<E, D>::from_vec(valid, &per_pos);
    let wrow = Tensor::<E, D>::from_vec((0..c).map(|k| s.wc(k)).collect(), &per_class);
    let p = x.view(&dims).softmax(1);
    let nll = p.mul(&wt).sub(&onehot).mul_scalar(s.keep);
    let sm = p
        .mul(&valid.mul_scalar(s.w_sum))
        .sub(&valid.mul(&wrow))
        .mul_scalar(s.smooth);
    let d = nll.add(&sm);
    let d = match reduction {
        Reduction::None => d.mul(&g.view(&per_pos)),
        Reduction::Sum => d.mul(g),
        Reduction::Mean => d.mul(&g.div_scalar(total_w)),
    };
    d.view(x.shape())
}

//! The log-softmax kernels of the fused cross-entropy (`loss_class.rs`
//! has the op, the weight's gradient and the `create_graph` rule): the
//! log-softmax and the negative log-likelihood with `ignore_index` and
//! label smoothing in one forward pass over any logits `(N, C)`, `(N, C,
//! d1, ..., dk)` or `(C,)`, and the logits' gradient in one backward pass
//! from the saved log-sum-exp.
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
//! An ignored position has loss 0 and gradient 0.
//!
//! **Threads.** `(N, C)` logits run over blocks of rows, K-d ones over
//! blocks of positions (about 16K logits each) forward and blocks of whole
//! class runs of `d1 ... dk` values backward; each position's values come
//! from its own logits, in a fixed order, so every result is the same for
//! any number of threads.

use super::spec::Spec;
use crate::cpu::{vmath, Storage};
use crate::ops::softmax::{exp_cost, lane_sum, row_blocks_mut, ROW_BLOCK_ELEMS};
use crate::tensor::Float;

/// `(lse, loss)` per position of the logits `x` (ignored positions: 0, 0).
pub(super) fn forward<E: Float>(s: &Spec<E>, x: &[E], tv: &[i64]) -> (Vec<E>, Vec<E>) {
    if s.inner == 1 {
        forward_rows(s, x, tv)
    } else {
        forward_tiles(s, x, tv)
    }
}

/// The logits' gradient from the saved `lse` and each position's upstream
/// factor `scale` (0 when ignored): the formula of the module docs times
/// `scale`.
pub(super) fn backward<E: Float>(
    s: &Spec<E>,
    x: &[E],
    tv: &[i64],
    lse: &[E],
    scale: &[E],
) -> Storage<E> {
    // per position: (a, b) = (scale (1 - ls) w_t, scale ls / C)
    let coef: Vec<(E, E)> = tv
        .iter()
        .zip(scale)
        .map(|(&t, &sc)| match t == s.ignore {
            true => (E::zero(), E::zero()),
            false => (sc * s.keep * s.wc(t as usize), sc * s.smooth),
        })
        .collect();
    // every element is written below, ignored positions' as 0 (stale: no
    // zeroing pass first)
    let mut gx = Storage::stale(x.len());
    if s.inner == 1 {
        backward_rows(s, x, tv, lse, &coef, &mut gx);
    } else {
        backward_tiles(s, x, tv, lse, &coef, &mut gx);
    }
    gx
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
    row_blocks_mut(
        &mut stats,
        chunk_len,
        exp_cost(x.len()),
        #[inline(always)]
        |b, chunk| {
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
        },
    );
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
    row_blocks_mut(
        &mut stats,
        chunk_len,
        exp_cost(x.len()),
        #[inline(always)]
        |b, chunk| {
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
        },
    );
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
    row_blocks_mut(
        gx,
        rows * c,
        exp_cost(x.len()),
        #[inline(always)]
        |b, chunk| {
            for (r, g) in chunk.chunks_mut(c).enumerate() {
                let i = b * rows + r;
                if tv[i] == s.ignore {
                    g.fill(E::zero());
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
        },
    );
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
    row_blocks_mut(
        gx,
        rb * inner,
        exp_cost(x.len()),
        #[inline(always)]
        |b, chunk| {
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
        },
    );
}

#[cfg(test)]
mod tests {
    use super::super::spec::Kind;
    use super::*;

    /// The logits' gradient is written whole over a pooled buffer that
    /// held other values (`Storage::stale`): ignored rows and positions
    /// come out exactly `+0`, the others finite, for `(N, C)` rows and K-d
    /// positions.
    #[test]
    fn ignored_positions_get_zero_gradients_over_a_dirty_buffer() {
        for (n, c, inner) in [(7usize, 300usize, 1usize), (3, 5, 40)] {
            let len = n * c * inner;
            let s = Spec::<f32> {
                kind: Kind::CrossEntropy,
                n,
                c,
                inner,
                ignore: -100,
                w: None,
                w_sum: c as f32,
                keep: 1.0,
                smooth: 0.0,
                smoothing: false,
            };
            let x: Vec<f32> = (0..len)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 10.0)
                .collect();
            let positions = n * inner;
            let tv: Vec<i64> = (0..positions)
                .map(|p| if p % 3 == 1 { -100 } else { (p % c) as i64 })
                .collect();
            let (lse, _) = forward(&s, &x, &tv);
            let scale: Vec<f32> = tv
                .iter()
                .map(|&t| if t == -100 { 0.0 } else { 0.25 })
                .collect();
            // leave a buffer of the gradient's size full of NaN in the pool
            let mut dirty = Storage::<f32>::stale(len);
            dirty.fill(f32::NAN);
            drop(dirty);
            let gx = backward(&s, &x, &tv, &lse, &scale);
            for p in 0..positions {
                for k in 0..c {
                    let v = gx[s.at(p, k)];
                    if tv[p] == -100 {
                        assert_eq!(v.to_bits(), 0, "inner {inner}: ignored {p}, class {k}: {v}");
                    } else {
                        assert!(v.is_finite(), "inner {inner}: position {p}, class {k}: {v}");
                    }
                }
            }
        }
    }
}

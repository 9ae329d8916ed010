//! Inference self-attention over the rows of separate query, key and value
//! projections (`[B * T, C]` each, or columns of one wider matrix), heads
//! read in place through strides and the output written straight into the
//! merged `[B * T, C]` layout: none of the composed form's copies (three
//! head permutes, the scaled scores, the output permute) is made.
//!
//! Two variants, both per (batch entry, head) chunk in parallel, so each
//! output element comes from one chunk and the bits do not depend on the
//! thread count:
//! - [`attention_heads`] (any float type): the same gemm calls and the
//!   same elementwise arithmetic in the same order as the composed ops
//!   (`matmul_t`, `mul_scalar`, `softmax_masked`, `matmul`), so the values
//!   equal `scaled_dot_product_attention`'s on split heads bit for bit.
//! - [`attention_heads_bf16`] (autocast): the two products as bf16 gemms
//!   with f32 accumulation (`cpu::bgemm`: AMX tiles where the CPU class
//!   has them), the scores scaled, masked and soft-maxed in f32 and
//!   rounded to bf16 for the second product, as PyTorch's CPU autocast
//!   runs `matmul`/`bmm` in bf16 and softmax in f32. The output is written
//!   as bf16 rows, the input of the next (output) projection.

use super::softmax_masked::softmax_row_in_place;
use crate::autocast::Bf16Rounder;
use crate::cpu::bgemm::{padded_k, PackedBf16};
use crate::cpu::gemm::{gemm_batched, Mat};
use crate::cpu::memory::Storage;
use crate::cpu::threads::parallel_for_cost;
use crate::tensor::Float;

/// The shape of one call: batch, sequence, heads, head width, and the row
/// stride of the query, key and value inputs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadDims {
    /// Batch entries.
    pub(crate) b: usize,
    /// Positions per entry (queries and keys).
    pub(crate) t: usize,
    /// Heads.
    pub(crate) heads: usize,
    /// Head width; the model width is `heads * d`.
    pub(crate) d: usize,
    /// Elements between consecutive rows of `q`, `k` and `v` (at least
    /// `heads * d`).
    pub(crate) ld: usize,
}

impl HeadDims {
    /// The model width `heads * d`.
    fn c(&self) -> usize {
        self.heads * self.d
    }

    /// Head `h`'s `t x d` block of batch entry `bi` of `x`, rows `ld`
    /// apart.
    fn block<'a, E>(&self, x: &'a [E], bi: usize, h: usize) -> &'a [E] {
        let at = bi * self.t * self.ld + h * self.d;
        &x[at..at + (self.t - 1) * self.ld + self.d]
    }

    /// Panics unless `q`, `k`, `v`, the mask and an output of `out_len`
    /// elements fit the shape.
    #[track_caller]
    fn check<E>(&self, q: &[E], k: &[E], v: &[E], mask: Option<&[bool]>, out_len: usize) {
        let rows = self.b * self.t;
        let need = if rows == 0 {
            0
        } else {
            (rows - 1) * self.ld + self.c()
        };
        shape_assert!(
            self.ld >= self.c() && q.len() >= need && k.len() >= need && v.len() >= need,
            "attention_heads: q, k, v of {}, {}, {} elements for {rows} rows of {} heads of {} (row stride {})",
            q.len(),
            k.len(),
            v.len(),
            self.heads,
            self.d,
            self.ld
        );
        shape_assert!(
            mask.is_none_or(|m| m.len() == rows),
            "attention_heads: key mask of {:?} elements for {} x {}",
            mask.map(<[bool]>::len),
            self.b,
            self.t
        );
        shape_assert!(
            out_len >= rows * self.c(),
            "attention_heads: output of {out_len} elements for {rows} x {}",
            self.c()
        );
    }
}

/// A raw pointer shared by the per-head chunks of one call.
#[derive(Clone, Copy)]
struct Shared<E>(*mut E);
// SAFETY: each chunk (one batch entry and head) writes only its own head's
// columns of the output, which no other chunk touches, and the output
// outlives the parallel loop.
unsafe impl<E> Send for Shared<E> {}
// SAFETY: as above.
unsafe impl<E> Sync for Shared<E> {}

impl<E> Shared<E> {
    /// The pointer `offset` elements on (a method, so closures capture the
    /// `Sync` wrapper).
    fn at(self, offset: usize) -> *mut E {
        self.0.wrapping_add(offset)
    }
}

/// Scales one row of scores, hides the masked keys (`-inf`) and applies
/// the softmax in place: the steps of `mul_scalar` then `softmax_masked`.
/// A row with every key hidden becomes NaN, as in PyTorch.
#[inline(always)]
fn softmax_scores<E: Float>(row: &mut [E], scale: E, keys: Option<&[bool]>) {
    for s in row.iter_mut() {
        *s *= scale;
    }
    if let Some(keys) = keys {
        for (s, &keep) in row.iter_mut().zip(keys) {
            if !keep {
                *s = E::neg_infinity();
            }
        }
    }
    if !softmax_row_in_place(row) {
        row.fill(E::nan());
    }
}

/// [`softmax_scores`] on each row of `t` of `s`, for f32, compiled for
/// AVX-512 when `wide` (the crate's generic code is compiled for the
/// baseline's 4-lane vectors; inlined here, the scaling, masking, maximum,
/// sum and division passes get the CPU's widest vectors). The same
/// arithmetic, so the same bits.
fn softmax_rows(s: &mut [f32], t: usize, scale: f32, keys: Option<&[bool]>, wide: bool) {
    #[cfg(target_arch = "x86_64")]
    if wide {
        #[target_feature(enable = "avx512f")]
        fn avx512(s: &mut [f32], t: usize, scale: f32, keys: Option<&[bool]>) {
            for row in s.chunks_exact_mut(t) {
                softmax_scores(row, scale, keys);
            }
        }
        // SAFETY: `wide` is true only where the CPU class allows AVX-512F
        // (the caller's `cpu_has!`).
        unsafe { avx512(s, t, scale, keys) };
        return;
    }
    let _ = wide;
    for row in s.chunks_exact_mut(t) {
        softmax_scores(row, scale, keys);
    }
}

/// About the single-thread nanoseconds of one call (the two products at
/// ~30 multiply-adds per ns, plus the softmax).
fn cost(dims: &HeadDims, per_ns: usize) -> usize {
    let HeadDims { b, t, heads, d, .. } = *dims;
    b * heads * (2 * t * t * d / per_ns + 2 * t * t)
}

/// Multi-head self-attention `softmax(q k^T / sqrt(d) + mask) v` per head,
/// `q`, `k`, `v` holding `B * T` rows `ld` apart with the heads side by
/// side (`heads * d` columns); `key_mask` (`B * T`) is false for keys no
/// query may attend to (padding). Writes the `[B * T, heads * d]` result
/// into `out`. Values equal the composed ops' (see the module docs).
///
/// # Panics
/// When a buffer is too small for the shape or the mask has another
/// length.
#[track_caller]
pub(crate) fn attention_heads<E: Float>(
    q: &[E],
    k: &[E],
    v: &[E],
    dims: HeadDims,
    key_mask: Option<&[bool]>,
    out: &mut [E],
) {
    dims.check(q, k, v, key_mask, out.len());
    let HeadDims { b, t, heads, d, ld } = dims;
    let c = dims.c();
    if b * t == 0 || c == 0 {
        return;
    }
    let po = Shared(out.as_mut_ptr());
    let scale = E::from_f64(1.0 / (d as f64).sqrt());
    parallel_for_cost(b * heads, cost(&dims, 30), |pair| {
        let (bi, h) = (pair / heads, pair % heads);
        // written whole before being read: each product writes its output
        let mut scratch = Storage::<E>::stale(t * t + t * d);
        let (p, o) = scratch.split_at_mut(t * t);
        let (qh, kh, vh) = (
            dims.block(q, bi, h),
            dims.block(k, bi, h),
            dims.block(v, bi, h),
        );
        let kt = Mat {
            data: kh,
            rs: 1,
            cs: ld,
        };
        gemm_batched(
            1,
            t,
            d,
            t,
            |_| Mat {
                data: qh,
                rs: ld,
                cs: 1,
            },
            |_| kt,
            E::zero(),
            p,
        );
        let keys = key_mask.map(|m| &m[bi * t..(bi + 1) * t]);
        for row in p.chunks_exact_mut(t) {
            softmax_scores(row, scale, keys);
        }
        let vm = Mat {
            data: vh,
            rs: ld,
            cs: 1,
        };
        gemm_batched(1, t, t, d, |_| Mat::row_major(p, t), |_| vm, E::zero(), o);
        for (i, row) in o.chunks_exact(d).enumerate() {
            // SAFETY: columns `h d..(h + 1) d` of batch entry `bi`'s rows
            // of `out` (inside it: checked) belong to this chunk alone.
            unsafe {
                std::ptr::copy_nonoverlapping(row.as_ptr(), po.at((bi * t + i) * c + h * d), d)
            };
        }
    });
}

/// [`attention_heads`] with bf16 products (see the module docs): `q`, `k`,
/// `v` are f32, rounded to bf16 per head as they are packed; the result
/// goes to `out` as `B * T` bf16 rows of `heads * d` (an even number: the
/// padded row of the next bf16 product), so the output projection reads
/// it as it is.
///
/// # Panics
/// As [`attention_heads`], and when `heads * d` is odd.
#[track_caller]
pub(crate) fn attention_heads_bf16(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: HeadDims,
    key_mask: Option<&[bool]>,
    out: &mut [u16],
) {
    dims.check(q, k, v, key_mask, out.len());
    let HeadDims { b, t, heads, d, ld } = dims;
    let c = dims.c();
    shape_assert!(
        padded_k(c) == c,
        "attention_heads_bf16: model width {c} is odd"
    );
    if b * t == 0 || c == 0 {
        return;
    }
    let po = Shared(out.as_mut_ptr());
    let scale = 1.0 / (d as f32).sqrt();
    let (dp, tp) = (padded_k(d), padded_k(t));
    // found once: a lookup per row would cost as much as the row
    let round = Bf16Rounder::new();
    #[cfg(target_arch = "x86_64")]
    let wide = crate::cpu::class::cpu_has!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let wide = false;
    parallel_for_cost(b * heads, cost(&dims, 200), |pair| {
        let (bi, h) = (pair / heads, pair % heads);
        // this head's queries, keys and values in bf16, rows `dp` apart
        // (the padding of an odd `d` is read, so it is zeroed)
        let mut qkv = if dp == d {
            // written whole below
            Storage::<u16>::stale(3 * t * dp)
        } else {
            Storage::<u16>::zeroed(3 * t * dp)
        };
        for (x, part) in [q, k, v].into_iter().zip(qkv.chunks_exact_mut(t * dp)) {
            let src = dims.block(x, bi, h);
            for (i, dst) in part.chunks_exact_mut(dp).enumerate() {
                round.round(&src[i * ld..i * ld + d], &mut dst[..d]);
            }
        }
        let (qb, kv) = qkv.split_at(t * dp);
        let (kb, vb) = kv.split_at(t * dp);
        let keys = PackedBf16::from_bf16_rows(t, d, |j| &kb[j * dp..]);
        let values = PackedBf16::from_bf16_cols(d, t, |p| &vb[p * dp..]);
        // written whole by the products before being read
        let mut scratch = Storage::<f32>::stale(t * t + t * d);
        let (s, o) = scratch.split_at_mut(t * t);
        keys.gemm(t, qb, None, s);
        let mask = key_mask.map(|m| &m[bi * t..(bi + 1) * t]);
        softmax_rows(s, t, scale, mask, wide);
        // the probabilities in bf16, rows `tp` apart (padding zero)
        let pb = if tp == t {
            let mut pb = Storage::<u16>::stale(t * t);
            round.round(s, &mut pb);
            pb
        } else {
            let mut pb = Storage::<u16>::zeroed(t * tp);
            for (row, dst) in s.chunks_exact(t).zip(pb.chunks_exact_mut(tp)) {
                round.round(row, &mut dst[..t]);
            }
            pb
        };
        values.gemm(t, &pb, None, o);
        for (i, row) in o.chunks_exact(d).enumerate() {
            // SAFETY: columns `h d..(h + 1) d` of batch entry `bi`'s rows
            // of `out` (inside it: checked) belong to this chunk alone.
            let dst = unsafe { std::slice::from_raw_parts_mut(po.at((bi * t + i) * c + h * d), d) };
            round.round(row, dst);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Rng;

    /// Rows of scores with the cases a softmax meets: large and small
    /// values, `-inf`, and (with `masked`) some keys hidden, one row
    /// entirely.
    fn rows(t: usize, n: usize, rng: &mut Rng) -> Vec<f32> {
        (0..t * n)
            .map(|i| match i % 29 {
                3 => f32::NEG_INFINITY,
                11 => 60.0,
                _ => (rng.normal() * 5.0) as f32,
            })
            .collect()
    }

    #[test]
    fn softmax_rows_has_the_bits_of_softmax_scores() {
        let mut rng = Rng::new(7);
        #[cfg(target_arch = "x86_64")]
        let paths = if crate::cpu::class::cpu_has!("avx512f") {
            vec![false, true]
        } else {
            vec![false]
        };
        #[cfg(not(target_arch = "x86_64"))]
        let paths = vec![false];
        for t in [1, 7, 16, 37, 128] {
            for masked in [false, true] {
                let keys: Vec<bool> = (0..t).map(|j| !masked || j % 3 != 1).collect();
                let keys = masked.then_some(&keys[..]);
                let n = 5;
                let s = rows(t, n, &mut rng);
                let mut want = s.clone();
                for row in want.chunks_exact_mut(t) {
                    softmax_scores(row, 0.125, keys);
                }
                for &wide in &paths {
                    let mut got = s.clone();
                    softmax_rows(&mut got, t, 0.125, keys, wide);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "t {t}, masked {masked}, wide {wide}"
                    );
                }
            }
        }
        // every key hidden: NaN, as PyTorch gives
        let mut all_hidden = vec![1.0f32; 8];
        softmax_rows(
            &mut all_hidden,
            8,
            1.0,
            Some(&[false; 8]),
            paths[paths.len() - 1],
        );
        assert!(all_hidden.iter().all(|x| x.is_nan()));
    }
}

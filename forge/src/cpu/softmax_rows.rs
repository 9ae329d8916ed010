//! The scaled (and causal) softmax over the rows of one attention head's
//! `t x t` scores, for `f32` on AVX-512F: every pass over a row in whole
//! 16-lane vectors, the row's tail under a lane mask, where the generic
//! row loops (`ops::softmax_masked::softmax_row_in_place` after a scaling
//! loop) run each of their six passes to a scalar remainder. A causal
//! head's rows are 1, 2, ..., `t` long, so at `t` = 64 each row used to end
//! in up to 15 scalar steps per pass, its loop bounds changing every row;
//! about a third of a GPT forward's attention time went there (Intel Xeon
//! model 207, `perf`, 2026-12-07).
//!
//! # Bits
//! Each row's values are the generic path's, bit for bit
//! (`tests::rows_equal_the_generic_path`): the same rounded products
//! `x * scale`, the same maximum (a maximum of numbers does not depend on
//! the order; NaNs are skipped, as `f32::max` skips them), the same
//! `exp_f32` of each difference (`vmath`'s function on a 16-value array,
//! which the compiler turns into the vector form of the same operations),
//! the same sum (`lane_sum`'s eight partial sums, each taking its values in
//! increasing order, then its fixed tree: here the eight sums are the lanes
//! of one 8-lane vector, each 16-lane block adding its low half then its
//! high half; masked-off lanes add `+0`, which leaves a sum of positive
//! terms unchanged) and the same division.

use super::same_type::cast_mut;
use super::vmath::exp_f32;
use crate::base::Float;

/// Rows `i` of the row-major `t x t` block `p`: `n` = `i + 1` when
/// `causal`, `t` otherwise; the first `n` values become the softmax of
/// `scale` times them, the rest zero, and a row whose `n` scaled values
/// are all `-inf` (or NaN) becomes NaN, as PyTorch's does. Returns `false`,
/// with `p` untouched, where `E` is not `f32` or the CPU class in force
/// lacks AVX-512F (the caller then runs the generic row loops).
///
/// # Panics
/// When `p` is not `t * t` long.
pub(crate) fn scaled_softmax_rows<E: Float>(p: &mut [E], t: usize, scale: E, causal: bool) -> bool {
    assert_eq!(
        p.len(),
        t * t,
        "scaled_softmax_rows: {} values for t = {t}",
        p.len()
    );
    let Some(p) = cast_mut::<E, f32>(p) else {
        return false;
    };
    let scale = scale.to_f64() as f32;
    #[cfg(target_arch = "x86_64")]
    if super::class::cpu_has!("avx512f") {
        let len = |i: usize| if causal { i + 1 } else { t };
        for (g, rows) in p.chunks_mut(GROUP * t.max(1)).enumerate() {
            // SAFETY: the CPU has AVX-512F (checked just above); row `r`
            // of the group is row `GROUP g + r` of the block.
            unsafe { avx512::rows(rows, t, |r| len(GROUP * g + r), scale) };
        }
        return true;
    }
    let _ = (scale, causal);
    false
}

/// Rows per pass: each pass (scale and maximum, exponentials and sums,
/// divisions) runs over a group of rows before the next starts, so that
/// the exponentials of different rows overlap instead of each row waiting
/// for its own chain of maximum, polynomial, sum and division.
const GROUP: usize = 32;

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::exp_f32;
    use super::GROUP;
    use std::arch::x86_64::*;

    /// The lanes of block `b` (16 values from `16 b`) below `n`.
    #[inline(always)]
    fn lanes(n: usize, b: usize) -> __mmask16 {
        let left = n - 16 * b;
        if left >= 16 {
            0xffff
        } else {
            ((1u32 << left) - 1) as __mmask16
        }
    }

    /// `exp_f32` of each lane: the scalar function over a 16-value array,
    /// which the compiler vectorises (the same operations lane by lane).
    #[inline(always)]
    fn exp16(v: __m512) -> __m512 {
        let mut a = [0f32; 16];
        // SAFETY: 16 floats, unaligned stores and loads.
        unsafe { _mm512_storeu_ps(a.as_mut_ptr(), v) };
        for x in a.iter_mut() {
            *x = exp_f32(*x);
        }
        // SAFETY: as above.
        unsafe { _mm512_loadu_ps(a.as_ptr()) }
    }

    /// The rows of `block` (`t` values each, at most [`GROUP`]; row `r`'s
    /// first `len(r) <= t` values are its scores): see
    /// [`super::scaled_softmax_rows`].
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows(
        block: &mut [f32],
        t: usize,
        len: impl Fn(usize) -> usize,
        scale: f32,
    ) {
        let count = block.len() / t.max(1);
        assert!(count <= GROUP && (0..count).all(|r| len(r) <= t));
        let ptr = block.as_mut_ptr();
        let vscale = _mm512_set1_ps(scale);
        // the scaled values, and each row's maximum (NaN lanes skipped:
        // `max` returns its second operand, the running maximum, when the
        // first is NaN)
        let mut maxima = [0f32; GROUP];
        for (r, mx) in maxima.iter_mut().enumerate().take(count) {
            let (n, at) = (len(r), r * t);
            let mut vmax = _mm512_set1_ps(f32::NEG_INFINITY);
            for b in 0..n.div_ceil(16) {
                let m = lanes(n, b);
                // SAFETY: the lanes of `m` are inside row `r`'s first `n`
                // values (block `b` holds `16 b..min(16 b + 16, n)`).
                unsafe {
                    let p = ptr.add(at + 16 * b);
                    let x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p), vscale);
                    _mm512_mask_storeu_ps(p, m, x);
                    vmax = _mm512_mask_max_ps(vmax, m, x, vmax);
                }
            }
            *mx = _mm512_reduce_max_ps(vmax);
        }
        // e = exp(x - max), summed as `lane_sum` sums: eight partial sums
        // in the lanes of `acc`, each 16-value block adding its low eight
        // then its high eight
        let mut sums = [0f32; GROUP];
        for (r, (&mx, sum)) in maxima.iter().zip(sums.iter_mut()).enumerate().take(count) {
            let (n, at) = (len(r), r * t);
            if mx == f32::NEG_INFINITY {
                continue;
            }
            let vm = _mm512_set1_ps(mx);
            let mut acc = _mm256_setzero_ps();
            for b in 0..n.div_ceil(16) {
                let m = lanes(n, b);
                // SAFETY: as above.
                unsafe {
                    let p = ptr.add(at + 16 * b);
                    let x = _mm512_maskz_loadu_ps(m, p);
                    let e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(x, vm)));
                    _mm512_mask_storeu_ps(p, m, e);
                    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
                    if n > 16 * b + 8 {
                        acc = _mm256_add_ps(
                            acc,
                            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(e))),
                        );
                    }
                }
            }
            let mut a = [0f32; 8];
            // SAFETY: 8 floats.
            unsafe { _mm256_storeu_ps(a.as_mut_ptr(), acc) };
            *sum = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
        }
        // the divisions, the zeros after each row's values, and NaN rows
        for (r, (&mx, &sum)) in maxima.iter().zip(&sums).enumerate().take(count) {
            let (n, row) = (len(r), &mut block[r * t..(r + 1) * t]);
            if mx == f32::NEG_INFINITY {
                row.fill(f32::NAN);
                continue;
            }
            let vs = _mm512_set1_ps(sum);
            let p = row.as_mut_ptr();
            for b in 0..n.div_ceil(16) {
                let m = lanes(n, b);
                // SAFETY: as above (`n <= t`: row `r` is `t` values).
                unsafe {
                    let e = _mm512_maskz_loadu_ps(m, p.add(16 * b));
                    _mm512_mask_storeu_ps(p.add(16 * b), m, _mm512_div_ps(e, vs));
                }
            }
            row[n..].fill(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generic path of `ops::attention_qkv` before this kernel, written
    /// out: scale the row's first `n` values, then `softmax_row_in_place`'s
    /// steps (maximum, subtract, `exp_f32`, `lane_sum`, divide), zeros after.
    fn generic_row(row: &mut [f32], n: usize, scale: f32) {
        for v in row[..n].iter_mut() {
            *v *= scale;
        }
        row[n..].fill(0.0);
        let m = row[..n].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        if m == f32::NEG_INFINITY {
            row.fill(f32::NAN);
            return;
        }
        for v in row[..n].iter_mut() {
            *v = exp_f32(*v - m);
        }
        let mut acc = [0f32; 8];
        for (j, &v) in row[..n].iter().enumerate() {
            acc[j % 8] += v;
        }
        let s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for v in row[..n].iter_mut() {
            *v /= s;
        }
    }

    fn block(t: usize, seed: u64, spread: f32) -> Vec<f32> {
        // a small LCG: values in (-spread, spread)
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..t * t)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * spread
            })
            .collect()
    }

    #[test]
    fn rows_equal_the_generic_path() {
        if !crate::cpu::class::cpu_has!("avx512f") {
            return;
        }
        for t in [
            1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 64, 65, 100, 128,
        ] {
            for (seed, spread) in [(1, 1.0), (2, 30.0), (3, 200.0)] {
                for causal in [true, false] {
                    let mut x = block(t, seed + t as u64, spread);
                    // edge values: -inf scores (masked keys), a whole row
                    // of -inf, NaNs, zeros of both signs
                    if t > 3 {
                        x[t + 1] = f32::NEG_INFINITY;
                        x[2 * t..3 * t].fill(f32::NEG_INFINITY);
                        x[3 * t] = f32::NAN;
                        x[3 * t + 1] = -0.0;
                        x[t * t - 1] = 0.0;
                    }
                    let mut want = x.clone();
                    for (i, row) in want.chunks_exact_mut(t).enumerate() {
                        generic_row(row, if causal { i + 1 } else { t }, 0.17);
                    }
                    let mut got = x.clone();
                    assert!(scaled_softmax_rows(&mut got, t, 0.17f32, causal));
                    for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                            "t {t}, seed {seed}, causal {causal}: value {j} is {g}, the generic path's {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn other_classes_and_types_leave_the_block_to_the_generic_path() {
        use crate::cpu::class::{pin_thread, Class};
        let prev = pin_thread(Some(Class::Portable));
        let mut x = vec![1.0f32; 16];
        let taken = scaled_softmax_rows(&mut x, 4, 0.5f32, true);
        let mut y = vec![1.0f64; 16];
        assert!(!scaled_softmax_rows(&mut y, 4, 0.5, true));
        pin_thread(prev);
        assert!(!taken);
        assert!(x.iter().all(|&v| v == 1.0));
    }
}

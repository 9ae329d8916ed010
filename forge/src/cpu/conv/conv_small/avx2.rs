//! The `f32` inner loops of the direct convolution with AVX2 and FMA
//! intrinsics, for CPUs without AVX-512 (an AMD EPYC whose hypervisor
//! hides it, for one): each 16-lane block is two 8-lane halves, each lane
//! computed with the `mul_add` of the portable loops in the same order
//! (lanes are independent, so splitting a block changes no bits).
//!
//! Eight output channels times two halves would be 16 accumulators, all of
//! the 16 ymm registers, so the channels go in passes of at most 6
//! (`Q` channels, `2 * Q` accumulators plus two input halves and a
//! broadcast weight) and only the channels that exist are computed: the
//! caller says how many (`nq`), and the accumulators of the others are left
//! untouched (they are never read).

use super::{LANES, OB};
use std::arch::x86_64::{
    __m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
};

/// Lanes per register.
const HALF: usize = LANES / 2;

/// 8 `f32` from `s[at..at + 8]`; `#[inline]` into the `avx2,fma` loops
/// (see the AVX-512 `load`: an out-of-line call per load otherwise).
///
/// # Safety
/// The CPU has AVX.
///
/// # Panics
/// When `s` is shorter than `at + 8`.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn load(s: &[f32], at: usize) -> __m256 {
    let s = &s[at..at + HALF];
    // SAFETY: `s` holds exactly 8 `f32` (sliced just above); unaligned
    // loads are allowed.
    unsafe { _mm256_loadu_ps(s.as_ptr()) }
}

/// 8 `f32` into `s[at..at + 8]`.
///
/// # Safety
/// The CPU has AVX.
///
/// # Panics
/// When `s` is shorter than `at + 8`.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn store(s: &mut [f32], at: usize, v: __m256) {
    let s = &mut s[at..at + HALF];
    // SAFETY: `s` holds exactly 8 `f32` (sliced just above).
    unsafe { _mm256_storeu_ps(s.as_mut_ptr(), v) }
}

/// The forward's block sums for output channels `q0..q0 + Q` (see
/// [`forward_block`]), both halves of the block at once.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn forward_pass<const Q: usize>(
    s: &[f32],
    starts: &[usize],
    w: &[f32],
    op: usize,
    t0: usize,
    q0: usize,
    out: &mut [f32],
) {
    let mut lo = [_mm256_setzero_ps(); Q];
    let mut hi = [_mm256_setzero_ps(); Q];
    for (tap, &at) in starts.iter().enumerate() {
        // SAFETY: (both loads) the caller checked the CPU's features; `load`
        // slices `s[at..at + 8]`, so a start past the end panics, never reads.
        let (sl, sh) = unsafe { (load(s, at + t0), load(s, at + t0 + HALF)) };
        let wq = &w[tap * op + q0..][..Q];
        for ((l, h), &wv) in lo.iter_mut().zip(hi.iter_mut()).zip(wq) {
            let b = _mm256_set1_ps(wv);
            *l = _mm256_fmadd_ps(b, sl, *l);
            *h = _mm256_fmadd_ps(b, sh, *h);
        }
    }
    for (q, (&l, &h)) in lo.iter().zip(&hi).enumerate() {
        let at = (q0 + q) * LANES;
        // SAFETY: (both stores) the caller checked the CPU's features;
        // `store` slices `out[at..at + 8]`, so it cannot write past `out`.
        unsafe {
            store(out, at, l);
            store(out, at + HALF, h);
        }
    }
}

/// The forward's block sums (see `super::forward_block`): `out[q * 16 + l]
/// = sum_tap w[tap * op + q] * s[starts[tap] + t0 + l]`, taps in order, for
/// the output channels `q < nq` (`1 <= nq <= OB`); `out`'s other channels
/// are left as they are.
///
/// # Safety
/// The CPU has AVX2 and FMA.
///
/// # Panics
/// When a slice is shorter than the sums read or write.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn forward_block(
    s: &[f32],
    starts: &[usize],
    w: &[f32],
    op: usize,
    t0: usize,
    nq: usize,
    out: &mut [f32],
) {
    let out = &mut out[..OB * LANES];
    // SAFETY: (every pass) the caller checked the CPU's features; the
    // passes are safe code apart from the features: their loads and stores
    // go through the bounds-checked `load` and `store`.
    unsafe {
        match nq {
            0 => {}
            1..=2 => forward_pass::<2>(s, starts, w, op, t0, 0, out),
            3..=4 => forward_pass::<4>(s, starts, w, op, t0, 0, out),
            5..=6 => forward_pass::<6>(s, starts, w, op, t0, 0, out),
            _ => {
                forward_pass::<4>(s, starts, w, op, t0, 0, out);
                forward_pass::<4>(s, starts, w, op, t0, 4, out);
            }
        }
    }
}

/// The weight gradient's whole blocks for output channels `0..Q` and lanes
/// `h..h + 8` of every block (see [`wgrad_tap`]).
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn wgrad_pass<const Q: usize>(
    full: usize,
    src: &[f32],
    gy: &[&[f32]; OB],
    h: usize,
    acc: &mut [f32],
) {
    let mut a = [_mm256_setzero_ps(); Q];
    for (q, v) in a.iter_mut().enumerate() {
        // SAFETY: the caller checked the CPU's features.
        *v = unsafe { load(acc, q * LANES + h) };
    }
    for t0 in (h..full).step_by(LANES) {
        // SAFETY: the caller checked the CPU's features.
        let sv = unsafe { load(src, t0) };
        for (v, g) in a.iter_mut().zip(gy) {
            // SAFETY: as above.
            let gv = unsafe { load(g, t0) };
            *v = _mm256_fmadd_ps(gv, sv, *v);
        }
    }
    for (q, &v) in a.iter().enumerate() {
        // SAFETY: the caller checked the CPU's features.
        unsafe { store(acc, q * LANES + h, v) };
    }
}

/// The weight gradient's dot products for one tap (see
/// `super::wgrad_tap`): `acc[q * 16 + l] += gy[q][t] * src[t]` over the
/// whole blocks `t = t0 + l < l_len / 16 * 16`, then `tail[q]` over the
/// rest, in increasing `t`, for the output channels `q < nq`
/// (`1 <= nq <= OB`); the other channels' `acc` and `tail` are left as they
/// are.
///
/// # Safety
/// The CPU has AVX2 and FMA.
///
/// # Panics
/// When a slice is shorter than the sums read or write.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn wgrad_tap(
    l_len: usize,
    src: &[f32],
    gy: &[&[f32]; OB],
    nq: usize,
    acc: &mut [f32],
    tail: &mut [f32],
) {
    let full = l_len / LANES * LANES;
    let acc = &mut acc[..OB * LANES];
    for h in [0, HALF] {
        // SAFETY: (every pass) the caller checked the CPU's features; the
        // passes read and write through the bounds-checked `load`/`store`.
        unsafe {
            match nq {
                0 => {}
                1..=2 => wgrad_pass::<2>(full, src, gy, h, acc),
                3..=4 => wgrad_pass::<4>(full, src, gy, h, acc),
                5..=6 => wgrad_pass::<6>(full, src, gy, h, acc),
                _ => wgrad_pass::<8>(full, src, gy, h, acc),
            }
        }
    }
    // Scalar fused multiply-adds (this function is compiled with FMA, so
    // `mul_add` is one instruction, not a libm call).
    for (tq, g) in tail.iter_mut().zip(gy).take(nq) {
        for t in full..l_len {
            *tq = g[t].mul_add(src[t], *tq);
        }
    }
}

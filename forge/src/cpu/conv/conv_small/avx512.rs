//! The `f32` inner loops of the direct convolution with AVX-512F and FMA
//! intrinsics: the 16 lanes of a block in one register, each lane computed
//! with the `mul_add` of the portable loops in the same order, so both give
//! the same bits (the compiler vectorised the portable loops across output
//! channels with gathers instead, about 3x slower than the im2col path).

use super::{LANES, OB};
use std::arch::x86_64::{
    __m512, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_setzero_ps, _mm512_storeu_ps,
};

/// 16 `f32` from `s[at..at + 16]`.
///
/// `#[inline]`: without it this was an out-of-line call per load (its
/// 512-bit result returned through memory), 20% of the samples of a
/// 3 -> 6 channel, 5x5 layer's training step; inlined, its forward and
/// weight gradient took about half the time (issue 41, branch
/// `smallconv`).
///
/// # Safety
/// The CPU has AVX-512F.
///
/// # Panics
/// When `s` is shorter than `at + 16`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn load(s: &[f32], at: usize) -> __m512 {
    let s = &s[at..at + LANES];
    // SAFETY: `s` holds exactly 16 `f32` (sliced just above); unaligned
    // loads are allowed.
    unsafe { _mm512_loadu_ps(s.as_ptr()) }
}

/// The forward's block sums (see `super::forward_block`): `out[q * 16 + l]
/// = sum_tap w[tap * op + q] * s[starts[tap] + t0 + l]`, taps in order.
///
/// # Safety
/// The CPU has AVX-512F and FMA.
#[target_feature(enable = "avx512f,fma")]
pub(super) unsafe fn forward_block(
    s: &[f32],
    starts: &[usize],
    w: &[f32],
    op: usize,
    t0: usize,
    out: &mut [f32],
) {
    let mut acc = [_mm512_setzero_ps(); OB];
    for (tap, &at) in starts.iter().enumerate() {
        // SAFETY: the caller checked the CPU's features.
        let sv = unsafe { load(s, at + t0) };
        let wq = &w[tap * op..tap * op + OB];
        for (a, &wv) in acc.iter_mut().zip(wq) {
            *a = _mm512_fmadd_ps(_mm512_set1_ps(wv), sv, *a);
        }
    }
    let out = &mut out[..OB * LANES];
    for (q, a) in acc.iter().enumerate() {
        // SAFETY: `out` holds `OB * 16` `f32` (sliced above), so lanes
        // `q * 16..q * 16 + 16` are inside it.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(q * LANES), *a) };
    }
}

/// The weight gradient's dot products for one tap (see
/// `super::wgrad_tap`): `acc[q * 16 + l] += gy[q][t] * src[t]` over the
/// whole blocks `t = t0 + l < l_len / 16 * 16`, then `tail[q]` over the
/// rest, in increasing `t`.
///
/// # Safety
/// The CPU has AVX-512F and FMA.
#[target_feature(enable = "avx512f,fma")]
pub(super) unsafe fn wgrad_tap(
    l_len: usize,
    src: &[f32],
    gy: [&[f32]; OB],
    acc: &mut [f32],
    tail: &mut [f32],
) {
    let full = l_len / LANES * LANES;
    let acc = &mut acc[..OB * LANES];
    let mut a = [_mm512_setzero_ps(); OB];
    for (q, v) in a.iter_mut().enumerate() {
        // SAFETY: the caller checked the CPU's features.
        *v = unsafe { load(acc, q * LANES) };
    }
    for t0 in (0..full).step_by(LANES) {
        // SAFETY: the caller checked the CPU's features.
        let sv = unsafe { load(src, t0) };
        for (v, g) in a.iter_mut().zip(gy) {
            // SAFETY: as above.
            let gv = unsafe { load(g, t0) };
            *v = _mm512_fmadd_ps(gv, sv, *v);
        }
    }
    for (q, v) in a.iter().enumerate() {
        // SAFETY: `acc` holds `OB * 16` `f32` (sliced above).
        unsafe { _mm512_storeu_ps(acc.as_mut_ptr().add(q * LANES), *v) };
    }
    for (tq, g) in tail.iter_mut().zip(gy) {
        for t in full..l_len {
            *tq = g[t].mul_add(src[t], *tq);
        }
    }
}

/// [`wgrad_tap`] for two taps at once over the same `gy` rows: `acc_a` and
/// `tail_a` take tap `a`'s stream `src_a`, `acc_b` and `tail_b` tap `b`'s,
/// for the first `NQ` output channels (the others are left as they are).
/// Each row of `gy` is loaded once for both taps (the single-tap loop
/// loads it per tap, and 8 channels whatever `nq`); every sum is the one
/// [`wgrad_tap`] computes, in the same order, so the same bits.
///
/// # Safety
/// The CPU has AVX-512F and FMA.
///
/// # Panics
/// When a stream or row is shorter than `l_len`, or `NQ > OB`.
#[target_feature(enable = "avx512f,fma")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn wgrad_pair<const NQ: usize>(
    l_len: usize,
    src: [&[f32]; 2],
    gy: [&[f32]; OB],
    acc_a: &mut [f32],
    acc_b: &mut [f32],
    tail_a: &mut [f32],
    tail_b: &mut [f32],
) {
    assert!(NQ <= OB, "wgrad_pair: channels");
    let full = l_len / LANES * LANES;
    let gy: [&[f32]; NQ] = std::array::from_fn(|q| &gy[q][..l_len]);
    let (sa, sb) = (&src[0][..l_len], &src[1][..l_len]);
    let (acc_a, acc_b) = (&mut acc_a[..NQ * LANES], &mut acc_b[..NQ * LANES]);
    let mut a = [_mm512_setzero_ps(); NQ];
    let mut b = [_mm512_setzero_ps(); NQ];
    for q in 0..NQ {
        // SAFETY: the caller checked the CPU's features; `load`
        // slices, panicking when short.
        a[q] = unsafe { load(acc_a, q * LANES) };
        // SAFETY: as above.
        b[q] = unsafe { load(acc_b, q * LANES) };
    }
    for t0 in (0..full).step_by(LANES) {
        // SAFETY: as above.
        let (va, vb) = unsafe { (load(sa, t0), load(sb, t0)) };
        for q in 0..NQ {
            // SAFETY: as above.
            let gv = unsafe { load(gy[q], t0) };
            a[q] = _mm512_fmadd_ps(gv, va, a[q]);
            b[q] = _mm512_fmadd_ps(gv, vb, b[q]);
        }
    }
    for q in 0..NQ {
        // SAFETY: both accumulators hold `NQ * 16` `f32` (sliced above).
        unsafe {
            _mm512_storeu_ps(acc_a.as_mut_ptr().add(q * LANES), a[q]);
            _mm512_storeu_ps(acc_b.as_mut_ptr().add(q * LANES), b[q]);
        }
    }
    for (q, g) in gy.iter().enumerate() {
        for t in full..l_len {
            tail_a[q] = g[t].mul_add(sa[t], tail_a[q]);
            tail_b[q] = g[t].mul_add(sb[t], tail_b[q]);
        }
    }
}

/// [`forward_block`] for two blocks at once, outputs `t0..t0 + 16` into
/// `out_a` and `t0 + 16..t0 + 32` into `out_b`, for the first `NQ` output
/// channels (the others are left as they are): each tap's weights are
/// broadcast once for both blocks. Every sum is the one [`forward_block`]
/// computes, in the same order, so the same bits.
///
/// # Safety
/// The CPU has AVX-512F and FMA.
///
/// # Panics
/// When a stream or an output is too short, or `NQ > OB`.
#[target_feature(enable = "avx512f,fma")]
pub(super) unsafe fn forward_pair<const NQ: usize>(
    s: &[f32],
    starts: &[usize],
    w: &[f32],
    op: usize,
    t0: usize,
    out_a: &mut [f32],
    out_b: &mut [f32],
) {
    assert!(NQ <= OB, "forward_pair: channels");
    let mut a = [_mm512_setzero_ps(); NQ];
    let mut b = [_mm512_setzero_ps(); NQ];
    for (tap, &at) in starts.iter().enumerate() {
        // SAFETY: the caller checked the CPU's features; `load` slices,
        // panicking when short.
        let (va, vb) = unsafe { (load(s, at + t0), load(s, at + t0 + LANES)) };
        let wq = &w[tap * op..tap * op + NQ];
        for q in 0..NQ {
            let wv = _mm512_set1_ps(wq[q]);
            a[q] = _mm512_fmadd_ps(wv, va, a[q]);
            b[q] = _mm512_fmadd_ps(wv, vb, b[q]);
        }
    }
    let (out_a, out_b) = (&mut out_a[..NQ * LANES], &mut out_b[..NQ * LANES]);
    for q in 0..NQ {
        // SAFETY: both outputs hold `NQ * 16` `f32` (sliced above).
        unsafe {
            _mm512_storeu_ps(out_a.as_mut_ptr().add(q * LANES), a[q]);
            _mm512_storeu_ps(out_b.as_mut_ptr().add(q * LANES), b[q]);
        }
    }
}

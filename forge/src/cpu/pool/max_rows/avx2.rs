//! The run loop of `max_rows` for `f32` with AVX2 intrinsics, for windows
//! `step` 1 or 2 apart (2x2 stride 2, 3x3 stride 2, any stride-1 pooling).
//! The compiler's own vectorisation of the generic loops on AVX2 was mostly
//! scalar (stride-2 loads, and 64-bit positions whose selects need widened
//! masks: 6.6-9.5% of the LeNet train step on an AVX2-only EPYC, perf).
//!
//! Eight outputs per register; positions kept as `i32` lanes beside the
//! values (the caller checks that a plane's positions fit) and widened when
//! written. Each lane takes the taps in the scalar scan's order (rows, then
//! columns) with its comparison (`x > best`, ordered, or `x` is the first
//! NaN), so every output has the scan's value and position, bit for bit.

use std::arch::x86_64::{
    __m256, __m256i, _mm256_and_ps, _mm256_blendv_ps, _mm256_castpd_ps, _mm256_castps_pd,
    _mm256_castps_si256, _mm256_castsi256_ps, _mm256_cmp_ps, _mm256_loadu_ps, _mm256_or_ps,
    _mm256_permute4x64_pd, _mm256_set1_epi32, _mm256_set1_ps, _mm256_shuffle_ps, _mm256_storeu_ps,
    _mm256_storeu_si256, _CMP_GT_OQ, _CMP_ORD_Q, _CMP_UNORD_Q,
};
use std::mem::MaybeUninit;

/// Outputs per register.
const L: usize = 8;

/// `s[at..at + 8]`.
///
/// # Safety
/// The CPU has AVX.
///
/// # Panics
/// When `s` is shorter than `at + 8`.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn load(s: &[f32], at: usize) -> __m256 {
    let s = &s[at..at + L];
    // SAFETY: `s` holds exactly 8 `f32` (sliced just above).
    unsafe { _mm256_loadu_ps(s.as_ptr()) }
}

/// `s[at + 2 l]` for `l < 8`, reading `s[at..at + 15]` only: the even
/// elements of `s[at..at + 8]` and the odd ones of `s[at + 7..at + 15]`
/// (`s[at + 8], .., s[at + 14]`), put in order.
///
/// # Safety
/// The CPU has AVX2.
///
/// # Panics
/// When `s` is shorter than `at + 15`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load_even(s: &[f32], at: usize) -> __m256 {
    // SAFETY: (both loads) the caller checked the CPU's features; `load`
    // slices `s[at..at + 8]` and `s[at + 7..at + 15]`, panicking when short.
    let (a, b) = unsafe { (load(s, at), load(s, at + 7)) };
    // Per 128-bit half: a0 a2 b1 b3 | a4 a6 b5 b7 = s0 s2 s8 s10 | s4 s6 s12 s14.
    let m = _mm256_shuffle_ps::<0b11_01_10_00>(a, b);
    // 64-bit quarters 0 2 1 3: s0 s2 s4 s6 s8 s10 s12 s14.
    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(m)))
}

/// The geometry of one run for [`run_row`].
pub(super) struct RunGeom {
    /// The plane's width.
    pub(super) w: usize,
    /// Row and column dilation.
    pub(super) dilation: [usize; 2],
    /// The run's first window's first column, the step between windows (1
    /// or 2) and the kernel columns.
    pub(super) c0: usize,
    pub(super) step: usize,
    pub(super) taps: usize,
}

/// `super::run_row` for `f32`: values and positions of the run of one
/// output row whose window rows are `rows` (non-empty), into `vals` and
/// `idx`. `scratch` is the run's -inf padded row (`super::Scratch`),
/// `plane` starts at the plane and runs to the end of the input.
///
/// # Safety
/// The CPU has AVX2; every position of the plane is below `i32::MAX`.
///
/// # Panics
/// When `g.step` is not 1 or 2, or a slice is shorter than the run reads.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn run_row(
    g: &RunGeom,
    plane: &[f32],
    rows: (usize, usize),
    scratch: &mut [f32],
    vals: &mut [MaybeUninit<f32>],
    idx: &mut [MaybeUninit<usize>],
) {
    assert!(g.step == 1 || g.step == 2, "max_rows::avx2: step");
    let (w, [dr, d]) = (g.w, g.dilation);
    let (len, n) = (scratch.len(), vals.len());
    for b in 0..n.div_ceil(L) {
        // From -inf at the window's first position, as the generic loop.
        let mut v = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut i = _mm256_set1_epi32((rows.0 * w) as i32);
        let off = b * L * g.step;
        for r in (rows.0..rows.1).step_by(dr) {
            let at = r * w + g.c0;
            let row: &[f32] = if at + len <= plane.len() {
                &plane[at..at + len]
            } else {
                let m = len.min(w - g.c0);
                scratch[..m].copy_from_slice(&plane[at..at + m]);
                &scratch[..]
            };
            let seg = &row[off..];
            for j in 0..g.taps {
                let o = j * d;
                // SAFETY: (both loads) the caller checked the CPU's features;
                // `load` and `load_even` slice `seg`, panicking when short.
                let x = unsafe {
                    if g.step == 1 {
                        load(seg, o)
                    } else {
                        load_even(seg, o)
                    }
                };
                let pos = _mm256_set1_epi32((r * w + o) as i32);
                let gt = _mm256_cmp_ps::<_CMP_GT_OQ>(x, v);
                let x_nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x);
                let v_num = _mm256_cmp_ps::<_CMP_ORD_Q>(v, v);
                let t = _mm256_or_ps(gt, _mm256_and_ps(x_nan, v_num));
                v = _mm256_blendv_ps(v, x, t);
                // SAFETY: this function runs only where the CPU has AVX2
                // (the caller's contract), which includes AVX.
                i = unsafe { blend_i32(i, pos, t) };
            }
        }
        let (mut vo, mut io) = ([0.0f32; L], [0i32; L]);
        // SAFETY: both arrays hold 8 lanes; the caller checked the CPU's
        // features.
        unsafe {
            _mm256_storeu_ps(vo.as_mut_ptr(), v);
            _mm256_storeu_si256(io.as_mut_ptr().cast::<__m256i>(), i);
        }
        let t0 = b * L;
        let m = (n - t0).min(L);
        for (l, (dv, di)) in vals[t0..t0 + m]
            .iter_mut()
            .zip(&mut idx[t0..t0 + m])
            .enumerate()
        {
            dv.write(vo[l]);
            di.write(io[l] as usize + g.c0 + (t0 + l) * g.step);
        }
    }
}

/// `b` where the mask `t` is set, else `a`, on 32-bit integer lanes.
///
/// # Safety
/// The CPU has AVX.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn blend_i32(a: __m256i, b: __m256i, t: __m256) -> __m256i {
    _mm256_castps_si256(_mm256_blendv_ps(
        _mm256_castsi256_ps(a),
        _mm256_castsi256_ps(b),
        t,
    ))
}

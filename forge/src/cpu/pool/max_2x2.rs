//! Max pooling with 2x2 windows at stride 2 (no padding, no dilation, floor
//! mode: LeNet's and most small CNNs' pooling) for `f32` with AVX-512F:
//! each window's maximum and its position, 16 outputs of one output row
//! per register.
//!
//! A window's four inputs are taken in the scalar scan's order (top left,
//! top right, bottom left, bottom right) by a two-level tournament: the
//! top pair, the bottom pair, then the bottom winner against the top one,
//! each match won by the later input when it is greater (ordered) or is a
//! NaN against a number. That rule keeps the first NaN, else the first of
//! the maxima (values that compare equal, `-0.0` and `0.0` included), in
//! any grouping of the scan, so each output gets the scan's value and
//! position, bit for bit (`max_rows`' kernels and the scalar scan in the
//! other classes). The two pairs are independent, so the comparisons of
//! one window are two deep where the scan's are three.
//!
//! The run loop of `max_rows` (AVX2, 8 outputs a register, a chain of four
//! dependent selects per block, the positions widened one at a time) took
//! 9-11% of a one-thread LeNet-5 training step (`perf`, model 207).

use super::PoolWindows;
use std::any::TypeId;
use std::mem::MaybeUninit;

/// Whether [`max_planes`] takes `win` for `E`: `E` is `f32`, the CPU (and
/// class) has AVX-512F, every window is the 2x2 block at `(2 oy, 2 ox)`,
/// and a plane's positions fit `i32`.
pub(super) fn applies<E: 'static>(win: &PoolWindows) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        TypeId::of::<E>() == TypeId::of::<f32>()
            && is_2x2_stride_2(win)
            && win.h * win.w <= i32::MAX as usize
            && crate::cpu::class::cpu_has!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = win;
        false
    }
}

/// Whether every window of `win` is the full 2x2 block at `(2 oy, 2 ox)`.
fn is_2x2_stride_2(win: &PoolWindows) -> bool {
    win.dilation == [1, 1]
        && win.oh() > 0
        && win.ow() > 0
        && win
            .rows
            .iter()
            .enumerate()
            .all(|(i, &r)| r == (2 * i, 2 * i + 2))
        && win
            .cols
            .iter()
            .enumerate()
            .all(|(i, &c)| c == (2 * i, 2 * i + 2))
}

/// Values and positions of every output of `vals.len() / (oh ow)` planes of
/// `x` (planes of `h w`, from the start of `x`) into `vals` and `idx`,
/// every element written.
///
/// # Panics
/// When [`applies`] is false for `win` and `E`, the output slices differ
/// in length or are not whole planes, or `x` is shorter than their planes.
pub(super) fn max_planes<E: 'static>(
    win: &PoolWindows,
    x: &[E],
    vals: &mut [MaybeUninit<E>],
    idx: &mut [MaybeUninit<usize>],
) {
    assert!(applies::<E>(win), "max_2x2: window or type");
    let (ip, op) = (win.h * win.w, win.oh() * win.ow());
    assert_eq!(vals.len(), idx.len(), "max_2x2: outputs");
    assert_eq!(vals.len() % op, 0, "max_2x2: whole planes");
    let planes = vals.len() / op;
    assert!(x.len() >= planes * ip, "max_2x2: input");
    #[cfg(target_arch = "x86_64")]
    {
        let g = avx512::Geom {
            w: win.w,
            oh: win.oh(),
            ow: win.ow(),
        };
        for p in 0..planes {
            // SAFETY: `E` is `f32` and the CPU has AVX-512F (`applies`);
            // plane `p` of `x` holds `h w >= (2 oh) w` values with
            // `2 ow <= w` (the windows are inside the plane); the outputs
            // hold `oh ow` slots from `p op` (checked above).
            unsafe {
                avx512::plane(
                    &g,
                    x.as_ptr().cast::<f32>().add(p * ip),
                    vals.as_mut_ptr().cast::<f32>().add(p * op),
                    idx.as_mut_ptr().cast::<u64>().add(p * op),
                )
            };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::{
        __m512, __m512i, __mmask16, _mm512_add_epi32, _mm512_castsi512_si256, _mm512_cmp_ps_mask,
        _mm512_cvtepu32_epi64, _mm512_extracti64x4_epi64, _mm512_mask_blend_epi32,
        _mm512_mask_blend_ps, _mm512_mask_storeu_epi64, _mm512_mask_storeu_ps,
        _mm512_maskz_loadu_ps, _mm512_permutex2var_ps, _mm512_set1_epi32, _mm512_setr_epi32,
        _CMP_GT_OQ, _CMP_ORD_Q, _CMP_UNORD_Q,
    };

    /// The plane geometry: input width, output height and width.
    pub(super) struct Geom {
        pub(super) w: usize,
        pub(super) oh: usize,
        pub(super) ow: usize,
    }

    /// The lanes `0..n` of a 16-lane mask (`n <= 16`).
    fn lanes(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }

    /// `(v, at)` of the match of `b` (at `pb`) after `a` (at `pa`): `b`
    /// wins where it is greater (ordered) or a NaN against a number.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn take(a: __m512, pa: __m512i, b: __m512, pb: __m512i) -> (__m512, __m512i) {
        let t = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(b, a)
            | (_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(b, b) & _mm512_cmp_ps_mask::<_CMP_ORD_Q>(a, a));
        (
            _mm512_mask_blend_ps(t, a, b),
            _mm512_mask_blend_epi32(t, pa, pb),
        )
    }

    /// Columns `2 t` and `2 t + 1` (`t < 16`) of the `2 n` values at `s`
    /// (`n <= 16`; lanes `t >= n` are zero).
    ///
    /// # Safety
    /// `s` is valid for `2 n` reads.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn pairs(s: *const f32, n: usize) -> (__m512, __m512) {
        let lo_n = (2 * n).min(16);
        // SAFETY: lanes `0..lo_n` of the first block and `0..2 n - lo_n`
        // of the second are inside the caller's `2 n` values; the others
        // are neither read nor faulted on (masked loads), and the second
        // address is formed with wrapping arithmetic.
        let (lo, hi) = unsafe {
            (
                _mm512_maskz_loadu_ps(lanes(lo_n), s),
                _mm512_maskz_loadu_ps(lanes(2 * n - lo_n), s.wrapping_add(16)),
            )
        };
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        (
            _mm512_permutex2var_ps(lo, even, hi),
            _mm512_permutex2var_ps(lo, odd, hi),
        )
    }

    /// One plane: per output row, blocks of 16 outputs.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` is valid for reads of `2 oh` rows of `w`
    /// values with `2 ow <= w`; `vals` and `idx` for writes of `oh ow`;
    /// positions below `2 oh w` fit `i32`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane(g: &Geom, x: *const f32, vals: *mut f32, idx: *mut u64) {
        let w = g.w as i32;
        // Lane `t`'s offset of its window's top left from the block's.
        let two_t = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let (p_tl, p_tr) = (_mm512_set1_epi32(0), _mm512_set1_epi32(1));
        let (p_bl, p_br) = (_mm512_set1_epi32(w), _mm512_set1_epi32(w + 1));
        for oy in 0..g.oh {
            let mut t0 = 0;
            while t0 < g.ow {
                let n = (g.ow - t0).min(16);
                let at = 2 * oy * g.w + 2 * t0;
                // SAFETY: input rows `2 oy` and `2 oy + 1`, columns
                // `2 t0..2 (t0 + n) <= 2 ow <= w`, inside the plane.
                let ((tl, tr), (bl, br)) =
                    unsafe { (pairs(x.add(at), n), pairs(x.add(at + g.w), n)) };
                let (v_top, p_top) = take(tl, p_tl, tr, p_tr);
                let (v_bot, p_bot) = take(bl, p_bl, br, p_br);
                let (v, off) = take(v_top, p_top, v_bot, p_bot);
                let pos =
                    _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32(at as i32), two_t), off);
                let m = lanes(n);
                let out = oy * g.ow + t0;
                // SAFETY: outputs `out..out + n` of the plane (masked to
                // `n` lanes; the second half's address, past the end when
                // `n <= 8`, is formed with wrapping arithmetic and not
                // written); positions are below `2 oh w` and non-negative,
                // so widened without sign.
                unsafe {
                    _mm512_mask_storeu_ps(vals.add(out), m, v);
                    _mm512_mask_storeu_epi64(
                        idx.add(out).cast(),
                        m as u8,
                        _mm512_cvtepu32_epi64(_mm512_castsi512_si256(pos)),
                    );
                    _mm512_mask_storeu_epi64(
                        idx.wrapping_add(out + 8).cast(),
                        (m >> 8) as u8,
                        _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64::<1>(pos)),
                    );
                }
                t0 += n;
            }
        }
    }
}

//! Max pooling values (no positions: inference) for windows of any size at
//! stride 2 in both directions, without dilation (ResNet's 3x3 stem
//! pooling with padding 1, and the like), for `f32` with AVX-512F: 16
//! outputs per register over whole planes, however narrow.
//!
//! Each plane is copied into a scratch plane padded with `-inf` on every
//! side, so every window is whole. A `-inf` never replaces the running
//! maximum of the scan (`x > v` fails, and it is not a NaN), so the padded
//! windows select the same input as the clipped ones. Then the separable
//! passes of `max_values`: per padded row the maximum over each window's
//! columns, per output row the maximum of those over the window's rows.
//! The first pass runs over the padded plane as one flat array (its width
//! is even, so the even positions `2 i` are the windows' starts row by row
//! and a register holds windows of several rows when the rows are short),
//! the taps of 16 windows gathered from two loads by one permute. Every
//! match keeps the earlier element unless the later one is greater
//! (ordered) or a NaN against a number, and the earlier element always
//! comes first in the window's scan (rows, then columns): so each output
//! is the scan's first NaN, or else its first maximum, bit for bit.

use super::PoolWindows;

/// `(k, p)` when every window of one axis of `n` inputs is the clipped
/// `[2 o - p, 2 o - p + k)` and none is empty (`win.rows` or `win.cols`).
fn stride_two(windows: &[(usize, usize)], n: usize) -> Option<(usize, usize)> {
    // the widest window is whole: its width is the kernel, its start the
    // padding's offset
    let (o, &(a, b)) = windows.iter().enumerate().max_by_key(|(_, w)| w.1 - w.0)?;
    let (k, p) = (b - a, (2 * o).checked_sub(a)?);
    let fits = windows.iter().enumerate().all(|(o, &(a, b))| {
        let s = (2 * o) as isize - p as isize;
        a < b
            && a == s.clamp(0, n as isize) as usize
            && b == (s + k as isize).clamp(0, n as isize) as usize
    });
    (k > 0 && fits).then_some((k, p))
}

/// The geometry of the padded scratch plane for `win`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Padded {
    /// Kernel rows and columns.
    k: [usize; 2],
    /// Padding above and on the left.
    p: [usize; 2],
    /// Padded rows, and padded width (even).
    hp: usize,
    wp: usize,
}

impl Padded {
    /// The padded plane for `win` when its windows are `k x k'` blocks at
    /// stride 2 (any padding, no dilation, none empty); `None` otherwise.
    pub(super) fn of(win: &PoolWindows) -> Option<Padded> {
        if win.dilation != [1, 1] || win.oh() == 0 || win.ow() == 0 {
            return None;
        }
        let (kr, pr) = stride_two(&win.rows, win.h)?;
        let (kc, pc) = stride_two(&win.cols, win.w)?;
        // every input position must land inside the padded plane
        let hp = (2 * (win.oh() - 1) + kr).max(pr + win.h);
        let wp = (2 * (win.ow() - 1) + kc)
            .max(pc + win.w)
            .next_multiple_of(2);
        Some(Padded {
            k: [kr, kc],
            p: [pr, pc],
            hp,
            wp,
        })
    }

    /// Scratch elements per call: the padded plane (with 32 + `k` spare
    /// `-inf` for the last register's loads) and the column maxima.
    pub(super) fn scratch_len(&self) -> usize {
        self.hp * self.wp + 32 + self.k[1] + self.hp * self.wp / 2
    }
}

/// Whether [`max_planes`] takes `win` for `E`: `E` is `f32`, the CPU (and
/// class) has AVX-512F, and [`Padded::of`] applies.
pub(super) fn applies<E: 'static>(win: &PoolWindows) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::cpu::same_type::is::<E, f32>()
            && crate::cpu::class::cpu_has!("avx512f")
            && Padded::of(win).is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = win;
        false
    }
}

/// The maxima of consecutive planes of `x` over `win` (which [`applies`]
/// took for `f32`) into `out`, every slot written; `scratch` holds
/// [`Padded::scratch_len`] elements.
///
/// # Panics
/// When `win` is not a stride-2 geometry ([`Padded::of`]), the CPU lacks
/// AVX-512F, or a buffer is too short.
#[cfg(target_arch = "x86_64")]
pub(super) fn max_planes(
    win: &PoolWindows,
    x: &[f32],
    scratch: &mut [f32],
    out: &mut [std::mem::MaybeUninit<f32>],
) {
    let g = Padded::of(win).expect("max_s2: a stride-2 geometry");
    assert!(
        crate::cpu::class::cpu_has!("avx512f"),
        "max_s2: the CPU has no AVX-512F"
    );
    let (ip, op) = (win.h * win.w, win.oh() * win.ow());
    let (pad, cols) = scratch.split_at_mut(g.hp * g.wp + 32 + g.k[1]);
    let cols = &mut cols[..g.hp * g.wp / 2];
    pad.fill(f32::NEG_INFINITY);
    for (plane, o) in x.chunks_exact(ip).zip(out.chunks_exact_mut(op)) {
        // the plane in the middle of the -inf border (the border is never
        // written, so it stays -inf from the fill above)
        for (r, row) in plane.chunks_exact(win.w).enumerate() {
            let at = (r + g.p[0]) * g.wp + g.p[1];
            pad[at..at + win.w].copy_from_slice(row);
        }
        // SAFETY: the CPU has AVX-512F (asserted above).
        unsafe { avx512::plane(&g, pad, cols, win.oh(), win.ow(), o) };
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::Padded;
    use std::arch::x86_64::{
        __m512, __mmask16, _mm512_cmp_ps_mask, _mm512_loadu_ps, _mm512_mask_blend_ps,
        _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_permutex2var_ps, _mm512_set_epi32,
        _CMP_GT_OQ, _CMP_ORD_Q, _CMP_UNORD_Q,
    };
    use std::mem::MaybeUninit;

    /// `v`, or `x` where the scan takes it: `x > v` (ordered), or `x` is a
    /// NaN and `v` is not.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn take(v: __m512, x: __m512) -> __m512 {
        let gt = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, v);
        let x_nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
        let v_num = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v);
        _mm512_mask_blend_ps(gt | (x_nan & v_num), v, x)
    }

    /// One padded plane `pad` into `out` (`oh x ow`), through `cols` (the
    /// column maxima at every even position of `pad`).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    ///
    /// # Panics
    /// When a buffer is shorter than `g` needs.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane(
        g: &Padded,
        pad: &[f32],
        cols: &mut [f32],
        oh: usize,
        ow: usize,
        out: &mut [MaybeUninit<f32>],
    ) {
        let half = g.wp / 2;
        let n = g.hp * half;
        assert!(pad.len() >= 2 * n.next_multiple_of(16) + g.k[1] && cols.len() >= n);
        assert!(out.len() >= oh * ow && 2 * (oh - 1) + g.k[0] <= g.hp && ow <= half);
        // pass 1: cols[i] = max over the window's columns from pad[2 i]
        let mut i = 0;
        while i < n {
            // SAFETY: the CPU has AVX-512F (the caller's contract);
            // `evens` slices its 32 floats, panicking when short.
            let mut v = unsafe { evens(pad, 2 * i) };
            for c in 1..g.k[1] {
                // SAFETY: as above.
                let x = unsafe { evens(pad, 2 * i + c) };
                v = take(v, x);
            }
            let m = (n - i).min(16);
            let dst = &mut cols[i..i + m];
            // SAFETY: `dst` holds the `m` lanes stored.
            unsafe { _mm512_mask_storeu_ps(dst.as_mut_ptr(), lanes(m), v) };
            i += 16;
        }
        // pass 2: out[oy, ox] = max over the window's rows of cols
        for (oy, orow) in out.chunks_exact_mut(ow).take(oh).enumerate() {
            let mut ox = 0;
            while ox < ow {
                let m = (ow - ox).min(16);
                let at = |r: usize| &cols[(2 * oy + r) * half + ox..][..m];
                // SAFETY: as above; `part` loads the lanes of its slice.
                let mut v = unsafe { part(at(0)) };
                for r in 1..g.k[0] {
                    // SAFETY: as above.
                    let x = unsafe { part(at(r)) };
                    v = take(v, x);
                }
                let dst = &mut orow[ox..ox + m];
                // SAFETY: `dst` holds the `m` lanes stored.
                unsafe { _mm512_mask_storeu_ps(dst.as_mut_ptr().cast::<f32>(), lanes(m), v) };
                ox += 16;
            }
        }
    }

    /// The elements `s[at + 2 l]`, `l < 16`, from the 32 floats at `at`.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    ///
    /// # Panics
    /// When `s` is shorter than `at + 32`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn evens(s: &[f32], at: usize) -> __m512 {
        let s = &s[at..at + 32];
        let even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
        // SAFETY: `s` holds 32 floats (sliced just above).
        let (a, b) = unsafe {
            (
                _mm512_loadu_ps(s.as_ptr()),
                _mm512_loadu_ps(s[16..].as_ptr()),
            )
        };
        _mm512_permutex2var_ps(a, even, b)
    }

    /// The `s.len() <= 16` floats of `s` in the low lanes, zeros above.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn part(s: &[f32]) -> __m512 {
        assert!(s.len() <= 16);
        // SAFETY: the mask loads `s.len()` floats, all inside `s`.
        unsafe { _mm512_maskz_loadu_ps(lanes(s.len()), s.as_ptr()) }
    }

    /// The first `n <= 16` lanes.
    fn lanes(n: usize) -> __mmask16 {
        if n >= 16 {
            0xFFFF
        } else {
            ((1u32 << n) - 1) as __mmask16
        }
    }
}

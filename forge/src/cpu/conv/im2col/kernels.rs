//! The inner loops of the column transforms for `f32` with AVX-512F:
//! im2col's short runs (`count` runs of `len` values, run `r` at
//! `src[r * s_step..]` and `dst[r * d_step..]`, one per output row of a
//! kernel tap) and, at stride 1, col2im over one plane.
//!
//! LeNet-5's second convolution (5x5 over 14x14 planes) has runs of 10
//! values: the portable copy loop compiled to a libc `memmove` call per
//! run, here one masked load and store. Its col2im added each tap's run
//! of 10 onto the plane, 25 overlapping read-modify-writes of every plane
//! row (4-lane loops with a scalar tail); here each 16-value block of a
//! plane row is loaded once, gets every tap's term in tap order with a
//! masked add (lanes without a term are left as they are), and is stored
//! once. Every value is moved, or gets the same additions `dst + src` in
//! the same order, as in the portable loops, so both give the same bits.

use crate::base::Float;
#[cfg(target_arch = "x86_64")]
use crate::cpu::class::cpu_has;
use std::mem::MaybeUninit;

/// Checks that `count` runs of `len` values, `step` apart, fit in `n`
/// values.
///
/// # Panics
/// When they do not.
fn check(n: usize, step: usize, len: usize, count: usize, what: &str) {
    if count > 0 && len > 0 {
        let end = (count - 1)
            .checked_mul(step)
            .and_then(|v| v.checked_add(len));
        assert!(end.is_some_and(|e| e <= n), "runs: {what} too short");
    }
}

/// Most kernel columns [`col2im_plane`] takes.
const MAX_KW: usize = 16;

/// Whether the AVX-512 loops take `E`: `f32` on a CPU (and class) with
/// AVX-512F. Asked once per transform by the callers, which pass the
/// answer to [`copy`] and [`col2im_plane`] (asking per run cost more than
/// the copy).
pub(super) fn fast<E: 'static>() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_f32::<E>() && cpu_has!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether `E` is `f32`.
fn is_f32<E: 'static>() -> bool {
    std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>()
}

/// Whether the AVX-512 loop may run for a caller's `fast` (what sound
/// code needs, without the class look-up: `E` is `f32` and the CPU has
/// AVX-512F).
#[cfg(target_arch = "x86_64")]
fn may_run<E: 'static>(fast: bool) -> bool {
    fast && is_f32::<E>() && std::arch::is_x86_feature_detected!("avx512f")
}

/// The geometry of one plane's col2im at stride 1 (see [`col2im_plane`]).
pub(super) struct PlaneGeom<'a> {
    /// Kernel rows and columns.
    pub(super) kh: usize,
    /// Kernel columns.
    pub(super) kw: usize,
    /// Input plane height and width.
    pub(super) h: usize,
    /// Input plane width.
    pub(super) w: usize,
    /// Output plane height.
    pub(super) oh: usize,
    /// Output plane width.
    pub(super) ow: usize,
    /// Padding (rows, columns).
    pub(super) padding: [usize; 2],
    /// Dilation (rows, columns).
    pub(super) dilation: [usize; 2],
    /// Per kernel column, the output columns whose input column is inside.
    pub(super) inside: &'a [(usize, usize)],
}

/// col2im of one channel at stride 1: `plane[y, x] += rows[t ld + off +
/// oy ow + ox]` for every tap `t = i kw + j` in increasing order, where
/// `y = oy - p0 + i d0` and `x = ox - p1 + j d1` fall inside, each plane
/// value getting its terms in tap order. Returns `false`, leaving `plane`
/// untouched, when the AVX-512 loop does not run: `fast` (the caller's
/// [`fast::<E>()`](fast)) is `false`, or the kernel is wider than
/// [`MAX_KW`]; the caller then runs the portable loop.
///
/// # Panics
/// When `rows` or `plane` is too short for the geometry.
pub(super) fn col2im_plane<E: Float>(
    g: &PlaneGeom<'_>,
    rows: &[E],
    ld: usize,
    off: usize,
    plane: &mut [E],
    fast: bool,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if may_run::<E>(fast) && g.kw <= MAX_KW {
        let taps = g.kh * g.kw;
        assert_eq!(g.inside.len(), g.kw, "col2im_plane: inside table");
        // every inside run within the output row, its input columns
        // within the plane (the AVX-512 loop's reads and writes rely on it)
        let [p1, d1] = [g.padding[1], g.dilation[1]];
        assert!(
            g.inside.iter().enumerate().all(|(j, &(lo, hi))| {
                lo >= hi || (hi <= g.ow && lo + j * d1 >= p1 && hi + j * d1 - p1 <= g.w)
            }),
            "col2im_plane: inside table"
        );
        assert!(
            taps == 0 || rows.len() >= (taps - 1) * ld + off + g.oh * g.ow,
            "col2im_plane: rows too short"
        );
        assert!(plane.len() >= g.h * g.w, "col2im_plane: plane too short");
        // SAFETY: `E` is `f32` and the CPU has AVX-512F (`may_run`);
        // the lengths, the inside table and `kw <= MAX_KW` were checked
        // above.
        unsafe {
            avx512::col2im_plane(g, rows.as_ptr().cast(), ld, off, plane.as_mut_ptr().cast())
        };
        return true;
    }
    let _ = (g, rows, ld, off, plane, fast);
    false
}

/// Writes `dst[r * d_step + k] = src[r * s_step + k]` for `r < count`,
/// `k < len`, with the AVX-512 loop when `fast` ([`fast::<E>()`](fast)'s
/// answer).
///
/// # Panics
/// When a run falls outside `src` or `dst`.
pub(super) fn copy<E: Float>(
    src: &[E],
    s_step: usize,
    dst: &mut [MaybeUninit<E>],
    d_step: usize,
    (len, count): (usize, usize),
    fast: bool,
) {
    check(src.len(), s_step, len, count, "source");
    check(dst.len(), d_step, len, count, "destination");
    #[cfg(target_arch = "x86_64")]
    if may_run::<E>(fast) {
        // SAFETY: `E` is `f32` (`may_run`), so both pointers are to `f32`
        // (`MaybeUninit<f32>` has its layout); every run is inside its
        // slice (checked above); the CPU has AVX-512F (`may_run`).
        unsafe {
            avx512::copy(
                src.as_ptr().cast(),
                s_step,
                dst.as_mut_ptr().cast(),
                d_step,
                len,
                count,
            )
        };
        return;
    }
    let _ = fast;
    for r in 0..count {
        let s = &src[r * s_step..][..len];
        for (d, &v) in dst[r * d_step..][..len].iter_mut().zip(s) {
            d.write(v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{PlaneGeom, MAX_KW};
    use std::arch::x86_64::{
        __mmask16, _mm512_loadu_ps, _mm512_mask_add_ps, _mm512_mask_storeu_ps,
        _mm512_maskz_loadu_ps, _mm512_storeu_ps,
    };

    /// The lanes `lo..hi` of a 16-lane mask (`lo <= hi <= 16`).
    fn lanes(lo: usize, hi: usize) -> __mmask16 {
        (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as __mmask16
    }

    /// [`super::col2im_plane`] on raw pointers: per block of 16 plane
    /// columns, each kernel column's mask (the plane columns it reaches)
    /// and offset found once; then per plane row the block loaded once,
    /// every tap's term added under its mask (in tap order), the block
    /// stored.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `kw <= MAX_KW`; `rows` is valid for reads of
    /// `(kh kw - 1) ld + off + oh ow` values and `plane` for reads and
    /// writes of `h w`; `inside` holds `kw` runs within `0..ow` whose input
    /// columns are inside the plane (`ConvGeom::inside_table`).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn col2im_plane(
        g: &PlaneGeom<'_>,
        rows: *const f32,
        ld: usize,
        off: usize,
        plane: *mut f32,
    ) {
        let ([p0, p1], [d0, d1]) = (g.padding, g.dilation);
        let mut xb = 0;
        while xb < g.w {
            let width = (g.w - xb).min(16);
            let m = lanes(0, width);
            // Plane column `x` reads output column `x + p1 - j d1` of tap
            // column `j`; the inside ones are `x_lo..x_hi`. Lane `k` of
            // the block reads `at[j] + k` of the tap's output row.
            let mut masks = [0 as __mmask16; MAX_KW];
            let mut at = [0isize; MAX_KW];
            for (j, &(ox_lo, ox_hi)) in g.inside.iter().enumerate() {
                let shift = j * d1;
                if ox_lo < ox_hi {
                    let (x_lo, x_hi) = (ox_lo + shift - p1, ox_hi + shift - p1);
                    let (lo, hi) = (x_lo.max(xb), x_hi.min(xb + width));
                    if lo < hi {
                        masks[j] = lanes(lo - xb, hi - xb);
                    }
                }
                at[j] = (j * ld + xb + p1) as isize - shift as isize;
            }
            for y in 0..g.h {
                // SAFETY: plane row `y`, columns `xb..xb + width`, inside
                // the `h w` values.
                let dst = unsafe { plane.add(y * g.w + xb) };
                // SAFETY: as above, masked to the block's columns.
                let mut acc = unsafe { _mm512_maskz_loadu_ps(m, dst) };
                for i in 0..g.kh {
                    // output row `oy = y + p0 - i d0`, when inside `0..oh`
                    let Some(oy) = (y + p0).checked_sub(i * d0).filter(|&v| v < g.oh) else {
                        continue;
                    };
                    let row = rows.wrapping_add(i * g.kw * ld + off + oy * g.ow);
                    for (&mk, &a) in masks[..g.kw].iter().zip(&at[..g.kw]) {
                        if mk == 0 {
                            continue;
                        }
                        // SAFETY: the lanes in `mk` read output columns
                        // inside `0..ow` of tap `(i, j)`'s row `oy` (inside
                        // `rows`, the contract); the others are not read
                        // (the address is formed with wrapping arithmetic).
                        let v = unsafe { _mm512_maskz_loadu_ps(mk, row.wrapping_offset(a)) };
                        acc = _mm512_mask_add_ps(acc, mk, acc, v);
                    }
                }
                // SAFETY: as for the load.
                unsafe { _mm512_mask_storeu_ps(dst, m, acc) };
            }
            xb += width;
        }
    }

    /// The lanes `0..tail` of a 16-lane mask.
    fn mask(tail: usize) -> __mmask16 {
        lanes(0, tail)
    }

    /// [`super::copy`] on raw `f32` pointers: whole 16-value blocks, then
    /// the run's tail under a mask (masked-off lanes are neither read nor
    /// written).
    ///
    /// # Safety
    /// The CPU has AVX-512F; `src + r * s_step` and `dst + r * d_step` are
    /// valid for `len` reads / writes for every `r < count`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn copy(
        src: *const f32,
        s_step: usize,
        dst: *mut f32,
        d_step: usize,
        len: usize,
        count: usize,
    ) {
        let (full, m) = (len / 16 * 16, mask(len % 16));
        for r in 0..count {
            // SAFETY: the caller's contract: `len` values at each run.
            unsafe {
                let (s, d) = (src.add(r * s_step), dst.add(r * d_step));
                let mut k = 0;
                while k < full {
                    _mm512_storeu_ps(d.add(k), _mm512_loadu_ps(s.add(k)));
                    k += 16;
                }
                if m != 0 {
                    _mm512_mask_storeu_ps(d.add(k), m, _mm512_maskz_loadu_ps(m, s.add(k)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

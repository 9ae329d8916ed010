//! Max pooling values without their positions, for inference: when no
//! gradient will flow back (`no_grad`, or an input that is not tracked) the
//! positions are never read, and tracking them costs a select per tap in
//! 64-bit lanes (ResNet-18's stem pooling at batch 32 spent about 16% of the
//! inference forward in the position-tracking kernel).
//!
//! Separable: each input row's maxima over the windows' columns first, then
//! the maxima of those over the windows' rows. Both passes keep the first
//! maximum (or the first NaN) in scan order, rows then columns, so every
//! output has the bits of the one-window-at-a-time scan: the first NaN in
//! row-major order lies in the first row that has one and is that row's
//! first NaN; otherwise the first element equal to the maximum lies in the
//! first row whose maximum equals it and is that row's first.

use super::PoolWindows;
use crate::base::Float;
use std::mem::MaybeUninit;

/// `v` replaced by `x` when the scan would take `x`: greater, or the first
/// NaN. Non-short-circuit operators: no branch on the data.
#[inline(always)]
fn take<E: Float>(v: E, x: E) -> E {
    if (x > v) | (x.is_nan() & !v.is_nan()) {
        x
    } else {
        v
    }
}

/// The maxima of consecutive `h x w` planes of `x` over `win`, into `out`
/// (`oh * ow` slots per plane, every one written); `scratch` holds at least
/// `(h + 1) * ow` elements. An empty window yields its plane's first
/// element, as the scan does. Compiled for AVX2 as well, which runs where
/// the CPU has it (comparisons and selects: the same bits at any width).
pub(super) fn max_planes<E: Float>(
    win: &PoolWindows,
    x: &[E],
    scratch: &mut [E],
    out: &mut [MaybeUninit<E>],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::class::cpu_has!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        unsafe { max_planes_avx2(win, x, scratch, out) };
        return;
    }
    max_planes_base(win, x, scratch, out)
}

/// [`max_planes`] compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn max_planes_avx2<E: Float>(
    win: &PoolWindows,
    x: &[E],
    scratch: &mut [E],
    out: &mut [MaybeUninit<E>],
) {
    max_planes_base(win, x, scratch, out)
}

/// [`max_planes`]' loops, inlined into each compiled version.
#[inline(always)]
fn max_planes_base<E: Float>(
    win: &PoolWindows,
    x: &[E],
    scratch: &mut [E],
    out: &mut [MaybeUninit<E>],
) {
    let (ip, ow) = (win.h * win.w, win.ow());
    let op = win.oh() * ow;
    let [dr, dc] = win.dilation;
    let (rows, acc) = scratch.split_at_mut(win.h * ow);
    let acc = &mut acc[..ow];
    for (plane, out) in x.chunks_exact(ip).zip(out.chunks_exact_mut(op)) {
        // Pass 1: per input row, the maximum over each window's columns.
        for (src, dst) in plane.chunks_exact(win.w).zip(rows.chunks_exact_mut(ow)) {
            for (d, &(c0, c1)) in dst.iter_mut().zip(&win.cols) {
                *d = if c0 < c1 {
                    (c0 + dc..c1)
                        .step_by(dc)
                        .fold(src[c0], |v, c| take(v, src[c]))
                } else {
                    plane[0]
                };
            }
        }
        // Pass 2: per output row, the maximum over the window's rows, a
        // contiguous row of `ow` at a time.
        for (dst, &(r0, r1)) in out.chunks_exact_mut(ow).zip(&win.rows) {
            if r0 >= r1 {
                dst.iter_mut().for_each(|d| _ = d.write(plane[0]));
                continue;
            }
            acc.copy_from_slice(&rows[r0 * ow..(r0 + 1) * ow]);
            for r in (r0 + dr..r1).step_by(dr) {
                for (a, &x) in acc.iter_mut().zip(&rows[r * ow..(r + 1) * ow]) {
                    *a = take(*a, x);
                }
            }
            for ((d, &a), &(c0, c1)) in dst.iter_mut().zip(acc.iter()).zip(&win.cols) {
                d.write(if c0 < c1 { a } else { plane[0] });
            }
        }
    }
}

//! Max pooling vectorised over contiguous output rows: each window's
//! maximum and its position in one pass over the input.
//!
//! For one output row, the columns whose windows are full-width and evenly
//! spaced (every column of a sliding window except the ones clipped by the
//! padding) form a [`Run`]: kernel tap `(r, j)` of output column `t` of the
//! run reads input `(r, c0 + t * step + j * dilation)`. The run's maxima are
//! kept in the output row itself and updated tap by tap, in the order a
//! window is scanned one at a time (rows, then columns), with the
//! comparison the scalar scan uses (`v > best`, or `v` is the first NaN),
//! so each output gets the value and position of the scalar scan, bit for
//! bit. The tap loops are comparisons and selects over contiguous slices,
//! which the compiler vectorises; on x86-64 they are also compiled for
//! AVX2 and AVX-512F and the widest the CPU has runs (selects give the same
//! bits at any width). Without AVX-512, `f32` runs whose windows are 1 or 2
//! apart take AVX2 intrinsics instead (`max_rows/avx2.rs`: 8 outputs per
//! register, `i32` positions, even/odd loads for stride 2), since the
//! compiler's AVX2 code for them was mostly scalar. The clipped columns at
//! the edges, and windows that are not evenly spaced (adaptive bins), take
//! the scalar scan.

use super::PoolWindows;
use crate::base::Float;
#[cfg(target_arch = "x86_64")]
use crate::cpu::same_type::{cast, cast_mut, is};
use std::mem::MaybeUninit;

/// The output columns `lo..hi` whose windows have the full width and start
/// `step` apart, `c0` the first one's start, `taps` the kernel columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) lo: usize,
    pub(super) hi: usize,
    pub(super) c0: usize,
    pub(super) step: usize,
    pub(super) taps: usize,
}

impl Run {
    /// The run of `win`'s columns: the first full-width window and every
    /// following one as long as they stay full-width and evenly spaced.
    /// Empty (`lo == hi`) when no window has positive width.
    pub(super) fn of(win: &PoolWindows) -> Run {
        let d = win.dilation[1];
        let width = |ox: usize| win.cols[ox].1.saturating_sub(win.cols[ox].0);
        let full = (0..win.ow()).map(width).max().unwrap_or(0);
        let lo = (0..win.ow()).find(|&ox| width(ox) == full).unwrap_or(0);
        let mut run = Run {
            lo,
            hi: lo,
            c0: win.cols.get(lo).map_or(0, |c| c.0),
            step: 1,
            taps: (full.max(1) - 1) / d + 1,
        };
        if full == 0 || (full - 1) % d != 0 {
            return run;
        }
        run.hi = lo + 1;
        if lo + 1 < win.ow() && width(lo + 1) == full && win.cols[lo + 1].0 > run.c0 {
            run.step = win.cols[lo + 1].0 - run.c0;
            while run.hi < win.ow()
                && width(run.hi) == full
                && win.cols[run.hi].0 == run.c0 + (run.hi - lo) * run.step
            {
                run.hi += 1;
            }
        }
        run
    }
}

/// `(best, position)` of one window scanned one element at a time (rows,
/// then columns; the first maximum, or the first NaN); `(plane[0], 0)` for
/// an empty window.
fn scan<E: Float>(
    win: &PoolWindows,
    plane: &[E],
    rows: (usize, usize),
    cols: (usize, usize),
) -> (E, usize) {
    let [dr, dc] = win.dilation;
    let ((r0, r1), (c0, c1)) = (rows, cols);
    if r0 >= r1 || c0 >= c1 {
        return (plane[0], 0);
    }
    let mut best = r0 * win.w + c0;
    let mut bv = plane[best];
    for r in (r0..r1).step_by(dr) {
        let row = &plane[r * win.w..(r + 1) * win.w];
        for c in (c0..c1).step_by(dc) {
            let v = row[c];
            if v > bv || (v.is_nan() && !bv.is_nan()) {
                (best, bv) = (r * win.w + c, v);
            }
        }
    }
    (bv, best)
}

/// Takes `x` (at position `at`) into `(v, i)` when it beats `v` as the
/// scalar scan decides: greater, or the first NaN.
#[inline(always)]
fn take<E: Float>(x: E, at: usize, v: &mut E, i: &mut usize) {
    // Non-short-circuit operators: no branch on the data.
    let t = (x > *v) | (x.is_nan() & !v.is_nan());
    *v = if t { x } else { *v };
    *i = if t { at } else { *i };
}

/// Lanes per block of the run loops: a block's running maxima and their positions are
/// fixed-size arrays that stay in vector registers while every tap of the
/// windows passes over them (a 14-wide output row, LeNet's, would
/// otherwise run entirely in the scalar tail of a 16-lane loop).
const LANES: usize = 16;

/// Per-chunk work space of [`max_planes`]: one input row segment of the
/// run, padded with -inf to whole blocks, for the last rows of the input
/// (elsewhere the padding lanes read the input past the row: their values
/// are never written out).
pub(super) struct Scratch<E> {
    row: Vec<E>,
}

impl<E: Float> Scratch<E> {
    /// Space for `run` over windows `win`.
    pub(super) fn new(win: &PoolWindows, run: &Run) -> Self {
        let n = (run.hi - run.lo).div_ceil(LANES) * LANES;
        let span = (run.taps - 1) * win.dilation[1] + 1;
        let len = if n == 0 { 0 } else { (n - 1) * run.step + span };
        Scratch {
            row: vec![E::neg_infinity(); len],
        }
    }
}

/// One tap over a block: lane `l` meets `seg[l * STEP]` (`STEP` 0 means
/// the runtime `step`), at position `at` (relative to its window's start).
#[inline(always)]
fn tap<E: Float, const L: usize, const STEP: usize>(
    seg: &[E],
    step: usize,
    at: usize,
    v: &mut [E; L],
    i: &mut [usize; L],
) {
    let step = if STEP == 0 { step } else { STEP };
    let seg = &seg[..(L - 1) * step + 1];
    for l in 0..L {
        take(seg[l * step], at, &mut v[l], &mut i[l]);
    }
}

/// Contiguous windows (`step == taps`, undilated): one window row of a
/// block, the `TAPS` (0: runtime `taps`) columns of each window in order.
#[inline(always)]
fn row_pass<E: Float, const L: usize, const TAPS: usize>(
    seg: &[E],
    taps: usize,
    at: usize,
    v: &mut [E; L],
    i: &mut [usize; L],
) {
    let k = if TAPS == 0 { taps } else { TAPS };
    let seg = &seg[..L * k];
    for l in 0..L {
        for j in 0..k {
            take(seg[l * k + j], at + j, &mut v[l], &mut i[l]);
        }
    }
}

/// Values and positions of the run of one output row whose window rows are
/// `rows` (non-empty), written to `vals` and `idx` (the run's outputs).
/// `plane` starts at the plane and runs to the end of the input.
///
/// With `AVX2` (set only inside code compiled for AVX2), `f32` runs of
/// step 1 or 2 take the intrinsics of `avx2.rs` instead, with the same bits.
#[inline(always)]
fn run_row<E: Float, const L: usize, const AVX2: bool>(
    win: &PoolWindows,
    run: &Run,
    plane: &[E],
    rows: (usize, usize),
    sc: &mut Scratch<E>,
    vals: &mut [MaybeUninit<E>],
    idx: &mut [MaybeUninit<usize>],
) {
    #[cfg(target_arch = "x86_64")]
    if AVX2
        && (run.step == 1 || run.step == 2)
        && win.h * win.w <= i32::MAX as usize
        && let (Some(p), Some(s), Some(v)) =
            (cast(plane), cast_mut(&mut sc.row[..]), cast_mut(vals))
    {
        let g = avx2::RunGeom {
            w: win.w,
            dilation: win.dilation,
            c0: run.c0,
            step: run.step,
            taps: run.taps,
        };
        // SAFETY: `AVX2` is set only in code compiled for AVX2, which
        // runs only on CPUs that have it; a plane's positions fit
        // `i32` (checked just above).
        unsafe { avx2::run_row(&g, p, rows, s, v, idx) };
        return;
    }
    let (w, [dr, d]) = (win.w, win.dilation);
    let contiguous = d == 1 && run.step == run.taps;
    let (len, n) = (sc.row.len(), vals.len());
    for b in 0..n.div_ceil(L) {
        // Start from -inf at the window's first position: the first
        // element then wins exactly when the scalar scan keeps it.
        let mut v = [E::neg_infinity(); L];
        let mut i = [rows.0 * w; L];
        let off = b * L * run.step;
        for r in (rows.0..rows.1).step_by(dr) {
            let at = r * w + run.c0;
            let row = if at + len <= plane.len() {
                &plane[at..at + len]
            } else {
                let m = len.min(w - run.c0);
                sc.row[..m].copy_from_slice(&plane[at..at + m]);
                &sc.row[..]
            };
            let seg = &row[off..];
            if contiguous {
                match run.taps {
                    2 => row_pass::<E, L, 2>(seg, 2, r * w, &mut v, &mut i),
                    3 => row_pass::<E, L, 3>(seg, 3, r * w, &mut v, &mut i),
                    k => row_pass::<E, L, 0>(seg, k, r * w, &mut v, &mut i),
                }
                continue;
            }
            for j in 0..run.taps {
                let (seg, at) = (&seg[j * d..], r * w + j * d);
                match run.step {
                    1 => tap::<E, L, 1>(seg, 1, at, &mut v, &mut i),
                    2 => tap::<E, L, 2>(seg, 2, at, &mut v, &mut i),
                    s => tap::<E, L, 0>(seg, s, at, &mut v, &mut i),
                }
            }
        }
        let t0 = b * L;
        let m = (n - t0).min(L);
        for (l, (vo, io)) in vals[t0..t0 + m]
            .iter_mut()
            .zip(&mut idx[t0..t0 + m])
            .enumerate()
        {
            vo.write(v[l]);
            io.write(i[l] + run.c0 + (t0 + l) * run.step);
        }
    }
}

/// Values and positions of every output of `vals.len() / out_plane` planes
/// of `x` from plane `first` on (`vals`, `idx`: their output planes, every
/// element written).
#[inline(always)]
fn planes_base<E: Float, const AVX2: bool>(
    win: &PoolWindows,
    run: &Run,
    sc: &mut Scratch<E>,
    x: &[E],
    first: usize,
    vals: &mut [MaybeUninit<E>],
    idx: &mut [MaybeUninit<usize>],
) {
    let (ow, ip) = (win.ow(), win.h * win.w);
    let op = win.oh() * ow;
    for (p, (vals, idx)) in vals.chunks_mut(op).zip(idx.chunks_mut(op)).enumerate() {
        let plane = &x[(first + p) * ip..];
        for (oy, &rows) in win.rows.iter().enumerate() {
            let (vr, ir) = (
                &mut vals[oy * ow..(oy + 1) * ow],
                &mut idx[oy * ow..(oy + 1) * ow],
            );
            let (lo, hi) = if rows.0 < rows.1 {
                (run.lo, run.hi)
            } else {
                (0, 0)
            };
            for ox in (0..lo).chain(hi..ow) {
                let (v, i) = scan(win, plane, rows, win.cols[ox]);
                vr[ox].write(v);
                ir[ox].write(i);
            }
            if lo < hi {
                run_row::<E, LANES, AVX2>(
                    win,
                    run,
                    plane,
                    rows,
                    sc,
                    &mut vr[lo..hi],
                    &mut ir[lo..hi],
                );
            }
        }
    }
}

/// [`planes_base`] with the AVX2 `f32` run intrinsics where the CPU has
/// AVX2, also on CPUs with AVX-512F: there the generic loop compiled for
/// AVX-512F was 8.6x slower than the intrinsics (ResNet-18's 3x3 stride-2
/// pool of `[16, 64, 16, 16]`: 3.7 ms against 0.43 ms on one thread of the
/// benchmark machine), since its stride-2 taps vectorise as gathers.
pub(super) fn max_planes<E: Float>(
    win: &PoolWindows,
    run: &Run,
    sc: &mut Scratch<E>,
    x: &[E],
    first: usize,
    vals: &mut [MaybeUninit<E>],
    idx: &mut [MaybeUninit<usize>],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::class::cpu_has!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        unsafe { wide::planes_avx2(win, run, sc, x, first, vals, idx) };
        return;
    }
    planes_base::<E, false>(win, run, sc, x, first, vals, idx)
}

/// Whether [`max_planes`] runs the AVX2 `f32` run intrinsics for `win`
/// (`E` is `f32`, the CPU has AVX2, the run's windows are
/// 1 or 2 apart and a plane's positions fit `i32`): there they beat the
/// separable values-only kernel, which `max_values` then leaves aside.
pub(super) fn avx2_runs<E: Float>(win: &PoolWindows, run: &Run) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::cpu::class::cpu_has as has;
        is::<E, f32>()
            && run.lo < run.hi
            && (run.step == 1 || run.step == 2)
            && win.h * win.w <= i32::MAX as usize
            && has!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (win, run);
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;

/// [`planes_base`] compiled for AVX2 (x86-64): comparisons and selects
/// only, so it computes the baseline's bits.
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::{planes_base, PoolWindows, Run, Scratch};
    use crate::base::Float;
    use std::mem::MaybeUninit;

    /// [`planes_base`] compiled for AVX2, with the `f32` run intrinsics.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn planes_avx2<E: Float>(
        win: &PoolWindows,
        run: &Run,
        sc: &mut Scratch<E>,
        x: &[E],
        first: usize,
        vals: &mut [MaybeUninit<E>],
        idx: &mut [MaybeUninit<usize>],
    ) {
        planes_base::<E, true>(win, run, sc, x, first, vals, idx)
    }
}

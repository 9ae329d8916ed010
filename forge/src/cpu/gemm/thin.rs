//! The thin gemm kernels: a matrix-vector product (row axpys or column
//! dot products) and the narrow `n <= 16` product against one packed
//! 16-wide panel (see the parent module for when each runs). The f32
//! column dots also have intrinsic versions for AVX-512F and for AVX2 +
//! FMA, with the generic loop's partial sums, reduction and tail (so its
//! bits).

use super::{Mat, LANES};
use crate::base::Float;

/// `out = acc + beta out`, reading `out` only when `beta` is not zero (as
/// `matrixmultiply`, so an uninitialised-looking NaN is overwritten).
#[inline(always)]
fn store<E: Float>(out: &mut E, acc: E, beta: E) {
    *out = if beta == E::zero() {
        acc
    } else {
        *out * beta + acc
    };
}

// ---- Thin kernels -----------------------------------------------------------
// Each is a plain generic loop over fixed 16-lane arrays, instantiated inside
// functions compiled for AVX-512 or AVX2+FMA (chosen at run time) so that the
// arrays become vector registers and `mul_add` a fused multiply-add. The
// arithmetic is the same in every instantiation (`mul_add` is always fused),
// so the path taken never changes a result.

/// Defines `$name`, which runs `$generic` compiled for the widest
/// instruction set the CPU has (AVX-512, else AVX2 + FMA, else the target's
/// baseline), with `R` rows (or columns) per register block.
macro_rules! simd_dispatch {
    ($name:ident => $generic:ident ($($arg:ident : $ty:ty),*)) => {
        #[allow(clippy::too_many_arguments)]
        pub(super) fn $name<E: Float>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn wide<E: Float>($($arg: $ty),*) {
                    $generic::<E, 8>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx2<E: Float>($($arg: $ty),*) {
                    $generic::<E, 4>($($arg),*)
                }
                if crate::cpu::class::cpu_has!("avx512f") {
                    // SAFETY: the CPU has every feature `wide` is compiled for.
                    return unsafe { wide::<E>($($arg),*) };
                }
                if crate::cpu::class::cpu_has!("avx2")
                    && crate::cpu::class::cpu_has!("fma")
                {
                    // SAFETY: the CPU has every feature `avx2` is compiled for.
                    return unsafe { avx2::<E>($($arg),*) };
                }
            }
            $generic::<E, 4>($($arg),*)
        }
    };
}

simd_dispatch!(gemv_rows_simd => gemv_rows(k: usize, len: usize, x: Mat<E>, w: Mat<E>, beta: E, out: &mut [E]));
simd_dispatch!(gemv_dots_simd => gemv_dots(k: usize, len: usize, x: Mat<E>, w: Mat<E>, beta: E, out: &mut [E]));
simd_dispatch!(narrow => narrow_rows(rows: usize, k: usize, n: usize, a: Mat<E>, panel: &[E], beta: E, out: &mut [E]));

/// `out[j] = sum_p x[p] w[p, j] + beta out[j]` for `j < len`.
pub(super) fn gemv<E: Float>(k: usize, len: usize, x: Mat<E>, w: Mat<E>, beta: E, out: &mut [E]) {
    if w.cs == 1 {
        gemv_rows_simd(k, len, x, w, beta, out)
    } else if w.rs == 1 {
        #[cfg(target_arch = "x86_64")]
        if std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>()
            && x.cs == 1
            && let Some(dots) = dots_f32()
        {
            assert!(x.data.len() >= k && out.len() >= len);
            assert!(len == 0 || w.data.len() >= (len - 1) * w.cs + k);
            // SAFETY: `E` is `f32` (checked above), so these are the
            // same slices and value under their own type.
            let (xf, wf, of, bf) = unsafe {
                (
                    std::slice::from_raw_parts(x.data.as_ptr() as *const f32, k),
                    std::slice::from_raw_parts(w.data.as_ptr() as *const f32, w.data.len()),
                    std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, len),
                    *(&beta as *const E as *const f32),
                )
            };
            // SAFETY: `dots_f32` chose a kernel this CPU has the
            // features of; the extents are asserted above.
            unsafe { dots(k, len, xf, wf, w.cs, bf, of) };
            return;
        }
        gemv_dots_simd(k, len, x, w, beta, out)
    } else {
        // neither rows nor columns contiguous: a plain loop in the same
        // order as `gemv_rows`
        for (j, o) in out[..len].iter_mut().enumerate() {
            let mut s = E::zero();
            for p in 0..k {
                s = x.data[p * x.cs].mul_add(w.data[p * w.rs + j * w.cs], s);
            }
            store(o, s, beta);
        }
    }
}

/// `gemv` when the rows of `w` are contiguous: `acc += x[p] * w[p, ..]`,
/// 4 x 16 columns at a time, each column summed in increasing `p`.
#[inline(always)]
pub(super) fn gemv_rows<E: Float, const R: usize>(
    k: usize,
    len: usize,
    x: Mat<E>,
    w: Mat<E>,
    beta: E,
    out: &mut [E],
) {
    const S: usize = 4 * LANES;
    let mut j = 0;
    while j + S <= len {
        let mut acc = [E::zero(); S];
        for p in 0..k {
            let xv = x.data[p * x.cs];
            let row: &[E; S] = w.data[p * w.rs + j..p * w.rs + j + S]
                .try_into()
                .expect("S elements");
            for l in 0..S {
                acc[l] = xv.mul_add(row[l], acc[l]);
            }
        }
        for (o, &v) in out[j..j + S].iter_mut().zip(&acc) {
            store(o, v, beta);
        }
        j += S;
    }
    for (jj, o) in out[j..len].iter_mut().enumerate() {
        let mut s = E::zero();
        for p in 0..k {
            s = x.data[p * x.cs].mul_add(w.data[p * w.rs + j + jj], s);
        }
        store(o, s, beta);
    }
}

/// A dot product's end: the 16 partial sums added pairwise (lane `l` with
/// `l + 8`, then `+ 4`, `+ 2`, `+ 1`), then the products past `kk` in order.
#[inline(always)]
fn finish_dot<E: Float>(acc: &[E; LANES], x: &[E], col: &[E], kk: usize) -> E {
    let mut h = *acc;
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            h[l] += h[l + width];
        }
        width /= 2;
    }
    let mut s = h[0];
    for p in kk..x.len() {
        s = x[p].mul_add(col[p], s);
    }
    s
}

/// A column-dots kernel for f32: `(k, len, x, w, ldw, beta, out)`.
#[cfg(target_arch = "x86_64")]
pub(super) type DotsF32 = unsafe fn(usize, usize, &[f32], &[f32], usize, f32, &mut [f32]);

/// The f32 column-dots kernel for this CPU: AVX-512F, else AVX2 + FMA;
/// `None` without either (then the generic [`gemv_dots`] runs).
#[cfg(target_arch = "x86_64")]
fn dots_f32() -> Option<DotsF32> {
    if crate::cpu::class::cpu_has!("avx512f") {
        Some(dots_f32_avx512)
    } else if crate::cpu::class::cpu_has!("avx2") && crate::cpu::class::cpu_has!("fma") {
        Some(dots_f32_avx2)
    } else {
        None
    }
}

/// `gemv_dots` for f32 with AVX-512 intrinsics (the generic loop does not
/// vectorise well): the same partial sums, reduction and tail, so the same
/// bits.
///
/// # Safety
/// The CPU must support AVX-512F; `x` has `k` elements, column `j < len` of
/// `w` is `w[j * ldw..j * ldw + k]`, `out` has `len` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn dots_f32_avx512(
    k: usize,
    len: usize,
    x: &[f32],
    w: &[f32],
    ldw: usize,
    beta: f32,
    out: &mut [f32],
) {
    use std::arch::x86_64::{
        _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_setzero_ps, _mm512_storeu_ps,
    };
    let kk = k / LANES * LANES;
    let (xp, wp) = (x.as_ptr(), w.as_ptr());
    let mut j = 0;
    while j < len {
        let nb = 4.min(len - j);
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut p = 0;
        while p < kk {
            // SAFETY: `p + 16 <= kk <= k`: inside `x` and every column.
            unsafe {
                let xv = _mm512_loadu_ps(xp.add(p));
                for (b, a) in acc.iter_mut().enumerate().take(nb) {
                    *a = _mm512_fmadd_ps(xv, _mm512_loadu_ps(wp.add((j + b) * ldw + p)), *a);
                }
            }
            p += LANES;
        }
        for (b, a) in acc.iter().enumerate().take(nb) {
            let mut lanes = [0f32; LANES];
            // SAFETY: `lanes` holds 16 floats.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), *a) };
            let col = &w[(j + b) * ldw..(j + b) * ldw + k];
            store(&mut out[j + b], finish_dot(&lanes, x, col, kk), beta);
        }
        j += nb;
    }
}

/// [`dots_f32_avx512`] with AVX2 + FMA, for CPUs without AVX-512: each
/// column's 16 partial sums (lane `l` takes `p = l mod 16`) are two 8-lane
/// halves, accumulated in the same order with fused multiply-adds, then
/// the same reduction and tail, so the bits are `gemv_dots`' (and the
/// AVX-512 kernel's).
///
/// # Safety
/// The CPU must support AVX2 and FMA; `x` has `k` elements, column
/// `j < len` of `w` is `w[j * ldw..j * ldw + k]`, `out` has `len`
/// elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dots_f32_avx2(
    k: usize,
    len: usize,
    x: &[f32],
    w: &[f32],
    ldw: usize,
    beta: f32,
    out: &mut [f32],
) {
    use std::arch::x86_64::{
        _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    assert!(x.len() >= k && out.len() >= len);
    assert!(len == 0 || w.len() >= (len - 1) * ldw + k);
    let kk = k / LANES * LANES;
    let (xp, wp) = (x.as_ptr(), w.as_ptr());
    let mut j = 0;
    while j < len {
        let nb = 4.min(len - j);
        let mut acc = [[_mm256_setzero_ps(); 2]; 4];
        let mut p = 0;
        while p < kk {
            // SAFETY: `p + 16 <= kk <= k`: inside `x` and every column
            // (asserted).
            unsafe {
                let x0 = _mm256_loadu_ps(xp.add(p));
                let x1 = _mm256_loadu_ps(xp.add(p + 8));
                for (b, a) in acc.iter_mut().enumerate().take(nb) {
                    let col = wp.add((j + b) * ldw + p);
                    a[0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(col), a[0]);
                    a[1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(col.add(8)), a[1]);
                }
            }
            p += LANES;
        }
        for (b, a) in acc.iter().enumerate().take(nb) {
            let mut lanes = [0f32; LANES];
            // SAFETY: `lanes` holds 16 floats.
            unsafe {
                _mm256_storeu_ps(lanes.as_mut_ptr(), a[0]);
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8), a[1]);
            }
            let col = &w[(j + b) * ldw..(j + b) * ldw + k];
            store(&mut out[j + b], finish_dot(&lanes, x, col, kk), beta);
        }
        j += nb;
    }
}

/// `acc[l] += x[l] y[l]`, fused, lane by lane.
#[inline(always)]
fn fma_lanes<E: Float>(acc: &mut [E; LANES], x: &[E; LANES], y: &[E; LANES]) {
    for l in 0..LANES {
        acc[l] = x[l].mul_add(y[l], acc[l]);
    }
}

/// `gemv` when the columns of `w` are contiguous: dot products of `x` with
/// columns of `w`, four at a time, in 16 partial sums (lane `l` takes
/// `p = l mod 16`) added pairwise at the end, then the tail of `k`.
#[inline(always)]
pub(super) fn gemv_dots<E: Float, const R: usize>(
    k: usize,
    len: usize,
    x: Mat<E>,
    w: Mat<E>,
    beta: E,
    out: &mut [E],
) {
    let xs: Vec<E>;
    let x: &[E] = if x.cs == 1 {
        &x.data[..k]
    } else {
        xs = (0..k).map(|p| x.data[p * x.cs]).collect();
        &xs
    };
    assert!(len == 0 || w.data.len() >= (len - 1) * w.cs + k && out.len() >= len);
    let kk = k / LANES * LANES;
    let (xp, wp) = (x.as_ptr(), w.data.as_ptr());
    // SAFETY (every block below): column `j < len` of `w` is
    // `wp[j * w.cs..j * w.cs + k]` and `x` has `k` elements, both checked
    // above; loads are at `p + l < kk <= k`.
    const B: usize = 4;
    let mut j = 0;
    while j + B <= len {
        let mut acc = [[E::zero(); LANES]; B];
        let mut p = 0;
        while p < kk {
            // SAFETY: see above.
            let (xv, c0, c1, c2, c3) = unsafe {
                let col = |b: usize| &*(wp.add((j + b) * w.cs + p) as *const [E; LANES]);
                (
                    &*(xp.add(p) as *const [E; LANES]),
                    col(0),
                    col(1),
                    col(2),
                    col(3),
                )
            };
            let [a0, a1, a2, a3] = &mut acc;
            fma_lanes(a0, xv, c0);
            fma_lanes(a1, xv, c1);
            fma_lanes(a2, xv, c2);
            fma_lanes(a3, xv, c3);
            p += LANES;
        }
        for (b, ab) in acc.iter().enumerate() {
            // (`finish_dot` called directly, not from a closure: a closure
            // is compiled without the caller's FMA, and its tail's
            // `mul_add` would be a call to `fmaf`)
            let col = &w.data[(j + b) * w.cs..(j + b) * w.cs + k];
            store(&mut out[j + b], finish_dot(ab, x, col, kk), beta);
        }
        j += B;
    }
    while j < len {
        let mut acc = [E::zero(); LANES];
        let mut p = 0;
        while p < kk {
            // SAFETY: see above.
            let (xv, cv) = unsafe {
                (
                    &*(xp.add(p) as *const [E; LANES]),
                    &*(wp.add(j * w.cs + p) as *const [E; LANES]),
                )
            };
            fma_lanes(&mut acc, xv, cv);
            p += LANES;
        }
        let col = &w.data[j * w.cs..j * w.cs + k];
        store(&mut out[j], finish_dot(&acc, x, col, kk), beta);
        j += 1;
    }
}

/// `out (rows x n) = a panel + beta out` where `panel` is `b` packed as
/// `k` rows of 16 (zero-padded past `n`), in blocks of `R` rows: each step
/// broadcasts `a[i, p]` against panel row `p`, so every output sums its
/// products in increasing `p`.
#[inline(always)]
pub(super) fn narrow_rows<E: Float, const R: usize>(
    rows: usize,
    k: usize,
    n: usize,
    a: Mat<E>,
    panel: &[E],
    beta: E,
    out: &mut [E],
) {
    assert!(rows == 0 || k == 0 || a.data.len() > (rows - 1) * a.rs + (k - 1) * a.cs);
    assert!(panel.len() >= k * LANES && out.len() >= rows * n && n <= LANES);
    let (ap, pp) = (a.data.as_ptr(), panel.as_ptr());
    let (rs, cs) = (a.rs, a.cs);
    let mut i = 0;
    while i < rows {
        let nr = R.min(rows - i);
        let mut acc = [[E::zero(); LANES]; R];
        if nr == R {
            // SAFETY: the extents of `a` and `panel` are asserted above
            // and `i + R <= rows`.
            unsafe { narrow_block::<E, R>(ap, rs, cs, pp, k, i, &mut acc, R) };
        } else {
            // the last rows one at a time: the same sums in the same order
            for (r, ar) in acc.iter_mut().enumerate().take(nr) {
                let mut one = [[E::zero(); LANES]; R];
                // SAFETY: as above, row `i + r < rows`.
                unsafe { narrow_block::<E, R>(ap, rs, cs, pp, k, i + r, &mut one, 1) };
                *ar = one[0];
            }
        }
        for (r, ar) in acc.iter().enumerate().take(nr) {
            for (o, &v) in out[(i + r) * n..(i + r + 1) * n].iter_mut().zip(ar) {
                store(o, v, beta);
            }
        }
        i += nr;
    }
}

/// One block of `nr <= R` rows of [`narrow_rows`], starting at row `i`.
/// A function forced inline rather than a closure: a closure that is not
/// inlined is compiled without its caller's target features, and its
/// `mul_add` became a call to `fmaf` per element (0.4 GFLOP/s on an AVX2
/// CPU).
///
/// # Safety
/// Panel row `p < k` is `pp[p * 16..p * 16 + 16]`; `a[i + r, p]` for
/// `r < nr`, `p < k` is `ap[(i + r) * rs + p * cs]`, all in bounds.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn narrow_block<E: Float, const R: usize>(
    ap: *const E,
    rs: usize,
    cs: usize,
    pp: *const E,
    k: usize,
    i: usize,
    acc: &mut [[E; LANES]; R],
    nr: usize,
) {
    for p in 0..k {
        // SAFETY: guaranteed by the caller.
        let prow = unsafe { &*(pp.add(p * LANES) as *const [E; LANES]) };
        for (r, ar) in acc.iter_mut().enumerate().take(nr) {
            // SAFETY: guaranteed by the caller.
            let av = unsafe { *ap.add((i + r) * rs + p * cs) };
            for l in 0..LANES {
                ar[l] = av.mul_add(prow[l], ar[l]);
            }
        }
    }
}

//! The elementwise loops every unary, binary and scalar op runs: one pass
//! over contiguous slices into a pooled [`Storage`], written as plain loops
//! the compiler vectorises, split into fixed chunks of [`CHUNK`] elements
//! over the worker threads when the slice is at least [`PAR_MIN`] long.
//!
//! Each output element depends only on the inputs at its own index, so the
//! results are the same whatever the split.
//!
//! **Vector width.** The crate is compiled for the target's baseline
//! (SSE2's 4 lanes on x86-64). Each chunk's loop runs through [`widest`],
//! which compiles it again for AVX2 and for AVX-512F and picks the widest
//! the CPU class in force allows (`crate::cpu::class`): the same scalar
//! IEEE operations per element in the same order (Rust never fuses a
//! multiply and an add, nor reorders float arithmetic), so the same bits in
//! every class; only the number of lanes per instruction changes.

use super::memory::Storage;
use super::threads::{num_threads, parallel_for};
use std::mem::MaybeUninit;

/// Elements per parallel chunk (fixed: it does not depend on the thread
/// count).
pub const CHUNK: usize = 1 << 14;

/// Slices shorter than this run on the calling thread: dispatch would cost
/// more than it saves.
pub const PAR_MIN: usize = 1 << 16;

/// Runs `body` compiled for the widest vector instructions the CPU class in
/// force allows: AVX-512F, else AVX2, else the build's baseline. `body`
/// should be a closure marked `#[inline(always)]` whose loops are inlined
/// into it (`#[inline(always)]` helpers, closures called once), so that
/// they are compiled inside the wider function; anything left out of line
/// runs at the baseline width (still the same bits).
///
/// The same bits in every class: the wider copies run the same scalar
/// operations per element in the same order (no fused multiply-add is
/// formed, no float arithmetic reassociated); a reduction keeps the lanes
/// its code spells out (`lane_sum`'s eight partial sums stay eight).
/// Example: `examples::widest` below.
#[inline(always)]
pub(crate) fn widest<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if super::class::cpu_has!("avx512f") {
            // SAFETY: the CPU has AVX-512F and the class in force allows it
            // (checked just above).
            return unsafe { wide::avx512(body) };
        }
        if super::class::cpu_has!("avx2") {
            // SAFETY: the CPU has AVX2 and the class in force allows it
            // (checked just above).
            return unsafe { wide::avx2(body) };
        }
    }
    body()
}

/// The wider copies of [`widest`]'s body (x86-64).
#[cfg(target_arch = "x86_64")]
mod wide {
    #[target_feature(enable = "avx512f")]
    pub(super) fn avx512<R, F: FnOnce() -> R>(body: F) -> R {
        body()
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn avx2<R, F: FnOnce() -> R>(body: F) -> R {
        body()
    }
}

/// A raw output pointer shared by the chunks of one parallel loop.
#[derive(Clone, Copy)]
struct Out<T>(*mut MaybeUninit<T>);

// SAFETY: each chunk writes a disjoint range through the pointer (chunk `i`
// owns `i * CHUNK .. min((i + 1) * CHUNK, n)`), and the buffer outlives the
// loop, so sharing the pointer between threads is sound.
unsafe impl<T: Send> Send for Out<T> {}
// SAFETY: as above; the pointer itself is never written.
unsafe impl<T: Send> Sync for Out<T> {}

impl<T> Out<T> {
    /// The `i`-th chunk of an `n`-element output.
    ///
    /// # Safety
    /// The pointer spans `n` elements, and no other live reference covers
    /// this chunk.
    #[allow(clippy::mut_from_ref)]
    unsafe fn chunk(&self, i: usize, n: usize) -> &mut [MaybeUninit<T>] {
        // SAFETY: the caller's contract.
        unsafe { self.chunk_of(i, n, CHUNK) }
    }

    /// The `i`-th chunk of `chunk_len` elements of an `n`-element output.
    ///
    /// # Safety
    /// As [`Out::chunk`].
    #[allow(clippy::mut_from_ref)]
    unsafe fn chunk_of(&self, i: usize, n: usize, chunk_len: usize) -> &mut [MaybeUninit<T>] {
        let start = i * chunk_len;
        let len = chunk_len.min(n - start);
        // SAFETY: `start + len <= n` and the chunk is exclusively ours
        // (caller's contract).
        unsafe { std::slice::from_raw_parts_mut(self.0.add(start), len) }
    }
}

/// Fills a fresh `n`-element storage by `fill(offset, out_chunk)`, one call
/// per fixed chunk, in parallel when `n >= PAR_MIN`, each call at the
/// widest vector width ([`widest`]). `fill` must write every element of
/// the chunk it is given.
fn build<T: Copy + Send>(
    n: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<T>]) + Sync,
) -> Storage<T> {
    build_in(n, CHUNK, fill)
}

/// [`build`] with chunks of `chunk_len` elements (a kernel that needs
/// whole rows picks a multiple of its row length; the single inline call
/// gets the whole output).
pub(crate) fn build_in<T: Copy + Send>(
    n: usize,
    chunk_len: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<T>]) + Sync,
) -> Storage<T> {
    let mut s = Storage::with_capacity(n);
    let spare = &mut s.spare_capacity_mut()[..n];
    if n < PAR_MIN || num_threads() == 1 || chunk_len == 0 || chunk_len >= n {
        widest(
            #[inline(always)]
            || fill(0, spare),
        );
    } else {
        let out = Out(spare.as_mut_ptr());
        parallel_for(n.div_ceil(chunk_len), |i| {
            // SAFETY: chunk `i` is written by this call alone, and `spare`
            // spans `n` elements for the whole loop.
            let chunk = unsafe { out.chunk_of(i, n, chunk_len) };
            widest(
                #[inline(always)]
                || fill(i * chunk_len, chunk),
            )
        });
    }
    // SAFETY: every caller's `fill` writes each element of its chunk, and
    // the chunks (or the single inline call) cover `0..n`.
    unsafe { s.set_len(n) };
    s
}

/// `out[i] = f(a[i])`, into a pooled buffer.
#[inline]
pub fn map<A: Copy + Sync, B: Copy + Send>(a: &[A], f: impl Fn(A) -> B + Sync) -> Storage<B> {
    build(
        a.len(),
        #[inline(always)]
        |off, out| {
            let src = &a[off..off + out.len()];
            for (o, &x) in out.iter_mut().zip(src) {
                o.write(f(x));
            }
        },
    )
}

/// `out[i] = f(a[i], b[i])` for equal-length slices, into a pooled buffer.
///
/// # Panics
/// When the lengths differ.
#[inline]
pub fn zip<A: Copy + Sync, B: Copy + Sync, C: Copy + Send>(
    a: &[A],
    b: &[B],
    f: impl Fn(A, B) -> C + Sync,
) -> Storage<C> {
    assert_eq!(a.len(), b.len(), "zip: length mismatch");
    build(
        a.len(),
        #[inline(always)]
        |off, out| {
            let end = off + out.len();
            for ((o, &x), &y) in out.iter_mut().zip(&a[off..end]).zip(&b[off..end]) {
                o.write(f(x, y));
            }
        },
    )
}

/// `out[r * cols + j] = f(a[r * cols + j], row[j])`: a matrix of `cols`
/// columns combined with one row broadcast down it (a bias).
///
/// # Panics
/// When `a.len()` is not a multiple of `row.len()`.
#[inline]
pub fn zip_rows<A: Copy + Sync, B: Copy + Sync, C: Copy + Send>(
    a: &[A],
    row: &[B],
    f: impl Fn(A, B) -> C + Sync,
) -> Storage<C> {
    let cols = row.len();
    assert!(
        a.len().is_multiple_of(cols),
        "zip_rows: {} elements are not rows of {cols}",
        a.len()
    );
    if a.is_empty() {
        return Storage::with_capacity(0);
    }
    build(
        a.len(),
        #[inline(always)]
        |off, out| {
            let src = &a[off..off + out.len()];
            // Walk whole rows after the first partial one; the inner loops
            // are contiguous on both sides.
            let mut j = off % cols;
            let mut k = 0;
            while k < out.len() {
                let len = (cols - j).min(out.len() - k);
                for ((o, &x), &y) in out[k..k + len]
                    .iter_mut()
                    .zip(&src[k..k + len])
                    .zip(&row[j..j + len])
                {
                    o.write(f(x, y));
                }
                k += len;
                j = 0;
            }
        },
    )
}

/// `out[r * cols + j] = f(a[r * cols + j], col[r])`: each row combined with
/// one value of a column (a per-row scale or shift).
///
/// # Panics
/// When `a.len()` differs from `col.len() * cols`.
#[inline]
pub fn zip_cols<A: Copy + Sync, B: Copy + Sync, C: Copy + Send>(
    a: &[A],
    col: &[B],
    cols: usize,
    f: impl Fn(A, B) -> C + Sync,
) -> Storage<C> {
    assert_eq!(a.len(), col.len() * cols, "zip_cols: shape mismatch");
    if a.is_empty() {
        return Storage::with_capacity(0);
    }
    build(
        a.len(),
        #[inline(always)]
        |off, out| {
            let src = &a[off..off + out.len()];
            let mut k = 0;
            while k < out.len() {
                let r = (off + k) / cols;
                let len = (cols - (off + k) % cols).min(out.len() - k);
                let y = col[r];
                for (o, &x) in out[k..k + len].iter_mut().zip(&src[k..k + len]) {
                    o.write(f(x, y));
                }
                k += len;
            }
        },
    )
}

/// A copy of `a` transformed in place by the slice kernel `f` (a
/// [`vmath`](super::vmath) function), one call per fixed chunk of
/// [`CHUNK`] elements, in parallel when `a` has at least [`PAR_MIN`]
/// (with one thread, or below that, one call on the whole copy). `f` must
/// compute each element from the element at the same index only, as the
/// vector-math kernels do, so the split never changes a bit.
#[inline]
pub fn map_slices<T: Copy + Send + Sync>(a: &[T], f: impl Fn(&mut [T]) + Sync) -> Storage<T> {
    build(
        a.len(),
        #[inline(always)]
        |off, out| f(copy_init(out, &a[off..off + out.len()])),
    )
}

/// A copy of `a` transformed in place by the two-slice kernel `f(z, out)`
/// (a vector-math gradient such as `gelu_grad(x, g)`), with `z` cut at the
/// same fixed chunks as the copy (see [`map_slices`]); `f` must pair
/// elements by index only.
///
/// # Panics
/// When the lengths differ.
#[inline]
pub fn zip_slices<T: Copy + Send + Sync, U: Sync>(
    z: &[U],
    a: &[T],
    f: impl Fn(&[U], &mut [T]) + Sync,
) -> Storage<T> {
    assert_eq!(z.len(), a.len(), "zip_slices: length mismatch");
    build(
        a.len(),
        #[inline(always)]
        |off, out| {
            let end = off + out.len();
            f(&z[off..end], copy_init(out, &a[off..end]))
        },
    )
}

/// `f(a, out)` for an out-of-place slice kernel `f` (a vector-math
/// `_into` function such as `gelu_tanh_into`), which writes `out` from the
/// elements of `a` at the same indices: [`map_slices`] without its copy of
/// `a` (one pass over memory instead of two), at the same fixed chunks.
/// `f` must write every element of its `out` (the result is read as
/// initialised) and compute each from the element at the same index only.
#[inline]
pub(crate) fn map_slices_into<T: Copy + Send + Sync>(
    a: &[T],
    f: impl Fn(&[T], &mut [MaybeUninit<T>]) + Sync,
) -> Storage<T> {
    build(
        a.len(),
        #[inline(always)]
        |off, out| f(&a[off..off + out.len()], out),
    )
}

/// `f(z, a, out)` for an out-of-place two-slice kernel (a vector-math
/// gradient such as `gelu_tanh_grad_into(x, g, out)`): [`zip_slices`]
/// without its copy of `a`, at the same fixed chunks. `f` must write every
/// element of its `out` and pair elements by index only.
///
/// # Panics
/// When the lengths differ.
#[inline]
pub(crate) fn zip_slices_into<T: Copy + Send + Sync, U: Sync>(
    z: &[U],
    a: &[T],
    f: impl Fn(&[U], &[T], &mut [MaybeUninit<T>]) + Sync,
) -> Storage<T> {
    assert_eq!(z.len(), a.len(), "zip_slices_into: length mismatch");
    build(
        a.len(),
        #[inline(always)]
        |off, out| {
            let end = off + out.len();
            f(&z[off..end], &a[off..end], out)
        },
    )
}

/// Writes `src` into `out` (of the same length) and returns it as
/// initialised.
#[inline(always)]
fn copy_init<'a, T: Copy>(out: &'a mut [MaybeUninit<T>], src: &[T]) -> &'a mut [T] {
    for (o, &v) in out.iter_mut().zip(src) {
        o.write(v);
    }
    // SAFETY: every element was written just above (`build` hands out
    // chunks as long as their `src`), and `MaybeUninit<T>` has the layout
    // of `T`.
    unsafe { &mut *(out as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// `acc[i] = f(acc[i], b[i])` in place, in parallel fixed chunks when long
/// (the gradient accumulation `acc += g` and optimizer updates).
///
/// # Panics
/// When the lengths differ.
#[inline]
pub fn zip_assign<A: Copy + Send + Sync, B: Copy + Sync>(
    acc: &mut [A],
    b: &[B],
    f: impl Fn(A, B) -> A + Sync,
) {
    assert_eq!(acc.len(), b.len(), "zip_assign: length mismatch");
    let n = acc.len();
    // each chunk's loop at the widest vector width
    let run = |off: usize, out: &mut [A]| {
        widest(
            #[inline(always)]
            || {
                let src = &b[off..off + out.len()];
                for (o, &y) in out.iter_mut().zip(src) {
                    *o = f(*o, y);
                }
            },
        )
    };
    if n < PAR_MIN || num_threads() == 1 {
        return run(0, acc);
    }
    // `MaybeUninit<A>` has the layout of `A`; the chunks only read and
    // write initialised values through it.
    let out = Out(acc.as_mut_ptr().cast::<MaybeUninit<A>>());
    parallel_for(n.div_ceil(CHUNK), |i| {
        // SAFETY: chunk `i` is this call's alone and lies inside `acc`,
        // which is borrowed mutably for the whole loop; its elements are
        // initialised (they come from `&mut [A]`), so viewing them as `A`
        // again is sound.
        let chunk = unsafe { out.chunk(i, n) };
        // SAFETY: the same chunk (`chunk.len()` elements from its start, in
        // bounds), its `MaybeUninit<A>` initialised, so readable as `A`.
        let chunk =
            unsafe { std::slice::from_raw_parts_mut(chunk.as_mut_ptr().cast::<A>(), chunk.len()) };
        run(i * CHUNK, chunk)
    });
}

/// Elements per chunk of [`update_chunks`]: a quarter of [`CHUNK`], so
/// that the benchmark GPT's `16384`-element projection weights split over
/// two threads (as one chunk each they ran on the caller alone) and a
/// `49152`-element one splits 6 / 6 rather than 2 / 1. An optimizer's
/// update is a few ns an element, so a chunk is still about 10 us of work.
pub const UPDATE_CHUNK: usize = CHUNK / 4;

/// Runs `f(offset, chunks)` over the same fixed chunks of [`UPDATE_CHUNK`]
/// elements of several equally long mutable slices (an optimizer's
/// parameter and its state buffers), in parallel when the whole loop, at
/// `ns_per_element`, costs at least
/// [`PARALLEL_MIN_NS`](super::threads::PARALLEL_MIN_NS). An empty slice
/// stays empty in every chunk (a state buffer the rule does not use). Each
/// chunk sees elements `offset..offset + len` of every non-empty slice, so
/// an element-by-element update gives the same bits for any thread count.
///
/// # Panics
/// When two non-empty slices differ in length.
pub fn update_chunks<E: Send, const K: usize>(
    slices: [&mut [E]; K],
    ns_per_element: usize,
    f: impl Fn(usize, [&mut [E]; K]) + Sync,
) {
    let n = slices.iter().map(|s| s.len()).max().unwrap_or(0);
    assert!(
        slices.iter().all(|s| s.is_empty() || s.len() == n),
        "update_chunks: length mismatch"
    );
    let ptrs: [(Out<E>, bool); K] = slices.map(|s| (Out(s.as_mut_ptr().cast()), !s.is_empty()));
    let run = |i: usize| {
        let parts: [&mut [E]; K] = std::array::from_fn(|k| {
            let (p, used) = &ptrs[k];
            if *used {
                // SAFETY: chunk `i` of each slice is handed to this call
                // alone (one call per chunk index), lies inside the slice
                // (which spans `n` elements and stays mutably borrowed for
                // the whole loop), and holds initialised `E`s.
                let c = unsafe { p.chunk_of(i, n, UPDATE_CHUNK) };
                // SAFETY: that chunk (`c.len()` elements, in bounds), its
                // elements initialised, so viewable as `E`.
                unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast::<E>(), c.len()) }
            } else {
                &mut []
            }
        });
        f(i * UPDATE_CHUNK, parts)
    };
    super::threads::parallel_for_cost(
        n.div_ceil(UPDATE_CHUNK),
        n.saturating_mul(ns_per_element),
        run,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::class::{pin_thread, Class};

    #[test]
    fn parallel_and_inline_loops_agree() {
        let _threads = crate::cpu::threads::lock_thread_count();
        let n = PAR_MIN * 2 + 123;
        let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
        let row: Vec<f32> = (0..123).map(|i| i as f32).collect();
        let col: Vec<f32> = (0..n / 123).map(|i| i as f32 * 0.5).collect();
        let mut want = Vec::new();
        for threads in [1, 2, 3] {
            crate::cpu::set_num_threads(threads);
            let mut acc = a.clone();
            zip_assign(&mut acc, &b, |x, y| x * 2.0 + y);
            let got = (
                map(&a, |x| x.exp()).to_vec(),
                zip(&a, &b, |x, y| x * y).to_vec(),
                zip_rows(&a[..n / 123 * 123], &row, |x, y| x - y).to_vec(),
                zip_cols(&a[..n / 123 * 123], &col, 123, |x, y| x * y).to_vec(),
                acc,
            );
            if threads == 1 {
                // Reference values with plain per-index arithmetic.
                assert!(got.0.iter().zip(&a).all(|(o, x)| *o == x.exp()));
                assert!((0..n).all(|i| got.1[i] == a[i] * b[i]));
                assert!((0..n / 123 * 123).all(|i| got.2[i] == a[i] - row[i % 123]));
                assert!((0..n / 123 * 123).all(|i| got.3[i] == a[i] * col[i / 123]));
                assert!((0..n).all(|i| got.4[i] == a[i] * 2.0 + b[i]));
                want.push(got);
            } else {
                assert!(got == want[0], "{threads} threads differ");
            }
        }
    }

    #[test]
    fn slice_kernels_give_the_same_bits_for_any_split() {
        let _threads = crate::cpu::threads::lock_thread_count();
        // Long enough to split, with a ragged last chunk.
        let n = PAR_MIN * 2 + 123;
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        let g: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
        let kernel = |s: &mut [f32]| crate::cpu::vmath::gelu_tanh(s);
        let grad = |z: &[f32], s: &mut [f32]| crate::cpu::vmath::gelu_tanh_grad(z, s);
        // Reference: the kernels over whole copies, in one call.
        let mut want_y = x.clone();
        kernel(&mut want_y);
        let mut want_g = g.clone();
        grad(&x, &mut want_g);
        for threads in [1, 2, 3] {
            crate::cpu::set_num_threads(threads);
            let before = crate::cpu::threads::pool_dispatches();
            let y = map_slices(&x, kernel);
            let gx = zip_slices(&x, &g, grad);
            assert!(
                y[..] == want_y[..],
                "{threads} threads: forward bits differ"
            );
            assert!(
                gx[..] == want_g[..],
                "{threads} threads: gradient bits differ"
            );
            let split = crate::cpu::threads::pool_dispatches() - before;
            assert_eq!(split, if threads > 1 { 2 } else { 0 }, "{threads} threads");
            // the out-of-place kernels (no copy first) at the same split
            let y = map_slices_into(&x, crate::cpu::vmath::gelu_tanh_into);
            let gx = zip_slices_into(&x, &g, crate::cpu::vmath::gelu_tanh_grad_into);
            assert!(
                y[..] == want_y[..],
                "{threads} threads: out-of-place forward bits differ"
            );
            assert!(
                gx[..] == want_g[..],
                "{threads} threads: out-of-place gradient bits differ"
            );
        }
    }

    #[test]
    fn update_chunks_cover_every_element_once_and_split_large_loops() {
        let _threads = crate::cpu::threads::lock_thread_count();
        crate::cpu::set_num_threads(2);
        let n = 3 * CHUNK + 17;
        let mut p: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut m = vec![0.0f32; n];
        let mut unused: Vec<f32> = Vec::new();
        let before = crate::cpu::threads::pool_dispatches();
        update_chunks([&mut p, &mut m, &mut unused], 1, |off, [p, m, u]| {
            assert!(u.is_empty() && p.len() == m.len() && p.len() <= UPDATE_CHUNK);
            assert_eq!(off % UPDATE_CHUNK, 0);
            for (j, (p, m)) in p.iter_mut().zip(m.iter_mut()).enumerate() {
                assert_eq!(*p, (off + j) as f32);
                *p += 1.0;
                *m += 1.0;
            }
        });
        assert!((0..n).all(|i| p[i] == i as f32 + 1.0 && m[i] == 1.0));
        // 50k elements at 1 ns each: above the threshold, split
        assert_eq!(crate::cpu::threads::pool_dispatches(), before + 1);
        let mut small = vec![0.0f32; 1000];
        update_chunks([&mut small], 1, |_, [s]| {
            s.iter_mut().for_each(|x| *x = 2.0)
        });
        assert!(small.iter().all(|&x| x == 2.0));
        assert_eq!(crate::cpu::threads::pool_dispatches(), before + 1);
        // one `CHUNK` at 2 ns an element (the benchmark GPT's projection
        // weights under AdamW, 33 us): split too, in several chunks
        let mut w = vec![0.0f32; CHUNK];
        let chunks = std::sync::atomic::AtomicUsize::new(0);
        update_chunks([&mut w], 2, |_, [w]| {
            chunks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            w.iter_mut().for_each(|x| *x += 1.0)
        });
        assert!(w.iter().all(|&x| x == 1.0));
        assert_eq!(chunks.into_inner(), 4);
        assert_eq!(crate::cpu::threads::pool_dispatches(), before + 2);
    }

    /// Runs `f` with the calling thread pinned to each CPU class this
    /// machine has (portable first), one thread, and returns the results.
    fn in_each_class<R>(f: impl Fn() -> R) -> Vec<(Class, R)> {
        let _threads = crate::cpu::threads::lock_thread_count();
        let threads = num_threads();
        crate::cpu::set_num_threads(1);
        let mut out = Vec::new();
        for class in [Class::Portable, Class::Avx2, Class::Avx512] {
            if class > crate::cpu::class::detected() {
                continue;
            }
            let prev = pin_thread(Some(class));
            out.push((class, f()));
            pin_thread(prev);
        }
        crate::cpu::set_num_threads(threads);
        out
    }

    /// `n` values with the cases the lanes must agree on: signed zeros,
    /// infinities, NaN, subnormals, large and ordinary values.
    fn awkward(n: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                let u = (state >> 8) as f32 / (1u32 << 24) as f32;
                match i % 23 {
                    3 => -0.0,
                    5 => 0.0,
                    7 => f32::INFINITY,
                    11 => f32::NEG_INFINITY,
                    13 => f32::NAN,
                    17 => 1e-40,
                    19 => -3e38,
                    _ => (u - 0.5) * 12.0,
                }
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Every loop run through `widest` gives, in every CPU class, the bits
    /// of a plain per-element loop (lengths around the 4-, 8- and 16-lane
    /// widths and their tails).
    #[test]
    fn widened_loops_give_the_per_element_bits_in_every_class() {
        let lens = [0usize, 1, 3, 7, 15, 16, 17, 31, 33, 47, 100, 1003];
        let runs = in_each_class(|| {
            let mut got = Vec::new();
            for &n in &lens {
                let a = awkward(n, n as u32 + 1);
                let b = awkward(n, n as u32 + 99);
                let relu = |x: f32| x.max(0.0);
                let mix = |x: f32, y: f32| x * y + (x - y) / 3.0;
                let want_map: Vec<f32> = a.iter().map(|&x| relu(x)).collect();
                let want_zip: Vec<f32> = a.iter().zip(&b).map(|(&x, &y)| mix(x, y)).collect();
                assert_eq!(bits(&map(&a, relu)), bits(&want_map), "map, n {n}");
                assert_eq!(bits(&zip(&a, &b, mix)), bits(&want_zip), "zip, n {n}");
                let mut acc = a.clone();
                zip_assign(&mut acc, &b, mix);
                assert_eq!(bits(&acc), bits(&want_zip), "zip_assign, n {n}");
                for cols in [1usize, 7, 19] {
                    let rows = n / cols;
                    let m = &a[..rows * cols];
                    let row = &b[..cols.min(n)];
                    if row.len() == cols {
                        let want: Vec<f32> =
                            (0..m.len()).map(|i| mix(m[i], row[i % cols])).collect();
                        assert_eq!(
                            bits(&zip_rows(m, row, mix)),
                            bits(&want),
                            "zip_rows {n} {cols}"
                        );
                    }
                    let col = &b[..rows];
                    let want: Vec<f32> = (0..m.len()).map(|i| mix(m[i], col[i / cols])).collect();
                    assert_eq!(
                        bits(&zip_cols(m, col, cols, mix)),
                        bits(&want),
                        "zip_cols {n} {cols}"
                    );
                }
                // an Adam-like update: square root and division per element
                let mut p = a.clone();
                let mut v = b.iter().map(|x| x * x).collect::<Vec<f32>>();
                update_chunks([&mut p, &mut v], 1, |_, [p, v]| {
                    for (p, v) in p.iter_mut().zip(v.iter_mut()) {
                        *v = 0.999 * *v + 0.001 * *p * *p;
                        *p -= 0.01 * (*p / (v.sqrt() / 0.3 + 1e-8));
                    }
                });
                let want: Vec<f32> = a
                    .iter()
                    .zip(&b)
                    .map(|(&p, &b)| {
                        let v = 0.999 * (b * b) + 0.001 * p * p;
                        p - 0.01 * (p / (v.sqrt() / 0.3 + 1e-8))
                    })
                    .collect();
                assert_eq!(bits(&p), bits(&want), "update_chunks, n {n}");
                // the vector-math kernels promise equal values, NaN for
                // NaN (not the NaN's sign and payload) in every class
                let canon = |v: &[f32]| {
                    v.iter()
                        .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                        .collect::<Vec<_>>()
                };
                let y = map_slices(&a, crate::cpu::vmath::gelu_tanh);
                let gx = zip_slices(&a, &b, crate::cpu::vmath::gelu_tanh_grad);
                // their out-of-place forms: the same values as in place
                let y_into = map_slices_into(&a, crate::cpu::vmath::gelu_tanh_into);
                let gx_into = zip_slices_into(&a, &b, crate::cpu::vmath::gelu_tanh_grad_into);
                assert_eq!(canon(&y_into), canon(&y), "gelu_tanh_into, n {n}");
                assert_eq!(canon(&gx_into), canon(&gx), "gelu_tanh_grad_into, n {n}");
                got.push((canon(&y), canon(&gx)));
            }
            got
        });
        // the slice kernels (their own reference is the vector-math
        // tests'): the same bits in every class
        for (class, got) in &runs[1..] {
            assert!(got == &runs[0].1, "{class:?}: slice kernels differ");
        }
    }

    #[test]
    fn empty_inputs() {
        assert!(map(&[] as &[f32], |x| x).is_empty());
        assert!(zip_rows(&[] as &[f32], &[] as &[f32], |x, _| x).is_empty());
    }
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn map() {
        let v = crate::cpu::elementwise::map(&[1.0f32, 2.0], |x| x * 2.0);
        assert_eq!(&v[..], &[2.0, 4.0]);
    }

    #[test]
    fn zip() {
        let v = crate::cpu::elementwise::zip(&[1.0f32, 2.0], &[3.0, 4.0], |x, y| x + y);
        assert_eq!(&v[..], &[4.0, 6.0]);
    }

    #[test]
    fn zip_rows() {
        let v =
            crate::cpu::elementwise::zip_rows(&[1.0f32, 2.0, 3.0, 4.0], &[10.0, 20.0], |x, y| {
                x + y
            });
        assert_eq!(&v[..], &[11.0, 22.0, 13.0, 24.0]);
    }

    #[test]
    fn zip_cols() {
        let v = crate::cpu::elementwise::zip_cols(
            &[1.0f32, 2.0, 3.0, 4.0],
            &[10.0, 20.0],
            2,
            |x, y| x * y,
        );
        assert_eq!(&v[..], &[10.0, 20.0, 60.0, 80.0]);
    }

    #[test]
    fn map_slices() {
        let v = crate::cpu::elementwise::map_slices(&[1.0f32, 4.0], |s| {
            s.iter_mut().for_each(|x| *x = x.sqrt())
        });
        assert_eq!(&v[..], &[1.0, 2.0]);
    }

    #[test]
    fn zip_slices() {
        let v = crate::cpu::elementwise::zip_slices(&[2.0f32, 3.0], &[1.0, 1.0], |z, g| {
            g.iter_mut().zip(z).for_each(|(g, z)| *g *= z)
        });
        assert_eq!(&v[..], &[2.0, 3.0]);
    }

    #[test]
    fn zip_assign() {
        let mut acc = vec![1.0f64, 2.0];
        crate::cpu::elementwise::zip_assign(&mut acc, &[0.5, 0.25], |a, b| a + b);
        assert_eq!(acc, vec![1.5, 2.25]);
    }

    #[test]
    fn widest() {
        let mut v = vec![1.0f32; 100];
        crate::cpu::elementwise::widest(
            #[inline(always)]
            || v.iter_mut().for_each(|x| *x *= 2.0),
        );
        assert!(v.iter().all(|&x| x == 2.0));
    }

    #[test]
    fn update_chunks() {
        let mut p = vec![1.0f32; 5];
        let mut m = vec![0.0f32; 5];
        let g = [0.5f32; 5];
        crate::cpu::elementwise::update_chunks([&mut p, &mut m], 2, |off, [p, m]| {
            for (j, (p, m)) in p.iter_mut().zip(m.iter_mut()).enumerate() {
                *m = 0.9 * *m + g[off + j];
                *p -= 0.1 * *m;
            }
        });
        assert_eq!(p, vec![0.95; 5]);
    }
}

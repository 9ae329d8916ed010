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
mod tests;

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

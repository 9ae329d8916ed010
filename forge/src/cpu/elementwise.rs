//! The elementwise loops every unary, binary and scalar op runs: one pass
//! over contiguous slices into a pooled [`Storage`], written as plain loops
//! the compiler vectorises, split into fixed chunks of [`CHUNK`] elements
//! over the worker threads when the slice is at least [`PAR_MIN`] long.
//!
//! Each output element depends only on the inputs at its own index, so the
//! results are the same whatever the split.

use super::memory::Storage;
use super::threads::{num_threads, parallel_for};
use std::mem::MaybeUninit;

/// Elements per parallel chunk (fixed: it does not depend on the thread
/// count).
pub const CHUNK: usize = 1 << 14;

/// Slices shorter than this run on the calling thread: dispatch would cost
/// more than it saves.
pub const PAR_MIN: usize = 1 << 16;

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
/// per fixed chunk, in parallel when `n >= PAR_MIN`. `fill` must write every
/// element of the chunk it is given.
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
        fill(0, spare);
    } else {
        let out = Out(spare.as_mut_ptr());
        parallel_for(n.div_ceil(chunk_len), |i| {
            // SAFETY: chunk `i` is written by this call alone, and `spare`
            // spans `n` elements for the whole loop.
            fill(i * chunk_len, unsafe { out.chunk_of(i, n, chunk_len) })
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
    build(a.len(), |off, out| {
        let src = &a[off..off + out.len()];
        for (o, &x) in out.iter_mut().zip(src) {
            o.write(f(x));
        }
    })
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
    build(a.len(), |off, out| {
        let end = off + out.len();
        for ((o, &x), &y) in out.iter_mut().zip(&a[off..end]).zip(&b[off..end]) {
            o.write(f(x, y));
        }
    })
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
    build(a.len(), |off, out| {
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
    })
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
    build(a.len(), |off, out| {
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
    })
}

/// A copy of `a` transformed in place by the slice kernel `f` (a
/// [`vmath`](super::vmath) function), one call per fixed chunk of
/// [`CHUNK`] elements, in parallel when `a` has at least [`PAR_MIN`]
/// (with one thread, or below that, one call on the whole copy). `f` must
/// compute each element from the element at the same index only, as the
/// vector-math kernels do, so the split never changes a bit.
#[inline]
pub fn map_slices<T: Copy + Send + Sync>(a: &[T], f: impl Fn(&mut [T]) + Sync) -> Storage<T> {
    build(a.len(), |off, out| {
        f(copy_init(out, &a[off..off + out.len()]))
    })
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
    build(a.len(), |off, out| {
        let end = off + out.len();
        f(&z[off..end], copy_init(out, &a[off..end]))
    })
}

/// Writes `src` into `out` (of the same length) and returns it as
/// initialised.
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
    let run = |off: usize, out: &mut [A]| {
        let src = &b[off..off + out.len()];
        for (o, &y) in out.iter_mut().zip(src) {
            *o = f(*o, y);
        }
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

/// Runs `f(offset, chunks)` over the same fixed chunks of [`CHUNK`]
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
                let c = unsafe { p.chunk(i, n) };
                // SAFETY: that chunk (`c.len()` elements, in bounds), its
                // elements initialised, so viewable as `E`.
                unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast::<E>(), c.len()) }
            } else {
                &mut []
            }
        });
        f(i * CHUNK, parts)
    };
    super::threads::parallel_for_cost(n.div_ceil(CHUNK), n.saturating_mul(ns_per_element), run);
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(u.is_empty() && p.len() == m.len() && p.len() <= CHUNK);
            assert_eq!(off % CHUNK, 0);
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

//! Output buffers for the kernels (convolution, pooling, normalisation,
//! softmax, ...): pooled outputs filled in place (no memset), and the
//! parallel loops that hand each chunk or row of an output buffer to one
//! task. Every split comes from the lengths only, never the thread count,
//! so results do not depend on it.
use super::memory::Storage;
use super::threads::{parallel_for, PARALLEL_MIN_NS};
use crate::base::Float;
use std::mem::MaybeUninit;

/// `s` seen as possibly-uninitialised slots, so one kernel can fill fresh
/// and reused buffers alike.
///
/// # Safety
/// The caller must store only initialised values through the returned
/// slice (`MaybeUninit::write`), so that `s` is still initialised when the
/// borrow ends.
pub(crate) unsafe fn uninit_mut<E>(s: &mut [E]) -> &mut [MaybeUninit<E>] {
    // SAFETY: `MaybeUninit<E>` has the layout of `E`; initialisation is
    // kept by the caller's contract.
    unsafe { &mut *(s as *mut [E] as *mut [MaybeUninit<E>]) }
}

/// A pooled scratch buffer of `cap` elements whose first `len` elements
/// `fill` writes (every one of them): on the first call the buffer is
/// fresh and `fill` writes uninitialised memory, on later calls (with `len`
/// at most the first call's) it overwrites earlier values. No memset.
pub(crate) fn refill<E: Float>(
    s: &mut Storage<E>,
    len: usize,
    fill: impl FnOnce(&mut [MaybeUninit<E>]),
) {
    if s.len() < len {
        assert!(
            s.is_empty() && len <= s.capacity(),
            "refill: grows only once"
        );
        fill(&mut s.spare_capacity_mut()[..len]);
        // SAFETY: `fill` wrote every element of `0..len` (its contract), and
        // `len <= capacity` (asserted).
        unsafe { s.set_len(len) };
    } else {
        // SAFETY: the fills passed here (im2col and gathers) write values
        // only (`MaybeUninit::write`).
        fill(unsafe { uninit_mut(&mut s[..len]) });
    }
}

/// A pooled `n`-element output filled by `fill`, which must write every
/// element of the slots it is given.
pub(crate) fn build<E: Float>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<E>])) -> Storage<E> {
    let mut s = Storage::with_capacity(n);
    refill(&mut s, n, fill);
    s
}

/// A pooled `n`-element output whose consecutive chunks of `chunk_len`
/// elements are written by `fill(chunk_index, chunk)`, in parallel over the
/// chunks; `fill` must write every element of its chunk.
pub(crate) fn build_chunks<E: Copy + Send>(
    n: usize,
    chunk_len: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<E>]) + Sync,
) -> Storage<E> {
    let mut s = Storage::with_capacity(n);
    for_each_chunk_mut(&mut s.spare_capacity_mut()[..n], chunk_len, fill);
    assert!(n == 0 || chunk_len > 0, "build_chunks: empty chunks");
    // SAFETY: `n <= capacity` (allocated with `n` above); the chunks cover
    // `0..n` (for a positive `chunk_len`, asserted unless `n` is 0) and
    // `fill` wrote every element of each.
    unsafe { s.set_len(n) };
    s
}

/// A pooled output of `planes` planes of `plane_len` elements, plane `p`
/// written whole by `fill(p, plane)`, for cheap per-plane kernels (pooling,
/// gathers) that touch about `work` elements per plane, with the grouping
/// of [`for_each_row_mut`]: planes in tasks of at least [`ROW_TASK_ELEMS`]
/// elements of work, the whole pass on the calling thread when it costs
/// less than [`PARALLEL_MIN_NS`] (about half a nanosecond per element of
/// work).
/// One task per plane made ResNet-18's global average pool (`[16, 512, 1,
/// 1]`, one element per plane) 8192 tasks, 5x slower at 2 threads than
/// inline. Each plane is written by the same call either way, so the
/// result does not depend on the grouping or the thread count.
pub(crate) fn build_planes<E: Copy + Send>(
    planes: usize,
    plane_len: usize,
    work: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<E>]) + Sync,
) -> Storage<E> {
    let n = planes * plane_len;
    let mut s = Storage::with_capacity(n);
    for_each_row_work(&mut s.spare_capacity_mut()[..n], plane_len, work, fill);
    // SAFETY: the planes cover `0..n` (`plane_len` elements each) and `fill`
    // wrote every element of each.
    unsafe { s.set_len(n) };
    s
}

/// A raw pointer to one output buffer, shared by the chunks of a parallel
/// loop that each write a disjoint range of it (here, in `cpu::qgemm` and
/// in `cpu::conv::im2col::chunked`). Closures take the pointer through
/// [`get`](Self::get), so that they capture the whole `Send + Sync`
/// wrapper, not its raw field.
pub(crate) struct SharedOut<E>(pub(crate) *mut E);
impl<E> Clone for SharedOut<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for SharedOut<E> {}
// SAFETY: each chunk derefs only its own disjoint range, and the buffer
// outlives the loop (see `for_each_chunk_mut`).
unsafe impl<E: Send> Send for SharedOut<E> {}
// SAFETY: as above; the pointer itself is only copied.
unsafe impl<E: Send> Sync for SharedOut<E> {}

impl<E> SharedOut<E> {
    /// The pointer.
    pub(crate) fn get(self) -> *mut E {
        self.0
    }
}

/// Runs `f(chunk_index, chunk)` over consecutive chunks of `chunk_len`
/// elements of `out` (the last may be shorter), in parallel over fixed chunks.
pub(crate) fn for_each_chunk_mut<E: Send>(
    out: &mut [E],
    chunk_len: usize,
    f: impl Fn(usize, &mut [E]) + Sync,
) {
    if out.is_empty() || chunk_len == 0 {
        return;
    }
    let n = out.len();
    let ptr = SharedOut(out.as_mut_ptr());
    parallel_for(n.div_ceil(chunk_len), |i| {
        let p = ptr;
        let start = i * chunk_len;
        // SAFETY: chunk `i` is `start..start + len`, inside `out` (`start <
        // n`), disjoint from every other chunk, and visited exactly once;
        // `out` stays borrowed until `parallel_for` returns.
        let chunk =
            unsafe { std::slice::from_raw_parts_mut(p.get().add(start), chunk_len.min(n - start)) };
        f(i, chunk);
    });
}

/// Elements per task of [`for_each_row_mut`]: rows of a copy pass are
/// grouped into tasks of at least this many elements (a size from the
/// shape only, never the thread count).
const ROW_TASK_ELEMS: usize = 1 << 12;

/// Runs `f(row_index, row)` over consecutive rows of `row_len` elements of
/// `out` (the last may be shorter), for cheap per-element work such as
/// the copies of im2col: rows are grouped into tasks of at least
/// [`ROW_TASK_ELEMS`] elements, and the whole pass runs on the calling
/// thread when it costs less than [`PARALLEL_MIN_NS`] (at about half a
/// nanosecond per element). One task per row made a `[4608, 1]` im2col (a
/// 3x3 convolution of 512 channels on a 1x1 plane at batch 1) 4608 tasks
/// of one element, whose claims on the shared task counters took longer
/// than the copies. Each row is written by the same call either way, so the
/// result does not depend on the grouping or the thread count.
pub(crate) fn for_each_row_mut<E: Send>(
    out: &mut [E],
    row_len: usize,
    f: impl Fn(usize, &mut [E]) + Sync,
) {
    for_each_row_work(out, row_len, row_len, f);
}

/// [`for_each_row_mut`] for rows that cost about `work` elements each
/// (not necessarily their length: an average pool reads a window per
/// output): tasks of at least [`ROW_TASK_ELEMS`] elements of work, inline
/// below [`PARALLEL_MIN_NS`] at about half a nanosecond per element of
/// work.
pub(crate) fn for_each_row_work<E: Send>(
    out: &mut [E],
    row_len: usize,
    work: usize,
    f: impl Fn(usize, &mut [E]) + Sync,
) {
    if out.is_empty() || row_len == 0 {
        return;
    }
    let rows = (ROW_TASK_ELEMS / work.max(1)).max(1);
    let run = |task: usize, part: &mut [E]| {
        for (r, row) in part.chunks_mut(row_len).enumerate() {
            f(task * rows + r, row);
        }
    };
    if out.len().saturating_mul(work) / row_len / 2 < PARALLEL_MIN_NS {
        for (task, part) in out.chunks_mut(rows * row_len).enumerate() {
            run(task, part);
        }
    } else {
        for_each_chunk_mut(out, rows * row_len, run);
    }
}

/// Writes `v` into every slot of `s` and returns it as initialised.
pub(crate) fn fill_init<E: Copy>(s: &mut [MaybeUninit<E>], v: E) -> &mut [E] {
    s.iter_mut().for_each(|x| _ = x.write(v));
    // SAFETY: every element was written just above, and `MaybeUninit<E>`
    // has the layout of `E`.
    unsafe { &mut *(s as *mut [MaybeUninit<E>] as *mut [E]) }
}

#[cfg(test)]
mod tests;

//! [`Storage`]: a vector whose buffer comes from the pool and goes back to
//! it on drop.

use super::freelists::{count_wrapped, give, pooled, take, PoolRef};
use std::fmt;
use std::mem::{size_of, ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A contiguous buffer of `T` whose memory comes from the CPU buffer pool
/// and returns to it when the storage is dropped (see [`crate::runtime`]). It derefs to a slice, and grows like a `Vec`.
///
/// Build one with [`with_capacity`](Self::with_capacity) and fill it with
/// [`push`](Self::push) / [`extend`](Extend::extend), or with one of the
/// helpers that write straight into the pooled buffer:
/// [`filled`](Self::filled), [`zeroed`](Self::zeroed),
/// [`from_slice`](Self::from_slice), [`map`](Self::map),
/// [`zip`](Self::zip), or by collecting an iterator. Kernels that write
/// elements in any order use [`spare_capacity_mut`](Self::spare_capacity_mut)
/// and [`set_len`](Self::set_len).
///
/// ```
/// use forge::runtime::Storage;
/// let a = Storage::from_slice(&[1.0f32, 2.0, 3.0]);
/// let b = Storage::map(&a, |x| x * 10.0);
/// assert_eq!(&b[..], &[10.0, 20.0, 30.0]);
/// let c: Storage<f32> = a.iter().zip(b.iter()).map(|(x, y)| x + y).collect();
/// assert_eq!(&c[..], &[11.0, 22.0, 33.0]);
/// ```
pub struct Storage<T: Copy> {
    /// The buffer: `len` initialised elements of `cap`.
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
    /// Bytes of the pooled block at `ptr`, or 0 when the buffer is a
    /// vector's (wrapped by [`from_vec`](Self::from_vec), or of a size or
    /// type the pool does not serve): then `(ptr, len, cap)` are that
    /// vector's raw parts, and it is rebuilt to be grown or freed.
    ///
    /// A pooled block is never handed to a `Vec`: it is aligned beyond
    /// `T` (to a cache line, or 2 MiB when large; `freelists::layout`), a
    /// layout a vector of `T` could not free or grow.
    block: usize,
    /// The pool a pooled block goes back to (`None`: the process's).
    pool: PoolRef,
    /// The arena call the block was taken in, or 0 outside arenas: the
    /// accessors panic once the arena has started a later call.
    generation: u64,
    /// The write version: bumped by every mutable access to the values
    /// ([`note_write`](Self::note_write), called by `deref_mut`,
    /// `spare_capacity_mut`, `set_len`, `push` and `extend_from_slice`), so data derived from the values knows when they changed.
    version: u64,
    /// Data derived from the values at [`version`](Self::version) (a weight
    /// packed for the gemm kernel: `cpu::gemm::weight_cache`), built on
    /// first use by a shared reader; emptied by every write and dropped
    /// with the storage.
    derived: std::sync::OnceLock<Derived>,
}

/// A [`Storage`]'s derived data with the write version it was built at.
pub(crate) struct Derived {
    /// The storage's [`version`](Storage::version) when it was built.
    pub(crate) version: u64,
    /// The data (its type is the builder's).
    pub(crate) data: Box<dyn std::any::Any + Send + Sync>,
}

// SAFETY: a `Storage` owns its buffer alone, as a `Vec` does (no other
// pointer to it exists), so sending it sends its elements.
unsafe impl<T: Copy + Send> Send for Storage<T> {}
// SAFETY: shared access gives only `&[T]`, as a `Vec` does.
unsafe impl<T: Copy + Sync> Sync for Storage<T> {}

impl<T: Copy> Storage<T> {
    /// Empty storage with room for at least `n` elements, taken from the
    /// pool (no allocation when `n` is 0; a plain vector when the element
    /// size does not divide 16 bytes, the granularity of pooled blocks).
    ///
    /// ```
    /// let mut s = forge::runtime::Storage::<f64>::with_capacity(3);
    /// s.extend([1.0, 2.0, 3.0]);
    /// assert_eq!(s.len(), 3);
    /// assert!(s.capacity() >= 3);
    /// ```
    pub fn with_capacity(n: usize) -> Self {
        let size = size_of::<T>();
        let align = std::mem::align_of::<T>();
        let bytes = n.saturating_mul(size);
        // Pooled blocks are whole multiples of 16 bytes, so only elements
        // whose size divides 16 fill one exactly; others (12-byte triples)
        // take a plain vector.
        if size == 0 || 16 % size != 0 || !pooled(bytes, align) {
            return Self::vec_parts(Vec::with_capacity(n));
        }
        let b = take(bytes, align);
        debug_assert_eq!(b.bytes % size, 0);
        Storage {
            pool: b.pool,
            generation: b.generation,
            // The block is aligned to at least `align_of::<T>()` (a cache
            // line or more), and `b.bytes` is a multiple of `size_of::<T>()`
            // (classes are multiples of 16 bytes, or 64, and element sizes
            // divide 16): room for exactly `b.bytes / size` elements.
            ptr: b.ptr.cast::<T>(),
            len: 0,
            // Under ASan's poisoning (`super::asan`) the block past the
            // request is off limits, so the capacity is the request.
            cap: if super::asan::ON { n } else { b.bytes / size },
            block: b.bytes,
            version: 0,
            derived: std::sync::OnceLock::new(),
        }
    }

    /// Takes a vector apart into an unpooled storage.
    fn vec_parts(v: Vec<T>) -> Self {
        let mut v = ManuallyDrop::new(v);
        Storage {
            // A vector's pointer is never null (dangling when it has not
            // allocated).
            ptr: NonNull::new(v.as_mut_ptr()).expect("a Vec's pointer is not null"),
            len: v.len(),
            cap: v.capacity(),
            block: 0,
            pool: None,
            generation: 0,
            version: 0,
            derived: std::sync::OnceLock::new(),
        }
    }

    /// Wraps a vector without copying. Its buffer did not come from the
    /// pool, so it is freed to the OS on drop (and counted in
    /// [`MemoryStats::wrapped`](crate::runtime::MemoryStats::wrapped)).
    ///
    /// ```
    /// let s = forge::runtime::Storage::from_vec(vec![1u8, 2]);
    /// assert!(!s.is_pooled());
    /// ```
    pub fn from_vec(v: Vec<T>) -> Self {
        if v.capacity() > 0 && size_of::<T>() > 0 {
            count_wrapped();
        }
        Self::vec_parts(v)
    }

    /// `n` copies of `v`.
    ///
    /// ```
    /// let s = forge::runtime::Storage::filled(3, 7i64);
    /// assert_eq!(&s[..], &[7, 7, 7]);
    /// ```
    pub fn filled(n: usize, v: T) -> Self {
        Self::with_capacity(n).fill_to(n, v)
    }

    /// This empty storage (capacity at least `n`) with `n` copies of `v`.
    fn fill_to(mut self, n: usize, v: T) -> Self {
        for slot in &mut self.spare_capacity_mut()[..n] {
            slot.write(v);
        }
        // SAFETY: the first `n` slots (within the capacity) were written.
        unsafe { self.set_len(n) };
        self
    }

    /// `n` default values (zeros for numbers).
    ///
    /// ```
    /// assert_eq!(&forge::runtime::Storage::<f32>::zeroed(2)[..], &[0.0, 0.0]);
    /// ```
    pub fn zeroed(n: usize) -> Self
    where
        T: Default,
    {
        Self::filled(n, T::default())
    }

    /// `n` elements with unspecified values (whatever the pooled buffer
    /// last held, or zeros), for an output that a kernel overwrites whole
    /// before anything reads it (a product with `beta = 0`): no zeroing
    /// pass. The floating-point and primitive integer types take the
    /// pooled buffer as it is, since every bit pattern is one of their
    /// values; other types (`bool`, structs), and sizes the pool does not
    /// serve, are zero-filled.
    pub(crate) fn stale(n: usize) -> Self
    where
        T: Default + 'static,
    {
        use std::any::TypeId;
        let t = TypeId::of::<T>();
        let any_bits = [
            TypeId::of::<f32>(),
            TypeId::of::<f64>(),
            TypeId::of::<u8>(),
            TypeId::of::<i8>(),
            TypeId::of::<u16>(),
            TypeId::of::<i16>(),
            TypeId::of::<u32>(),
            TypeId::of::<i32>(),
            TypeId::of::<u64>(),
            TypeId::of::<i64>(),
        ]
        .contains(&t);
        let mut s = Self::with_capacity(n);
        if s.block > 0 && any_bits {
            // SAFETY: `n <= capacity()`; every byte of a pooled block is
            // initialised (allocated zeroed by `take`, and since then only
            // overwritten with values of element types, which have no
            // padding), and every bit pattern is a valid value of the
            // float and integer types listed above.
            unsafe { s.set_len(n) };
            s
        } else {
            s.fill_to(n, T::default())
        }
    }

    /// A pooled copy of `src`.
    ///
    /// ```
    /// let s = forge::runtime::Storage::from_slice(&[1, 2, 3]);
    /// assert_eq!(s.to_vec(), vec![1, 2, 3]);
    /// ```
    pub fn from_slice(src: &[T]) -> Self {
        let mut s = Self::with_capacity(src.len());
        s.extend_from_slice(src);
        s
    }

    /// `out[i] = f(src[i])`, written into a pooled buffer in one pass.
    ///
    /// ```
    /// let s = forge::runtime::Storage::map(&[1.0f32, 4.0], |x| x.sqrt());
    /// assert_eq!(&s[..], &[1.0, 2.0]);
    /// ```
    #[inline]
    pub fn map<A: Copy>(src: &[A], f: impl Fn(A) -> T) -> Self {
        let mut s = Self::with_capacity(src.len());
        let out = &mut s.spare_capacity_mut()[..src.len()];
        for (slot, &x) in out.iter_mut().zip(src) {
            slot.write(f(x));
        }
        // SAFETY: the first `src.len()` slots were written above.
        unsafe { s.set_len(src.len()) };
        s
    }

    /// `out[i] = f(a[i], b[i])`, written into a pooled buffer in one pass.
    ///
    /// # Panics
    /// When the lengths differ.
    ///
    /// ```
    /// let s = forge::runtime::Storage::zip(&[1.0f32, 2.0], &[3.0, 4.0], |x, y| x * y);
    /// assert_eq!(&s[..], &[3.0, 8.0]);
    /// ```
    #[inline]
    pub fn zip<A: Copy, B: Copy>(a: &[A], b: &[B], f: impl Fn(A, B) -> T) -> Self {
        assert_eq!(a.len(), b.len(), "Storage::zip: lengths differ");
        let n = a.len();
        let mut s = Self::with_capacity(n);
        let out = &mut s.spare_capacity_mut()[..n];
        for ((slot, &x), &y) in out.iter_mut().zip(a).zip(&b[..n]) {
            slot.write(f(x, y));
        }
        // SAFETY: the first `n` slots were written above.
        unsafe { s.set_len(n) };
        s
    }

    /// Appends one element (growing like a `Vec` past the capacity).
    ///
    /// ```
    /// let mut s = forge::runtime::Storage::with_capacity(1);
    /// s.push(5u32);
    /// assert_eq!(&s[..], &[5]);
    /// ```
    #[inline]
    pub fn push(&mut self, x: T) {
        self.note_write();
        if self.len == self.cap {
            self.reserve(1);
        }
        // SAFETY: `len < cap` (reserved above): the slot is inside the
        // buffer and not yet initialised.
        unsafe { self.ptr.as_ptr().add(self.len).write(x) };
        self.len += 1;
    }

    /// Makes room for at least `additional` more elements. Past the
    /// capacity a pooled buffer takes a larger block from the pool (at
    /// least twice the capacity, as a `Vec` grows), copies its elements
    /// into it and gives the old block back; a vector's buffer grows as
    /// the vector does.
    ///
    /// # Panics
    /// When the length would overflow `usize`.
    ///
    /// ```
    /// let mut s = forge::runtime::Storage::<f32>::with_capacity(4);
    /// s.reserve(100);
    /// assert!(s.capacity() >= 100 && s.is_pooled());
    /// ```
    pub fn reserve(&mut self, additional: usize) {
        let need = self
            .len
            .checked_add(additional)
            .expect("Storage::reserve: length overflows usize");
        if need <= self.cap {
            return;
        }
        if self.block == 0 {
            // SAFETY: `(ptr, len, cap)` are a vector's raw parts
            // (`block == 0`); the rebuilt vector is not dropped (a panic in
            // `reserve` leaves it as it was, still owned by `self`), and
            // its parts after growing replace the old ones.
            let mut v = ManuallyDrop::new(unsafe {
                Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.cap)
            });
            v.reserve(additional);
            self.ptr = NonNull::new(v.as_mut_ptr()).expect("a Vec's pointer is not null");
            self.cap = v.capacity();
            return;
        }
        let mut bigger = Self::with_capacity(need.max(2 * self.cap));
        bigger.extend_from_slice(self);
        // The version moves on from this storage's, never back to the new
        // one's own count: derived data built at an earlier version must
        // not look current again (an exactly sized buffer, as under ASan,
        // made `push` on a full storage return to an old version).
        let version = self.version.wrapping_add(1);
        // The old storage is dropped here: its block goes back to the pool.
        *self = bigger;
        self.version = version;
    }

    /// Appends a slice.
    ///
    /// ```
    /// let mut s = forge::runtime::Storage::with_capacity(2);
    /// s.extend_from_slice(&[1u8, 2]);
    /// assert_eq!(s.len(), 2);
    /// ```
    pub fn extend_from_slice(&mut self, src: &[T]) {
        self.note_write();
        self.reserve(src.len());
        // SAFETY: `len + src.len() <= cap` (reserved above); `src` cannot
        // overlap the unused part of a buffer `self` owns mutably.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(self.len), src.len())
        };
        self.len += src.len();
    }

    /// The number of elements the buffer holds without growing.
    ///
    /// ```
    /// assert!(forge::runtime::Storage::<f32>::with_capacity(10).capacity() >= 10);
    /// ```
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Whether the buffer came from the pool (and goes back on drop).
    ///
    /// ```
    /// assert!(forge::runtime::Storage::<f32>::zeroed(4).is_pooled());
    /// ```
    pub fn is_pooled(&self) -> bool {
        self.block > 0
    }

    /// The unused part of the buffer (`len..capacity`), to be written
    /// before [`set_len`](Self::set_len) claims it.
    ///
    /// ```
    /// let mut s = forge::runtime::Storage::<f32>::with_capacity(2);
    /// for (i, slot) in s.spare_capacity_mut()[..2].iter_mut().enumerate() {
    ///     slot.write(i as f32);
    /// }
    /// // SAFETY: both elements were written just above.
    /// unsafe { s.set_len(2) };
    /// assert_eq!(&s[..], &[0.0, 1.0]);
    /// ```
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<T>] {
        self.check_fresh();
        self.note_write();
        // SAFETY: slots `len..cap` are inside the buffer, owned by `self`
        // (borrowed mutably for the slice's life), and `MaybeUninit` claims
        // nothing of their contents.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.as_ptr().add(self.len).cast::<MaybeUninit<T>>(),
                self.cap - self.len,
            )
        }
    }

    /// Sets the length.
    ///
    /// # Safety
    /// `n <= capacity()`, and elements `len()..n` have been written through
    /// [`spare_capacity_mut`](Self::spare_capacity_mut).
    pub unsafe fn set_len(&mut self, n: usize) {
        debug_assert!(n <= self.cap);
        self.note_write();
        self.len = n;
    }

    /// The elements as a `Vec`: moved out without copying when the buffer
    /// is a vector's; copied when it is pooled (a pooled block is aligned
    /// beyond `T`, so a `Vec` may not own it), the block going back to the
    /// pool.
    ///
    /// ```
    /// let s = forge::runtime::Storage::from_slice(&[1, 2]);
    /// assert_eq!(s.into_vec(), vec![1, 2]);
    /// ```
    pub fn into_vec(self) -> Vec<T> {
        if self.block > 0 {
            self.check_fresh();
            return self.to_vec();
        }
        let s = ManuallyDrop::new(self);
        // SAFETY: `(ptr, len, cap)` are a vector's raw parts (`block ==
        // 0`), and `s` is never dropped, so the vector is their only owner.
        unsafe { Vec::from_raw_parts(s.ptr.as_ptr(), s.len, s.cap) }
    }
}

impl<T: Copy> Storage<T> {
    /// The write version: how many mutable accesses the values have had
    /// (see the field). Derived data built at one version is stale at any
    /// other.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// Records a write: bumps the version and drops the derived data.
    /// Every `&mut` access to the values calls it.
    #[inline]
    pub(crate) fn note_write(&mut self) {
        self.version = self.version.wrapping_add(1);
        if self.derived.get_mut().is_some() {
            self.derived.take();
        }
    }

    /// The derived data of type `D` for the current values: built by
    /// `build` when there is none (outside any arena, so that it lasts as
    /// long as the storage), `None` when the slot holds data of another
    /// type or `build` declines (returns `None`). The slot holds one
    /// entry, so its memory is bounded by the builder's (one packed copy
    /// of a weight), and it is dropped with the storage or by the next
    /// write.
    pub(crate) fn derived<D: std::any::Any + Send + Sync>(
        &self,
        build: impl FnOnce() -> Option<D>,
    ) -> Option<&D> {
        let version = self.version();
        let entry = match self.derived.get() {
            Some(e) => e,
            None => {
                // outside any arena (`runtime::outside_arena`'s body,
                // called here directly: the runtime sits above the storage)
                let data = super::freelists::with_target(super::freelists::current_base(), build)?;
                // Another thread may have filled the slot meanwhile: then
                // its entry (for the same values) is kept.
                let _ = self.derived.set(Derived {
                    version,
                    data: Box::new(data),
                });
                self.derived.get()?
            }
        };
        (entry.version == version)
            .then(|| entry.data.downcast_ref::<D>())
            .flatten()
    }

    /// Panics when this storage was made in an arena call that the arena
    /// has moved on from (see [`Arena`](crate::runtime::Arena)): its
    /// values are gone. Free outside arenas (one comparison).
    #[inline]
    fn check_fresh(&self) {
        if self.generation != 0 {
            self.check_arena();
        }
    }

    #[inline(never)]
    fn check_arena(&self) {
        let Some(mark) = self.pool.as_deref().and_then(|p| p.arena()) else {
            return;
        };
        let now = mark.generation.load(std::sync::atomic::Ordering::Acquire);
        if now != self.generation {
            stale(&mark.name, self.generation, now);
        }
    }
}

/// The panic of a read of an arena's output after the arena moved on.
#[cold]
#[inline(never)]
fn stale(arena: &str, made: u64, now: u64) -> ! {
    panic!(
        "arena \"{arena}\": a tensor made in its call {made} was read after call {now} \
         started (an arena's outputs last until its next call); keep a result past the \
         next call by copying it out first (Arena::keep)"
    )
}

impl<T: Copy> Drop for Storage<T> {
    fn drop(&mut self) {
        if self.block == 0 {
            // SAFETY: `(ptr, len, cap)` are a vector's raw parts, used
            // again by nothing after this.
            drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.cap) });
            return;
        }
        // SAFETY: `ptr` is the block handed out by `take` for `self.block`
        // bytes with `T`'s alignment, and nothing uses it after this.
        // `T: Copy` has no destructor to run on the elements.
        unsafe {
            give(
                self.ptr.cast::<u8>(),
                self.block,
                std::mem::align_of::<T>(),
                &self.pool,
            )
        };
    }
}

impl<T: Copy> Deref for Storage<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.check_fresh();
        // SAFETY: the first `len` elements are initialised, inside the
        // buffer `self` owns.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for Storage<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.check_fresh();
        self.note_write();
        // SAFETY: as in `deref`, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Clone for Storage<T> {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for Storage<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Copy + PartialEq> PartialEq for Storage<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Copy> Default for Storage<T> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<T: Copy> Extend<T> for Storage<T> {
    /// Appends the items: into the room the lower size hint reserves in
    /// one pass, the rest one by one through [`push`](Storage::push).
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let mut iter = iter.into_iter();
        self.reserve(iter.size_hint().0);
        let mut written = 0;
        // `zip` asks the slots first, so no item is taken past the room.
        for (slot, x) in self.spare_capacity_mut().iter_mut().zip(iter.by_ref()) {
            slot.write(x);
            written += 1;
        }
        self.len += written;
        for x in iter {
            self.push(x);
        }
    }
}

impl<T: Copy> FromIterator<T> for Storage<T> {
    /// Collects into a pooled buffer sized by the iterator's lower size
    /// hint (exact for slice iterators and their maps and zips).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut s = Self::with_capacity(iter.size_hint().0);
        s.extend(iter);
        s
    }
}

impl<'a, T: Copy> IntoIterator for &'a Storage<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Copy> From<Vec<T>> for Storage<T> {
    fn from(v: Vec<T>) -> Self {
        Self::from_vec(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_a_thread_local_drops_at_thread_exit_goes_back_quietly() {
        // A thread-local cache (autocast's converted weights) can outlive
        // the pool's own thread-locals: its storage is dropped during the
        // thread's exit, after them. Giving it back must not touch them
        // (it used to panic in a destructor, which aborts the process).
        thread_local! {
            static KEEP: std::cell::RefCell<Option<Storage<f32>>> =
                const { std::cell::RefCell::new(None) };
        }
        std::thread::spawn(|| {
            KEEP.with(|k| *k.borrow_mut() = Some((0..4096).map(|i| i as f32).collect()));
            let kept = KEEP.with(|k| k.borrow().as_ref().map(|s| s.block));
            assert!(kept.is_some_and(|b| b > 0), "the storage is pooled");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn elements_whose_size_does_not_divide_16_bytes_are_not_pooled() {
        // A pooled block's length is a multiple of 16 bytes, not of 12 or
        // 24: such elements take a plain vector (this used to trip the
        // block-size assertion: a Storage of per-channel (mean, scale,
        // shift) triples).
        for n in [1, 100, 1000] {
            let s: Storage<[f32; 3]> = (0..n).map(|i| [i as f32; 3]).collect();
            assert_eq!((s.len(), s.block), (n, 0));
            assert_eq!(s[n - 1], [(n - 1) as f32; 3]);
            let t: Storage<(f64, f64, f64)> = (0..n).map(|i| (i as f64, 0.0, 1.0)).collect();
            assert_eq!((t.len(), t.block), (n, 0));
        }
        assert!(
            Storage::<[f32; 4]>::with_capacity(100).block > 0,
            "16 bytes divide"
        );
    }

    #[test]
    fn pooled_storage_grows_through_the_pool() {
        let mut s = Storage::<u64>::with_capacity(8);
        let block = s.block;
        assert!(block > 0);
        s.extend(0..10_000u64);
        assert_eq!(s.len(), 10_000);
        assert_eq!(s[9_999], 9_999);
        assert!(s.block >= 10_000 * 8, "a larger pooled block");
        s.extend_from_slice(&[1, 2, 3]);
        for i in 0..5_000u64 {
            s.push(i);
        }
        assert_eq!((s.len(), s[10_001], s[15_002]), (15_003, 2, 4_999));
        // the whole block, except under ASan's poisoning (exactly the request)
        assert!(s.block >= 15_003 * 8 && (s.capacity() * 8 == s.block || super::super::asan::ON));
        let mut v = Storage::from_vec(vec![1u64]);
        v.extend(2..=1000u64);
        assert_eq!((v.len(), v[999], v.is_pooled()), (1000, 1000, false));
    }

    #[test]
    fn growing_past_the_capacity_moves_the_version_forward() {
        let mut s = Storage::<f32>::with_capacity(4);
        let cap = s.capacity();
        s.extend_from_slice(&vec![1.0; cap]);
        let (v, block) = (s.version(), s.block);
        s.push(2.0); // past the capacity: a new, larger block
        assert!(
            s.block > block && s.version() > v,
            "version {} after {v}",
            s.version()
        );
        let v = s.version();
        s.reserve(4 * s.capacity());
        assert!(
            s.version() > v,
            "reserve: version {} after {v}",
            s.version()
        );
        assert_eq!((s.len(), s[cap]), (cap + 1, 2.0));
    }

    #[test]
    fn pooled_blocks_start_on_a_cache_line_and_large_ones_on_2_mib() {
        for n in [1usize, 3, 100, 1000, 4097, 100_000] {
            let s = Storage::<f32>::with_capacity(n);
            assert_eq!(s.as_ptr() as usize % 64, 0, "{n} floats");
            let b = Storage::<u8>::with_capacity(n);
            assert_eq!(b.as_ptr() as usize % 64, 0, "{n} bytes");
        }
        let big = Storage::<f32>::zeroed(1 << 20);
        assert_eq!(big.as_ptr() as usize % (2 << 20), 0);
        assert!(big.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn storage_of_different_types_shares_nothing_it_should_not() {
        let a = Storage::filled(100, 1.5f64);
        let b = Storage::filled(100, 7i64);
        assert!(a.iter().all(|&x| x == 1.5));
        assert!(b.iter().all(|&x| x == 7));
        drop(a);
        let c = Storage::<i64>::filled(100, 3);
        assert!(c.iter().all(|&x| x == 3));
    }

    #[test]
    fn into_vec_keeps_the_values() {
        let s = Storage::map(&[1, 2, 3], |x: i32| x * 2);
        assert_eq!(s.into_vec(), vec![2, 4, 6]);
        assert_eq!(Storage::<f32>::default().len(), 0);
    }
}

//! [`Storage`]: a vector whose buffer comes from the pool and goes back to
//! it on drop.

use super::freelists::{count_wrapped, forget, give, pooled, take};
use std::fmt;
use std::mem::{size_of, ManuallyDrop, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A contiguous buffer of `T` whose memory comes from the CPU buffer pool
/// and returns to it when the storage is dropped (see
/// [`crate::cpu::memory`]). It derefs to a slice, and grows like a `Vec`.
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
/// use forge::cpu::memory::Storage;
/// let a = Storage::from_slice(&[1.0f32, 2.0, 3.0]);
/// let b = Storage::map(&a, |x| x * 10.0);
/// assert_eq!(&b[..], &[10.0, 20.0, 30.0]);
/// let c: Storage<f32> = a.iter().zip(b.iter()).map(|(x, y)| x + y).collect();
/// assert_eq!(&c[..], &[11.0, 22.0, 33.0]);
/// ```
pub struct Storage<T: Copy> {
    vec: ManuallyDrop<Vec<T>>,
    /// Bytes of the pooled block behind `vec`, or 0 when `vec` did not come
    /// from the pool.
    block: usize,
}

impl<T: Copy> Storage<T> {
    /// Empty storage with room for at least `n` elements, taken from the
    /// pool (no allocation when `n` is 0; a plain vector when the element
    /// size does not divide 16 bytes, the granularity of pooled blocks).
    ///
    /// ```
    /// let mut s = forge::cpu::memory::Storage::<f64>::with_capacity(3);
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
            return Storage {
                vec: ManuallyDrop::new(Vec::with_capacity(n)),
                block: 0,
            };
        }
        let b = take(bytes, align);
        debug_assert_eq!(b.bytes % size, 0);
        // SAFETY: `b.ptr` points to `b.bytes` bytes allocated with the
        // global allocator with alignment `align_of::<T>()`, and `b.bytes`
        // is a multiple of `size_of::<T>()` (classes are multiples of 16
        // bytes, or 64, and element sizes divide 16), so the allocation's
        // layout is exactly that of a `Vec<T>` of capacity `b.bytes / size`.
        // Length 0: nothing is claimed to be initialised.
        let vec = unsafe { Vec::from_raw_parts(b.ptr.as_ptr().cast::<T>(), 0, b.bytes / size) };
        Storage {
            vec: ManuallyDrop::new(vec),
            block: b.bytes,
        }
    }

    /// Wraps a vector without copying. Its buffer did not come from the
    /// pool, so it is freed to the OS on drop (and counted in
    /// [`PoolStats::wrapped`](super::PoolStats::wrapped)).
    ///
    /// ```
    /// let s = forge::cpu::memory::Storage::from_vec(vec![1u8, 2]);
    /// assert!(!s.is_pooled());
    /// ```
    pub fn from_vec(v: Vec<T>) -> Self {
        if v.capacity() > 0 && size_of::<T>() > 0 {
            count_wrapped();
        }
        Storage {
            vec: ManuallyDrop::new(v),
            block: 0,
        }
    }

    /// `n` copies of `v`.
    ///
    /// ```
    /// let s = forge::cpu::memory::Storage::filled(3, 7i64);
    /// assert_eq!(&s[..], &[7, 7, 7]);
    /// ```
    pub fn filled(n: usize, v: T) -> Self {
        let mut s = Self::with_capacity(n);
        s.vec.resize(n, v);
        s
    }

    /// `n` default values (zeros for numbers).
    ///
    /// ```
    /// assert_eq!(&forge::cpu::memory::Storage::<f32>::zeroed(2)[..], &[0.0, 0.0]);
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
    /// pass. `f32` and `f64` take the pooled buffer as it is, since every
    /// bit pattern is one of their values; other types, and sizes the pool
    /// does not serve, are zero-filled.
    pub(crate) fn stale(n: usize) -> Self
    where
        T: Default + 'static,
    {
        use std::any::TypeId;
        let mut s = Self::with_capacity(n);
        let any_bits =
            TypeId::of::<T>() == TypeId::of::<f32>() || TypeId::of::<T>() == TypeId::of::<f64>();
        if s.block > 0 && any_bits {
            // SAFETY: `n <= capacity()`; every byte of a pooled block is
            // initialised (allocated zeroed by `take`, and since then only
            // overwritten with values of element types, which have no
            // padding), and every bit pattern is a valid `f32` / `f64`.
            unsafe { s.vec.set_len(n) };
        } else {
            s.vec.resize(n, T::default());
        }
        s
    }

    /// A pooled copy of `src`.
    ///
    /// ```
    /// let s = forge::cpu::memory::Storage::from_slice(&[1, 2, 3]);
    /// assert_eq!(s.to_vec(), vec![1, 2, 3]);
    /// ```
    pub fn from_slice(src: &[T]) -> Self {
        let mut s = Self::with_capacity(src.len());
        s.vec.extend_from_slice(src);
        s
    }

    /// `out[i] = f(src[i])`, written into a pooled buffer in one pass.
    ///
    /// ```
    /// let s = forge::cpu::memory::Storage::map(&[1.0f32, 4.0], |x| x.sqrt());
    /// assert_eq!(&s[..], &[1.0, 2.0]);
    /// ```
    #[inline]
    pub fn map<A: Copy>(src: &[A], f: impl Fn(A) -> T) -> Self {
        let mut s = Self::with_capacity(src.len());
        s.vec.extend(src.iter().map(|&x| f(x)));
        s
    }

    /// `out[i] = f(a[i], b[i])`, written into a pooled buffer in one pass.
    ///
    /// # Panics
    /// When the lengths differ.
    ///
    /// ```
    /// let s = forge::cpu::memory::Storage::zip(&[1.0f32, 2.0], &[3.0, 4.0], |x, y| x * y);
    /// assert_eq!(&s[..], &[3.0, 8.0]);
    /// ```
    #[inline]
    pub fn zip<A: Copy, B: Copy>(a: &[A], b: &[B], f: impl Fn(A, B) -> T) -> Self {
        assert_eq!(a.len(), b.len(), "Storage::zip: lengths differ");
        let mut s = Self::with_capacity(a.len());
        s.vec.extend(a.iter().zip(b).map(|(&x, &y)| f(x, y)));
        s
    }

    /// Appends one element (growing like a `Vec` past the capacity).
    ///
    /// ```
    /// let mut s = forge::cpu::memory::Storage::with_capacity(1);
    /// s.push(5u32);
    /// assert_eq!(&s[..], &[5]);
    /// ```
    #[inline]
    pub fn push(&mut self, x: T) {
        self.vec.push(x);
    }

    /// Appends a slice.
    ///
    /// ```
    /// let mut s = forge::cpu::memory::Storage::with_capacity(2);
    /// s.extend_from_slice(&[1u8, 2]);
    /// assert_eq!(s.len(), 2);
    /// ```
    pub fn extend_from_slice(&mut self, src: &[T]) {
        self.vec.extend_from_slice(src);
    }

    /// The number of elements the buffer holds without growing.
    ///
    /// ```
    /// assert!(forge::cpu::memory::Storage::<f32>::with_capacity(10).capacity() >= 10);
    /// ```
    pub fn capacity(&self) -> usize {
        self.vec.capacity()
    }

    /// Whether the buffer came from the pool (and goes back on drop).
    ///
    /// ```
    /// assert!(forge::cpu::memory::Storage::<f32>::zeroed(4).is_pooled());
    /// ```
    pub fn is_pooled(&self) -> bool {
        self.block > 0
    }

    /// The unused part of the buffer (`len..capacity`), to be written
    /// before [`set_len`](Self::set_len) claims it.
    ///
    /// ```
    /// let mut s = forge::cpu::memory::Storage::<f32>::with_capacity(2);
    /// for (i, slot) in s.spare_capacity_mut()[..2].iter_mut().enumerate() {
    ///     slot.write(i as f32);
    /// }
    /// // SAFETY: both elements were written just above.
    /// unsafe { s.set_len(2) };
    /// assert_eq!(&s[..], &[0.0, 1.0]);
    /// ```
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<T>] {
        self.vec.spare_capacity_mut()
    }

    /// Sets the length.
    ///
    /// # Safety
    /// `n <= capacity()`, and elements `len()..n` have been written through
    /// [`spare_capacity_mut`](Self::spare_capacity_mut).
    pub unsafe fn set_len(&mut self, n: usize) {
        // SAFETY: forwarded to the caller.
        unsafe { self.vec.set_len(n) }
    }

    /// Moves the elements out as a `Vec` without copying; the buffer leaves
    /// the pool for good.
    ///
    /// ```
    /// let s = forge::cpu::memory::Storage::from_slice(&[1, 2]);
    /// assert_eq!(s.into_vec(), vec![1, 2]);
    /// ```
    pub fn into_vec(mut self) -> Vec<T> {
        if self.block > 0 {
            forget(self.block);
            self.block = 0;
        }
        let v = std::mem::take(&mut *self.vec);
        // `self` now holds an empty, unallocated vector; dropping it is a no-op.
        v
    }
}

impl<T: Copy> Drop for Storage<T> {
    fn drop(&mut self) {
        // SAFETY: `self.vec` is never used again after this line.
        let v = unsafe { ManuallyDrop::take(&mut self.vec) };
        if self.block == 0 {
            return drop(v);
        }
        if v.capacity() * size_of::<T>() != self.block {
            // The vector grew past its block and the allocator moved it:
            // the block is gone; free the new buffer normally.
            forget(self.block);
            return drop(v);
        }
        let mut v = ManuallyDrop::new(v);
        let ptr = NonNull::new(v.as_mut_ptr().cast::<u8>()).expect("pooled storage is allocated");
        // SAFETY: `ptr` is the unmoved block handed out by `take` for
        // `self.block` bytes with `T`'s alignment (its capacity still spans
        // exactly the block), and `v` is forgotten, so nothing uses it again.
        // `T: Copy` has no destructor to run on the elements.
        unsafe { give(ptr, self.block, std::mem::align_of::<T>()) };
    }
}

impl<T: Copy> Deref for Storage<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        &self.vec
    }
}

impl<T: Copy> DerefMut for Storage<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.vec
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
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        self.vec.extend(iter);
    }
}

impl<T: Copy> FromIterator<T> for Storage<T> {
    /// Collects into a pooled buffer sized by the iterator's lower size
    /// hint (exact for slice iterators and their maps and zips).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut s = Self::with_capacity(iter.size_hint().0);
        s.vec.extend(iter);
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
    fn grown_storage_is_not_returned_to_the_pool() {
        let mut s = Storage::<u64>::with_capacity(8);
        let block = s.block;
        assert!(block > 0);
        s.extend(0..10_000u64);
        assert_eq!(s.len(), 10_000);
        assert_eq!(s[9_999], 9_999);
        // Drop must notice the reallocation (the freed block was the
        // allocator's to free) and not list the new buffer under the old
        // class.
        drop(s);
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

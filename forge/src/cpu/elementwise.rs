//! Elementwise maps over contiguous slices, written as plain loops the
//! compiler vectorises.

/// `out[i] = f(a[i])`.
///
/// ```
/// let v = forge::cpu::elementwise::map(&[1.0f32, 2.0], |x| x * 2.0);
/// assert_eq!(v, vec![2.0, 4.0]);
/// ```
#[inline]
pub fn map<A: Copy, B>(a: &[A], f: impl Fn(A) -> B) -> Vec<B> {
    a.iter().map(|&x| f(x)).collect()
}

/// `out[i] = f(a[i], b[i])` for equal-length slices.
///
/// # Panics
/// When the lengths differ.
///
/// ```
/// let v = forge::cpu::elementwise::zip(&[1.0f32, 2.0], &[3.0, 4.0], |x, y| x + y);
/// assert_eq!(v, vec![4.0, 6.0]);
/// ```
#[inline]
pub fn zip<A: Copy, B: Copy, C>(a: &[A], b: &[B], f: impl Fn(A, B) -> C) -> Vec<C> {
    assert_eq!(a.len(), b.len(), "zip: length mismatch");
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

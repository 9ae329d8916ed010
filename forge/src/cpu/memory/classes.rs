//! Size classes of the buffer pool.
//!
//! A request of `b` bytes is served by a buffer of the smallest class of at
//! least `b` bytes. Classes are 64 bytes and below one class, then four
//! classes per power of two (`2^p * 5/4, 6/4, 7/4, 8/4`), so at most a
//! quarter of a buffer is slack. Every class above 64 bytes is a multiple
//! of 16 bytes, so a class holds a whole number of elements of every
//! element type (1, 2, 4, 8 or 16 bytes).

/// Requests above this many bytes bypass the pool.
pub(crate) const MAX_POOLED: usize = 1 << 40;

/// Number of classes: enough for every size up to [`MAX_POOLED`].
pub(crate) const CLASSES: usize = 1 + 4 * (40 - 6);

/// The class index serving `bytes` (in `1..=MAX_POOLED`).
pub(crate) fn class_of(bytes: usize) -> usize {
    if bytes <= 64 {
        return 0;
    }
    // bytes in (2^p, 2^(p+1)], p >= 6; quarter steps of 2^(p-2).
    let p = usize::BITS as usize - 1 - (bytes - 1).leading_zeros() as usize;
    let step = 1usize << (p - 2);
    let k = (bytes - (1usize << p)).div_ceil(step); // 1..=4
    1 + 4 * (p - 6) + (k - 1)
}

/// The byte size of class `c`.
pub(crate) fn class_bytes(c: usize) -> usize {
    if c == 0 {
        return 64;
    }
    let p = (c - 1) / 4 + 6;
    let k = (c - 1) % 4 + 1;
    (1usize << p) + k * (1usize << (p - 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_requests_with_at_most_a_quarter_slack() {
        for bytes in (1..5000).chain([1 << 20, (1 << 20) + 1, 3 << 27, MAX_POOLED - 1, MAX_POOLED])
        {
            let c = class_of(bytes);
            let size = class_bytes(c);
            assert!(size >= bytes, "{bytes} -> class {c} of {size}");
            assert!(
                c == 0 || class_bytes(c - 1) < bytes,
                "{bytes}: class {c} not the smallest"
            );
            assert!(
                bytes <= 64 || size - bytes < size / 4 + 1,
                "{bytes}: {size}"
            );
            assert!(size.is_multiple_of(16));
            assert!(c < CLASSES);
        }
    }

    #[test]
    fn class_sizes_increase() {
        for c in 1..CLASSES {
            assert!(class_bytes(c) > class_bytes(c - 1));
        }
        assert_eq!(
            (0..6).map(class_bytes).collect::<Vec<_>>(),
            vec![64, 80, 96, 112, 128, 160]
        );
    }
}

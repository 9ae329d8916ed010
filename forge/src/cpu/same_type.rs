//! Slices of a generic element type seen as a concrete one when the two
//! are the same type: how the generic kernels hand `f32` data to their
//! `f32` fast paths. One place for the `TypeId` check and the
//! reinterpretation it makes sound.

use std::any::TypeId;
use std::mem::MaybeUninit;

/// Whether `E` is `T`.
#[inline(always)]
pub(crate) fn is<E: 'static, T: 'static>() -> bool {
    TypeId::of::<E>() == TypeId::of::<T>()
}

/// `x` as `&[T]` when `E` is `T`, else `None`.
#[inline(always)]
pub(crate) fn cast<E: 'static, T: 'static>(x: &[E]) -> Option<&[T]> {
    // SAFETY: `E` is `T` (checked), so this reinterprets the slice as
    // itself: the same length, layout and lifetime.
    is::<E, T>().then(|| unsafe { &*(x as *const [E] as *const [T]) })
}

/// `x` as `&mut [T]` when `E` is `T`, else `None` (the borrow moves into
/// the result).
#[inline(always)]
pub(crate) fn cast_mut<E: 'static, T: 'static>(x: &mut [E]) -> Option<&mut [T]> {
    // SAFETY: as in `cast`: `E` is `T`.
    is::<E, T>().then(|| unsafe { &mut *(x as *mut [E] as *mut [T]) })
}

/// `x` as `&mut [MaybeUninit<T>]` when `E` is `T`, else `None`.
#[inline(always)]
pub(crate) fn cast_uninit<E: 'static, T: 'static>(
    x: &mut [MaybeUninit<E>],
) -> Option<&mut [MaybeUninit<T>]> {
    // SAFETY: as in `cast`: `E` is `T`, so `MaybeUninit<E>` is
    // `MaybeUninit<T>`.
    is::<E, T>().then(|| unsafe { &mut *(x as *mut [MaybeUninit<E>] as *mut [MaybeUninit<T>]) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_only_to_the_same_type() {
        let mut v = [1.5f32, -2.0];
        assert!(is::<f32, f32>() && !is::<f32, f64>());
        assert_eq!(cast::<f32, f32>(&v), Some(&[1.5f32, -2.0][..]));
        assert_eq!(cast::<f32, f64>(&v), None);
        cast_mut::<f32, f32>(&mut v).expect("f32 is f32")[1] = 3.0;
        assert_eq!(v, [1.5, 3.0]);
        assert!(cast_mut::<f32, u32>(&mut v).is_none());
        let mut u = [MaybeUninit::<f64>::uninit(); 2];
        assert_eq!(cast_uninit::<f64, f64>(&mut u).map(|s| s.len()), Some(2));
        assert!(cast_uninit::<f64, f32>(&mut u).is_none());
    }
}

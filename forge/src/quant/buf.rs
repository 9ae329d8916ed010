//! The f32 buffers the int8 layers work in, taken from forge's buffer pool
//! (`cpu::memory`) instead of fresh vectors: a large `Vec` is a C-allocator
//! buffer, mapped on every call and faulted in page by page, while a pooled
//! buffer is reused from the previous call of the same shape.

use crate::cpu::memory::Storage;
use crate::tensor::{Element, Float, Tensor};
use std::any::{Any, TypeId};
use std::ops::Deref;

/// `f32` values borrowed from a tensor of `f32`, or converted into a pooled
/// buffer from any other float type.
pub(crate) enum F32In<'a> {
    /// The tensor's own values.
    Borrowed(&'a [f32]),
    /// A pooled copy.
    Owned(Storage<f32>),
}

impl Deref for F32In<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            F32In::Borrowed(s) => s,
            F32In::Owned(s) => s,
        }
    }
}

/// `x`'s values (row-major) as `f32`, without a copy when `E` is `f32`.
pub(crate) fn f32_values<E: Float>(x: &[E]) -> F32In<'_> {
    if TypeId::of::<E>() == TypeId::of::<f32>() {
        // SAFETY: `E` is `f32`, so this reinterprets the slice as itself
        // (same length, layout and lifetime).
        F32In::Borrowed(unsafe { &*(x as *const [E] as *const [f32]) })
    } else {
        F32In::Owned(Storage::map(x, |v| Element::to_f64(v) as f32))
    }
}

/// A tensor of `E` holding `y` (pooled), without a copy when `E` is `f32`.
///
/// # Panics
/// When `y.len()` does not fill `shape`.
pub(crate) fn tensor_from_f32<E: Float>(y: Storage<f32>, shape: &[usize]) -> Tensor<E> {
    match (Box::new(y) as Box<dyn Any>).downcast::<Storage<E>>() {
        Ok(s) => Tensor::from_storage(*s, shape),
        Err(y) => {
            let y = y
                .downcast::<Storage<f32>>()
                .expect("the box holds the f32 storage");
            Tensor::from_storage(Storage::map(&y, |v| E::from_f64(f64::from(v))), shape)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_is_borrowed_and_other_floats_are_converted() {
        let a = [1.0f32, 2.5];
        assert!(matches!(f32_values(&a[..]), F32In::Borrowed(_)));
        let b = [1.0f64, 2.5];
        let v = f32_values(&b[..]);
        assert!(matches!(v, F32In::Owned(_)));
        assert_eq!(&*v, &[1.0f32, 2.5]);
        let t = tensor_from_f32::<f64>(Storage::from_slice(&[0.5f32, 3.0]), &[2, 1]);
        assert_eq!(t.to_vec(), vec![0.5, 3.0]);
        let t = tensor_from_f32::<f32>(Storage::from_slice(&[0.5f32]), &[1]);
        assert_eq!(t.to_vec(), vec![0.5]);
    }
}

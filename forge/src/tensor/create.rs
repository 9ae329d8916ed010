//! Tensor creation: constants, ranges, identity.

use super::{numel, Device, Element, Tensor};
use crate::cpu::Storage;

impl<E: Element, D: Device> Tensor<E, D> {
    /// A 0-d tensor (shape `[]`) holding one value.
    ///
    /// ```
    /// let s = forge::Tensor::<f32>::scalar(2.0);
    /// assert_eq!(s.shape(), &[] as &[usize]);
    /// ```
    pub fn scalar(v: E) -> Self {
        Self::from_parts(D::filled(1, v), [].into(), None)
    }

    /// A tensor filled with `v`.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::full(&[2], 7.0).to_vec(), vec![7.0, 7.0]);
    /// ```
    pub fn full(shape: &[usize], v: E) -> Self {
        Self::from_parts(D::filled(numel(shape), v), shape.into(), None)
    }

    /// A tensor of zeros.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::zeros(&[3]).to_vec(), vec![0.0; 3]);
    /// ```
    pub fn zeros(shape: &[usize]) -> Self {
        Self::full(shape, E::ZERO)
    }

    /// A tensor of ones.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f32>::ones(&[3]).to_vec(), vec![1.0; 3]);
    /// ```
    pub fn ones(shape: &[usize]) -> Self {
        Self::full(shape, E::ONE)
    }

    /// Zeros with the shape of `other`.
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::ones(&[2, 2]);
    /// assert_eq!(forge::Tensor::zeros_like(&a).shape(), &[2, 2]);
    /// ```
    pub fn zeros_like(other: &Self) -> Self {
        Self::zeros(other.shape())
    }

    /// Ones with the shape of `other`.
    ///
    /// ```
    /// let a = forge::Tensor::<f32>::zeros(&[2]);
    /// assert_eq!(forge::Tensor::ones_like(&a).to_vec(), vec![1.0, 1.0]);
    /// ```
    pub fn ones_like(other: &Self) -> Self {
        Self::ones(other.shape())
    }

    /// A tensor whose element at flat index `i` is `f(i)`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_fn(&[3], |i| i as f32 * 2.0);
    /// assert_eq!(t.to_vec(), vec![0.0, 2.0, 4.0]);
    /// ```
    pub fn from_fn(shape: &[usize], f: impl FnMut(usize) -> E) -> Self {
        let data: Storage<E> = (0..numel(shape)).map(f).collect();
        Self::from_parts(data, shape.into(), None)
    }

    /// `start, start + step, ...` up to but excluding `end`, as
    /// `torch.arange`.
    ///
    /// # Panics
    /// When `step` is zero or has the wrong sign for the range.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::arange(0.0, 5.0, 2.0);
    /// assert_eq!(t.to_vec(), vec![0.0, 2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn arange(start: f64, end: f64, step: f64) -> Self {
        shape_assert!(
            step != 0.0 && ((end - start) / step).is_finite(),
            "arange: invalid step {step} for range {start}..{end}"
        );
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        Self::from_fn(&[n], |i| E::from_f64(start + step * i as f64))
    }

    /// `steps` evenly spaced values from `start` to `end` inclusive, as
    /// `torch.linspace`.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::linspace(0.0, 1.0, 5);
    /// assert_eq!(t.to_vec(), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    /// ```
    pub fn linspace(start: f64, end: f64, steps: usize) -> Self {
        let step = if steps > 1 {
            (end - start) / (steps - 1) as f64
        } else {
            0.0
        };
        // PyTorch fills the second half from the end so that the last value
        // is exactly `end`.
        let half = steps / 2;
        Self::from_fn(&[steps], |i| {
            if i < half {
                E::from_f64(start + step * i as f64)
            } else {
                E::from_f64(end - step * (steps - 1 - i) as f64)
            }
        })
    }

    /// The `n x n` identity matrix.
    ///
    /// ```
    /// let i = forge::Tensor::<f32>::eye(2);
    /// assert_eq!(i.to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
    /// ```
    pub fn eye(n: usize) -> Self {
        Self::from_fn(&[n, n], |i| if i / n == i % n { E::ONE } else { E::ZERO })
    }
}

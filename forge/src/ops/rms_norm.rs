//! Root-mean-square normalisation (`F.rms_norm`).

use crate::tensor::{Device, Float, Tensor};

/// `x / sqrt(mean(x^2) + eps) * weight` over the trailing
/// `normalized_shape` (`F.rms_norm(input, normalized_shape, weight, eps)`;
/// `eps = None` is the element type's machine epsilon, as PyTorch's).
///
/// # Panics
/// When the input's shape does not end with `normalized_shape` or
/// `weight` does not have that shape.
///
/// ```
/// use forge::nn::functional::rms_norm;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![3.0, -3.0, 1.0, 1.0], &[2, 2]);
/// let y = rms_norm(&x, &[2], None, Some(0.0));
/// assert_eq!(y.to_vec(), vec![1.0, -1.0, 1.0, 1.0]);
/// ```
#[track_caller]
pub fn rms_norm<E: Float, D: Device>(
    input: &Tensor<E, D>,
    normalized_shape: &[usize],
    weight: Option<&Tensor<E, D>>,
    eps: Option<f64>,
) -> Tensor<E, D> {
    let (r, k) = (input.rank(), normalized_shape.len());
    shape_assert!(
        r >= k && &input.shape()[r - k..] == normalized_shape,
        "rms_norm: input of shape {:?} does not end with normalized_shape {normalized_shape:?}",
        input.shape()
    );
    if let Some(w) = weight {
        shape_assert!(
            w.shape() == normalized_shape,
            "rms_norm: weight of shape {:?} for normalized_shape {normalized_shape:?}",
            w.shape()
        );
    }
    let eps = eps.unwrap_or_else(|| E::epsilon().to_f64());
    let dims: Vec<isize> = (r - k..r).map(|d| d as isize).collect();
    let y = input.mul(
        &input
            .square()
            .mean_dim(&dims, true)
            .add_scalar(E::from_f64(eps))
            .rsqrt(),
    );
    match weight {
        Some(w) => y.mul(w),
        None => y,
    }
}

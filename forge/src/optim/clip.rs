//! Gradient clipping: `torch.nn.utils.clip_grad_norm_` and
//! `clip_grad_value_`.

use crate::autograd::Gradients;
use crate::tensor::{Element, Float};
use crate::{ForgeError, Result};

/// Scales every gradient so that their total (L2) norm is at most
/// `max_norm`, and returns the total norm before clipping: PyTorch's
/// `clip_grad_norm_(params, max_norm)`. Other norms:
/// [`clip_grad_norm_with`].
///
/// ```
/// use forge::{Gradients, Tensor};
/// use forge::optim::clip_grad_norm;
/// let w = Tensor::<f64>::zeros(&[2]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![3.0, 4.0], &[2]));
/// assert_eq!(clip_grad_norm(&mut g, 1.0), 5.0);
/// ```
pub fn clip_grad_norm<E: Float>(grads: &mut Gradients<E>, max_norm: f64) -> E {
    clip_grad_norm_with(grads, max_norm, 2.0)
}

/// Scales every gradient so that their total norm is at most `max_norm`,
/// and returns the total norm *before* clipping.
///
/// The total norm is the `norm_type`-norm of all gradients concatenated
/// (`f64::INFINITY` for the largest absolute value). Every gradient is
/// multiplied by `min(max_norm / (total + 1e-6), 1)`, as PyTorch does: a
/// total exactly equal to `max_norm` is still scaled by
/// `max_norm / (max_norm + 1e-6)`; a NaN anywhere makes the total and so
/// every gradient NaN, as in PyTorch. The norm is accumulated in a fixed
/// order (ascending tensor id), so the result is reproducible.
///
/// # Panics
/// When `norm_type` is not positive (or NaN).
///
/// ```
/// use forge::{Gradients, Tensor};
/// use forge::optim::clip_grad_norm_with;
/// let w = Tensor::<f64>::zeros(&[2]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![3.0, 4.0], &[2]));
/// let total = clip_grad_norm_with(&mut g, 1.0, 2.0);
/// assert_eq!(total, 5.0);
/// let c = g.get(&w).unwrap().to_vec();
/// assert!((c[0] - 0.6).abs() < 1e-6 && (c[1] - 0.8).abs() < 1e-6);
/// ```
pub fn clip_grad_norm_with<E: Float>(grads: &mut Gradients<E>, max_norm: f64, norm_type: f64) -> E {
    let total = total_norm(grads, norm_type);
    scale_by(grads, max_norm, total)
}

/// [`clip_grad_norm_with`] with PyTorch's `error_if_nonfinite` option:
/// when it is on and the total norm is NaN or infinite, nothing is changed
/// and the error says so (naming the first gradient that holds a
/// non-finite value, by its position in ascending tensor-id order).
///
/// # Errors
/// [`ForgeError::NonFinite`] when `error_if_nonfinite` is on and the total
/// norm is not finite.
///
/// # Panics
/// When `norm_type` is not positive (or NaN).
///
/// ```
/// use forge::{ForgeError, Gradients, Tensor};
/// use forge::optim::try_clip_grad_norm;
/// let w = Tensor::<f32>::zeros(&[2]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![3.0, f32::NAN], &[2]));
/// let err = try_clip_grad_norm(&mut g, 1.0, 2.0, true).unwrap_err();
/// assert!(matches!(err, ForgeError::NonFinite { .. }));
/// assert_eq!(g.get(&w).unwrap().to_vec()[0], 3.0); // unchanged
/// // Off, it behaves as clip_grad_norm_with: the NaN spreads.
/// assert!(try_clip_grad_norm(&mut g, 1.0, 2.0, false).unwrap().is_nan());
/// ```
pub fn try_clip_grad_norm<E: Float>(
    grads: &mut Gradients<E>,
    max_norm: f64,
    norm_type: f64,
    error_if_nonfinite: bool,
) -> Result<E> {
    let total = total_norm(grads, norm_type);
    if error_if_nonfinite && !total.is_finite() {
        let culprit = grads
            .iter()
            .enumerate()
            .find_map(|(k, g)| crate::tools::first_nonfinite(g.as_slice()).map(|(i, v)| (k, i, v)));
        let detail = match culprit {
            Some((k, i, v)) => format!(
                "the {norm_type}-norm is {total}: gradient {k} (in tensor-id order) holds {v} at index {i}"
            ),
            None => format!("the {norm_type}-norm is {total} (the sum overflowed)"),
        };
        return Err(ForgeError::NonFinite {
            name: "total norm of the gradients".into(),
            detail,
        });
    }
    Ok(scale_by(grads, max_norm, total))
}

/// The total `norm_type`-norm of every gradient, in ascending id order.
fn total_norm<E: Float>(grads: &Gradients<E>, norm_type: f64) -> f64 {
    assert!(
        norm_type > 0.0,
        "clip_grad_norm: norm_type must be positive, got {norm_type}"
    );
    if norm_type == f64::INFINITY {
        grads
            .iter()
            .flat_map(|g| g.as_slice().iter())
            .fold(0.0f64, |m, x| {
                let a = Element::to_f64(*x).abs();
                if a > m || a.is_nan() {
                    a
                } else {
                    m
                }
            })
    } else {
        // Per-tensor norms, then the norm of the norms (PyTorch's order).
        let p = norm_type;
        let norms: Vec<f64> = grads
            .iter()
            .map(|g| lp_norm(g.as_slice().iter().map(|x| Element::to_f64(*x)), p))
            .collect();
        lp_norm(norms.into_iter(), p)
    }
}

/// Multiplies every gradient by `min(max_norm / (total + 1e-6), 1)` and
/// returns `total`.
fn scale_by<E: Float>(grads: &mut Gradients<E>, max_norm: f64, total: f64) -> E {
    // PyTorch clamps with `clamp(max=1)`, which keeps a NaN (a NaN gradient
    // then turns every gradient into NaN); `f64::min` would pick 1.0.
    let raw = max_norm / (total + 1e-6);
    let coef = if raw.is_nan() { raw } else { raw.min(1.0) };
    let c = E::from_f64(coef);
    for g in grads.iter_mut() {
        *g = g.map(|x| x * c);
    }
    E::from_f64(total)
}

fn lp_norm(xs: impl Iterator<Item = f64>, p: f64) -> f64 {
    if p == 2.0 {
        xs.map(|x| x * x).sum::<f64>().sqrt()
    } else if p == 1.0 {
        xs.map(f64::abs).sum()
    } else {
        xs.map(|x| x.abs().powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// Clamps every gradient element to `[-clip_value, clip_value]`.
///
/// # Panics
/// When `clip_value` is negative or NaN.
///
/// ```
/// use forge::{Gradients, Tensor};
/// let w = Tensor::<f32>::zeros(&[3]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::from_vec(vec![-2.0, 0.05, 7.0], &[3]));
/// forge::optim::clip_grad_value(&mut g, 0.1);
/// assert_eq!(g.get(&w).unwrap().to_vec(), vec![-0.1, 0.05, 0.1]);
/// ```
pub fn clip_grad_value<E: Float>(grads: &mut Gradients<E>, clip_value: f64) {
    assert!(
        clip_value >= 0.0,
        "clip_grad_value: clip_value must be >= 0, got {clip_value}"
    );
    let hi = E::from_f64(clip_value);
    let lo = -hi;
    for g in grads.iter_mut() {
        // into a pooled buffer; a NaN stays NaN, as torch.clamp_
        *g = g.map(|x| {
            if x < lo {
                lo
            } else if x > hi {
                hi
            } else {
                x
            }
        });
    }
}

//! `F.bilinear`: `y = x1^T A x2 + b` per output feature, one `einsum`
//! (so gradients of every order come from its ops).

use crate::tensor::{Device, Float, Tensor};

/// `F.bilinear(x1, x2, weight, bias)`: `y[.., o] = sum_ij x1[.., i]
/// weight[o, i, j] x2[.., j] + bias[o]`, for inputs `[.., in1]` and
/// `[.., in2]` with the same leading dimensions, `weight [out, in1, in2]`
/// and an optional `bias [out]`. Differentiable in all four.
///
/// # Panics
/// When the shapes do not fit (naming them).
///
/// ```
/// use forge::nn::functional::bilinear;
/// use forge::Tensor;
/// let x1 = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 2]);
/// let x2 = Tensor::<f32>::from_vec(vec![3.0], &[1, 1]);
/// let w = Tensor::<f32>::from_vec(vec![1.0, 1.0, 0.0, 1.0], &[2, 2, 1]);
/// let b = Tensor::<f32>::from_vec(vec![0.5, 0.0], &[2]);
/// assert_eq!(bilinear(&x1, &x2, &w, Some(&b)).to_vec(), vec![9.5, 6.0]);
/// ```
#[track_caller]
pub fn bilinear<E: Float, D: Device>(
    x1: &Tensor<E, D>,
    x2: &Tensor<E, D>,
    weight: &Tensor<E, D>,
    bias: Option<&Tensor<E, D>>,
) -> Tensor<E, D> {
    let (s1, s2, w) = (x1.shape(), x2.shape(), weight.shape());
    let fits = !s1.is_empty()
        && s1.len() == s2.len()
        && s1[..s1.len() - 1] == s2[..s2.len() - 1]
        && w.len() == 3
        && w[1] == s1[s1.len() - 1]
        && w[2] == s2[s2.len() - 1]
        && bias.is_none_or(|b| b.shape() == [w[0]]);
    assert!(
        fits,
        "bilinear: inputs {s1:?} and {s2:?} with weight {w:?} and bias {:?} (need [.., in1], [.., in2], [out, in1, in2], [out])",
        bias.map(|b| b.shape().to_vec())
    );
    let y = Tensor::einsum("...i,oij,...j->...o", &[x1, weight, x2]);
    match bias {
        Some(b) => y.add(b),
        None => y,
    }
}

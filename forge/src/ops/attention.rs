//! Scaled dot-product attention.

use super::softmax_masked::{MaskTerm, ScoreMask};
use crate::tensor::{broadcast_shapes, Device, Float, Tensor};

/// The attention probabilities `softmax(q k^T / sqrt(d) + mask)`, shape
/// `(..., L, S)`, with `mask` applied inside the softmax kernel (no mask
/// tensor is built); see [`scaled_dot_product_attention`].
#[track_caller]
pub(crate) fn attention_probs<E: Float, D: Device>(
    q: &Tensor<E, D>,
    k: &Tensor<E, D>,
    mask: &ScoreMask<D>,
) -> Tensor<E, D> {
    let e = q.dim(-1);
    let scores = q
        .matmul_t(k)
        .mul_scalar(E::from_f64(1.0 / (e as f64).sqrt()));
    if mask.terms.is_empty() && !mask.causal {
        return scores.softmax(-1);
    }
    scores.softmax_masked(mask)
}

/// The mask of [`scaled_dot_product_attention`] over scores of shape
/// `scores`: `attn_mask` is `true` where attention is allowed.
///
/// # Panics
/// When `attn_mask` does not broadcast to the scores.
fn sdpa_mask<D: Device>(
    attn_mask: Option<&Tensor<bool, D>>,
    is_causal: bool,
    scores: &[usize],
) -> ScoreMask<D> {
    let op = "scaled_dot_product_attention";
    let terms = match attn_mask {
        Some(m) => {
            let term = MaskTerm::broadcast(m, scores, false).unwrap_or_else(|| {
                shape_panic!(
                    "{op}: attn_mask of shape {:?} does not broadcast to the scores' shape {scores:?}",
                    m.shape()
                )
            });
            vec![term]
        }
        None => Vec::new(),
    };
    ScoreMask {
        terms,
        causal: is_causal,
    }
}

fn check_qkv<E: Float, D: Device>(q: &Tensor<E, D>, k: &Tensor<E, D>, v: &Tensor<E, D>) {
    let op = "scaled_dot_product_attention";
    shape_assert!(
        q.rank() >= 2 && k.rank() >= 2 && v.rank() >= 2,
        "{op}: q, k, v need rank >= 2, got shapes {:?}, {:?}, {:?}",
        q.shape(),
        k.shape(),
        v.shape()
    );
    shape_assert!(
        q.dim(-1) == k.dim(-1) && k.dim(-2) == v.dim(-2),
        "{op}: q {:?}, k {:?}, v {:?}: q and k need the same last dimension and k and v the same sequence length",
        q.shape(),
        k.shape(),
        v.shape()
    );
}

/// `softmax(q k^T / sqrt(d) + mask) v` for `q` of shape `(..., L, d)`, `k`
/// of shape `(..., S, d)` and `v` of shape `(..., S, dv)` (leading
/// dimensions broadcast), giving `(..., L, dv)`.
///
/// `attn_mask` (broadcastable to `(..., L, S)`) is `true` where a query may
/// attend to a key, as in PyTorch; masked scores are set to `-inf` before
/// the softmax. `is_causal` masks keys after the query (`j > i`); it may be
/// combined with `attn_mask`. A query with every key masked gets NaN, as in
/// PyTorch.
///
/// # Panics
/// When the ranks are below 2, the feature or sequence dimensions do not
/// match, or the mask does not broadcast to the scores.
///
/// ```
/// use forge::nn::functional::scaled_dot_product_attention;
/// use forge::Tensor;
/// let q = Tensor::<f64>::zeros(&[2, 4]);
/// let k = Tensor::<f64>::zeros(&[2, 4]);
/// let v = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
/// // Uniform attention, except that the first query sees only the first key.
/// let y = scaled_dot_product_attention(&q, &k, &v, None, true);
/// assert_eq!(y.to_vec(), vec![1.0, 2.0, 2.0, 3.0]);
/// ```
#[track_caller]
pub fn scaled_dot_product_attention<E: Float, D: Device>(
    q: &Tensor<E, D>,
    k: &Tensor<E, D>,
    v: &Tensor<E, D>,
    attn_mask: Option<&Tensor<bool, D>>,
    is_causal: bool,
) -> Tensor<E, D> {
    check_qkv(q, k, v);
    let lead = broadcast_shapes(&q.shape()[..q.rank() - 2], &k.shape()[..k.rank() - 2])
        .unwrap_or_else(|| {
            shape_panic!(
                "scaled_dot_product_attention: the batch dimensions of q {:?} and k {:?} do not broadcast",
                q.shape(),
                k.shape()
            )
        });
    let scores = [&lead[..], &[q.dim(-2), k.dim(-2)]].concat();
    let mask = sdpa_mask(attn_mask, is_causal, &scores);
    attention_probs(q, k, &mask).matmul(v)
}

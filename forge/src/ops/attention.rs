//! Scaled dot-product attention.

use crate::cpu::Storage;
use crate::tensor::{broadcast_shapes, Device, Float, Tensor};

/// The additive mask (0 where attention is allowed, `-inf` elsewhere) of
/// shape `mask.shape()` broadcast with `(L, S)`, or `None` when nothing is
/// masked.
fn additive_mask<E: Float, D: Device>(
    attn_mask: Option<&Tensor<bool, D>>,
    is_causal: bool,
    l: usize,
    s: usize,
) -> Option<Tensor<E, D>> {
    if attn_mask.is_none() && !is_causal {
        return None;
    }
    let shape = match attn_mask {
        Some(m) => broadcast_shapes(m.shape(), &[l, s]).unwrap_or_else(|| {
            panic!(
                "scaled_dot_product_attention: attn_mask of shape {:?} does not broadcast to (L, S) = ({l}, {s})",
                m.shape()
            )
        }),
        None => vec![l, s],
    };
    let allowed: Storage<bool> = match attn_mask {
        Some(m) => crate::cpu::broadcast::expand(m.as_slice(), m.shape(), &shape),
        None => Storage::filled(l * s, true),
    };
    let data = allowed
        .iter()
        .enumerate()
        .map(|(k, &ok)| {
            let (i, j) = ((k / s) % l, k % s);
            if ok && (!is_causal || j <= i) {
                E::zero()
            } else {
                E::neg_infinity()
            }
        })
        .collect();
    Some(Tensor::from_vec(data, &shape))
}

/// The attention probabilities `softmax(q k^T / sqrt(d) + mask)`, shape
/// `(..., L, S)`; see [`scaled_dot_product_attention`].
pub(crate) fn attention_probs<E: Float, D: Device>(
    q: &Tensor<E, D>,
    k: &Tensor<E, D>,
    attn_mask: Option<&Tensor<bool, D>>,
    is_causal: bool,
) -> Tensor<E, D> {
    let op = "scaled_dot_product_attention";
    let (l, s, e) = (q.dim(-2), k.dim(-2), q.dim(-1));
    let scores = q
        .matmul_t(k)
        .mul_scalar(E::from_f64(1.0 / (e as f64).sqrt()));
    if attn_mask.is_none() && is_causal {
        // The causal mask is applied inside the softmax kernel.
        return scores.softmax_causal();
    }
    let scores = match additive_mask(attn_mask, is_causal, l, s) {
        Some(m) => {
            assert!(
                broadcast_shapes(m.shape(), scores.shape()).as_deref() == Some(scores.shape()),
                "{op}: attn_mask of shape {:?} does not broadcast to the scores' shape {:?}",
                m.shape(),
                scores.shape()
            );
            scores.add(&m)
        }
        None => scores,
    };
    scores.softmax(-1)
}

fn check_qkv<E: Float, D: Device>(q: &Tensor<E, D>, k: &Tensor<E, D>, v: &Tensor<E, D>) {
    let op = "scaled_dot_product_attention";
    assert!(
        q.rank() >= 2 && k.rank() >= 2 && v.rank() >= 2,
        "{op}: q, k, v need rank >= 2, got shapes {:?}, {:?}, {:?}",
        q.shape(),
        k.shape(),
        v.shape()
    );
    assert!(
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
pub fn scaled_dot_product_attention<E: Float, D: Device>(
    q: &Tensor<E, D>,
    k: &Tensor<E, D>,
    v: &Tensor<E, D>,
    attn_mask: Option<&Tensor<bool, D>>,
    is_causal: bool,
) -> Tensor<E, D> {
    check_qkv(q, k, v);
    attention_probs(q, k, attn_mask, is_causal).matmul(v)
}

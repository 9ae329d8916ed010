//! [`KvCache`]: the keys and values of the tokens a decoder has seen, the
//! attention that reads them, and the rotary position embedding.

use crate::nn::functional::scaled_dot_product_attention;
use crate::tensor::{Float, Tensor};

/// The keys and values of every layer for the tokens seen so far, and
/// which of those tokens are real (not padding), so that each new token
/// attends to the past without recomputing it.
///
/// A cache belongs to one batch of sequences: start a new one (with
/// [`CausalLm::new_cache`](super::CausalLm::new_cache)) for a new prompt.
///
/// ```
/// use forge::hub::KvCache;
/// let c = KvCache::<f32>::new(2);
/// assert_eq!(c.len(), 0);
/// assert!(c.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct KvCache<E: Float = f32> {
    /// Per layer: keys and values `[B, kv_heads, S, head_dim]`.
    layers: Vec<Option<(Tensor<E>, Tensor<E>)>>,
    /// Per sequence: whether each of the `S` positions holds a real token.
    valid: Vec<Vec<bool>>,
}

/// What every layer of one decoding step shares: the position of each new
/// token and which keys each may attend to.
#[derive(Clone, Debug)]
pub(crate) struct StepMask {
    /// `[B, T]`: each new token's position (its count of real tokens
    /// before it in its sequence).
    pub positions: Vec<i64>,
    /// `[B, 1, T, S]`, true where query `i` may attend to key `j`.
    pub mask: Tensor<bool>,
}

impl<E: Float> KvCache<E> {
    /// An empty cache for a decoder of `n_layers` layers.
    ///
    /// ```
    /// assert_eq!(forge::hub::KvCache::<f64>::new(3).len(), 0);
    /// ```
    pub fn new(n_layers: usize) -> Self {
        KvCache {
            layers: vec![None; n_layers],
            valid: Vec::new(),
        }
    }

    /// The number of positions stored (padding included).
    ///
    /// ```
    /// assert_eq!(forge::hub::KvCache::<f32>::new(1).len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.valid.first().map_or(0, Vec::len)
    }

    /// Whether nothing is stored yet.
    ///
    /// ```
    /// assert!(forge::hub::KvCache::<f32>::new(1).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records `t` new positions of each of `b` sequences (`valid`, `[b *
    /// t]`, false for padding; all real when `None`) and returns their
    /// positions and attention mask: query `i` (absolute index `q`) sees
    /// key `j` when `j <= q` and key `j` is real, and always sees itself
    /// (so a padding query has one key, not none).
    ///
    /// # Panics
    /// When `b` differs from the cache's batch or `valid` has the wrong
    /// length.
    pub(crate) fn begin(&mut self, b: usize, t: usize, valid: Option<&[bool]>) -> StepMask {
        if self.valid.is_empty() {
            self.valid = vec![Vec::new(); b];
        }
        assert!(
            self.valid.len() == b,
            "KvCache: a step of {b} sequences on a cache of {}",
            self.valid.len()
        );
        if let Some(v) = valid {
            assert!(
                v.len() == b * t,
                "KvCache: {} validity flags for [{b}, {t}] tokens",
                v.len()
            );
        }
        let past = self.len();
        let s = past + t;
        let mut positions = Vec::with_capacity(b * t);
        let mut mask = Vec::with_capacity(b * t * s);
        for (r, row) in self.valid.iter_mut().enumerate() {
            for i in 0..t {
                row.push(valid.is_none_or(|v| v[r * t + i]));
            }
            for i in 0..t {
                let q = past + i;
                positions.push(row[..q].iter().filter(|&&x| x).count() as i64);
                mask.extend((0..s).map(|j| j == q || (j < q && row[j])));
            }
        }
        StepMask {
            positions,
            mask: Tensor::from_vec(mask, &[b, 1, t, s]),
        }
    }

    /// Appends keys and values `[B, kv_heads, T, D]` to layer `layer` and
    /// returns all of them so far.
    pub(crate) fn append(
        &mut self,
        layer: usize,
        k: Tensor<E>,
        v: Tensor<E>,
    ) -> (Tensor<E>, Tensor<E>) {
        let slot = &mut self.layers[layer];
        let kv = match slot.take() {
            None => (k, v),
            Some((pk, pv)) => (Tensor::cat(&[&pk, &k], 2), Tensor::cat(&[&pv, &v], 2)),
        };
        *slot = Some(kv.clone());
        kv
    }
}

/// Attention of queries `q` `[B, H, T, D]` over the cached and new keys
/// and values `k`, `v` `[B, KV, S, D]` (`KV` divides `H`: grouped-query
/// attention, head `h` reads key/value head `h / (H / KV)`), masked by
/// `mask` `[B, 1, T, S]`. Returns `[B, T, H * D]`.
pub(crate) fn grouped_attention<E: Float>(
    q: &Tensor<E>,
    k: &Tensor<E>,
    v: &Tensor<E>,
    mask: &Tensor<bool>,
) -> Tensor<E> {
    let (b, h, t, d) = (q.dim(0), q.dim(1), q.dim(2), q.dim(3));
    let kv = k.dim(1);
    assert!(
        kv > 0 && h.is_multiple_of(kv),
        "attention: {kv} key/value heads do not divide {h} query heads"
    );
    let y = if kv == h {
        scaled_dot_product_attention(q, k, v, Some(mask), false)
    } else {
        let q = q.reshape(&[
            b as isize,
            kv as isize,
            (h / kv) as isize,
            t as isize,
            d as isize,
        ]);
        let y = scaled_dot_product_attention(
            &q,
            &k.unsqueeze(2),
            &v.unsqueeze(2),
            Some(&mask.unsqueeze(1)),
            false,
        );
        y.reshape(&[b as isize, h as isize, t as isize, d as isize])
    };
    y.permute(&[0, 2, 1, 3])
        .reshape(&[b as isize, t as isize, (h * d) as isize])
}

/// Splits `[B, T, H * D]` into heads `[B, H, T, D]`.
pub(crate) fn split_heads<E: Float>(x: &Tensor<E>, heads: usize) -> Tensor<E> {
    let (b, t, c) = (x.dim(0), x.dim(1), x.dim(2));
    x.reshape(&[b as isize, t as isize, heads as isize, (c / heads) as isize])
        .permute(&[0, 2, 1, 3])
}

/// The rotary position embedding (Llama's "rotate half" pairing: feature
/// `i` turns with feature `i + D/2`) of `x` `[B, H, T, D]` at `positions`
/// `[B * T]`, with frequencies `theta^(-2i/D)`. Angles, cosines and sines
/// are computed in f64.
pub(crate) fn rotary<E: Float>(x: &Tensor<E>, positions: &[i64], theta: f64) -> Tensor<E> {
    let (b, t, d) = (x.dim(0), x.dim(2), x.dim(3));
    let half = d / 2;
    let angle = |k: usize| {
        let (row, i) = (k / d, k % d);
        let inv = 1.0 / theta.powf((2 * (i % half)) as f64 / d as f64);
        positions[row] as f64 * inv
    };
    let cos = Tensor::<E>::from_fn(&[b * t * d], |k| E::from_f64(angle(k).cos()))
        .reshape(&[b as isize, 1, t as isize, d as isize]);
    let sin = Tensor::<E>::from_fn(&[b * t * d], |k| E::from_f64(angle(k).sin()))
        .reshape(&[b as isize, 1, t as isize, d as isize]);
    let x1 = x.narrow(-1, 0, half);
    let x2 = x.narrow(-1, half, half);
    let rotated = Tensor::cat(&[&x2.neg(), &x1], -1);
    x.mul(&cos).add(&rotated.mul(&sin))
}

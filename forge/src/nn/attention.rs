//! [`MultiheadAttention`] and the sinusoidal [`PositionalEncoding`].

use super::dropout::Dropout;
use super::forward::Forward;
use super::linear::Linear;
use super::summary::{record_output, summary_running};
use crate::ops::attention::attention_probs;
use crate::ops::attention_qkv::qkv_attention;
use crate::ops::softmax_masked::{MaskTerm, ScoreMask};
use crate::tensor::{Cpu, Float, Rng, Tensor};
use forge_macros::Layer;

/// Multi-head attention with PyTorch's packed parameters (`nn.MultiheadAttention`):
/// `[q; k; v] = x in_proj_weight^T + in_proj_bias` (rows `0..E` project
/// the query, `E..2E` the key, `2E..3E` the value), `num_heads` heads of
/// size `E / num_heads` attending with scale `1 / sqrt(E / num_heads)`,
/// dropout on the attention probabilities, then `out_proj`. Returns the
/// output and the attention probabilities averaged over the heads.
///
/// # Shapes
/// - `in_proj_weight`: `[3E, E]`, `in_proj_bias`: `[3E]`,
///   `out_proj.weight`: `[E, E]`, `out_proj.bias`: `[E]`
/// - query `[N, L, E]`, key and value `[N, S, E]` with `batch_first`
///   (`[L, N, E]`, `[S, N, E]` without, PyTorch's default)
/// - output `[N, L, E]` (or `[L, N, E]`); weights `[N, L, S]`
///
/// ```
/// use forge::prelude::*;
/// let mha = forge::nn::MultiheadAttention::<f32>::new(8, 2, 0.0, true, &mut Rng::new(0));
/// let x = Tensor::ones(&[3, 5, 8]);
/// let (y, w) = mha.forward(x);
/// assert_eq!((y.shape(), w.shape()), (&[3, 5, 8][..], &[3, 5, 5][..]));
/// let names: Vec<String> = mha.state_dict().into_keys().collect();
/// assert_eq!(names, ["in_proj_bias", "in_proj_weight", "out_proj.bias", "out_proj.weight"]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct MultiheadAttention<E: Float = f32> {
    /// `[3E, E]`: the query, key and value projections stacked by rows.
    pub in_proj_weight: Tensor<E>,
    /// `[3E]`, if the projections have a bias.
    pub in_proj_bias: Option<Tensor<E>>,
    /// The output projection `E -> E`.
    pub out_proj: Linear<E>,
    /// Dropout on the attention probabilities (training only).
    pub dropout: Dropout,
    /// The number of heads; divides `E`.
    #[skip]
    pub num_heads: usize,
    /// Inputs are `[N, L, E]` when true, `[L, N, E]` when false.
    #[skip]
    pub batch_first: bool,
}

impl<E: Float> MultiheadAttention<E> {
    /// A layer initialised as PyTorch does: `in_proj_weight` xavier-uniform
    /// (`fan_in = E`, `fan_out = 3E`), biases 0, `out_proj.weight` as a
    /// `Linear`; attention dropout `dropout`.
    ///
    /// # Panics
    /// When `num_heads` does not divide `embed_dim`.
    ///
    /// ```
    /// let m = forge::nn::MultiheadAttention::<f64>::new(6, 3, 0.1, false, &mut forge::Rng::new(0));
    /// assert_eq!(m.in_proj_weight.shape(), &[18, 6]);
    /// ```
    pub fn new(
        embed_dim: usize,
        num_heads: usize,
        dropout: f64,
        batch_first: bool,
        rng: &mut Rng,
    ) -> Self {
        shape_assert!(
            num_heads > 0 && embed_dim.is_multiple_of(num_heads),
            "MultiheadAttention: {num_heads} heads do not divide embed_dim {embed_dim}"
        );
        let a = (6.0 / (4 * embed_dim) as f64).sqrt();
        let in_proj_weight = Tensor::uniform(&[3 * embed_dim, embed_dim], -a, a, rng);
        let out = Linear::new(embed_dim, embed_dim, rng);
        MultiheadAttention {
            in_proj_weight: in_proj_weight.requires_grad(),
            in_proj_bias: Some(Tensor::zeros(&[3 * embed_dim]).requires_grad()),
            out_proj: Linear::from_weights(
                out.weight,
                Some(Tensor::zeros(&[embed_dim]).requires_grad()),
            )
            .expect("shapes built above"),
            dropout: Dropout::from_rng(dropout, rng),
            num_heads,
            batch_first,
        }
    }

    /// The embedding size `E`.
    ///
    /// ```
    /// let m = forge::nn::MultiheadAttention::<f32>::new(8, 2, 0.0, true, &mut forge::Rng::new(0));
    /// assert_eq!(m.embed_dim(), 8);
    /// ```
    pub fn embed_dim(&self) -> usize {
        self.in_proj_weight.shape()[1]
    }

    /// `x W_i^T + b_i` with the `i`-th block of the packed projection.
    fn project(&self, x: &Tensor<E>, i: usize) -> Tensor<E> {
        let e = self.embed_dim();
        let y = x.matmul_t(&self.in_proj_weight.narrow(0, i * e, e));
        match &self.in_proj_bias {
            Some(b) => y.add(&b.narrow(0, i * e, e)),
            None => y,
        }
    }

    /// Unmasked (or causal) self-attention of `x`, as
    /// [`attend`](Self::attend)`(x, x, x, None, None, is_causal).0` computes
    /// it but through one in-projection `[.., 3E]` (a `linear`; outside
    /// autograd its packed weight is kept while unchanged) and the fused
    /// [`qkv_attention`](crate::nn::functional::qkv_attention) kernel (no
    /// head split or permute copies, no head-averaged weights, and outside
    /// autograd the probabilities never written out): the encoder layer's
    /// path, as PyTorch's fast path is its inference path. Differentiable,
    /// gradients of gradients included (both ops are). The sums run in
    /// another order than `attend`'s, so the bits differ from it in the
    /// last places; they do not depend on the thread count, nor on a tool
    /// (the profiler, anomaly detection) being on: its ops are ops the
    /// tools see. `None` where it does not apply: active dropout or a
    /// summary.
    pub(crate) fn self_attention_fused(&self, x: &Tensor<E>, is_causal: bool) -> Option<Tensor<E>> {
        let dropout_on = self.dropout.training && self.dropout.p > 0.0;
        if dropout_on || summary_running() {
            return None;
        }
        let e = self.embed_dim();
        shape_assert!(
            x.rank() == 3 && x.dim(2) == e,
            "MultiheadAttention(embed_dim {e}, {} heads): expected a self-attention input of shape {} with E = {e}, got {:?}",
            self.num_heads,
            if self.batch_first { "[N, L, E]" } else { "[L, N, E]" },
            x.shape()
        );
        let xb = if self.batch_first {
            x.clone()
        } else {
            x.transpose(0, 1)
        };
        // `linear` outside autograd: the weight packed once and kept on
        // its storage, the bias added by the product as it stores each tile
        // (it used to pack `in_proj_weight^T` on every call and add the
        // bias in a pass of its own: 5% of a d = 512 encoder's inference)
        let qkv = xb.linear(&self.in_proj_weight, self.in_proj_bias.as_ref());
        let out = self
            .out_proj
            .forward(qkv_attention(&qkv, self.num_heads, is_causal));
        Some(if self.batch_first {
            out
        } else {
            out.transpose(0, 1)
        })
    }

    /// `[N, T, E]` to `[N, H, T, E / H]`.
    fn split_heads(&self, x: &Tensor<E>) -> Tensor<E> {
        let (n, t, e) = (x.dim(0), x.dim(1), x.dim(2));
        let h = self.num_heads;
        x.view(&[n, t, h, e / h]).permute(&[0, 2, 1, 3])
    }

    /// Attention of `query` over `key`/`value`, returning the output and
    /// the head-averaged attention probabilities.
    ///
    /// `key_padding_mask` (`[N, S]`) is `true` at padded keys, which are
    /// ignored; `attn_mask` (`[L, S]` or `[N * num_heads, L, S]`) is `true`
    /// where attention is *not* allowed (PyTorch's convention for this
    /// layer); `is_causal` also hides keys after each query. Masked scores
    /// are `-inf` before the softmax: the masks are read in place by the
    /// softmax kernel, never expanded to `[N, H, L, S]`. A query with every
    /// key masked gets NaN, as in PyTorch.
    ///
    /// # Panics
    /// When a shape is wrong; the message names the layer and the shapes.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mha = forge::nn::MultiheadAttention::<f64>::new(4, 2, 0.0, true, &mut Rng::new(0));
    /// let x = Tensor::<f64>::ones(&[1, 3, 4]);
    /// let pad = Tensor::<bool>::from_vec(vec![false, false, true], &[1, 3]);
    /// let (_, w) = mha.attend(&x, &x, &x, Some(&pad), None, false);
    /// assert_eq!(w.to_vec()[2], 0.0); // nobody attends to the padded key
    /// ```
    pub fn attend(
        &self,
        query: &Tensor<E>,
        key: &Tensor<E>,
        value: &Tensor<E>,
        key_padding_mask: Option<&Tensor<bool>>,
        attn_mask: Option<&Tensor<bool>>,
        is_causal: bool,
    ) -> (Tensor<E>, Tensor<E>) {
        let e = self.embed_dim();
        let h = self.num_heads;
        let layout = if self.batch_first {
            "[N, L, E]"
        } else {
            "[L, N, E]"
        };
        let bf = |t: &Tensor<E>| {
            if self.batch_first {
                t.clone()
            } else {
                t.transpose(0, 1)
            }
        };
        for (what, t) in [("query", query), ("key", key), ("value", value)] {
            shape_assert!(
                t.rank() == 3 && t.dim(2) == e,
                "MultiheadAttention(embed_dim {e}, {h} heads): expected {what} of shape {layout} with E = {e}, got {:?}",
                t.shape()
            );
        }
        let (q, k, v) = (bf(query), bf(key), bf(value));
        let (n, l, s) = (q.dim(0), q.dim(1), k.dim(1));
        shape_assert!(
            k.dim(0) == n && v.dim(0) == n && v.dim(1) == s,
            "MultiheadAttention(embed_dim {e}, {h} heads): query {:?}, key {:?} and value {:?} do not match",
            query.shape(),
            key.shape(),
            value.shape()
        );
        let mask = score_mask(key_padding_mask, attn_mask, is_causal, [n, h, l, s]);
        let q = self.split_heads(&self.project(&q, 0));
        let k = self.split_heads(&self.project(&k, 1));
        let v = self.split_heads(&self.project(&v, 2));
        let p = self.dropout.forward(attention_probs(&q, &k, &mask));
        let y = p.matmul(&v).permute(&[0, 2, 1, 3]).view(&[n, l, e]);
        let out = self.out_proj.forward(y);
        let out = if self.batch_first {
            out
        } else {
            out.transpose(0, 1)
        };
        record_output(self, (out, p.mean_dim(&[1], false)))
    }
}

/// The masks over the scores `[N, H, L, S]`, read in place by the softmax
/// kernel: a padding mask `[N, S]` (true = padded) for every head and
/// query of its batch row, an attention mask `[L, S]` or `[N*H, L, S]`
/// (true = not allowed), and the causal mask.
///
/// # Panics
/// When a mask has another shape.
fn score_mask(
    key_padding_mask: Option<&Tensor<bool>>,
    attn_mask: Option<&Tensor<bool>>,
    is_causal: bool,
    [n, h, l, s]: [usize; 4],
) -> ScoreMask<Cpu> {
    let name = "MultiheadAttention";
    let mut terms = Vec::new();
    if let Some(m) = key_padding_mask {
        shape_assert!(
            m.shape() == [n, s],
            "{name}: key_padding_mask of shape {:?}, expected [{n}, {s}]",
            m.shape()
        );
        terms.push(MaskTerm::with_strides(m, vec![s, 0, 0, 1], true));
    }
    if let Some(m) = attn_mask {
        let strides = if m.shape() == [l, s] {
            vec![0, 0, s, 1]
        } else if m.shape() == [n * h, l, s] {
            vec![h * l * s, l * s, s, 1]
        } else {
            shape_panic!(
                "{name}: attn_mask of shape {:?}, expected [{l}, {s}] or [{}, {l}, {s}]",
                m.shape(),
                n * h
            )
        };
        terms.push(MaskTerm::with_strides(m, strides, true));
    }
    ScoreMask {
        terms,
        causal: is_causal,
    }
}

impl<E: Float> Forward<Tensor<E>> for MultiheadAttention<E> {
    type Output = (Tensor<E>, Tensor<E>);

    /// Self-attention (`query = key = value = x`) without masks.
    fn forward(&self, x: Tensor<E>) -> (Tensor<E>, Tensor<E>) {
        self.attend(&x, &x, &x, None, None, false)
    }
}

impl<E: Float> Forward<(Tensor<E>, Tensor<E>, Tensor<E>)> for MultiheadAttention<E> {
    type Output = (Tensor<E>, Tensor<E>);

    /// Attention of a query over keys and values, without masks.
    fn forward(&self, (q, k, v): (Tensor<E>, Tensor<E>, Tensor<E>)) -> (Tensor<E>, Tensor<E>) {
        self.attend(&q, &k, &v, None, None, false)
    }
}

/// Adds the sinusoidal position encoding of "Attention Is All You Need",
/// `pe[t, 2i] = sin(t / 10000^(2i/d))`, `pe[t, 2i+1] = cos(t / 10000^(2i/d))`,
/// then applies dropout (as PyTorch's tutorial module does). `pe` is a
/// frozen tensor, saved in the state dict.
///
/// # Shapes
/// - `pe`: `[max_len, d_model]`
/// - input `[N, T, d_model]` with `batch_first`, `[T, N, d_model]` without;
///   `T <= max_len`; output the same shape
///
/// ```
/// use forge::prelude::*;
/// let pe = forge::nn::PositionalEncoding::<f64>::new(4, 10, 0.0, true, &mut Rng::new(0));
/// let y = pe.forward(Tensor::zeros(&[1, 2, 4]));
/// // position 0: sin(0) = 0, cos(0) = 1
/// assert_eq!(&y.to_vec()[..4], &[0.0, 1.0, 0.0, 1.0]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct PositionalEncoding<E: Float = f32> {
    /// The table `[max_len, d_model]`.
    #[frozen]
    pub pe: Tensor<E>,
    /// Dropout after the addition.
    pub dropout: Dropout,
    /// Inputs are `[N, T, d]` when true, `[T, N, d]` when false.
    #[skip]
    pub batch_first: bool,
}

impl<E: Float> PositionalEncoding<E> {
    /// The encoding of `max_len` positions in `d_model` dimensions.
    ///
    /// ```
    /// let pe = forge::nn::PositionalEncoding::<f32>::new(6, 50, 0.1, false, &mut forge::Rng::new(0));
    /// assert_eq!(pe.pe.shape(), &[50, 6]);
    /// ```
    pub fn new(
        d_model: usize,
        max_len: usize,
        dropout: f64,
        batch_first: bool,
        rng: &mut Rng,
    ) -> Self {
        let pe = Tensor::from_fn(&[max_len, d_model], |k| {
            let (t, c) = ((k / d_model) as f64, k % d_model);
            let freq = (-(10000f64.ln()) * (c - c % 2) as f64 / d_model as f64).exp();
            let a = t * freq;
            E::from_f64(if c % 2 == 0 { a.sin() } else { a.cos() })
        });
        PositionalEncoding {
            pe,
            dropout: Dropout::from_rng(dropout, rng),
            batch_first,
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for PositionalEncoding<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When the input is not 3-D, its feature size differs from `d_model`,
    /// or it is longer than `max_len`.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let (max_len, d) = (self.pe.shape()[0], self.pe.shape()[1]);
        let t_axis = if self.batch_first { 1 } else { 0 };
        shape_assert!(
            x.rank() == 3 && x.dim(2) == d && x.dim(t_axis) <= max_len,
            "PositionalEncoding(d_model {d}, max_len {max_len}): expected input of shape {}, got {:?}",
            if self.batch_first { "[N, T <= max_len, d_model]" } else { "[T <= max_len, N, d_model]" },
            x.shape()
        );
        let t = x.dim(t_axis);
        let table = Tensor::from_vec(self.pe.as_slice()[..t * d].to_vec(), &[t, d]);
        let table = if self.batch_first {
            table
        } else {
            table.view(&[t, 1, d])
        };
        self.dropout.forward(x.add(&table))
    }
}

//! [`Gpt`]: a GPT-2 style decoder-only language model (nanoGPT's layout and
//! names), with greedy decoding and sampling with temperature and top-k.
//!
//! The state-dict names are nanoGPT's (and so Hugging Face GPT-2's, with
//! `Linear` layers in PyTorch's `[out, in]` layout):
//!
//! | path | shape |
//! |---|---|
//! | `transformer.wte.weight` | `[vocab_size, n_embd]` (also the output head) |
//! | `transformer.wpe.weight` | `[block_size, n_embd]` |
//! | `transformer.h.{i}.ln_1.{weight,bias}` | `[n_embd]` |
//! | `transformer.h.{i}.attn.c_attn.{weight,bias}` | `[3 n_embd, n_embd]`, `[3 n_embd]` |
//! | `transformer.h.{i}.attn.c_proj.{weight,bias}` | `[n_embd, n_embd]`, `[n_embd]` |
//! | `transformer.h.{i}.ln_2.{weight,bias}` | `[n_embd]` |
//! | `transformer.h.{i}.mlp.c_fc.{weight,bias}` | `[4 n_embd, n_embd]`, `[4 n_embd]` |
//! | `transformer.h.{i}.mlp.c_proj.{weight,bias}` | `[n_embd, 4 n_embd]`, `[n_embd]` |
//! | `transformer.ln_f.{weight,bias}` | `[n_embd]` |
//!
//! (biases absent when [`GptConfig::bias`] is false).
//!
//! **Weight tying.** The output head is the token embedding: `logits =
//! ln_f(x) @ wte.weight^T`. It is one parameter, so it appears once in
//! [`Layer::named_parameters`] and [`Layer::state_dict`] (no
//! `lm_head.weight` key), and its gradient holds both uses. nanoGPT's own
//! state dict stores the tied tensor twice (`lm_head.weight` too);
//! [`Gpt`]'s [`Layer::load_state_dict`] accepts such a dict when the two
//! copies are identical, and refuses it when they differ.

use crate::error::{ForgeError, Result};
use crate::nn::functional::{cross_entropy_with, qkv_attention, CrossEntropyOptions};
use crate::nn::record_output;
use crate::nn::{
    Embedding, Forward, Layer, LayerNorm, Linear, TensorVisitor, TensorVisitorMut, Visit,
};
use crate::no_grad;
use crate::tensor::{Element, Float, Rng, Tensor};
use std::collections::BTreeMap;

/// The shape of a [`Gpt`].
///
/// ```
/// let c = forge::models::gpt::GptConfig::gpt2_small();
/// assert_eq!((c.n_layer, c.n_head, c.n_embd), (12, 12, 768));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptConfig {
    /// The number of distinct tokens.
    pub vocab_size: usize,
    /// The longest context (number of learned positions).
    pub block_size: usize,
    /// The number of transformer blocks.
    pub n_layer: usize,
    /// The number of attention heads (must divide `n_embd`).
    pub n_head: usize,
    /// The width of the residual stream.
    pub n_embd: usize,
    /// Whether the `Linear` layers and `LayerNorm`s have biases.
    pub bias: bool,
}

impl GptConfig {
    /// GPT-2 small (124M parameters): 12 layers, 12 heads, width 768,
    /// vocabulary 50257, context 1024, with biases.
    ///
    /// ```
    /// assert_eq!(forge::models::gpt::GptConfig::gpt2_small().block_size, 1024);
    /// ```
    pub fn gpt2_small() -> Self {
        GptConfig {
            vocab_size: 50257,
            block_size: 1024,
            n_layer: 12,
            n_head: 12,
            n_embd: 768,
            bias: true,
        }
    }

    fn check(&self) {
        assert!(
            self.vocab_size > 0 && self.block_size > 0 && self.n_head > 0 && self.n_embd > 0,
            "GptConfig: sizes must be positive, got {self:?}"
        );
        assert!(
            self.n_embd.is_multiple_of(self.n_head),
            "GptConfig: n_head {} does not divide n_embd {}",
            self.n_head,
            self.n_embd
        );
    }
}

/// Causal multi-head self-attention with one fused `c_attn` projection
/// (`[q | k | v]` along the last dimension) and an output projection
/// `c_proj`.
///
/// # Shapes
/// input and output `[B, T, n_embd]`.
///
/// ```
/// use forge::models::gpt::CausalSelfAttention;
/// use forge::prelude::*;
/// let a = CausalSelfAttention::<f64>::new(8, 2, true, &mut Rng::new(0));
/// assert_eq!(a.forward(Tensor::zeros(&[1, 3, 8])).shape(), &[1, 3, 8]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct CausalSelfAttention<E: Float = f32> {
    /// `[3 n_embd, n_embd]`: queries, keys and values.
    pub c_attn: Linear<E>,
    /// `[n_embd, n_embd]`: the output projection.
    pub c_proj: Linear<E>,
    /// The number of heads.
    #[skip]
    pub n_head: usize,
}

impl<E: Float> CausalSelfAttention<E> {
    /// A layer initialised as PyTorch's `Linear` (callers such as
    /// [`Gpt::new`] re-initialise it nanoGPT's way).
    ///
    /// # Panics
    /// When `n_head` does not divide `n_embd`.
    ///
    /// ```
    /// use forge::models::gpt::CausalSelfAttention;
    /// let a = CausalSelfAttention::<f32>::new(8, 2, false, &mut forge::Rng::new(0));
    /// assert!(a.c_attn.bias.is_none());
    /// ```
    pub fn new(n_embd: usize, n_head: usize, bias: bool, rng: &mut Rng) -> Self {
        assert!(
            n_head > 0 && n_embd.is_multiple_of(n_head),
            "CausalSelfAttention: n_head {n_head} does not divide n_embd {n_embd}"
        );
        CausalSelfAttention {
            c_attn: linear(n_embd, 3 * n_embd, bias, rng),
            c_proj: linear(n_embd, n_embd, bias, rng),
            n_head,
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for CausalSelfAttention<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When the input is not `[B, T, n_embd]`.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let c = self.c_proj.out_features();
        assert!(
            x.rank() == 3 && x.shape()[2] == c,
            "CausalSelfAttention(n_embd {c}): expected input [B, T, {c}], got {:?}",
            x.shape()
        );
        let y = qkv_attention(&self.c_attn.forward(x), self.n_head, true);
        record_output(self, self.c_proj.forward(y))
    }
}

/// The feed-forward half of a block: `c_proj(gelu_tanh(c_fc(x)))`, with a
/// hidden width of `4 n_embd`.
///
/// ```
/// use forge::models::gpt::Mlp;
/// use forge::prelude::*;
/// let m = Mlp::<f32>::new(8, true, &mut Rng::new(0));
/// assert_eq!(m.c_fc.weight.shape(), &[32, 8]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Mlp<E: Float = f32> {
    /// `[4 n_embd, n_embd]`.
    pub c_fc: Linear<E>,
    /// `[n_embd, 4 n_embd]`.
    pub c_proj: Linear<E>,
}

impl<E: Float> Mlp<E> {
    /// A layer initialised as PyTorch's `Linear`.
    ///
    /// ```
    /// let m = forge::models::gpt::Mlp::<f32>::new(4, false, &mut forge::Rng::new(0));
    /// assert!(m.c_proj.bias.is_none());
    /// ```
    pub fn new(n_embd: usize, bias: bool, rng: &mut Rng) -> Self {
        Mlp {
            c_fc: linear(n_embd, 4 * n_embd, bias, rng),
            c_proj: linear(4 * n_embd, n_embd, bias, rng),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for Mlp<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, self.c_proj.forward(self.c_fc.forward_gelu_tanh(x)))
    }
}

/// A pre-LayerNorm transformer block:
/// `x += attn(ln_1(x)); x += mlp(ln_2(x))`.
///
/// ```
/// use forge::models::gpt::Block;
/// use forge::prelude::*;
/// let blk = Block::<f64>::new(8, 2, true, &mut Rng::new(0));
/// assert_eq!(blk.forward(Tensor::ones(&[2, 3, 8])).shape(), &[2, 3, 8]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct Block<E: Float = f32> {
    /// Normalises the attention input.
    pub ln_1: LayerNorm<E>,
    /// Causal self-attention.
    pub attn: CausalSelfAttention<E>,
    /// Normalises the MLP input.
    pub ln_2: LayerNorm<E>,
    /// The feed-forward layer.
    pub mlp: Mlp<E>,
}

impl<E: Float> Block<E> {
    /// A block initialised with PyTorch's defaults.
    ///
    /// # Panics
    /// When `n_head` does not divide `n_embd`.
    ///
    /// ```
    /// let b = forge::models::gpt::Block::<f32>::new(8, 4, true, &mut forge::Rng::new(0));
    /// assert_eq!(b.attn.n_head, 4);
    /// ```
    pub fn new(n_embd: usize, n_head: usize, bias: bool, rng: &mut Rng) -> Self {
        Block {
            ln_1: layer_norm(n_embd, bias),
            attn: CausalSelfAttention::new(n_embd, n_head, bias, rng),
            ln_2: layer_norm(n_embd, bias),
            mlp: Mlp::new(n_embd, bias, rng),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for Block<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let x = &x + &self.attn.forward(self.ln_1.forward(x.clone()));
        record_output(self, &x + &self.mlp.forward(self.ln_2.forward(x.clone())))
    }
}

/// The body of a [`Gpt`] (nanoGPT's `transformer` module dict).
///
/// ```
/// use forge::models::gpt::{Gpt, GptConfig};
/// let cfg = GptConfig { vocab_size: 10, block_size: 4, n_layer: 2, n_head: 2, n_embd: 8, bias: true };
/// let g = Gpt::<f32>::new(cfg, &mut forge::Rng::new(0));
/// assert_eq!(g.transformer.h.len(), 2);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct GptTransformer<E: Float = f32> {
    /// Token embedding `[vocab_size, n_embd]`, also the output head.
    pub wte: Embedding<E>,
    /// Position embedding `[block_size, n_embd]`.
    pub wpe: Embedding<E>,
    /// The blocks.
    pub h: Vec<Block<E>>,
    /// The final LayerNorm.
    pub ln_f: LayerNorm<E>,
}

/// A GPT-2 style language model (see the [module docs](self) for the
/// names, shapes and weight tying).
///
/// # Shapes
/// `forward(idx)`: `idx` `[B, T]` token ids with `T <= block_size`;
/// logits `[B, T, vocab_size]`.
///
/// ```
/// use forge::models::gpt::{Gpt, GptConfig};
/// use forge::prelude::*;
/// let cfg = GptConfig { vocab_size: 11, block_size: 8, n_layer: 1, n_head: 2, n_embd: 8, bias: true };
/// let gpt = Gpt::<f32>::new(cfg, &mut Rng::new(0));
/// let idx = Tensor::<i64>::from_vec(vec![1, 2, 3, 4, 5, 6], &[2, 3]);
/// assert_eq!(gpt.forward(idx.clone()).shape(), &[2, 3, 11]);
/// let loss = gpt.loss(&idx, &idx);
/// assert!((loss.item() - 11f32.ln()).abs() < 0.1); // near uniform at init
/// assert!(gpt.state_dict().contains_key("transformer.h.0.attn.c_attn.weight"));
/// ```
#[derive(Clone, Debug)]
pub struct Gpt<E: Float = f32> {
    /// The embeddings, blocks and final LayerNorm.
    pub transformer: GptTransformer<E>,
    /// The shape this model was built with.
    pub config: GptConfig,
}

impl<E: Float> Gpt<E> {
    /// A model initialised as nanoGPT does: every `Linear` and `Embedding`
    /// weight N(0, 0.02), except the residual projections
    /// (`attn.c_proj.weight`, `mlp.c_proj.weight`), N(0, 0.02/sqrt(2
    /// n_layer)); biases 0; LayerNorms weight 1, bias 0. No dropout.
    ///
    /// # Panics
    /// When a size is zero or `n_head` does not divide `n_embd`.
    ///
    /// ```
    /// use forge::models::gpt::{Gpt, GptConfig};
    /// use forge::prelude::*;
    /// let cfg = GptConfig { vocab_size: 5, block_size: 4, n_layer: 1, n_head: 1, n_embd: 4, bias: false };
    /// let g = Gpt::<f32>::new(cfg, &mut Rng::new(0));
    /// // wte, wpe, ln_1, c_attn, c_proj, ln_2, c_fc, c_proj, ln_f (no biases)
    /// assert_eq!(g.parameters().len(), 9);
    /// ```
    pub fn new(config: GptConfig, rng: &mut Rng) -> Self {
        config.check();
        let c = config.n_embd;
        let std = 0.02;
        let proj_std = 0.02 / ((2 * config.n_layer.max(1)) as f64).sqrt();
        let normal = |shape: &[usize], s: f64, rng: &mut Rng| {
            Tensor::<E>::normal(shape, 0.0, s, rng).requires_grad()
        };
        let init_linear = |l: &mut Linear<E>, s: f64, rng: &mut Rng| {
            l.weight = normal(l.weight.shape(), s, rng);
            if let Some(b) = &mut l.bias {
                *b = Tensor::zeros(b.shape()).requires_grad();
            }
        };
        let mut wte = Embedding::new(config.vocab_size, c, None, rng);
        wte.weight = normal(&[config.vocab_size, c], std, rng);
        let mut wpe = Embedding::new(config.block_size, c, None, rng);
        wpe.weight = normal(&[config.block_size, c], std, rng);
        let h = (0..config.n_layer)
            .map(|_| {
                let mut b = Block::new(c, config.n_head, config.bias, rng);
                init_linear(&mut b.attn.c_attn, std, rng);
                init_linear(&mut b.attn.c_proj, proj_std, rng);
                init_linear(&mut b.mlp.c_fc, std, rng);
                init_linear(&mut b.mlp.c_proj, proj_std, rng);
                b
            })
            .collect();
        Gpt {
            transformer: GptTransformer {
                wte,
                wpe,
                h,
                ln_f: layer_norm(c, config.bias),
            },
            config,
        }
    }

    /// The mean cross-entropy of the next-token predictions: `targets`
    /// `[B, T]` are the ids that should follow each position of `idx`.
    ///
    /// # Panics
    /// As [`forward`](Forward::forward), or when `targets` does not have
    /// the shape of `idx`.
    ///
    /// ```
    /// use forge::models::gpt::{Gpt, GptConfig};
    /// use forge::prelude::*;
    /// let cfg = GptConfig { vocab_size: 7, block_size: 4, n_layer: 1, n_head: 1, n_embd: 4, bias: true };
    /// let gpt = Gpt::<f64>::new(cfg, &mut Rng::new(0));
    /// let idx = Tensor::<i64>::from_vec(vec![0, 1, 2], &[1, 3]);
    /// let tgt = Tensor::<i64>::from_vec(vec![1, 2, 3], &[1, 3]);
    /// let grads = gpt.loss(&idx, &tgt).backward();
    /// assert_eq!(grads.len(), gpt.parameters().len());
    /// ```
    pub fn loss(&self, idx: &Tensor<i64>, targets: &Tensor<i64>) -> Tensor<E> {
        self.logits_and_loss(idx, targets).1
    }

    /// The logits `[B, T, vocab_size]` and the mean cross-entropy loss
    /// (see [`loss`](Gpt::loss)).
    ///
    /// # Panics
    /// As [`loss`](Gpt::loss).
    ///
    /// ```
    /// use forge::models::gpt::{Gpt, GptConfig};
    /// use forge::prelude::*;
    /// let cfg = GptConfig { vocab_size: 7, block_size: 4, n_layer: 1, n_head: 1, n_embd: 4, bias: true };
    /// let gpt = Gpt::<f32>::new(cfg, &mut Rng::new(0));
    /// let idx = Tensor::<i64>::from_vec(vec![0, 1], &[1, 2]);
    /// let (logits, loss) = gpt.logits_and_loss(&idx, &idx);
    /// assert_eq!((logits.shape(), loss.shape()), (&[1, 2, 7][..], &[][..]));
    /// ```
    pub fn logits_and_loss(
        &self,
        idx: &Tensor<i64>,
        targets: &Tensor<i64>,
    ) -> (Tensor<E>, Tensor<E>) {
        assert!(
            targets.shape() == idx.shape(),
            "Gpt::loss: targets of shape {:?} differ from idx of shape {:?}",
            targets.shape(),
            idx.shape()
        );
        let logits = self.forward(idx.clone());
        let v = self.config.vocab_size as isize;
        let loss = cross_entropy_with(
            &logits.reshape(&[-1, v]),
            &targets.reshape(&[-1]),
            CrossEntropyOptions::default(),
        );
        (logits, loss)
    }

    /// Greedy decoding: appends `max_new_tokens` tokens to `prompt` (`[B,
    /// T0]`), each the argmax of the last position's logits, feeding the
    /// context cropped to its last `block_size` tokens. Returns the whole
    /// sequence `[B, T0 + max_new_tokens]` (prompt first), as nanoGPT's
    /// `generate` does. Runs without recording a tape.
    ///
    /// # Panics
    /// When the prompt is not `[B, T0]` with `T0 >= 1`, or a token is out of
    /// range.
    ///
    /// ```
    /// use forge::models::gpt::{Gpt, GptConfig};
    /// use forge::prelude::*;
    /// let cfg = GptConfig { vocab_size: 7, block_size: 4, n_layer: 1, n_head: 1, n_embd: 4, bias: true };
    /// let gpt = Gpt::<f32>::new(cfg, &mut Rng::new(0));
    /// let out = gpt.generate_greedy(&Tensor::from_vec(vec![3], &[1, 1]), 6);
    /// assert_eq!(out.shape(), &[1, 7]);
    /// assert_eq!(out.as_slice()[0], 3);
    /// ```
    pub fn generate_greedy(&self, prompt: &Tensor<i64>, max_new_tokens: usize) -> Tensor<i64> {
        self.generate_with(prompt, max_new_tokens, argmax)
    }

    /// Sampling: like [`generate_greedy`](Gpt::generate_greedy), but each
    /// new token is drawn from `softmax(logits / temperature)` restricted to
    /// the `top_k` most likely tokens (all tokens when `None`; ties at the
    /// k-th value are kept), with `rng`: the same seed gives the same text.
    ///
    /// # Panics
    /// As [`generate_greedy`](Gpt::generate_greedy), or when `temperature`
    /// is not positive or `top_k` is `Some(0)`.
    ///
    /// ```
    /// use forge::models::gpt::{Gpt, GptConfig};
    /// use forge::prelude::*;
    /// let cfg = GptConfig { vocab_size: 7, block_size: 4, n_layer: 1, n_head: 1, n_embd: 4, bias: true };
    /// let gpt = Gpt::<f32>::new(cfg, &mut Rng::new(0));
    /// let p = Tensor::from_vec(vec![3], &[1, 1]);
    /// let a = gpt.generate(&p, 10, 0.8, Some(3), &mut Rng::new(42));
    /// let b = gpt.generate(&p, 10, 0.8, Some(3), &mut Rng::new(42));
    /// assert_eq!(a.to_vec(), b.to_vec());
    /// // top_k = 1 is greedy decoding
    /// let g = gpt.generate(&p, 10, 1.0, Some(1), &mut Rng::new(1));
    /// assert_eq!(g.to_vec(), gpt.generate_greedy(&p, 10).to_vec());
    /// ```
    pub fn generate(
        &self,
        prompt: &Tensor<i64>,
        max_new_tokens: usize,
        temperature: f64,
        top_k: Option<usize>,
        rng: &mut Rng,
    ) -> Tensor<i64> {
        assert!(
            temperature > 0.0 && temperature.is_finite(),
            "Gpt::generate: temperature must be positive, got {temperature}"
        );
        assert!(top_k != Some(0), "Gpt::generate: top_k must be at least 1");
        self.generate_with(prompt, max_new_tokens, |row| {
            sample_row(row, temperature, top_k, rng)
        })
    }

    fn generate_with(
        &self,
        prompt: &Tensor<i64>,
        max_new_tokens: usize,
        mut pick: impl FnMut(&[f64]) -> i64,
    ) -> Tensor<i64> {
        assert!(
            prompt.rank() == 2 && prompt.shape()[1] >= 1,
            "Gpt::generate: prompt must be [B, T0] with T0 >= 1, got {:?}",
            prompt.shape()
        );
        let b = prompt.shape()[0];
        let mut rows: Vec<Vec<i64>> = prompt
            .as_slice()
            .chunks(prompt.shape()[1])
            .map(|r| r.to_vec())
            .collect();
        let v = self.config.vocab_size;
        no_grad(|| {
            for _ in 0..max_new_tokens {
                let len = rows[0].len();
                let start = len.saturating_sub(self.config.block_size);
                let t = len - start;
                let ctx: Vec<i64> = rows
                    .iter()
                    .flat_map(|r| r[start..].iter().copied())
                    .collect();
                let logits = self.forward(Tensor::from_vec(ctx, &[b, t]));
                let data = logits.as_slice();
                for (i, row) in rows.iter_mut().enumerate() {
                    let last = &data[(i * t + t - 1) * v..(i * t + t) * v];
                    let last: Vec<f64> = last.iter().map(|&x| Element::to_f64(x)).collect();
                    row.push(pick(&last));
                }
            }
        });
        let n = rows[0].len();
        Tensor::from_vec(rows.concat(), &[b, n])
    }
}

impl<E: Float> Forward<Tensor<i64>> for Gpt<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When `idx` is not `[B, T]` with `1 <= T <= block_size`, or a token id
    /// is out of range.
    fn forward(&self, idx: Tensor<i64>) -> Tensor<E> {
        let bs = self.config.block_size;
        assert!(
            idx.rank() == 2 && idx.shape()[1] >= 1 && idx.shape()[1] <= bs,
            "Gpt: expected token ids [B, T] with 1 <= T <= block_size {bs}, got {:?}",
            idx.shape()
        );
        let t = idx.shape()[1];
        let tr = &self.transformer;
        let pos = Tensor::<i64>::from_vec((0..t as i64).collect(), &[t]);
        let mut x = &tr.wte.forward(idx) + &tr.wpe.forward(pos);
        for block in &tr.h {
            x = block.forward(x);
        }
        record_output(self, tr.wte.attend(&tr.ln_f.forward(x)))
    }
}

/// The name of the tied head in nanoGPT's state dict.
const LM_HEAD: &str = "lm_head.weight";
const WTE: &str = "transformer.wte.weight";

impl<E: Float> Layer<E> for Gpt<E> {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        self.transformer.visit("transformer", v)
    }

    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        self.transformer.visit_mut("transformer", v)
    }

    /// Loads nanoGPT-named weights. Besides the keys of
    /// [`state_dict`](Layer::state_dict), the dict may hold
    /// `lm_head.weight`, the tied head, as nanoGPT saves it: it must then be
    /// identical (bit for bit) to `transformer.wte.weight` and is otherwise
    /// ignored; if `transformer.wte.weight` is absent, `lm_head.weight`
    /// provides it.
    ///
    /// # Errors
    /// [`ForgeError::Invalid`] when `lm_head.weight` differs from
    /// `transformer.wte.weight`; [`ForgeError::StateDict`] as for any layer
    /// (missing, unexpected or mis-shaped keys).
    ///
    /// ```
    /// use forge::models::gpt::{Gpt, GptConfig};
    /// use forge::prelude::*;
    /// let cfg = GptConfig { vocab_size: 5, block_size: 4, n_layer: 1, n_head: 1, n_embd: 4, bias: true };
    /// let a = Gpt::<f32>::new(cfg, &mut Rng::new(0));
    /// let mut b = Gpt::<f32>::new(cfg, &mut Rng::new(1));
    /// let mut sd = a.state_dict();
    /// sd.insert("lm_head.weight".into(), sd["transformer.wte.weight"].clone());
    /// b.load_state_dict(&sd).unwrap();
    /// assert_eq!(b.transformer.wte.weight.to_vec(), a.transformer.wte.weight.to_vec());
    /// sd.insert("lm_head.weight".into(), Tensor::zeros(&[5, 4]));
    /// assert!(b.load_state_dict(&sd).is_err());
    /// ```
    fn load_state_dict(&mut self, dict: &BTreeMap<String, Tensor<E>>) -> Result<()> {
        let mut dict = dict.clone();
        if let Some(head) = dict.remove(LM_HEAD) {
            match dict.get(WTE) {
                None => {
                    dict.insert(WTE.to_string(), head);
                }
                Some(wte) if wte.shape() == head.shape() && wte.as_slice() == head.as_slice() => {}
                Some(wte) => {
                    return Err(ForgeError::invalid(LM_HEAD, format!(
                        "Gpt::load_state_dict: {LM_HEAD} {:?} is not identical to {WTE} {:?}, but the head is tied to the token embedding",
                        head.shape(),
                        wte.shape()
                    )))
                }
            }
        }
        Untied(&mut self.transformer).load_state_dict(&dict)
    }
}

/// The body seen as a layer under the path `transformer`, so that the
/// default `load_state_dict` (all checks included) applies to it.
struct Untied<'a, E: Float>(&'a mut GptTransformer<E>);

impl<E: Float> Layer<E> for Untied<'_, E> {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        self.0.visit("transformer", v)
    }
    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        self.0.visit_mut("transformer", v)
    }
}

fn linear<E: Float>(i: usize, o: usize, bias: bool, rng: &mut Rng) -> Linear<E> {
    if bias {
        Linear::new(i, o, rng)
    } else {
        Linear::new_no_bias(i, o, rng)
    }
}

fn layer_norm<E: Float>(n: usize, bias: bool) -> LayerNorm<E> {
    let mut ln = LayerNorm::new(&[n]);
    if !bias {
        ln.bias = None;
    }
    ln
}

/// The first index of the largest value (NaN never wins).
fn argmax(row: &[f64]) -> i64 {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] || row[best].is_nan() {
            best = i;
        }
    }
    best as i64
}

/// Draws one index from `softmax(row / temperature)` restricted to the
/// `top_k` largest values.
fn sample_row(row: &[f64], temperature: f64, top_k: Option<usize>, rng: &mut Rng) -> i64 {
    let scaled: Vec<f64> = row.iter().map(|x| x / temperature).collect();
    let cutoff = match top_k {
        Some(k) if k < scaled.len() => {
            let mut sorted = scaled.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            sorted[k - 1]
        }
        _ => f64::NEG_INFINITY,
    };
    let max = scaled.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scaled
        .iter()
        .map(|&x| if x >= cutoff { (x - max).exp() } else { 0.0 })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut u = rng.uniform() * total;
    for (i, w) in weights.iter().enumerate() {
        if *w > 0.0 {
            if u < *w {
                return i as i64;
            }
            u -= w;
        }
    }
    // Round-off left `u` past the end: the last candidate.
    weights.iter().rposition(|w| *w > 0.0).unwrap_or(0) as i64
}

#[cfg(test)]
mod tests {
    use super::{argmax, sample_row};
    use crate::Rng;

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f64::NAN, 0.0]), 1);
    }

    #[test]
    fn top_k_sampling_stays_within_the_top_k() {
        let row = [0.0, 5.0, 1.0, 4.9, -3.0];
        let mut rng = Rng::new(3);
        let mut seen = [0usize; 5];
        for _ in 0..2000 {
            seen[sample_row(&row, 1.0, Some(2), &mut rng) as usize] += 1;
        }
        assert_eq!(seen[0] + seen[2] + seen[4], 0);
        // exp(5) / (exp(5) + exp(4.9)) = 0.525
        assert!((seen[1] as f64 / 2000.0 - 0.525).abs() < 0.05, "{seen:?}");
        // A low temperature is nearly greedy.
        let cold = (0..200)
            .filter(|_| sample_row(&row, 0.01, None, &mut rng) == 1)
            .count();
        assert!(cold >= 198, "{cold}");
    }
}

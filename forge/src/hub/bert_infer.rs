//! The inference path of [`Bert::encode`]'s encoder layers (nothing
//! recorded): the attention reads its heads in place and writes the merged
//! layout (`ops::attention_heads`), and each residual add runs in one pass
//! with the layer norm after it (`add_layer_norm_in_place`).
//!
//! Under bf16 autocast (f32 models) the whole layer stays in one chain of
//! bf16 products with f32 accumulation: the hidden state is rounded to
//! bf16 once per layer input in the layer norm's pass and feeds the three
//! projections; the attention's two products run in bf16 and write the
//! context as bf16 rows for the output projection; the MLP's GELU and
//! its rounding to bf16 are the widening product's epilogue
//! (`PackedBf16::gemm_gelu_bf16`), so its f32 output is never written.
//! Softmax, layer norms and residual sums stay in f32, as in PyTorch's CPU
//! autocast, whose bf16 list holds `linear`, `matmul` and `bmm`.
//!
//! Values: the f32 / f64 path equals the composed ops bit for bit (each
//! fused pass keeps their per-element arithmetic); the bf16 path is
//! bounded against an f64 reference in the tests. Every pass works on
//! fixed row blocks or heads, so both are the same bits for every thread
//! count.

use super::bert::{Bert, BertLayer, BertOutput, BertSelfAttention};
use crate::autocast::{bf16_now, packed_weight, rows_to_bf16, to_bf16_slice};
use crate::cpu::bgemm::padded_k;
use crate::cpu::memory::Storage;
use crate::nn::{Activation, Forward, Linear};
use crate::ops::attention_heads::{attention_heads, attention_heads_bf16, HeadDims};
use crate::ops::norm::add_layer_norm_in_place;
use crate::quant::{f32_values, tensor_from_f32, Int8Weight};
use crate::tensor::{Float, Tensor};
use std::any::Any;

impl<E: Float> Bert<E> {
    /// Whether [`encode_layers_infer`](Self::encode_layers_infer) can run
    /// this model on `x`: not recording (gradients off or nothing
    /// tracked), no summary running, every layer norm with its weight and
    /// bias.
    pub(super) fn infer_applies(&self, x: &Tensor<E>) -> bool {
        applies(self, x)
    }

    /// The encoder layers on the embeddings' output `x` (`[B, T, C]`) by
    /// the inference path; `key_mask` (`B * T`) is false for padding. The
    /// caller checked [`infer_applies`](Self::infer_applies).
    pub(super) fn encode_layers_infer(&self, x: Tensor<E>, key_mask: Option<&[bool]>) -> Tensor<E> {
        encode_layers(self, x, key_mask)
    }
}

/// Whether [`encode_layers`] can run `bert`: not recording (gradients off
/// or nothing tracked), no summary running, every layer norm with its
/// weight and bias.
fn applies<E: Float>(bert: &Bert<E>, x: &Tensor<E>) -> bool {
    let recording = crate::autograd::is_grad_enabled()
        && (x.is_tracked()
            || crate::nn::Layer::parameters(bert)
                .iter()
                .any(|p| p.is_tracked()));
    !recording
        && !crate::nn::summary_running()
        && bert.encoder.layer.iter().all(|l| {
            [&l.attention.output, &l.output]
                .iter()
                .all(|o| o.LayerNorm.weight.is_some() && o.LayerNorm.bias.is_some())
        })
}

/// The encoder layers on the embeddings' output `x` (`[B, T, C]`);
/// `key_mask` (`B * T`) is false for padding. The caller checked
/// [`applies`].
fn encode_layers<E: Float>(bert: &Bert<E>, x: Tensor<E>, key_mask: Option<&[bool]>) -> Tensor<E> {
    if let Some(b32) = (bert as &dyn Any).downcast_ref::<Bert<f32>>() {
        let x32 = (Box::new(x.clone()) as Box<dyn Any>)
            .downcast::<Tensor<f32>>()
            .expect("E is f32");
        if bf16_layers_apply(b32, &x32) {
            let y = encode_layers_bf16(b32, *x32, key_mask);
            return *(Box::new(y) as Box<dyn Any>)
                .downcast::<Tensor<E>>()
                .expect("E is f32");
        }
    }
    let mut x = x;
    for l in &bert.encoder.layer {
        x = layer(bert, l, x, key_mask);
    }
    x
}

/// The rows and width of a `[B, T, C]` state, and its head split.
fn head_dims<E: Float>(bert: &Bert<E>, x: &Tensor<E>, ld: usize) -> HeadDims {
    let heads = bert.config.num_attention_heads;
    HeadDims {
        b: x.dim(0),
        t: x.dim(1),
        heads,
        d: x.dim(2) / heads,
        ld,
    }
}

/// `LayerNorm(dense(y) + residual)` of a [`BertOutput`], the add and the
/// norm in one pass (in place in the product's fresh output).
fn output<E: Float>(o: &BertOutput<E>, y: Tensor<E>, residual: &Tensor<E>) -> Tensor<E> {
    let mut z = o.dense.forward(y);
    let shape = z.shape().to_vec();
    // a fresh product is unshared; anything else is copied first
    if z.values_mut().is_none() {
        z = Tensor::from_vec(z.to_vec(), &shape);
    }
    let v = z.values_mut().expect("a new tensor is unshared");
    let ln = &o.LayerNorm;
    let (w, b) = (
        ln.weight.as_ref().expect("checked by applies"),
        ln.bias.as_ref().expect("checked by applies"),
    );
    add_layer_norm_in_place(
        v,
        residual.as_slice(),
        shape[shape.len() - 1],
        w.as_slice(),
        b.as_slice(),
        ln.eps,
        |_, _| {},
    );
    // nothing recorded: the tools see the norm (the residual add in it)
    z.seen("layer_norm", [residual, w, b])
}

/// One encoder layer in `E` (f32 products through [`Linear`], which
/// autocast may still run in bf16).
fn layer<E: Float>(
    bert: &Bert<E>,
    l: &BertLayer<E>,
    x: Tensor<E>,
    key_mask: Option<&[bool]>,
) -> Tensor<E> {
    let s = &l.attention.self_;
    let (q, k, v) = match int8_qkv(s, &x) {
        Some(qkv) => qkv,
        None => (
            s.query.forward(x.clone()),
            s.key.forward(x.clone()),
            s.value.forward(x.clone()),
        ),
    };
    let shape = x.shape().to_vec();
    let c = shape[2];
    let dims = head_dims(bert, &x, c);
    // written whole: every head's columns of every row
    let mut ctx = Storage::<E>::stale(x.numel());
    attention_heads(
        q.as_slice(),
        k.as_slice(),
        v.as_slice(),
        dims,
        key_mask,
        &mut ctx,
    );
    // nothing recorded: the tools see the heads' products and softmax as
    // one attention op
    let ctx = Tensor::from_storage(ctx, &shape).seen("scaled_dot_product_attention", [&q, &k, &v]);
    let x = output(&l.attention.output, ctx, &x);
    let m = l
        .intermediate
        .dense
        .forward_activated(x.clone(), Activation::Gelu);
    output(&l.output, m, &x)
}

/// The query, key and value projections of `x` when all three are int8,
/// with `x` (as `f32`) quantized once for the three products: the same
/// bits as each layer's own forward pass, which would quantize the same
/// `x` to the same bytes three times. `None` otherwise.
fn int8_qkv<E: Float>(
    s: &BertSelfAttention<E>,
    x: &Tensor<E>,
) -> Option<(Tensor<E>, Tensor<E>, Tensor<E>)> {
    let layers = [&s.query, &s.key, &s.value];
    let weights: Vec<_> = layers.iter().map(|l| l.int8()).collect::<Option<_>>()?;
    let c = x.shape().last().copied()?;
    if weights.iter().any(|w| w.in_features() != c) {
        return None;
    }
    let xs = f32_values(x.as_slice());
    let biases: Vec<_> = layers
        .iter()
        .map(|l| l.bias.as_ref().map(|b| f32_values(b.as_slice())))
        .collect();
    let parts: Vec<_> = weights
        .iter()
        .zip(&biases)
        .map(|(&w, b)| (w, b.as_deref()))
        .collect();
    let mut ys = Int8Weight::linear_shared(&parts, &xs).into_iter();
    let mut next = |w: &Int8Weight| {
        let mut shape = x.shape().to_vec();
        *shape.last_mut().expect("rank checked") = w.out_features();
        tensor_from_f32::<E>(ys.next().expect("one output per weight"), &shape)
    };
    Some((next(weights[0]), next(weights[1]), next(weights[2])))
}

/// Whether the bf16 chain applies: bf16 autocast on, plain f32 weights
/// (none quantized), even widths (the bf16 rows need no padding).
fn bf16_layers_apply(bert: &Bert<f32>, x: &Tensor<f32>) -> bool {
    let plain = |l: &Linear<f32>| l.int8().is_none() && l.fp8().is_none() && l.bias.is_some();
    let c = bert.config.hidden_size;
    bf16_now(false)
        && padded_k(c) == c
        && padded_k(bert.config.intermediate_size) == bert.config.intermediate_size
        && x.is_contiguous()
        && bert.encoder.layer.iter().all(|l| {
            let s = &l.attention.self_;
            [
                &s.query,
                &s.key,
                &s.value,
                &l.attention.output.dense,
                &l.intermediate.dense,
                &l.output.dense,
            ]
            .into_iter()
            .all(plain)
        })
}

/// A raw pointer to rows shared by the row blocks of one pass.
struct Rows<T>(*mut T);
impl<T> Clone for Rows<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Rows<T> {}
// SAFETY: each row block writes only its own rows, which no other block
// touches, and the buffer outlives the pass.
unsafe impl<T> Send for Rows<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Rows<T> {}

impl<T> Rows<T> {
    /// Rows `first..first + len / width` of `width` elements.
    ///
    /// # Safety
    /// Those rows are inside the buffer and written by this block alone.
    unsafe fn rows<'a>(self, first: usize, width: usize, len: usize) -> &'a mut [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(first * width), len) }
    }
}

/// `x W^T + b` of bf16 rows `a` (`m` of them) with `l`'s cached packing.
fn product(l: &Linear<f32>, m: usize, a: &[u16]) -> Storage<f32> {
    let w = packed_weight(&l.weight);
    // written whole by the product
    let mut out = Storage::<f32>::stale(m * l.weight.dim(0));
    w.gemm(m, a, l.bias.as_ref().map(|b| b.as_slice()), &mut out);
    out
}

/// `LayerNorm(dense(a) + residual)` with `a` in bf16; the result in f32
/// and (into `xb`) in bf16.
fn output_bf16(
    o: &BertOutput<f32>,
    m: usize,
    a: &[u16],
    residual: &[f32],
    xb: &mut [u16],
) -> Storage<f32> {
    let mut y = product(&o.dense, m, a);
    let c = residual.len() / m.max(1);
    let ln = &o.LayerNorm;
    let dst = Rows(xb.as_mut_ptr());
    add_layer_norm_in_place(
        &mut y,
        residual,
        c,
        ln.weight.as_ref().expect("checked by applies").as_slice(),
        ln.bias.as_ref().expect("checked by applies").as_slice(),
        ln.eps,
        |first, rows| {
            // SAFETY: this block's rows of `xb` (`m x c`, as `y`).
            let out = unsafe { dst.rows(first, c, rows.len()) };
            to_bf16_slice(rows, out);
        },
    );
    y
}

/// The encoder layers with bf16 products (see the module docs).
fn encode_layers_bf16(bert: &Bert<f32>, x: Tensor<f32>, key_mask: Option<&[bool]>) -> Tensor<f32> {
    // the input tensor, kept for the tools (the state below shadows it)
    let input = &x;
    let shape = x.shape().to_vec();
    let (c, inter) = (shape[2], bert.config.intermediate_size);
    let m = shape[0] * shape[1];
    let dims = head_dims(bert, &x, c);
    let mut xb = rows_to_bf16(x.as_slice(), m, c);
    let mut x = Storage::from_vec(x.as_slice().to_vec());
    for l in &bert.encoder.layer {
        let s = &l.attention.self_;
        let (q, k, v) = (
            product(&s.query, m, &xb),
            product(&s.key, m, &xb),
            product(&s.value, m, &xb),
        );
        // written whole: every head's columns of every row
        let mut ctx = Storage::<u16>::stale(m * c);
        attention_heads_bf16(&q, &k, &v, dims, key_mask, &mut ctx);
        x = output_bf16(&l.attention.output, m, &ctx, &x, &mut xb);
        // written whole: every row, GELU'd and rounded in the product's
        // epilogue
        let mut hb = Storage::<u16>::stale(m * inter);
        let up = &l.intermediate.dense;
        packed_weight(&up.weight).gemm_gelu_bf16(
            m,
            &xb,
            up.bias.as_ref().map(|b| b.as_slice()),
            &mut hb,
        );
        let mut next = Storage::<u16>::stale(m * c);
        x = output_bf16(&l.output, m, &hb, &x, &mut next);
        xb = next;
    }
    // nothing recorded, and no tensor between the layers: the tools see
    // the whole chain as one op
    Tensor::from_storage(x, &shape).seen("encoder_layers_bf16", [input])
}

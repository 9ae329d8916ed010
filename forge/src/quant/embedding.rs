//! int8 embedding tables: [`quantize_embeddings`] converts every
//! [`Embedding`](crate::nn::Embedding) of a model to a table of signed
//! bytes with one symmetric scale per row; a lookup dequantizes only the
//! rows it reads, and a table tied to an output head (GPT-2's `lm_head`)
//! serves that head as an int8 product on the same bytes, its per-row
//! scales being the head's per-output-channel scales.

use super::buf::{f32_values, tensor_from_f32};
use super::inference::inference_only;
use super::int8::{Granularity, Int8Weight, Quantizable};
use crate::cpu::memory::Storage;
use crate::nn::{Layer, TensorKind, TensorVisitorMut};
use crate::tensor::{Float, Tensor};

/// Converts every [`Embedding`](crate::nn::Embedding) of `model` to int8
/// in place and returns how many it converted: each row gets its own
/// symmetric scale (`max|row| / 127.5`, as [`Granularity::PerChannel`]
/// gives a `Linear`'s output channels) and the lookup returns the
/// dequantized rows (`value * scale`, exactly
/// [`Int8Weight::dequantize`]'s). A table that is also a model's output
/// head (GPT-2's tied `lm_head`, through
/// [`Embedding::attend`](crate::nn::Embedding::attend)) then runs that head
/// as a dynamic int8 product on the same bytes: the tie is kept and
/// nothing is stored twice. The tables become inference only.
///
/// [`quantize_dynamic`](super::quantize_dynamic) leaves embeddings alone,
/// as PyTorch's does (its embeddings need their own `qconfig`, see the
/// quantization chapter of the guide); call both to quantize a whole
/// transformer.
///
/// ```
/// use forge::prelude::*;
/// use forge::quant::{quantize_embeddings, resident_bytes};
/// let mut emb = forge::nn::Embedding::<f32>::new(100, 16, None, &mut Rng::new(0));
/// let idx = Tensor::<i64>::from_vec(vec![3, 97, 3], &[3]);
/// let exact = emb.forward(idx.clone());
/// assert_eq!(quantize_embeddings(&mut emb), 1);
/// let approx = emb.forward(idx);
/// // each value within half a step of its row (max|row| / 127.5 / 2)
/// assert!(exact.sub(&approx).abs().max().item() < 4.5 / 255.0);
/// // the bytes (rows padded to a multiple of 16), a sum and an f32 scale per row
/// assert_eq!(resident_bytes(&emb), 112 * 16 + 100 * 4 + 100 * 4);
/// ```
pub fn quantize_embeddings<E: Float, L: Layer<E> + ?Sized>(model: &mut L) -> usize {
    struct Convert(usize);
    impl<E: Float> TensorVisitorMut<E> for Convert {
        fn visit(&mut self, _: &str, _: &mut Tensor<E>, _: TensorKind) {}
        fn visit_quantizable(&mut self, _: &str, layer: &mut dyn Quantizable) {
            if layer.quantize_table_int8() {
                self.0 += 1;
            }
        }
    }
    let mut v = Convert(0);
    model.visit_tensors_mut(&mut v);
    v.0
}

/// A `[num_embeddings, dim]` table quantized with one scale per row.
pub(crate) fn quantize_table<E: Float>(weight: &Tensor<E>) -> Int8Weight {
    let (n, d) = (weight.dim(0), weight.dim(1));
    Int8Weight::quantize(
        &f32_values(weight.as_slice()),
        n,
        d,
        Granularity::PerChannel,
    )
}

/// The rows of `q` at `idx` (already checked to be in range), dequantized:
/// `[*idx.shape(), dim]`.
pub(crate) fn lookup<E: Float>(q: &Int8Weight, idx: &Tensor<i64>) -> Tensor<E> {
    let d = q.in_features();
    let ids = idx.as_slice();
    let mut y = Storage::<f32>::stale(ids.len() * d);
    for (row, &i) in y.chunks_exact_mut(d.max(1)).zip(ids) {
        q.dequantize_row_into(i as usize, row);
    }
    let mut shape = idx.shape().to_vec();
    shape.push(d);
    tensor_from_f32(y, &shape)
}

/// `x w^T` for the int8 table `q` (`x`'s last dimension the table's
/// width): the dynamic int8 product of a tied output head, recorded so that
/// a backward pass through it panics naming the layer.
pub(crate) fn attend<E: Float>(q: &Int8Weight, x: &Tensor<E>) -> Tensor<E> {
    let (n, d) = (q.out_features(), q.in_features());
    let y = q.linear_pooled(&f32_values(x.as_slice()), None, None);
    let mut shape = x.shape().to_vec();
    *shape.last_mut().expect("checked rank") = n;
    let layer = format!("Embedding({n}, {d}) with an int8 table, as an output head,");
    inference_only(
        tensor_from_f32(y, &shape),
        vec![x.clone()],
        "embedding_attend_int8",
        layer,
    )
}

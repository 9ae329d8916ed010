//! [`Embedding`]: a lookup table of learned vectors, in f32 or int8.

use super::forward::Forward;
use super::layer::{enter_layer, enter_layer_mut, Layer};
use super::summary::record_output;
use super::visit::{TensorKind, TensorVisitor, TensorVisitorMut, Visit, Visitable};
use crate::ops::embedding::embedding;
use crate::quant::{
    attend_int8, lookup_int8, quantize_table, visit_int8, visit_int8_mut, Granularity, Int8Weight,
    Quantizable,
};
use crate::tensor::{Float, Rng, Tensor};
use std::sync::Arc;

/// A table of `num_embeddings` vectors of size `embedding_dim`, looked up
/// by integer index (PyTorch's `nn.Embedding`). The gradient accumulates
/// over repeated indices; row `padding_idx` gets no gradient.
///
/// [`quantize_embeddings`](crate::quant::quantize_embeddings) converts the
/// table to int8 (one scale per row); `weight` is then empty
/// (`[0, embedding_dim]`) and the state dict holds the integer values as
/// `weight` and their scales as `weight_scale`.
///
/// # Shapes
/// - `weight`: `[num_embeddings, embedding_dim]`
/// - input: integer indices of any shape; output `[*input, embedding_dim]`
///
/// ```
/// use forge::prelude::*;
/// let emb = forge::nn::Embedding::<f32>::new(10, 4, None, &mut Rng::new(0));
/// let idx = Tensor::<i64>::from_vec(vec![1, 2, 1], &[3]);
/// assert_eq!(emb.forward(idx).shape(), &[3, 4]);
/// ```
#[derive(Clone, Debug)]
pub struct Embedding<E: Float = f32> {
    /// `[num_embeddings, embedding_dim]` (`[0, embedding_dim]` once
    /// quantized).
    pub weight: Tensor<E>,
    /// The row that receives no gradient (and is initialised to zeros).
    pub padding_idx: Option<usize>,
    /// The int8 table, once quantized.
    pub(crate) int8: Option<Arc<Int8Weight>>,
}

impl<E: Float> Embedding<E> {
    /// A trainable table initialised as PyTorch does: N(0, 1), with row
    /// `padding_idx` zeroed.
    ///
    /// # Panics
    /// When `padding_idx` is not below `num_embeddings`.
    ///
    /// ```
    /// let e = forge::nn::Embedding::<f64>::new(5, 3, Some(0), &mut forge::Rng::new(1));
    /// assert_eq!(&e.weight.to_vec()[..3], &[0.0, 0.0, 0.0]);
    /// ```
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        padding_idx: Option<usize>,
        rng: &mut Rng,
    ) -> Self {
        if let Some(p) = padding_idx {
            shape_assert!(
                p < num_embeddings,
                "Embedding: padding_idx {p} is out of range for {num_embeddings} embeddings"
            );
        }
        let w = Tensor::<E>::normal(&[num_embeddings, embedding_dim], 0.0, 1.0, rng);
        let mut data = w.to_vec();
        if let Some(p) = padding_idx {
            data[p * embedding_dim..(p + 1) * embedding_dim].fill(E::zero());
        }
        Embedding::from_weight(
            Tensor::from_vec(data, &[num_embeddings, embedding_dim]).requires_grad(),
            padding_idx,
        )
    }

    /// A layer holding `weight` (`[num_embeddings, embedding_dim]`) as it
    /// is (trainable if it requires a gradient).
    ///
    /// # Panics
    /// When `weight` is not 2-D or `padding_idx` is out of range.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let e = forge::nn::Embedding::from_weight(Tensor::<f32>::ones(&[4, 2]), None);
    /// assert_eq!((e.num_embeddings(), e.embedding_dim()), (4, 2));
    /// ```
    pub fn from_weight(weight: Tensor<E>, padding_idx: Option<usize>) -> Self {
        shape_assert!(
            weight.rank() == 2,
            "Embedding: weight must be 2-D (num_embeddings, dim), got shape {:?}",
            weight.shape()
        );
        if let Some(p) = padding_idx {
            shape_assert!(
                p < weight.dim(0),
                "Embedding: padding_idx {p} is out of range for {} embeddings",
                weight.dim(0)
            );
        }
        Embedding {
            weight,
            padding_idx,
            int8: None,
        }
    }

    /// The number of rows (the table's first dimension, in f32 or int8).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut e = forge::nn::Embedding::<f32>::new(7, 3, None, &mut Rng::new(0));
    /// forge::quant::quantize_embeddings(&mut e);
    /// assert_eq!((e.num_embeddings(), e.embedding_dim()), (7, 3));
    /// ```
    pub fn num_embeddings(&self) -> usize {
        match &self.int8 {
            Some(q) => q.out_features(),
            None => self.weight.dim(0),
        }
    }

    /// The length of each row.
    ///
    /// ```
    /// let e = forge::nn::Embedding::<f32>::new(7, 3, None, &mut forge::Rng::new(0));
    /// assert_eq!(e.embedding_dim(), 3);
    /// ```
    pub fn embedding_dim(&self) -> usize {
        self.weight.dim(1)
    }

    /// The int8 table, once quantized
    /// ([`quantize_embeddings`](crate::quant::quantize_embeddings)).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut e = forge::nn::Embedding::<f32>::new(7, 3, None, &mut Rng::new(0));
    /// assert!(e.int8().is_none());
    /// forge::quant::quantize_embeddings(&mut e);
    /// assert_eq!(e.int8().unwrap().scales().len(), 7); // one per row
    /// ```
    pub fn int8(&self) -> Option<&Int8Weight> {
        self.int8.as_deref()
    }

    /// The table used as an output projection, `x weightᵀ` (`x`:
    /// `[.., embedding_dim]`, output `[.., num_embeddings]`): the tied
    /// output head of a language model (GPT-2's `lm_head`; Flax's
    /// `Embed.attend`). An int8 table runs it as a dynamic int8 product on
    /// its own bytes, the per-row scales being the per-output-channel
    /// scales (inference only: a backward pass through it panics naming
    /// the layer).
    ///
    /// # Panics
    /// When `x`'s last dimension is not `embedding_dim`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let e = forge::nn::Embedding::<f32>::new(10, 4, None, &mut Rng::new(0));
    /// let x = Tensor::<f32>::ones(&[2, 3, 4]);
    /// assert_eq!(e.attend(&x).shape(), &[2, 3, 10]);
    /// ```
    #[track_caller]
    pub fn attend(&self, x: &Tensor<E>) -> Tensor<E> {
        let d = self.embedding_dim();
        shape_assert!(
            x.rank() >= 1 && x.shape()[x.rank() - 1] == d,
            "Embedding({}, {d}).attend: expected input of shape [.., {d}], got {:?}",
            self.num_embeddings(),
            x.shape()
        );
        match &self.int8 {
            Some(q) => attend_int8(q, x),
            // Outside autograd `linear` keeps the table's packed transpose
            // on its storage until the table is next written, instead of
            // packing it on every call; the product and its bits are
            // `matmul_t`'s (`attend_bits_do_not_depend_on_the_tape`).
            None if !crate::autograd::is_grad_enabled() => x.linear(&self.weight, None),
            None => x.matmul_t(&self.weight),
        }
    }
}

impl<E: Float> Forward<Tensor<i64>> for Embedding<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When an index is out of range; the message names the layer, the
    /// index and the table's shape.
    fn forward(&self, idx: Tensor<i64>) -> Tensor<E> {
        let (n, d) = (self.num_embeddings(), self.embedding_dim());
        if let Some(&bad) = idx
            .as_slice()
            .iter()
            .find(|&&i| !(0..n as i64).contains(&i))
        {
            shape_panic!(
                "Embedding({n}, {d}): index {bad} is out of range (weight shape {:?}, input shape {:?})",
                [n, d],
                idx.shape()
            );
        }
        let y = match &self.int8 {
            // inference only: the table is no longer trainable and the
            // indices carry no gradient, so there is nothing to record
            Some(q) => lookup_int8(q, &idx),
            None => embedding(&self.weight, &idx, self.padding_idx),
        };
        record_output(self, y)
    }
}

impl<E: Float> Quantizable for Embedding<E> {
    /// `false`: [`quantize_dynamic`](crate::quant::quantize_dynamic) leaves
    /// embeddings in f32, as PyTorch's does; see
    /// [`quantize_table_int8`](Quantizable::quantize_table_int8).
    fn quantize_int8(&mut self, _: Granularity) -> bool {
        false
    }

    fn quantize_table_int8(&mut self) -> bool {
        if self.int8.is_some() {
            return false;
        }
        let d = self.embedding_dim();
        self.int8 = Some(Arc::new(quantize_table(&self.weight)));
        self.weight = Tensor::zeros(&[0, d]);
        true
    }
}

impl<E: Float> Layer<E> for Embedding<E> {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        match &self.int8 {
            Some(q) => visit_int8(v, "weight", q),
            None => v.visit("weight", &self.weight, TensorKind::Weight),
        }
    }

    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        v.visit_quantizable("", self);
        match &mut self.int8 {
            Some(q) => visit_int8_mut(v, "weight", q),
            None => v.visit("weight", &mut self.weight, TensorKind::Weight),
        }
    }
}

impl<E: Float> Visit<E> for Embedding<E> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        enter_layer(self, name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        enter_layer_mut(self, name, v)
    }
}

#[diagnostic::do_not_recommend]
impl<E: Float> Visitable for Embedding<E> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Sgd;

    fn bits(t: &Tensor<f32>) -> Vec<u32> {
        t.to_vec().iter().map(|v| v.to_bits()).collect()
    }

    /// `attend` outside autograd (the table's packed transpose kept on its
    /// storage) gives `matmul_t`'s bits, as it does under the tape, at 1
    /// and 2 threads; after an optimizer step writes the table, the next
    /// call multiplies by the new values, not the kept packing.
    #[test]
    fn attend_bits_do_not_depend_on_the_tape() {
        let mut rng = Rng::new(5);
        // 300 rows: not a multiple of the kernel's 32 columns; 40 x 37
        // rows of `x`: not a multiple of its 12-row tiles
        let mut e = Embedding::<f32>::new(300, 48, None, &mut rng);
        let x = Tensor::<f32>::uniform(&[40, 37, 48], -1.0, 1.0, &mut rng);
        for threads in [1, 2] {
            crate::cpu::set_num_threads(threads);
            let want = x.matmul_t(&e.weight);
            let taped = e.attend(&x);
            assert_eq!(bits(&taped), bits(&want), "{threads} threads, taped");
            for _ in 0..2 {
                let kept = crate::no_grad(|| e.attend(&x));
                assert_eq!(bits(&kept), bits(&want), "{threads} threads, no_grad");
            }
        }
        crate::cpu::set_num_threads(1);
        let g = e.attend(&x).sum().backward();
        Sgd::<f32>::new(0.1).step(&mut e, &g).unwrap();
        let fresh = x.matmul_t(&e.weight);
        let kept = crate::no_grad(|| e.attend(&x));
        assert_eq!(bits(&kept), bits(&fresh), "stale packing after a step");
    }
}

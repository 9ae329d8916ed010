//! Recurrent layers ([`Lstm`](super::Lstm), [`Gru`](super::Gru),
//! [`Rnn`](super::Rnn)) with `weight_ih` and `weight_hh` held as 8-bit
//! floats ([`to_fp8`](crate::quant::to_fp8)): the bytes and scales stay
//! resident (a quarter of the f32 weights), and each call decodes them
//! with the f32 gemm's panel decoder (`cpu::gemm::fp8_panels`) into pooled
//! f32 weights that the call's time loop uses as an f32 layer's (the
//! no-grad LSTM packs them once for the call, as it packs an f32 weight
//! once per write version) and drops afterwards. The loop that runs is the
//! f32 layer's on the same values, so the outputs and final states equal,
//! bit for bit, the f32 layer holding
//! [`Fp8Weight::dequantize`](crate::quant::Fp8Weight::dequantize)'s
//! weights, at any thread count.
//!
//! The layer is inference only: a backward pass that reaches an output or
//! a final state panics naming the layer.

use super::rnn::{CellWeights, Projected, Recurrent, Sequence};
use crate::quant::{inference_only, Fp8Format, Fp8Weight, Granularity};
use crate::tensor::{Element, Float, Tensor};
use std::sync::Arc;

/// `weight_ih` and `weight_hh` of one layer and direction as 8-bit floats.
type Fp8Cell = [Arc<Fp8Weight>; 2];

impl<E: Float> Recurrent<E> {
    /// Converts every cell's `weight_ih` and `weight_hh` to 8-bit floats
    /// (the weights of `cells` are then empty, `[0, in]`); `false` when
    /// they already are fp8 or int8.
    pub(crate) fn quantize_fp8(&mut self, format: Fp8Format, granularity: Granularity) -> bool {
        if self.int8.is_some() || self.fp8.is_some() {
            return false;
        }
        let convert = |w: &mut Tensor<E>| {
            let (rows, k) = (w.dim(0), w.dim(1));
            let v: Vec<f32> = w
                .to_vec()
                .iter()
                .map(|&x| Element::to_f64(x) as f32)
                .collect();
            *w = Tensor::zeros(&[0, k]);
            Arc::new(Fp8Weight::quantize(&v, rows, k, format, granularity))
        };
        let q = self
            .cells
            .iter_mut()
            .map(|c| [convert(&mut c.weight_ih), convert(&mut c.weight_hh)])
            .collect();
        self.fp8 = Some(q);
        true
    }

    /// [`run`](Recurrent::run) for fp8 weights `q`: the f32 layer holding
    /// the decoded weights runs the call, and every output is recorded so
    /// that a backward pass reaching it panics naming the layer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_fp8(
        &self,
        q: &[Fp8Cell],
        x: Tensor<E>,
        init: Option<&[Tensor<E>]>,
        state_names: &[&str],
        fold_bias_hh: bool,
        seq: Sequence<'_, E>,
        projected: Option<Projected<'_, E>>,
    ) -> (Tensor<E>, Vec<Tensor<E>>) {
        let cells = self
            .cells
            .iter()
            .zip(q)
            .map(|(c, [ih, hh])| CellWeights {
                weight_ih: ih.dequantized_tensor(),
                weight_hh: hh.dequantized_tensor(),
                bias_ih: c.bias_ih.clone(),
                bias_hh: c.bias_hh.clone(),
            })
            .collect();
        let decoded = Recurrent {
            config: self.config,
            kind: self.kind,
            cells,
            int8: None,
            fp8: None,
        };
        let mut inputs = vec![x.clone()];
        inputs.extend(init.into_iter().flatten().cloned());
        for c in &self.cells {
            inputs.extend(c.bias_ih.iter().chain(&c.bias_hh).cloned());
        }
        let (out, states) = decoded.run(x, init, state_names, fold_bias_hh, seq, projected);
        let layer = format!("{} with fp8 weights", self.label());
        let record = |y: Tensor<E>, op| inference_only(y, inputs.clone(), op, layer.clone());
        let states = states
            .into_iter()
            .map(|s| record(s, "rnn_fp8_state"))
            .collect();
        (record(out, "rnn_fp8"), states)
    }
}

//! Recurrent layers ([`Lstm`](super::Lstm), [`Gru`](super::Gru),
//! [`Rnn`](super::Rnn)) with `weight_ih` and `weight_hh` held as 8-bit
//! floats ([`to_fp8`](crate::quant::to_fp8)): the bytes and scales stay
//! resident (a quarter of the f32 weights).
//!
//! The no-grad LSTM over two or more sequences (its projected path,
//! `ops/rnn_cell/lstm_infer.rs`) packs `W_ih^T` and `W_hh^T` for the call
//! straight from the bytes: the bytes are held in the packed gemm's panel
//! order, so each panel is decoded (the f32 gemm's panel decoder,
//! `cpu::gemm::fp8_panels`) into the pooled packed buffer, and no f32 copy
//! of the weight exists besides the packed panels, which are dropped after
//! the call (kept, they would be an f32 copy of the weight). Every other
//! time loop (the GRU, the Elman RNN, the LSTM over one sequence, while
//! recording, or without the packed kernel) gets the cell's weights
//! decoded into pooled f32 tensors, one cell at a time
//! ([`Recurrent::decoded_cell`]), and runs as the f32 layer's.
//!
//! Either way the loop that runs is the f32 layer's on the same values
//! (the packed panels hold exactly the values the f32 layer packs), so
//! the outputs and final states equal, bit for bit, the f32 layer holding
//! [`Fp8Weight::dequantize`](crate::quant::Fp8Weight::dequantize)'s
//! weights, at any thread count.
//!
//! The layer is inference only: a backward pass that reaches an output or
//! a final state panics naming the layer.

use super::rnn::{CellWeights, Fp8Cell, Projected, Recurrent, Sequence};
use crate::quant::{inference_only, Fp8Format, Fp8Weight, Granularity};
use crate::tensor::{Element, Float, Tensor};
use std::sync::Arc;

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

    /// A cell with `q`'s weights decoded into pooled f32 tensors and
    /// `cell`'s biases: what a time loop other than the projected LSTM's
    /// reads (see the module docs).
    pub(crate) fn decoded_cell(q: &Fp8Cell, cell: &CellWeights<E>) -> CellWeights<E> {
        CellWeights {
            weight_ih: q[0].dequantized_tensor(),
            weight_hh: q[1].dequantized_tensor(),
            bias_ih: cell.bias_ih.clone(),
            bias_hh: cell.bias_hh.clone(),
        }
    }

    /// [`run`](Recurrent::run) for fp8 weights: the time loop
    /// ([`run_cells`](Recurrent::run_cells)), and every output recorded so
    /// that a backward pass reaching it panics naming the layer.
    pub(crate) fn run_fp8(
        &self,
        x: Tensor<E>,
        init: Option<&[Tensor<E>]>,
        state_names: &[&str],
        fold_bias_hh: bool,
        seq: Sequence<'_, E>,
        projected: Option<Projected<'_, E>>,
    ) -> (Tensor<E>, Vec<Tensor<E>>) {
        let mut inputs = vec![x.clone()];
        inputs.extend(init.into_iter().flatten().cloned());
        for c in &self.cells {
            inputs.extend(c.bias_ih.iter().chain(&c.bias_hh).cloned());
        }
        let (out, states) = self.run_cells(x, init, state_names, fold_bias_hh, seq, projected);
        let layer = format!("{} with fp8 weights", self.label());
        let record = |y: Tensor<E>, op| inference_only(y, inputs.clone(), op, layer.clone());
        let states = states
            .into_iter()
            .map(|s| record(s, "rnn_fp8_state"))
            .collect();
        (record(out, "rnn_fp8"), states)
    }
}

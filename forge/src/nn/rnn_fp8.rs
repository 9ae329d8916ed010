//! Recurrent layers ([`Lstm`](super::Lstm), [`Gru`](super::Gru),
//! [`Rnn`](super::Rnn)) with `weight_ih` and `weight_hh` held as 8-bit
//! floats ([`to_fp8`](crate::quant::to_fp8)): the bytes and scales stay
//! resident (a quarter of the f32 weights).
//!
//! The layer is inference only, so its time loops run without recording
//! (a backward pass that reaches an output or a final state panics naming
//! the layer), and no f32 copy of a weight is made for a call where
//! forge's packed gemm runs:
//!
//! - the LSTM over two or more sequences (its projected path,
//!   `ops/rnn_cell/lstm_infer.rs`) packs `W_ih^T` and `W_hh^T` for the
//!   call straight from the bytes: the bytes are held in the packed
//!   gemm's panel order, so each panel is decoded (the f32 gemm's panel
//!   decoder, `cpu::gemm::fp8_panels`) into the pooled packed buffer;
//! - every other time loop (the GRU, the Elman RNN, the LSTM over one
//!   sequence or without its packed path,
//!   [`fp8_sequence`](Recurrent::fp8_sequence)) projects the
//!   whole sequence in one product whose packing step decodes `W_ih`'s
//!   panels (`cpu::gemm::gemm_fp8_t`, the bytes read in place for one
//!   row), and multiplies each step by `W_hh^T` packed from the bytes
//!   once per call (`ops/rnn_cell/fp8_hidden.rs`).
//!
//! The packed panels are dropped after the call (kept, they would be an
//! f32 copy of the weight). Where the f32 loop does not multiply by
//! packed panels (a batch of one sequence, whose one-row products read
//! `W_hh` in place; an element type other than `f32`; a CPU without the
//! packed kernel; at most 16 gate rows) the weight is decoded into a
//! pooled tensor for the call (`W_hh` only, where the projection runs on
//! the bytes).
//!
//! Either way the loop that runs is the f32 layer's on the same values
//! (the packed panels hold exactly the values the f32 layer packs, and
//! each product has the bits of the f32 product), so the outputs and
//! final states equal, bit for bit, the f32 layer holding
//! [`Fp8Weight::dequantize`](crate::quant::Fp8Weight::dequantize)'s
//! weights, at any thread count.

use super::rnn::{CellWeights, Fp8Cell, Layered, Projected, Recurrent, Sequence};
use crate::autograd::no_grad;
use crate::ops::rnn_cell::Fp8Hidden;
use crate::quant::{
    f32_values, inference_only, tensor_from_f32, Fp8Format, Fp8Weight, Granularity,
};
use crate::tensor::{Element, Float, Tensor};
use std::any::TypeId;
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

    /// One layer and direction of the fp8 cell `q` (`cell` holding its
    /// biases) over the time-major input `x` (`[T, N, in]`), as
    /// [`run_cells`](Recurrent::run_cells)' projection and `seq` compute
    /// it with the decoded weights, without recording: `x W_ih^T` in one
    /// product decoding `W_ih` in its packing step, and `seq` handed
    /// `W_hh` prepared for its products ([`Fp8Hidden`]); either weight
    /// decoded into a pooled tensor for the call where that does not
    /// apply (see the module docs).
    pub(crate) fn fp8_sequence(
        q: &Fp8Cell,
        cell: &CellWeights<E>,
        x: &Tensor<E>,
        bias: Option<&Tensor<E>>,
        init: &[Tensor<E>],
        seq: Sequence<'_, E>,
        reverse: bool,
    ) -> (Tensor<E>, Vec<Tensor<E>>) {
        let (t_len, n, fan_in) = (x.dim(0), x.dim(1), x.dim(2));
        let rows = x.view(&[t_len * n, fan_in]);
        let g = q[0].shape()[0];
        let xp = if TypeId::of::<E>() == TypeId::of::<f32>() {
            // the bits of `rows.matmul_t(decoded)`: `gemm_fp8_t`, or the
            // bytes read in place for one row
            let rows = rows.contiguous();
            let y = q[0].linear_pooled(&f32_values(rows.as_slice()), None);
            tensor_from_f32(y, &[t_len, n, g])
        } else {
            rows.matmul_t(&q[0].dequantized_tensor())
                .view(&[t_len, n, g])
        };
        match Fp8Hidden::new(q[1].panels(), n) {
            Some(hh) => seq(&xp, bias, init, cell, Some(&hh), reverse),
            None => {
                let decoded = CellWeights {
                    weight_ih: cell.weight_ih.clone(),
                    weight_hh: q[1].dequantized_tensor(),
                    bias_ih: cell.bias_ih.clone(),
                    bias_hh: cell.bias_hh.clone(),
                };
                seq(&xp, bias, init, &decoded, None, reverse)
            }
        }
    }

    /// [`run`](Recurrent::run) for fp8 weights: the time loop
    /// ([`run_cells`](Recurrent::run_cells)) without recording, and every
    /// output recorded so that a backward pass reaching it panics naming
    /// the layer.
    pub(crate) fn run_fp8(
        &self,
        x: Tensor<E>,
        init: Option<&[Tensor<E>]>,
        state_names: &[&str],
        fold_bias_hh: bool,
        seq: (Sequence<'_, E>, Option<Layered<'_, E>>),
        projected: Option<Projected<'_, E>>,
    ) -> (Tensor<E>, Vec<Tensor<E>>) {
        let mut inputs = vec![x.clone()];
        inputs.extend(init.into_iter().flatten().cloned());
        for c in &self.cells {
            inputs.extend(c.bias_ih.iter().chain(&c.bias_hh).cloned());
        }
        // inference only: the loops run as under `no_grad` (the same bits
        // as recording them), on the paths that decode in their packing
        let (out, states) =
            no_grad(|| self.run_cells(x, init, state_names, fold_bias_hh, seq, projected));
        let layer = format!("{} with fp8 weights", self.label());
        let record = |y: Tensor<E>, op| inference_only(y, inputs.clone(), op, layer.clone());
        let states = states
            .into_iter()
            .map(|s| record(s, "rnn_fp8_state"))
            .collect();
        (record(out, "rnn_fp8"), states)
    }
}

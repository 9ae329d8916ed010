//! The int8 LSTM and GRU of PyTorch's dynamic quantization
//! (`torch.ao.nn.quantized.dynamic.LSTM` / `GRU`, the CPU path of ATen's
//! `quantized_lstm` / `quantized_gru`): per layer and direction, the input
//! projection of the whole sequence is one dynamic int8 product (one
//! activation scale for all `T x N` rows, `bias_ih` added in its epilogue),
//! then every step quantizes the hidden state `h` on its own and multiplies
//! it by the int8 `weight_hh` (`bias_hh` added), and the gates and the state
//! update run in `f32` exactly as in the float cell.

use super::int8::{Granularity, Int8Weight};
use crate::tensor::{Element, Float, Tensor};
use std::sync::Arc;

/// The int8 weights of one layer and direction.
#[derive(Clone, Debug)]
pub(crate) struct Int8Cell {
    /// `weight_ih`, `[G H, in]`.
    pub(crate) ih: Arc<Int8Weight>,
    /// `weight_hh`, `[G H, H]`.
    pub(crate) hh: Arc<Int8Weight>,
}

impl Int8Cell {
    /// Quantizes a cell's two weights.
    pub(crate) fn quantize<E: Float>(
        w_ih: &Tensor<E>,
        w_hh: &Tensor<E>,
        granularity: Granularity,
    ) -> Self {
        let q = |w: &Tensor<E>| {
            Arc::new(Int8Weight::quantize(
                &to_f32(w),
                w.dim(0),
                w.dim(1),
                granularity,
            ))
        };
        Int8Cell {
            ih: q(w_ih),
            hh: q(w_hh),
        }
    }
}

/// Which cell's gates follow the projections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CellKind {
    /// `(i, f, g, o)`, states `h` and `c`.
    Lstm,
    /// `(r, z, n)`, state `h`.
    Gru,
}

pub(crate) fn to_f32<E: Float>(t: &Tensor<E>) -> Vec<f32> {
    t.to_vec()
        .iter()
        .map(|&v| Element::to_f64(v) as f32)
        .collect()
}

fn from_f32<E: Float>(v: &[f32], shape: &[usize]) -> Tensor<E> {
    Tensor::from_vec(
        v.iter().map(|&x| E::from_f64(f64::from(x))).collect(),
        shape,
    )
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// One layer and direction of a quantized cell over a time-major input
/// `x` (`[T, N, in]`) from the initial states `init` (each `[N, H]`):
/// the outputs `[T, N, H]` in time order and the final states.
///
/// # Panics
/// When the shapes do not fit the cell's weights.
pub(crate) fn int8_sequence<E: Float>(
    kind: CellKind,
    cell: &Int8Cell,
    x: &Tensor<E>,
    bias_ih: Option<&Tensor<E>>,
    bias_hh: Option<&Tensor<E>>,
    init: &[Tensor<E>],
    reverse: bool,
) -> (Tensor<E>, Vec<Tensor<E>>) {
    let (t_len, n) = (x.dim(0), x.dim(1));
    let gh = cell.hh.out_features();
    let h_size = cell.hh.in_features();
    let g = gh / h_size;
    let b_ih = bias_ih.map(to_f32);
    let b_hh = bias_hh.map(to_f32);
    // the whole sequence's input projection, one activation scale
    let xp = cell.ih.linear(&to_f32(x), b_ih.as_deref());
    let mut h = to_f32(&init[0]);
    let mut c = match kind {
        CellKind::Lstm => to_f32(&init[1]),
        CellKind::Gru => Vec::new(),
    };
    assert_eq!(
        h.len(),
        n * h_size,
        "int8 {kind:?}: h0 is not [{n}, {h_size}]"
    );
    let mut out = vec![0f32; t_len * n * h_size];
    for step in 0..t_len {
        let t = if reverse { t_len - 1 - step } else { step };
        let hp = cell.hh.linear(&h, b_hh.as_deref());
        let xt = &xp[t * n * gh..(t + 1) * n * gh];
        for b in 0..n {
            let (xr, hr) = (&xt[b * gh..(b + 1) * gh], &hp[b * gh..(b + 1) * gh]);
            let hb = &mut h[b * h_size..(b + 1) * h_size];
            match kind {
                CellKind::Lstm => {
                    debug_assert_eq!(g, 4);
                    let cb = &mut c[b * h_size..(b + 1) * h_size];
                    for j in 0..h_size {
                        // PyTorch: gates = linear_hh(h) + linear_ih(x)
                        let gate = |k: usize| hr[k * h_size + j] + xr[k * h_size + j];
                        let (i, f) = (sigmoid(gate(0)), sigmoid(gate(1)));
                        let (gg, o) = (gate(2).tanh(), sigmoid(gate(3)));
                        cb[j] = f * cb[j] + i * gg;
                        hb[j] = o * cb[j].tanh();
                    }
                }
                CellKind::Gru => {
                    debug_assert_eq!(g, 3);
                    for j in 0..h_size {
                        let r = sigmoid(hr[j] + xr[j]);
                        let z = sigmoid(hr[h_size + j] + xr[h_size + j]);
                        let nn = (xr[2 * h_size + j] + hr[2 * h_size + j] * r).tanh();
                        hb[j] = (hb[j] - nn) * z + nn;
                    }
                }
            }
        }
        out[t * n * h_size..(t + 1) * n * h_size].copy_from_slice(&h);
    }
    let mut states = vec![from_f32(&h, &[n, h_size])];
    if kind == CellKind::Lstm {
        states.push(from_f32(&c, &[n, h_size]));
    }
    (from_f32(&out, &[t_len, n, h_size]), states)
}

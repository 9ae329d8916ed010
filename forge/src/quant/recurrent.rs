//! The int8 LSTM and GRU of PyTorch's dynamic quantization
//! (`torch.ao.nn.quantized.dynamic.LSTM` / `GRU`, the CPU path of ATen's
//! `quantized_lstm` / `quantized_gru`): per layer and direction, the input
//! projection of the whole sequence is one dynamic int8 product (one
//! activation scale for all `T x N` rows, `bias_ih` added in its epilogue),
//! then every step quantizes the hidden state `h` on its own and multiplies
//! it by the int8 `weight_hh` (`bias_hh` added), and the gates and the state
//! update run in `f32` exactly as in the float cell.

use super::buf::{f32_values, tensor_from_f32};
use super::inference::inference_only;
use super::int8::{quantize_rows, Granularity, Int8Weight};
use crate::cpu::memory::Storage;
use crate::cpu::qgemm::padded_k;
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

impl CellKind {
    /// How many gates the weights stack.
    fn gates(self) -> usize {
        match self {
            CellKind::Lstm => 4,
            CellKind::Gru => 3,
        }
    }

    /// The layer's name in messages.
    fn name(self) -> &'static str {
        match self {
            CellKind::Lstm => "LSTM",
            CellKind::Gru => "GRU",
        }
    }
}

pub(crate) fn to_f32<E: Float>(t: &Tensor<E>) -> Vec<f32> {
    t.to_vec()
        .iter()
        .map(|&v| Element::to_f64(v) as f32)
        .collect()
}

/// One layer and direction of a quantized cell over a time-major input
/// `x` (`[T, N, in]`) from the initial states `init` (each `[N, H]`):
/// the outputs `[T, N, H]` in time order and the final states.
///
/// Every buffer comes from the pool and the step loop allocates nothing:
/// the quantized `h`, the `i32` sums and the gates are taken once per
/// sequence and reused at every step. The gate functions are forge's
/// vectorizable `sigmoid_f32` / `tanh_f32` (within 2 and 2.5 ulp), as the
/// f32 cells use.
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
    let g = gh / h_size.max(1);
    assert!(
        h_size > 0 && g == kind.gates() && g * h_size == gh,
        "int8 {kind:?}: weight_hh [{gh}, {h_size}] is not [{} H, H]",
        kind.gates()
    );
    let b_ih = bias_ih.map(|b| f32_values(b.as_slice()));
    let b_hh = bias_hh.map(|b| f32_values(b.as_slice()));
    // the whole sequence's input projection, one activation scale
    let xp = cell
        .ih
        .linear_pooled(&f32_values(x.as_slice()), b_ih.as_deref(), None);
    let mut h = Storage::from_slice(&f32_values(init[0].as_slice()));
    let mut c = match kind {
        CellKind::Lstm => Storage::from_slice(&f32_values(init[1].as_slice())),
        CellKind::Gru => Storage::with_capacity(0),
    };
    assert_eq!(
        h.len(),
        n * h_size,
        "int8 {kind:?}: h0 is not [{n}, {h_size}]"
    );
    let mut out = Storage::<f32>::stale(t_len * n * h_size);
    // the step's scratch, taken once
    let mut a = Storage::<u8>::stale(n * padded_k(h_size));
    let mut acc = Storage::<i32>::stale(n * gh);
    let mut hp = Storage::<f32>::stale(n * gh);
    let mut tmp = Storage::<f32>::stale(h_size);
    for step in 0..t_len {
        let t = if reverse { t_len - 1 - step } else { step };
        let (scale, zp) = quantize_rows(&h, h_size, &mut a);
        cell.hh
            .product_into(n, &a, scale, zp, b_hh.as_deref(), None, &mut acc, &mut hp);
        let xt = &xp[t * n * gh..(t + 1) * n * gh];
        for b in 0..n {
            let (xr, hr) = (&xt[b * gh..(b + 1) * gh], &mut hp[b * gh..(b + 1) * gh]);
            let hb = &mut h[b * h_size..(b + 1) * h_size];
            match kind {
                CellKind::Lstm => {
                    let cb = &mut c[b * h_size..(b + 1) * h_size];
                    gates::lstm(hr, xr, cb, hb, &mut tmp);
                }
                CellKind::Gru => gates::gru(hr, xr, hb, &mut tmp),
            }
        }
        out[t * n * h_size..(t + 1) * n * h_size].copy_from_slice(&h);
    }
    let mut states = vec![tensor_from_f32(h, &[n, h_size])];
    if kind == CellKind::Lstm {
        states.push(tensor_from_f32(c, &[n, h_size]));
    }
    // recorded, so that a backward pass reaching the layer panics naming it
    // (the int8 loop has no backward) instead of leaving the layers before
    // it without gradients
    let mut inputs = vec![x.clone()];
    inputs.extend(bias_ih.cloned());
    inputs.extend(bias_hh.cloned());
    inputs.extend(init.iter().cloned());
    let layer = format!(
        "{}({} -> {h_size}) with int8 weights",
        kind.name(),
        cell.ih.in_features()
    );
    let record = |y: Tensor<E>, op| inference_only(y, inputs.clone(), op, layer.clone());
    let states = states
        .into_iter()
        .map(|s| record(s, "rnn_int8_state"))
        .collect();
    (
        record(tensor_from_f32(out, &[t_len, n, h_size]), "rnn_int8"),
        states,
    )
}

/// The gates and the state update of one batch row, compiled for the
/// CPU's vector width (the loops vectorize only with the target features
/// the transcendental helpers need, as in `ops/rnn_cell/lstm_f32.rs`);
/// every build computes the same operations in the same order, so the bits
/// do not depend on the path.
mod gates {
    use crate::cpu::vmath::{sigmoid_f32, tanh_f32};

    /// LSTM: `hr` holds `linear_hh(h)` (`[4 H]`, gates `i f g o`), `xr`
    /// `linear_ih(x)`; `c` and `h` are updated, `tmp` (`[H]`) is scratch.
    #[inline(always)]
    fn lstm_body(hr: &mut [f32], xr: &[f32], c: &mut [f32], h: &mut [f32], tmp: &mut [f32]) {
        let hs = h.len();
        // PyTorch: gates = linear_hh(h) + linear_ih(x)
        for (v, &xv) in hr.iter_mut().zip(xr) {
            *v += xv;
        }
        let (i_f, go) = hr.split_at_mut(2 * hs);
        let (g, o) = go.split_at_mut(hs);
        for v in i_f.iter_mut() {
            *v = sigmoid_f32(*v);
        }
        for v in o[..hs].iter_mut() {
            *v = sigmoid_f32(*v);
        }
        for v in g.iter_mut() {
            *v = tanh_f32(*v);
        }
        let (i, f) = i_f.split_at(hs);
        let tmp = &mut tmp[..hs];
        for ((((cv, t), &iv), &fv), &gv) in c.iter_mut().zip(tmp.iter_mut()).zip(i).zip(f).zip(&*g)
        {
            *cv = fv * *cv + iv * gv;
            *t = tanh_f32(*cv);
        }
        for ((hv, &ov), &t) in h.iter_mut().zip(&o[..hs]).zip(&*tmp) {
            *hv = ov * t;
        }
    }

    /// GRU: `hr` holds `linear_hh(h)` (`[3 H]`, gates `r z n`), `xr`
    /// `linear_ih(x)`; `h` is updated, `tmp` (`[H]`) is scratch.
    #[inline(always)]
    fn gru_body(hr: &mut [f32], xr: &[f32], h: &mut [f32], tmp: &mut [f32]) {
        let hs = h.len();
        let (rz, hn) = hr.split_at_mut(2 * hs);
        for (v, &xv) in rz.iter_mut().zip(&xr[..2 * hs]) {
            *v = sigmoid_f32(*v + xv);
        }
        let (r, z) = rz.split_at(hs);
        let tmp = &mut tmp[..hs];
        for (((t, &xn), &hnv), &rv) in tmp.iter_mut().zip(&xr[2 * hs..]).zip(&hn[..hs]).zip(r) {
            *t = tanh_f32(xn + hnv * rv);
        }
        for ((hv, &t), &zv) in h.iter_mut().zip(&*tmp).zip(z) {
            *hv = (*hv - t) * zv + t;
        }
    }

    macro_rules! build {
        ($lstm:ident, $gru:ident, $features:literal) => {
            /// # Safety
            /// The CPU has the target features.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn $lstm(
                hr: &mut [f32],
                xr: &[f32],
                c: &mut [f32],
                h: &mut [f32],
                tmp: &mut [f32],
            ) {
                lstm_body(hr, xr, c, h, tmp)
            }

            /// # Safety
            /// The CPU has the target features.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn $gru(hr: &mut [f32], xr: &[f32], h: &mut [f32], tmp: &mut [f32]) {
                gru_body(hr, xr, h, tmp)
            }
        };
    }
    build!(lstm_avx512, gru_avx512, "avx512f");
    build!(lstm_avx2, gru_avx2, "avx2,fma");

    /// Which build this CPU (and the CPU class in force) runs.
    #[derive(Clone, Copy)]
    enum Path {
        Avx512,
        Avx2,
        Portable,
    }

    fn path() -> Path {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has;
            if cpu_has!("avx512f") {
                return Path::Avx512;
            }
            if cpu_has!("avx2") && cpu_has!("fma") {
                return Path::Avx2;
            }
        }
        Path::Portable
    }

    /// See `lstm_body`.
    pub(super) fn lstm(hr: &mut [f32], xr: &[f32], c: &mut [f32], h: &mut [f32], tmp: &mut [f32]) {
        match path() {
            // SAFETY: `path` chose the build from what the CPU has.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { lstm_avx512(hr, xr, c, h, tmp) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { lstm_avx2(hr, xr, c, h, tmp) },
            _ => lstm_body(hr, xr, c, h, tmp),
        }
    }

    /// See `gru_body`.
    pub(super) fn gru(hr: &mut [f32], xr: &[f32], h: &mut [f32], tmp: &mut [f32]) {
        match path() {
            // SAFETY: `path` chose the build from what the CPU has.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { gru_avx512(hr, xr, h, tmp) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { gru_avx2(hr, xr, h, tmp) },
            _ => gru_body(hr, xr, h, tmp),
        }
    }
}

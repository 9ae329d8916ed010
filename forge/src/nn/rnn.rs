//! The recurrent layers' shared machinery ([`RnnConfig`](super::RnnConfig), [`CellWeights`],
//! the multi-layer, bidirectional time loop and the state-dict names;
//! [`RnnConfig`](super::RnnConfig) is in `rnn_config.rs`, the Elman [`Rnn`](super::Rnn) in `rnn_elman.rs`. [`Lstm`](super::Lstm) and [`Gru`](super::Gru) supply
//! only their cell step.
//!
//! Every recurrent layer is built from differentiable tensor ops (the input
//! projection of a whole sequence is one `matmul_t` per layer and
//! direction, or for the LSTM an op of the same product whose rule also
//! gives `dW_hh`, see [`Layered`]; the loop over time does the hidden
//! projection and the gates),
//! so gradients, and gradients of gradients, flow to the input, the
//! initial states and every weight.

use super::init;
pub(crate) use super::rnn_config::RnnConfig;
use super::visit::{TensorKind, TensorVisitor, TensorVisitorMut};
use crate::autograd::is_grad_enabled;
use crate::ops::rnn_cell::Fp8Hidden;
use crate::quant::{int8_sequence, visit_int8, visit_int8_mut, CellKind, Granularity, Int8Cell};
use crate::tensor::{Float, Rng, Tensor};

/// The weights of one layer and direction of a recurrent layer, in PyTorch's
/// layout: the gate blocks of `G` rows each (`G = 1` for [`Rnn`](super::Rnn), 4 for
/// [`Lstm`](super::Lstm), 3 for [`Gru`](super::Gru)) are stacked row-wise.
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{Lstm, RnnConfig};
/// let lstm = Lstm::<f32>::new(RnnConfig::new(5, 7), &mut Rng::new(0));
/// let cell = lstm.cell(0, false);
/// assert_eq!(cell.weight_ih.shape(), &[28, 5]);
/// assert_eq!(cell.weight_hh.shape(), &[28, 7]);
/// assert_eq!(cell.bias_hh.as_ref().unwrap().shape(), &[28]);
/// ```
#[derive(Clone, Debug)]
pub struct CellWeights<E: Float = f32> {
    /// `[G * H, input]` (`weight_ih_l{k}`); `input` is `I` for layer 0 and
    /// `directions * H` above it.
    pub weight_ih: Tensor<E>,
    /// `[G * H, H]` (`weight_hh_l{k}`).
    pub weight_hh: Tensor<E>,
    /// `[G * H]` (`bias_ih_l{k}`), if the layer has biases.
    pub bias_ih: Option<Tensor<E>>,
    /// `[G * H]` (`bias_hh_l{k}`), if the layer has biases.
    pub bias_hh: Option<Tensor<E>>,
}

impl<E: Float> CellWeights<E> {
    /// Whether any of the weights or biases is tracked (records a tape).
    pub(crate) fn is_tracked(&self) -> bool {
        [&self.weight_ih, &self.weight_hh]
            .into_iter()
            .any(Tensor::is_tracked)
            || self
                .bias_ih
                .iter()
                .chain(&self.bias_hh)
                .any(Tensor::is_tracked)
    }
}

/// One time step of a cell: the input projection of this step (`[N, G H]`,
/// biases included as the layer asked), the state before the step (`h`, and
/// `c` for the LSTM, each `[N, H]`) and the cell's weights give the state
/// after the step (its first entry is the step's output).
pub(crate) type Step<'a, E> =
    &'a dyn Fn(&Tensor<E>, &[Tensor<E>], &CellWeights<E>) -> Vec<Tensor<E>>;

/// One layer and direction over the whole sequence: the input projection
/// (`[T, N, G H]`) and the bias still to be added to it (`[G H]`; see
/// [`with_bias`]), the initial states (each `[N, H]`), the cell's weights
/// and whether the steps run in reverse give the outputs `[T, N, H]` (in
/// time order) and the final states.
///
/// The cell's fp8 `weight_hh`, prepared for the loop's products
/// ([`Fp8Hidden`]), comes along when the layer holds it and runs without
/// recording (`rnn_fp8.rs`): the sequence multiplies by it in place of
/// the cell's (empty) `weight_hh`.
pub(crate) type Sequence<'a, E> = &'a dyn Fn(
    &Tensor<E>,
    Option<&Tensor<E>>,
    &[Tensor<E>],
    &CellWeights<E>,
    Option<&Fp8Hidden<'_, E>>,
    bool,
) -> (Tensor<E>, Vec<Tensor<E>>);

/// One layer and direction over the sequence from its time-major input
/// (`[T, N, I]`), the input projection included: the input, the summed
/// bias, the initial states, the cell's weights and the direction give
/// what projecting the input (`matmul_t` by `weight_ih`) and running
/// [`Sequence`] gives, recorded as one op (the LSTM's
/// [`lstm_layer`](crate::ops::rnn_cell::lstm_layer), whose rule packs the
/// gate gradients once for both weight gradients). Taken in place of the
/// projection and [`Sequence`] where a cell has it and the weights are
/// dense.
pub(crate) type Layered<'a, E> = &'a dyn Fn(
    &Tensor<E>,
    Option<&Tensor<E>>,
    &[Tensor<E>],
    &CellWeights<E>,
    bool,
) -> (Tensor<E>, Vec<Tensor<E>>);

/// One layer and direction over the sequence from the layer's input
/// itself, without recording: the input (`[N, T, I]` when the flag is
/// set, else `[T, N, I]`), the summed bias, the initial states, the
/// cell's weights and the direction give the outputs in the input's layout
/// and the final states, exactly what projecting the input and running
/// [`Sequence`] gives; or `None` (nothing computed) where the cell's path
/// does not apply, and the layer falls back to the projection and
/// [`Sequence`].
///
/// The cell's fp8 weights `[weight_ih, weight_hh]` come along when the
/// layer holds them (its [`CellWeights`] then hold only the biases): the
/// path decodes them in its packing step.
pub(crate) type Projected<'a, E> = &'a dyn Fn(
    &Tensor<E>,
    bool,
    Option<&Tensor<E>>,
    &[Tensor<E>],
    &CellWeights<E>,
    Option<&Fp8Cell>,
    bool,
) -> Option<(Tensor<E>, Vec<Tensor<E>>)>;

/// `weight_ih` and `weight_hh` of one layer and direction as 8-bit floats
/// (`rnn_fp8.rs`).
pub(crate) type Fp8Cell = [std::sync::Arc<crate::quant::Fp8Weight>; 2];

/// `xp + bias` (one pass), or `xp` without a bias: for the cells that take
/// the projection with its bias (the LSTM adds it inside its step kernel).
pub(crate) fn with_bias<E: Float>(xp: &Tensor<E>, bias: Option<&Tensor<E>>) -> Tensor<E> {
    match bias {
        Some(b) => xp.add(b),
        None => xp.clone(),
    }
}

/// [`Sequence`] from tensor ops, one `step` per time index (the Elman
/// [`Rnn`](super::Rnn); the LSTM and GRU use their fused ops).
pub(crate) fn composed_sequence<E: Float>(
    xp: &Tensor<E>,
    init: &[Tensor<E>],
    w: &CellWeights<E>,
    reverse: bool,
    step: Step<'_, E>,
) -> (Tensor<E>, Vec<Tensor<E>>) {
    let t_len = xp.dim(0);
    let xs = unbind_steps(xp);
    let mut state: Vec<Tensor<E>> = init.to_vec();
    let mut ys: Vec<Option<Tensor<E>>> = vec![None; t_len];
    let order: Box<dyn Iterator<Item = usize>> = if reverse {
        Box::new((0..t_len).rev())
    } else {
        Box::new(0..t_len)
    };
    for t in order {
        state = step(&xs[t], &state, w);
        ys[t] = Some(state[0].clone());
    }
    let ys: Vec<Tensor<E>> = ys.into_iter().flatten().collect();
    let refs: Vec<&Tensor<E>> = ys.iter().collect();
    (Tensor::stack(&refs, 0), state)
}

/// The weights and the time loop shared by every recurrent layer.
#[derive(Clone, Debug)]
pub(crate) struct Recurrent<E: Float> {
    pub(crate) config: RnnConfig,
    /// `Rnn`, `Lstm` or `Gru`: names the layer in panic messages.
    pub(crate) kind: &'static str,
    /// The cells in PyTorch's order: layer-major, forward before reverse.
    pub(crate) cells: Vec<CellWeights<E>>,
    /// The cells' int8 weights, once quantized (`weight_ih` and
    /// `weight_hh` of `cells` are then empty, `[0, in]`).
    pub(crate) int8: Option<Vec<Int8Cell>>,
    /// The cells' 8-bit float weights `[weight_ih, weight_hh]`, once
    /// converted (`rnn_fp8.rs`; the weights of `cells` are then empty).
    pub(crate) fp8: Option<Vec<Fp8Cell>>,
}

impl<E: Float> Recurrent<E> {
    /// Draws every weight and bias from `U(-1/sqrt(H), 1/sqrt(H))`, in the
    /// order of PyTorch's parameters.
    pub(crate) fn new(kind: &'static str, config: RnnConfig, gates: usize, rng: &mut Rng) -> Self {
        let RnnConfig {
            input_size,
            hidden_size: h,
            num_layers,
            ..
        } = config;
        shape_assert!(
            input_size > 0 && h > 0 && num_layers > 0,
            "{kind}: input_size ({input_size}), hidden_size ({h}) and num_layers ({num_layers}) must be positive"
        );
        let bound = 1.0 / (h as f64).sqrt();
        let mut draw =
            |shape: &[usize]| init::uniform::<E>(shape, -bound, bound, rng).requires_grad();
        let d = config.num_directions();
        let mut cells = Vec::with_capacity(num_layers * d);
        for layer in 0..num_layers {
            let fan_in = if layer == 0 { input_size } else { d * h };
            for _ in 0..d {
                let weight_ih = draw(&[gates * h, fan_in]);
                let weight_hh = draw(&[gates * h, h]);
                let (bias_ih, bias_hh) = if config.bias {
                    (Some(draw(&[gates * h])), Some(draw(&[gates * h])))
                } else {
                    (None, None)
                };
                cells.push(CellWeights {
                    weight_ih,
                    weight_hh,
                    bias_ih,
                    bias_hh,
                });
            }
        }
        Recurrent {
            config,
            kind,
            cells,
            int8: None,
            fp8: None,
        }
    }

    /// `Lstm(5 -> 7)`: how panic messages name the layer.
    pub(crate) fn label(&self) -> String {
        format!(
            "{}({} -> {})",
            self.kind, self.config.input_size, self.config.hidden_size
        )
    }

    /// The cell of `layer` in the given direction.
    pub(crate) fn cell(&self, layer: usize, reverse: bool) -> &CellWeights<E> {
        let d = self.config.num_directions();
        shape_assert!(
            layer < self.config.num_layers && (!reverse || d == 2),
            "{}: no cell for layer {layer}{} (num_layers {}, bidirectional {})",
            self.label(),
            if reverse { " reverse" } else { "" },
            self.config.num_layers,
            self.config.bidirectional
        );
        &self.cells[layer * d + usize::from(reverse)]
    }

    /// `_l{k}` or `_l{k}_reverse`: PyTorch's suffix of cell `index`.
    fn suffix(&self, index: usize) -> String {
        let d = self.config.num_directions();
        let rev = if index % d == 1 { "_reverse" } else { "" };
        format!("_l{}{rev}", index / d)
    }

    /// Quantizes every cell's weights to int8 (the LSTM's and GRU's int8
    /// path, see [`crate::quant`]); `false` when they already are.
    pub(crate) fn quantize_int8(&mut self, granularity: Granularity) -> bool {
        if self.int8.is_some() || self.fp8.is_some() {
            return false;
        }
        let q = self
            .cells
            .iter_mut()
            .map(|c| {
                let q = Int8Cell::quantize(&c.weight_ih, &c.weight_hh, granularity);
                c.weight_ih = Tensor::zeros(&[0, c.weight_ih.dim(1)]);
                c.weight_hh = Tensor::zeros(&[0, c.weight_hh.dim(1)]);
                q
            })
            .collect();
        self.int8 = Some(q);
        true
    }

    pub(crate) fn visit(&self, v: &mut dyn TensorVisitor<E>) {
        for (i, c) in self.cells.iter().enumerate() {
            let s = self.suffix(i);
            match (&self.int8, &self.fp8) {
                (Some(q), _) => {
                    visit_int8(v, &format!("weight_ih{s}"), &q[i].ih);
                    visit_int8(v, &format!("weight_hh{s}"), &q[i].hh);
                }
                (_, Some(q)) => {
                    v.visit_fp8(&format!("weight_ih{s}"), &q[i][0]);
                    v.visit_fp8(&format!("weight_hh{s}"), &q[i][1]);
                }
                _ => {
                    v.visit(&format!("weight_ih{s}"), &c.weight_ih, TensorKind::Weight);
                    v.visit(&format!("weight_hh{s}"), &c.weight_hh, TensorKind::Weight);
                }
            }
            if let Some(b) = &c.bias_ih {
                v.visit(&format!("bias_ih{s}"), b, TensorKind::Weight);
            }
            if let Some(b) = &c.bias_hh {
                v.visit(&format!("bias_hh{s}"), b, TensorKind::Weight);
            }
        }
    }

    pub(crate) fn visit_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        for i in 0..self.cells.len() {
            let s = self.suffix(i);
            let c = &mut self.cells[i];
            match (&mut self.int8, &mut self.fp8) {
                (Some(q), _) => {
                    visit_int8_mut(v, &format!("weight_ih{s}"), &mut q[i].ih);
                    visit_int8_mut(v, &format!("weight_hh{s}"), &mut q[i].hh);
                }
                (_, Some(q)) => {
                    let [ih, hh] = &mut q[i];
                    v.visit_fp8(&format!("weight_ih{s}"), ih);
                    v.visit_fp8(&format!("weight_hh{s}"), hh);
                }
                _ => {
                    v.visit(
                        &format!("weight_ih{s}"),
                        &mut c.weight_ih,
                        TensorKind::Weight,
                    );
                    v.visit(
                        &format!("weight_hh{s}"),
                        &mut c.weight_hh,
                        TensorKind::Weight,
                    );
                }
            }
            if let Some(b) = &mut c.bias_ih {
                v.visit(&format!("bias_ih{s}"), b, TensorKind::Weight);
            }
            if let Some(b) = &mut c.bias_hh {
                v.visit(&format!("bias_hh{s}"), b, TensorKind::Weight);
            }
        }
    }

    /// The int8 cell of this layer kind (the LSTM's or GRU's).
    pub(crate) fn int8_kind(&self) -> Option<CellKind> {
        match self.kind {
            "Lstm" => Some(CellKind::Lstm),
            "Gru" => Some(CellKind::Gru),
            _ => None,
        }
    }

    /// Runs every layer and direction over the sequence `x`.
    ///
    /// `init` holds the initial states named `state_names` (`h0`, `c0`),
    /// each `[L * D, N, H]` (`[L * D, H]` for an unbatched `x`), or `None`
    /// for zeros. `fold_bias_hh` adds `bias_hh` to the input projection
    /// (valid when the cell adds it unchanged to the hidden projection).
    /// `seq` runs one layer and direction over the sequence; `layered`,
    /// if the cell has one, does so with the input projection (see
    /// [`Layered`]); `projected`, if the cell has one, does so from the
    /// layer's input in its own layout when nothing is recorded (see
    /// [`Projected`]).
    /// Returns the output sequence and the final states stacked like `init`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        x: Tensor<E>,
        init: Option<&[Tensor<E>]>,
        state_names: &[&str],
        fold_bias_hh: bool,
        seq: Sequence<'_, E>,
        layered: Option<Layered<'_, E>>,
        projected: Option<Projected<'_, E>>,
    ) -> (Tensor<E>, Vec<Tensor<E>>) {
        let s = (seq, layered);
        if self.fp8.is_some() {
            return self.run_fp8(x, init, state_names, fold_bias_hh, s, projected);
        }
        self.run_cells(x, init, state_names, fold_bias_hh, s, projected)
    }

    /// [`run`](Self::run) without the fp8 layer's recording: the time loop
    /// over the cells, each fp8 cell's weights handed to `projected` as
    /// they are held, or to [`fp8_sequence`](Self::fp8_sequence) where
    /// the projected path does not run (`rnn_fp8.rs`).
    pub(crate) fn run_cells(
        &self,
        x: Tensor<E>,
        init: Option<&[Tensor<E>]>,
        state_names: &[&str],
        fold_bias_hh: bool,
        (seq, layered): (Sequence<'_, E>, Option<Layered<'_, E>>),
        projected: Option<Projected<'_, E>>,
    ) -> (Tensor<E>, Vec<Tensor<E>>) {
        let cfg = &self.config;
        let (h, d) = (cfg.hidden_size, cfg.num_directions());
        let unbatched = x.rank() == 2;
        let rank_ok = x.rank() == 3 || unbatched;
        let i_ok = rank_ok && x.shape()[x.rank() - 1] == cfg.input_size;
        let steps_ok = rank_ok && x.shape()[usize::from(cfg.batch_first && !unbatched)] > 0;
        shape_assert!(
            i_ok && steps_ok,
            "{}: expected input of shape {} or [T, {}] with T >= 1, got {:?}",
            self.label(),
            if cfg.batch_first {
                format!("[N, T, {}]", cfg.input_size)
            } else {
                format!("[T, N, {}]", cfg.input_size)
            },
            cfg.input_size,
            x.shape()
        );
        let n = if unbatched {
            1
        } else {
            x.dim(usize::from(!cfg.batch_first) as isize)
        };
        let rows = cfg.num_layers * d;
        let states: Vec<Vec<Tensor<E>>> = match init {
            None => {
                let zero = Tensor::<E>::zeros(&[n, h]);
                vec![vec![zero; rows]; state_names.len()]
            }
            Some(init) => {
                let expected: Vec<usize> = if unbatched {
                    vec![rows, h]
                } else {
                    vec![rows, n, h]
                };
                init.iter()
                    .zip(state_names)
                    .map(|(s, name)| {
                        shape_assert!(
                            s.shape() == expected,
                            "{}: expected {name} of shape {expected:?}, got {:?}",
                            self.label(),
                            s.shape()
                        );
                        (0..rows).map(|r| s.narrow(0, r, 1).view(&[n, h])).collect()
                    })
                    .collect()
            }
        };
        // Without a tape (and with a projected path) the layers run in the
        // input's own layout; otherwise time-major, [T, N, I].
        let recorded = is_grad_enabled()
            && (x.is_tracked()
                || states.iter().flatten().any(|s| s.is_tracked())
                || self.cells.iter().any(|c| c.is_tracked()));
        // an int8 layer runs its own loop (inference only)
        let projected = projected.filter(|_| !unbatched && !recorded && self.int8.is_none());
        let bf = cfg.batch_first && projected.is_some();
        let x = if unbatched {
            x.unsqueeze(1)
        } else if cfg.batch_first && !bf {
            x.transpose(0, 1)
        } else {
            x
        };
        let mut finals: Vec<Vec<Tensor<E>>> = vec![Vec::with_capacity(rows); state_names.len()];
        let mut input = x;
        for layer in 0..cfg.num_layers {
            let mut outs = Vec::with_capacity(d);
            for dir in 0..d {
                let idx = layer * d + dir;
                let w = &self.cells[idx];
                // both biases summed first (a `[G H]` add); `seq` adds the
                // sum to the projection (in one pass, or inside its kernel)
                let b_hh = w.bias_hh.as_ref().filter(|_| fold_bias_hh);
                let bias = match (&w.bias_ih, b_hh) {
                    (Some(a), Some(b)) => Some(a.add(b)),
                    (a, b) => a.as_ref().or(b).cloned(),
                };
                let init: Vec<Tensor<E>> = states.iter().map(|s| s[idx].clone()).collect();
                let reverse = dir == 1;
                let fp8 = self.fp8.as_ref().map(|q| &q[idx]);
                let fused =
                    projected.and_then(|p| p(&input, bf, bias.as_ref(), &init, w, fp8, reverse));
                let (ys, state) = match fused {
                    Some(r) => r,
                    None => {
                        // time-major for the projection and `seq`
                        let tm = if bf {
                            input.transpose(0, 1)
                        } else {
                            input.clone()
                        };
                        let (ys, state) = match (&self.int8, self.int8_kind(), fp8) {
                            (Some(q), Some(kind), _) => {
                                let (b_ih, b_hh) = (w.bias_ih.as_ref(), w.bias_hh.as_ref());
                                int8_sequence(kind, &q[idx], &tm, b_ih, b_hh, &init, reverse)
                            }
                            (_, _, Some(q)) => {
                                Self::fp8_sequence(q, w, &tm, bias.as_ref(), &init, seq, reverse)
                            }
                            _ if layered.is_some() => {
                                let l = layered.expect("layered");
                                l(&tm, bias.as_ref(), &init, w, reverse)
                            }
                            _ => {
                                let (t_len, fan_in) = (tm.dim(0), tm.dim(2));
                                let xp = tm.view(&[t_len * n, fan_in]).matmul_t(&w.weight_ih);
                                let xp = xp.view(&[t_len, n, xp.dim(1)]);
                                seq(&xp, bias.as_ref(), &init, w, None, reverse)
                            }
                        };
                        (if bf { ys.transpose(0, 1) } else { ys }, state)
                    }
                };
                outs.push(ys);
                for (f, s) in finals.iter_mut().zip(state) {
                    f.push(s);
                }
            }
            input = if d == 2 {
                Tensor::cat(&[&outs[0], &outs[1]], 2)
            } else {
                outs.pop().expect("one direction")
            };
        }
        let out = if unbatched {
            input.squeeze(1)
        } else if cfg.batch_first && !bf {
            input.transpose(0, 1)
        } else {
            input
        };
        let finals = finals
            .iter()
            .map(|f| {
                let refs: Vec<&Tensor<E>> = f.iter().collect();
                let s = Tensor::stack(&refs, 0);
                if unbatched {
                    s.squeeze(1)
                } else {
                    s
                }
            })
            .collect();
        (out, finals)
    }
}

/// The `T` steps `[N, F]` of a `[T, N, F]` tensor. When it is tracked the
/// steps are cut by halving, so that the backward pass (each cut pads its
/// gradient back to the size of what it cut) costs `T log T` rather than
/// `T^2` sequence-sized buffers.
fn unbind_steps<E: Float>(x: &Tensor<E>) -> Vec<Tensor<E>> {
    let (t, n, f) = (x.dim(0), x.dim(1), x.dim(2));
    if !x.is_tracked() {
        return (0..t).map(|i| x.narrow(0, i, 1).view(&[n, f])).collect();
    }
    fn halve<E: Float>(x: &Tensor<E>, out: &mut Vec<Tensor<E>>) {
        let t = x.dim(0);
        if t == 1 {
            out.push(x.view(&[x.dim(1), x.dim(2)]));
        } else {
            let mid = t / 2;
            halve(&x.narrow(0, 0, mid), out);
            halve(&x.narrow(0, mid, t - mid), out);
        }
    }
    let mut out = Vec::with_capacity(t);
    halve(x, &mut out);
    out
}

/// Implements `Layer`, `Visit` and `Visitable` for a recurrent layer with a
/// `inner: Recurrent<E>` field: its tensors are reported under PyTorch's
/// names (`weight_ih_l0`, `bias_hh_l1_reverse`, ...).
macro_rules! recurrent_layer {
    ($ty:ident) => {
        impl<E: Float> $crate::nn::Layer<E> for $ty<E> {
            fn visit_tensors(&self, v: &mut dyn $crate::nn::TensorVisitor<E>) {
                self.inner.visit(v)
            }
            fn visit_tensors_mut(&mut self, v: &mut dyn $crate::nn::TensorVisitorMut<E>) {
                v.visit_quantizable("", self);
                self.inner.visit_mut(v)
            }
        }

        impl<E: Float> $crate::nn::Visit<E> for $ty<E> {
            fn visit(&self, name: &str, v: &mut dyn $crate::nn::TensorVisitor<E>) {
                $crate::nn::enter_layer(self, name, v)
            }
            fn visit_mut(&mut self, name: &str, v: &mut dyn $crate::nn::TensorVisitorMut<E>) {
                $crate::nn::enter_layer_mut(self, name, v)
            }
        }

        #[diagnostic::do_not_recommend]
        impl<E: Float> $crate::nn::Visitable for $ty<E> {}

        impl<E: Float> $crate::quant::Quantizable for $ty<E> {
            /// Quantizes `weight_ih` and `weight_hh` of every layer and
            /// direction (an LSTM or GRU; PyTorch's `quantize_dynamic`
            /// leaves an Elman `RNN` in f32, and so does forge: `false`).
            fn quantize_int8(&mut self, granularity: $crate::quant::Granularity) -> bool {
                self.inner.int8_kind().is_some() && self.inner.quantize_int8(granularity)
            }

            /// Converts `weight_ih` and `weight_hh` of every layer and
            /// direction to 8-bit floats (`rnn_fp8.rs`).
            fn quantize_fp8(
                &mut self,
                format: $crate::quant::Fp8Format,
                granularity: $crate::quant::Granularity,
            ) -> bool {
                self.inner.quantize_fp8(format, granularity)
            }
        }

        impl<E: Float> $ty<E> {
            /// The layer's hyperparameters.
            ///
            /// ```
            /// use forge::prelude::*;
            /// use forge::nn::RnnConfig;
            #[doc = concat!("let m = forge::nn::", stringify!($ty), "::<f32>::new(RnnConfig::new(3, 4).num_layers(2), &mut Rng::new(0));")]
            /// assert_eq!(m.config().num_layers, 2);
            /// ```
            pub fn config(&self) -> &$crate::nn::RnnConfig {
                &self.inner.config
            }

            /// The weights of `layer` (0-based) in the forward or reverse
            /// direction (`weight_ih_l{layer}[_reverse]`, ...).
            ///
            /// # Panics
            /// When the layer does not exist, or `reverse` is asked of a
            /// unidirectional layer.
            ///
            /// ```
            /// use forge::prelude::*;
            /// use forge::nn::RnnConfig;
            #[doc = concat!("let m = forge::nn::", stringify!($ty), "::<f32>::new(RnnConfig::new(3, 4).bidirectional(true), &mut Rng::new(0));")]
            /// assert_eq!(m.cell(0, true).weight_hh.dim(1), 4);
            /// ```
            pub fn cell(&self, layer: usize, reverse: bool) -> &$crate::nn::CellWeights<E> {
                self.inner.cell(layer, reverse)
            }
        }
    };
}
pub(crate) use recurrent_layer;

//! [`Lstm`]: long short-term memory, PyTorch's `nn.LSTM`.

use super::forward::Forward;
use super::rnn::{recurrent_layer, CellWeights, Fp8Cell, Recurrent, RnnConfig};
use super::summary::record_output;
use crate::ops::rnn_cell::{
    lstm_layer, lstm_projected, lstm_sequence, lstm_sequence_with, Fp8Hidden, HiddenWeight,
    ProjWeight,
};
use crate::tensor::{Float, Rng, Tensor};

/// A long short-term memory layer (`nn.LSTM`), stacked `num_layers` deep
/// and optionally bidirectional. Gate rows are ordered `(i, f, g, o)`:
///
/// ```text
/// i, f, o = sigmoid(x_t W_i*^T + b_i* + h_{t-1} W_h*^T + b_h*)
/// g       = tanh(x_t W_ig^T + b_ig + h_{t-1} W_hg^T + b_hg)
/// c_t = f * c_{t-1} + i * g        h_t = o * tanh(c_t)
/// ```
///
/// Parameters have PyTorch's state-dict names: `weight_ih_l{k}` `[4H, in]`,
/// `weight_hh_l{k}` `[4H, H]`, `bias_ih_l{k}`, `bias_hh_l{k}` `[4H]`, and
/// the same with `_reverse` for the reverse direction, so a PyTorch
/// `state_dict` loads by name.
///
/// # Shapes
/// - input `[T, N, I]` (`[N, T, I]` with `batch_first`), or unbatched `[T, I]`
/// - `h0`, `c0`, `h_n`, `c_n`: `[L * D, N, H]` (even with `batch_first`;
///   rows `[l0 forward, l0 reverse, l1 forward, ...]`), or `[L * D, H]`
/// - output `[T, N, D * H]` (`[N, T, D * H]` with `batch_first`), the
///   forward direction in `[.., :H]` and the reverse one in `[.., H:]`
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{Lstm, RnnConfig};
/// let lstm = Lstm::<f32>::new(RnnConfig::new(5, 7).bidirectional(true), &mut Rng::new(0));
/// let (out, (h_n, c_n)) = lstm.forward(Tensor::ones(&[6, 3, 5]));
/// assert_eq!(out.shape(), &[6, 3, 14]);
/// assert_eq!((h_n.shape(), c_n.shape()), (&[2, 3, 7][..], &[2, 3, 7][..]));
/// let names: Vec<String> = lstm.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names[4..6], ["weight_ih_l0_reverse", "weight_hh_l0_reverse"]);
/// ```
#[derive(Clone, Debug)]
pub struct Lstm<E: Float = f32> {
    inner: Recurrent<E>,
}

recurrent_layer!(Lstm);

/// One layer and direction: the fused [`lstm_sequence`] (one kernel per
/// time step for the gates and the state update, one tape node), which
/// adds the summed biases inside that kernel; with an fp8 `W_hh`
/// prepared for its products when the layer holds one.
fn lstm_seq<E: Float>(
    xp: &Tensor<E>,
    bias: Option<&Tensor<E>>,
    s: &[Tensor<E>],
    w: &CellWeights<E>,
    fp8_hh: Option<&Fp8Hidden<'_, E>>,
    reverse: bool,
) -> (Tensor<E>, Vec<Tensor<E>>) {
    let (out, h_n, c_n) = match fp8_hh {
        Some(hh) => lstm_sequence_with(xp, &s[0], &s[1], HiddenWeight::Fp8(hh), bias, reverse),
        None => lstm_sequence(xp, &s[0], &s[1], &w.weight_hh, bias, reverse),
    };
    (out, vec![h_n, c_n])
}

/// One layer and direction from its time-major input, the input
/// projection included ([`lstm_layer`]: one op, whose rule packs the gate
/// gradients once for both weight gradients).
fn lstm_layer_seq<E: Float>(
    x: &Tensor<E>,
    bias: Option<&Tensor<E>>,
    s: &[Tensor<E>],
    w: &CellWeights<E>,
    reverse: bool,
) -> (Tensor<E>, Vec<Tensor<E>>) {
    let (out, h_n, c_n) = lstm_layer(x, &w.weight_ih, &s[0], &s[1], &w.weight_hh, bias, reverse);
    (out, vec![h_n, c_n])
}

/// One layer and direction from the layer's input, without a tape:
/// [`lstm_projected`] (the input projection inside the time loop, in the
/// input's layout; fp8 weights decoded in its packing step), or `None`
/// where it does not apply.
fn lstm_proj<E: Float>(
    x: &Tensor<E>,
    batch_first: bool,
    bias: Option<&Tensor<E>>,
    s: &[Tensor<E>],
    w: &CellWeights<E>,
    fp8: Option<&Fp8Cell>,
    reverse: bool,
) -> Option<(Tensor<E>, Vec<Tensor<E>>)> {
    let (w_ih, w_hh) = match fp8 {
        Some([ih, hh]) => (ProjWeight::Fp8(ih.panels()), ProjWeight::Fp8(hh.panels())),
        None => (
            ProjWeight::Dense(&w.weight_ih),
            ProjWeight::Dense(&w.weight_hh),
        ),
    };
    let (out, h_n, c_n) = lstm_projected(x, batch_first, w_ih, w_hh, bias, &s[0], &s[1], reverse)?;
    Some((out, vec![h_n, c_n]))
}

impl<E: Float> Lstm<E> {
    /// A layer with every weight and bias drawn from
    /// `U(-1/sqrt(H), 1/sqrt(H))`, as PyTorch.
    ///
    /// # Panics
    /// When `input_size`, `hidden_size` or `num_layers` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{Lstm, RnnConfig};
    /// let lstm = Lstm::<f64>::new(RnnConfig::new(3, 4).num_layers(2), &mut Rng::new(0));
    /// assert_eq!(lstm.cell(1, false).weight_ih.shape(), &[16, 4]);
    /// // layer 0: [16, 3], [16, 4], 2 x [16]; layer 1: [16, 4], [16, 4], 2 x [16]
    /// assert_eq!(lstm.num_parameters(), (48 + 64 + 32) + (64 + 64 + 32));
    /// assert!(lstm.parameters().iter().all(|p| p.to_vec().iter().all(|v| v.abs() <= 0.5)));
    /// ```
    pub fn new(config: RnnConfig, rng: &mut Rng) -> Self {
        Lstm {
            inner: Recurrent::new("Lstm", config, 4, rng),
        }
    }

    fn run(
        &self,
        x: Tensor<E>,
        init: Option<[Tensor<E>; 2]>,
    ) -> (Tensor<E>, (Tensor<E>, Tensor<E>)) {
        let (out, mut finals) = self.inner.run(
            x,
            init.as_ref().map(|s| &s[..]),
            &["h0", "c0"],
            true,
            &lstm_seq,
            Some(&lstm_layer_seq),
            Some(&lstm_proj),
        );
        let c_n = finals.pop().expect("c_n");
        let h_n = finals.pop().expect("h_n");
        (out, (h_n, c_n))
    }
}

impl<E: Float> Forward<Tensor<E>> for Lstm<E> {
    type Output = (Tensor<E>, (Tensor<E>, Tensor<E>));

    /// `(output, (h_n, c_n))` from zero initial states.
    ///
    /// # Panics
    /// When the input is not `[T, N, I]` / `[N, T, I]` / `[T, I]` with the
    /// layer's `I` and `T >= 1`; the message names the layer and both shapes.
    fn forward(&self, x: Tensor<E>) -> Self::Output {
        record_output(self, self.run(x, None))
    }
}

impl<E: Float> Forward<(Tensor<E>, (Tensor<E>, Tensor<E>))> for Lstm<E> {
    type Output = (Tensor<E>, (Tensor<E>, Tensor<E>));

    /// `(output, (h_n, c_n))` from `(input, (h0, c0))`.
    ///
    /// # Panics
    /// As the zero-state form, and when `h0` or `c0` is not
    /// `[L * D, N, H]` (`[L * D, H]` for an unbatched input).
    fn forward(&self, (x, (h0, c0)): (Tensor<E>, (Tensor<E>, Tensor<E>))) -> Self::Output {
        record_output(self, self.run(x, Some([h0, c0])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::Layer;

    #[test]
    #[should_panic(
        expected = "Lstm(5 -> 7): expected input of shape [N, T, 5] or [T, 5] with T >= 1, got [3, 6, 4]"
    )]
    fn wrong_input_size_names_the_layer_and_shapes() {
        let lstm = Lstm::<f32>::new(RnnConfig::new(5, 7).batch_first(true), &mut Rng::new(0));
        lstm.forward(Tensor::zeros(&[3, 6, 4]));
    }

    #[test]
    #[should_panic(expected = "Lstm(5 -> 7): expected c0 of shape [2, 3, 7], got [1, 3, 7]")]
    fn wrong_state_shape_names_the_state() {
        let lstm = Lstm::<f32>::new(RnnConfig::new(5, 7).num_layers(2), &mut Rng::new(0));
        let h0 = Tensor::zeros(&[2, 3, 7]);
        lstm.forward((Tensor::zeros(&[6, 3, 5]), (h0, Tensor::zeros(&[1, 3, 7]))));
    }

    #[test]
    fn unbatched_input_matches_a_batch_of_one() {
        let lstm = Lstm::<f64>::new(RnnConfig::new(3, 4).bidirectional(true), &mut Rng::new(1));
        let x = Tensor::<f64>::uniform(&[5, 3], -1.0, 1.0, &mut Rng::new(2));
        let (o1, (h1, c1)) = lstm.forward(x.clone());
        let (o2, (h2, c2)) = lstm.forward(x.unsqueeze(1));
        assert_eq!(o1.shape(), &[5, 8]);
        assert_eq!(h1.shape(), &[2, 4]);
        assert_eq!(o1.to_vec(), o2.to_vec());
        assert_eq!(h1.to_vec(), h2.to_vec());
        assert_eq!(c1.to_vec(), c2.to_vec());
    }

    // The no-grad path keeps W_ih^T and W_hh^T packed on the weights'
    // storages (ops/rnn_cell/lstm_infer.rs): every way the weights change
    // must make the next call pack the new values.

    /// The no-grad output (cached packs) against the recorded forward
    /// (which packs in the call; the same bits by the projected path's
    /// contract), and both weights holding a pack for their values.
    fn cached_equals_fresh(l: &Lstm<f32>, x: &Tensor<f32>, what: &str) {
        let (cached, (h_c, c_c)) = crate::no_grad(|| l.forward(x.clone()));
        let (fresh, (h_f, c_f)) = l.forward(x.clone());
        assert!(cached.to_vec() == fresh.to_vec(), "stale pack after {what}");
        assert!(h_c.to_vec() == h_f.to_vec() && c_c.to_vec() == c_f.to_vec());
        let cell = l.cell(0, false);
        assert!(
            crate::ops::rnn_cell::holds_packed(&cell.weight_ih)
                && crate::ops::rnn_cell::holds_packed(&cell.weight_hh),
            "no packed weights for the values after {what}"
        );
    }

    fn lstm_and_input(seed: u64) -> (Lstm<f32>, Tensor<f32>) {
        let mut rng = Rng::new(seed);
        let l = Lstm::<f32>::new(RnnConfig::new(24, 20).batch_first(true), &mut rng);
        let x = Tensor::<f32>::uniform(&[6, 5, 24], -1.0, 1.0, &mut rng);
        (l, x)
    }

    #[test]
    fn an_optimizer_step_invalidates_the_packed_weights() {
        if !crate::cpu::gemm::packed_f32_available() {
            return;
        }
        let (mut l, x) = lstm_and_input(3);
        cached_equals_fresh(&l, &x, "nothing");
        let before = crate::no_grad(|| l.forward(x.clone())).0.to_vec();
        let g = l.forward(x.clone()).0.sum().backward();
        let w = &l.cell(0, false).weight_hh.storage;
        let v = w.version();
        crate::optim::Sgd::<f32>::new(0.5).step(&mut l, &g).unwrap();
        assert!(l.cell(0, false).weight_hh.storage.version() != v);
        cached_equals_fresh(&l, &x, "an optimizer step");
        assert!(crate::no_grad(|| l.forward(x.clone())).0.to_vec() != before);
    }

    #[test]
    fn loading_weights_invalidates_the_packed_weights() {
        if !crate::cpu::gemm::packed_f32_available() {
            return;
        }
        let (mut l, x) = lstm_and_input(4);
        cached_equals_fresh(&l, &x, "nothing");
        let (other, _) = lstm_and_input(5);
        l.load_state_dict(&other.state_dict()).unwrap();
        cached_equals_fresh(&l, &x, "a load");
        let want = crate::no_grad(|| other.forward(x.clone())).0.to_vec();
        assert!(crate::no_grad(|| l.forward(x.clone())).0.to_vec() == want);
    }

    #[test]
    fn no_bias_has_no_bias_tensors() {
        let lstm = Lstm::<f32>::new(RnnConfig::new(3, 4).bias(false), &mut Rng::new(0));
        let keys: Vec<String> = lstm.state_dict().into_keys().collect();
        assert_eq!(keys, ["weight_hh_l0", "weight_ih_l0"]);
        let (out, _) = lstm.forward(Tensor::ones(&[2, 1, 3]));
        assert_eq!(out.shape(), &[2, 1, 4]);
    }
}

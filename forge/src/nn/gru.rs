//! [`Gru`]: gated recurrent unit, PyTorch's `nn.GRU`.

use super::forward::Forward;
use super::rnn::{recurrent_layer, with_bias, CellWeights, Recurrent, RnnConfig};
use super::summary::record_output;
use crate::ops::rnn_cell::{gru_sequence, gru_sequence_with, Fp8Hidden, HiddenWeight};
use crate::tensor::{Float, Rng, Tensor};

/// A gated recurrent unit layer (`nn.GRU`), stacked `num_layers` deep and
/// optionally bidirectional. Gate rows are ordered `(r, z, n)`:
///
/// ```text
/// r, z = sigmoid(x_t W_i*^T + b_i* + h_{t-1} W_h*^T + b_h*)
/// n    = tanh(x_t W_in^T + b_in + r * (h_{t-1} W_hn^T + b_hn))
/// h_t  = (1 - z) * n + z * h_{t-1}
/// ```
///
/// Parameters have PyTorch's state-dict names: `weight_ih_l{k}` `[3H, in]`,
/// `weight_hh_l{k}` `[3H, H]`, `bias_ih_l{k}`, `bias_hh_l{k}` `[3H]`, and
/// the same with `_reverse` for the reverse direction.
///
/// # Shapes
/// - input `[T, N, I]` (`[N, T, I]` with `batch_first`), or unbatched `[T, I]`
/// - `h0`, `h_n`: `[L * D, N, H]` (even with `batch_first`; rows
///   `[l0 forward, l0 reverse, l1 forward, ...]`), or `[L * D, H]`
/// - output `[T, N, D * H]` (`[N, T, D * H]` with `batch_first`), the
///   forward direction in `[.., :H]` and the reverse one in `[.., H:]`
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{Gru, RnnConfig};
/// let gru = Gru::<f32>::new(RnnConfig::new(5, 7).num_layers(2).batch_first(true), &mut Rng::new(0));
/// let h0 = Tensor::zeros(&[2, 3, 7]);
/// let (out, h_n) = gru.forward((Tensor::ones(&[3, 6, 5]), h0));
/// assert_eq!(out.shape(), &[3, 6, 7]);
/// assert_eq!(h_n.shape(), &[2, 3, 7]);
/// assert_eq!(gru.state_dict()["weight_ih_l1"].shape(), &[21, 7]);
/// ```
#[derive(Clone, Debug)]
pub struct Gru<E: Float = f32> {
    inner: Recurrent<E>,
}

recurrent_layer!(Gru);

/// One layer and direction: the fused [`gru_sequence`] (one kernel per time
/// step for the gates and the state update, one tape node). `xp` holds the
/// input projection with `bias_ih` only, since `bias_hh`'s `n` block sits
/// inside `r * (..)`. With an fp8 `W_hh` prepared for its products when
/// the layer holds one.
fn gru_seq<E: Float>(
    xp: &Tensor<E>,
    bias_ih: Option<&Tensor<E>>,
    s: &[Tensor<E>],
    w: &CellWeights<E>,
    fp8_hh: Option<&Fp8Hidden<'_, E>>,
    reverse: bool,
) -> (Tensor<E>, Vec<Tensor<E>>) {
    let xp = with_bias(xp, bias_ih);
    let b_hh = w.bias_hh.as_ref();
    let (out, h_n) = match fp8_hh {
        Some(hh) => gru_sequence_with(&xp, &s[0], HiddenWeight::Fp8(hh), b_hh, reverse),
        None => gru_sequence(&xp, &s[0], &w.weight_hh, b_hh, reverse),
    };
    (out, vec![h_n])
}

impl<E: Float> Gru<E> {
    /// A layer with every weight and bias drawn from
    /// `U(-1/sqrt(H), 1/sqrt(H))`, as PyTorch.
    ///
    /// # Panics
    /// When `input_size`, `hidden_size` or `num_layers` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{Gru, RnnConfig};
    /// let gru = Gru::<f64>::new(RnnConfig::new(3, 4), &mut Rng::new(0));
    /// assert_eq!(gru.num_parameters(), 12 * 3 + 12 * 4 + 12 + 12);
    /// assert!(gru.parameters().iter().all(|p| p.to_vec().iter().all(|v| v.abs() <= 0.5)));
    /// ```
    pub fn new(config: RnnConfig, rng: &mut Rng) -> Self {
        Gru {
            inner: Recurrent::new("Gru", config, 3, rng),
        }
    }

    fn run(&self, x: Tensor<E>, h0: Option<Tensor<E>>) -> (Tensor<E>, Tensor<E>) {
        let init = h0.map(|h| vec![h]);
        let (out, mut finals) =
            self.inner
                .run(x, init.as_deref(), &["h0"], false, &gru_seq, None, None);
        (out, finals.remove(0))
    }
}

impl<E: Float> Forward<Tensor<E>> for Gru<E> {
    type Output = (Tensor<E>, Tensor<E>);

    /// `(output, h_n)` from a zero initial state.
    ///
    /// # Panics
    /// When the input is not `[T, N, I]` / `[N, T, I]` / `[T, I]` with the
    /// layer's `I` and `T >= 1`; the message names the layer and both shapes.
    fn forward(&self, x: Tensor<E>) -> Self::Output {
        record_output(self, self.run(x, None))
    }
}

impl<E: Float> Forward<(Tensor<E>, Tensor<E>)> for Gru<E> {
    type Output = (Tensor<E>, Tensor<E>);

    /// `(output, h_n)` from `(input, h0)`.
    ///
    /// # Panics
    /// As the zero-state form, and when `h0` is not `[L * D, N, H]`
    /// (`[L * D, H]` for an unbatched input).
    fn forward(&self, (x, h0): (Tensor<E>, Tensor<E>)) -> Self::Output {
        record_output(self, self.run(x, Some(h0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "Gru(5 -> 7): expected h0 of shape [1, 3, 7], got [1, 7]")]
    fn wrong_state_rank_names_the_layer_and_shapes() {
        let gru = Gru::<f32>::new(RnnConfig::new(5, 7), &mut Rng::new(0));
        gru.forward((Tensor::zeros(&[6, 3, 5]), Tensor::zeros(&[1, 7])));
    }

    #[test]
    fn batch_first_is_the_transpose_of_time_major() {
        let cfg = RnnConfig::new(3, 4).bidirectional(true);
        let a = Gru::<f64>::new(cfg, &mut Rng::new(5));
        let b = Gru::<f64>::new(cfg.batch_first(true), &mut Rng::new(5));
        let x = Tensor::<f64>::uniform(&[5, 2, 3], -1.0, 1.0, &mut Rng::new(6));
        let (oa, ha) = a.forward(x.clone());
        let (ob, hb) = b.forward(x.transpose(0, 1));
        assert_eq!(oa.transpose(0, 1).to_vec(), ob.to_vec());
        assert_eq!(ha.to_vec(), hb.to_vec());
    }
}

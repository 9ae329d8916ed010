//! The Elman recurrent layer [`Rnn`] and its [`RnnNonlinearity`], on the
//! shared machinery of `rnn.rs`.

use super::forward::Forward;
use super::rnn::{composed_sequence, recurrent_layer, with_bias, CellWeights, Recurrent};
use super::rnn_config::RnnConfig;
use super::summary::record_output;
use crate::ops::rnn_cell::Fp8Hidden;
use crate::tensor::{Float, Rng, Tensor};

/// The nonlinearity of an [`Rnn`] cell (PyTorch's `nonlinearity`).
///
/// ```
/// assert_ne!(forge::nn::RnnNonlinearity::Tanh, forge::nn::RnnNonlinearity::Relu);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RnnNonlinearity {
    /// `tanh` (the default).
    #[default]
    Tanh,
    /// `relu`.
    Relu,
}

/// An Elman recurrent layer (`nn.RNN`):
/// `h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)` with `act` tanh
/// (or relu), stacked `num_layers` deep and optionally bidirectional.
///
/// Parameters have PyTorch's state-dict names: `weight_ih_l{k}` `[H, in]`,
/// `weight_hh_l{k}` `[H, H]`, `bias_ih_l{k}`, `bias_hh_l{k}` `[H]`, and the
/// same with `_reverse` for the reverse direction.
///
/// # Shapes
/// - input `[T, N, I]` (`[N, T, I]` with `batch_first`), or unbatched `[T, I]`
/// - `h0`, `h_n`: `[L * D, N, H]` (even with `batch_first`), or `[L * D, H]`
/// - output `[T, N, D * H]` (`[N, T, D * H]` with `batch_first`), or `[T, D * H]`
///
/// ```
/// use forge::prelude::*;
/// use forge::nn::{Rnn, RnnConfig};
/// let rnn = Rnn::<f32>::new(RnnConfig::new(5, 7).batch_first(true), &mut Rng::new(0));
/// let (out, h_n) = rnn.forward(Tensor::ones(&[3, 6, 5]));
/// assert_eq!(out.shape(), &[3, 6, 7]);
/// assert_eq!(h_n.shape(), &[1, 3, 7]);
/// // h_n is the last step of the output
/// assert_eq!(out.narrow(1, 5, 1).to_vec(), h_n.to_vec());
/// ```
#[derive(Clone, Debug)]
pub struct Rnn<E: Float = f32> {
    inner: Recurrent<E>,
    nonlinearity: RnnNonlinearity,
}

recurrent_layer!(Rnn);

impl<E: Float> Rnn<E> {
    /// A tanh layer with every weight and bias drawn from
    /// `U(-1/sqrt(H), 1/sqrt(H))`, as PyTorch.
    ///
    /// # Panics
    /// When `input_size`, `hidden_size` or `num_layers` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{Rnn, RnnConfig};
    /// let rnn = Rnn::<f64>::new(RnnConfig::new(2, 4).num_layers(2), &mut Rng::new(0));
    /// let names: Vec<String> = rnn.state_dict().into_keys().collect();
    /// assert_eq!(names[..2], ["bias_hh_l0", "bias_hh_l1"]);
    /// assert!(rnn.parameters().iter().all(|p| p.to_vec().iter().all(|v| v.abs() <= 0.5)));
    /// ```
    pub fn new(config: RnnConfig, rng: &mut Rng) -> Self {
        Self::with_nonlinearity(config, RnnNonlinearity::Tanh, rng)
    }

    /// A layer with the given nonlinearity, initialised as [`Rnn::new`].
    ///
    /// # Panics
    /// When `input_size`, `hidden_size` or `num_layers` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{Rnn, RnnConfig, RnnNonlinearity};
    /// let rnn = Rnn::<f32>::with_nonlinearity(RnnConfig::new(2, 3), RnnNonlinearity::Relu, &mut Rng::new(0));
    /// let (out, _) = rnn.forward(Tensor::ones(&[4, 1, 2]));
    /// assert!(out.to_vec().iter().all(|&v| v >= 0.0));
    /// ```
    pub fn with_nonlinearity(
        config: RnnConfig,
        nonlinearity: RnnNonlinearity,
        rng: &mut Rng,
    ) -> Self {
        Rnn {
            inner: Recurrent::new("Rnn", config, 1, rng),
            nonlinearity,
        }
    }

    /// The cell's nonlinearity.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{Rnn, RnnConfig, RnnNonlinearity};
    /// let rnn = Rnn::<f32>::new(RnnConfig::new(2, 3), &mut Rng::new(0));
    /// assert_eq!(rnn.nonlinearity(), RnnNonlinearity::Tanh);
    /// ```
    pub fn nonlinearity(&self) -> RnnNonlinearity {
        self.nonlinearity
    }

    fn run(&self, x: Tensor<E>, h0: Option<Tensor<E>>) -> (Tensor<E>, Tensor<E>) {
        let relu = self.nonlinearity == RnnNonlinearity::Relu;
        // an fp8 layer's `W_hh` comes prepared for the products
        // (`rnn_fp8.rs`): the bits of the decoded weight's `matmul_t`
        let seq = |xp: &Tensor<E>,
                   b: Option<&Tensor<E>>,
                   s: &[Tensor<E>],
                   w: &CellWeights<E>,
                   fp8_hh: Option<&Fp8Hidden<'_, E>>,
                   reverse: bool| {
            let step = |xp: &Tensor<E>, s: &[Tensor<E>], w: &CellWeights<E>| {
                let hw = match fp8_hh {
                    Some(hh) => hh.matmul_t(&s[0]),
                    None => s[0].matmul_t(&w.weight_hh),
                };
                let a = xp.add(&hw);
                vec![if relu { a.relu() } else { a.tanh() }]
            };
            composed_sequence(&with_bias(xp, b), s, w, reverse, &step)
        };
        let init = h0.map(|h| vec![h]);
        let (out, mut finals) = self
            .inner
            .run(x, init.as_deref(), &["h0"], true, &seq, None, None);
        (out, finals.remove(0))
    }
}

impl<E: Float> Forward<Tensor<E>> for Rnn<E> {
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

impl<E: Float> Forward<(Tensor<E>, Tensor<E>)> for Rnn<E> {
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

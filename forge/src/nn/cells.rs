//! Single-step recurrent cells, as PyTorch's `nn.RNNCell`, `nn.LSTMCell`
//! and `nn.GRUCell`: one time step of [`Rnn`](super::Rnn),
//! [`Lstm`](super::Lstm) and [`Gru`](super::Gru), with the same parameter
//! names and layouts (`weight_ih [G H, I]`, `weight_hh [G H, H]`,
//! `bias_ih`, `bias_hh [G H]`; LSTM gate rows `(i, f, g, o)`, GRU rows
//! `(r, z, n)`), written in differentiable tensor ops.

use super::forward::Forward;
use super::rnn_elman::RnnNonlinearity;
use super::summary::record_output;
use crate::tensor::{Float, Rng, Tensor};
use forge_macros::Layer;

/// A cell's `(weight_ih, weight_hh, bias_ih, bias_hh)`.
type CellParams<E> = (Tensor<E>, Tensor<E>, Option<Tensor<E>>, Option<Tensor<E>>);

/// The weights of one cell with `gates` gate blocks, drawn from
/// `U(-1/sqrt(H), 1/sqrt(H))` as PyTorch's.
fn cell_weights<E: Float>(
    gates: usize,
    input_size: usize,
    hidden_size: usize,
    bias: bool,
    rng: &mut Rng,
) -> CellParams<E> {
    let k = 1.0 / (hidden_size as f64).sqrt();
    let mut draw = |shape: &[usize]| Tensor::uniform(shape, -k, k, rng).requires_grad();
    let w_ih = draw(&[gates * hidden_size, input_size]);
    let w_hh = draw(&[gates * hidden_size, hidden_size]);
    let (b_ih, b_hh) = if bias {
        (
            Some(draw(&[gates * hidden_size])),
            Some(draw(&[gates * hidden_size])),
        )
    } else {
        (None, None)
    };
    (w_ih, w_hh, b_ih, b_hh)
}

/// The zero state `[N, H]` (or `[H]` for an unbatched input).
fn zeros_state<E: Float>(x: &Tensor<E>, hidden: usize) -> Tensor<E> {
    if x.rank() == 1 {
        Tensor::zeros(&[hidden])
    } else {
        Tensor::zeros(&[x.shape()[0], hidden])
    }
}

#[track_caller]
fn check_input(name: &str, x: &[usize], input_size: usize) {
    shape_assert!(
        (x.len() == 1 || x.len() == 2) && x[x.len() - 1] == input_size,
        "{name}: expected an input [N, {input_size}] or [{input_size}], got shape {x:?}"
    );
}

macro_rules! cell_struct {
    ($(#[$doc:meta])* $name:ident $(, $extra:ident: $ty:ty)?) => {
        $(#[$doc])*
        #[derive(Layer, Clone, Debug)]
        pub struct $name<E: Float = f32> {
            /// Input weights `[G H, I]`.
            pub weight_ih: Tensor<E>,
            /// Hidden weights `[G H, H]`.
            pub weight_hh: Tensor<E>,
            /// Input bias `[G H]`, if any.
            pub bias_ih: Option<Tensor<E>>,
            /// Hidden bias `[G H]`, if any.
            pub bias_hh: Option<Tensor<E>>,
            /// The input features `I`.
            #[skip]
            pub input_size: usize,
            /// The hidden features `H`.
            #[skip]
            pub hidden_size: usize,
            $(
                /// The nonlinearity.
                #[skip]
                pub $extra: $ty,
            )?
        }

        impl<E: Float> $name<E> {
            /// The two affine maps `x W_ih^T + b_ih` and `h W_hh^T + b_hh`.
            fn affine(&self, x: &Tensor<E>, h: &Tensor<E>) -> (Tensor<E>, Tensor<E>) {
                check_input(stringify!($name), x.shape(), self.input_size);
                (
                    x.linear(&self.weight_ih, self.bias_ih.as_ref()),
                    h.linear(&self.weight_hh, self.bias_hh.as_ref()),
                )
            }
        }
    };
}

cell_struct!(
    /// One step of an Elman RNN (PyTorch's `nn.RNNCell`):
    /// `h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)`, `act` tanh or relu.
    ///
    /// # Shapes
    /// Input `[N, I]` (or `[I]`), state `[N, H]` (or `[H]`).
    ///
    /// # Panics
    /// When the input's last dimension is not `input_size`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let cell = forge::nn::RnnCell::<f64>::new(3, 4, &mut Rng::new(0));
    /// let h = cell.forward(Tensor::ones(&[2, 3]));
    /// assert_eq!(h.shape(), &[2, 4]);
    /// let h2 = cell.step(&Tensor::ones(&[2, 3]), Some(&h));
    /// assert_eq!(h2.shape(), &[2, 4]);
    /// ```
    RnnCell, nonlinearity: RnnNonlinearity
);

impl<E: Float> RnnCell<E> {
    /// A tanh cell with biases, weights from `U(-1/sqrt(H), 1/sqrt(H))`.
    ///
    /// ```
    /// let cell = forge::nn::RnnCell::<f32>::new(3, 4, &mut forge::Rng::new(0));
    /// assert_eq!(cell.weight_hh.shape(), &[4, 4]);
    /// ```
    pub fn new(input_size: usize, hidden_size: usize, rng: &mut Rng) -> Self {
        Self::with_options(input_size, hidden_size, true, RnnNonlinearity::Tanh, rng)
    }

    /// A cell with or without biases and with the given nonlinearity.
    ///
    /// ```
    /// use forge::nn::{RnnCell, RnnNonlinearity};
    /// let cell = RnnCell::<f32>::with_options(3, 4, false, RnnNonlinearity::Relu, &mut forge::Rng::new(0));
    /// assert!(cell.bias_ih.is_none());
    /// ```
    pub fn with_options(
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        nonlinearity: RnnNonlinearity,
        rng: &mut Rng,
    ) -> Self {
        let (weight_ih, weight_hh, bias_ih, bias_hh) =
            cell_weights(1, input_size, hidden_size, bias, rng);
        RnnCell {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            input_size,
            hidden_size,
            nonlinearity,
        }
    }

    /// One step from state `h` (zeros when `None`).
    ///
    /// # Panics
    /// When the shapes do not fit.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::nn::{RnnCell, RnnNonlinearity};
    /// let cell = RnnCell::<f64>::with_options(2, 3, true, RnnNonlinearity::Relu, &mut Rng::new(1));
    /// let h = cell.step(&Tensor::ones(&[2]), None);
    /// assert_eq!(h.shape(), &[3]);
    /// assert!(h.to_vec().iter().all(|&v| v >= 0.0));
    /// ```
    pub fn step(&self, x: &Tensor<E>, h: Option<&Tensor<E>>) -> Tensor<E> {
        let h = h
            .cloned()
            .unwrap_or_else(|| zeros_state(x, self.hidden_size));
        let (a, b) = self.affine(x, &h);
        let pre = a.add(&b);
        match self.nonlinearity {
            RnnNonlinearity::Tanh => pre.tanh(),
            RnnNonlinearity::Relu => pre.relu(),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for RnnCell<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, self.step(&x, None))
    }
}

cell_struct!(
    /// One step of an LSTM (PyTorch's `nn.LSTMCell`): gates
    /// `(i, f, g, o)` from `x W_ih^T + b_ih + h W_hh^T + b_hh`,
    /// `c' = sigmoid(f) c + sigmoid(i) tanh(g)`, `h' = sigmoid(o) tanh(c')`.
    ///
    /// # Shapes
    /// Input `[N, I]` (or `[I]`), states `[N, H]` (or `[H]`).
    ///
    /// # Panics
    /// When the input's last dimension is not `input_size`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let cell = forge::nn::LstmCell::<f64>::new(3, 4, &mut Rng::new(0));
    /// let (h, c) = cell.forward(Tensor::ones(&[2, 3]));
    /// let (h2, c2) = cell.step(&Tensor::ones(&[2, 3]), Some((&h, &c)));
    /// assert_eq!((h2.shape(), c2.shape()), (&[2, 4][..], &[2, 4][..]));
    /// ```
    LstmCell
);

impl<E: Float> LstmCell<E> {
    /// A cell with biases, weights from `U(-1/sqrt(H), 1/sqrt(H))`.
    ///
    /// ```
    /// let cell = forge::nn::LstmCell::<f32>::new(3, 4, &mut forge::Rng::new(0));
    /// assert_eq!(cell.weight_ih.shape(), &[16, 3]);
    /// ```
    pub fn new(input_size: usize, hidden_size: usize, rng: &mut Rng) -> Self {
        Self::with_bias(input_size, hidden_size, true, rng)
    }

    /// A cell with or without biases.
    ///
    /// ```
    /// let cell = forge::nn::LstmCell::<f32>::with_bias(3, 4, false, &mut forge::Rng::new(0));
    /// assert!(cell.bias_hh.is_none());
    /// ```
    pub fn with_bias(input_size: usize, hidden_size: usize, bias: bool, rng: &mut Rng) -> Self {
        let (weight_ih, weight_hh, bias_ih, bias_hh) =
            cell_weights(4, input_size, hidden_size, bias, rng);
        LstmCell {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            input_size,
            hidden_size,
        }
    }

    /// One step from `(h, c)` (zeros when `None`); returns `(h', c')`.
    ///
    /// # Panics
    /// When the shapes do not fit.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let cell = forge::nn::LstmCell::<f64>::new(2, 3, &mut Rng::new(1));
    /// let (h, c) = cell.step(&Tensor::ones(&[2]), None);
    /// assert_eq!((h.shape(), c.shape()), (&[3][..], &[3][..]));
    /// ```
    pub fn step(
        &self,
        x: &Tensor<E>,
        state: Option<(&Tensor<E>, &Tensor<E>)>,
    ) -> (Tensor<E>, Tensor<E>) {
        let (h, c) = match state {
            Some((h, c)) => (h.clone(), c.clone()),
            None => (
                zeros_state(x, self.hidden_size),
                zeros_state(x, self.hidden_size),
            ),
        };
        let (a, b) = self.affine(x, &h);
        let gates = a.add(&b).chunk(4, -1);
        let (i, f, g, o) = (
            gates[0].sigmoid(),
            gates[1].sigmoid(),
            gates[2].tanh(),
            gates[3].sigmoid(),
        );
        let c = f.mul(&c).add(&i.mul(&g));
        (o.mul(&c.tanh()), c)
    }
}

impl<E: Float> Forward<Tensor<E>> for LstmCell<E> {
    type Output = (Tensor<E>, Tensor<E>);
    fn forward(&self, x: Tensor<E>) -> (Tensor<E>, Tensor<E>) {
        let (h, c) = self.step(&x, None);
        (record_output(self, h), c)
    }
}

cell_struct!(
    /// One step of a GRU (PyTorch's `nn.GRUCell`): gates `(r, z, n)`,
    /// `r = sigmoid(.)`, `z = sigmoid(.)`,
    /// `n = tanh(W_in x + b_in + r (W_hn h + b_hn))`, `h' = (1 - z) n + z h`.
    ///
    /// # Shapes
    /// Input `[N, I]` (or `[I]`), state `[N, H]` (or `[H]`).
    ///
    /// # Panics
    /// When the input's last dimension is not `input_size`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let cell = forge::nn::GruCell::<f64>::new(3, 4, &mut Rng::new(0));
    /// let h = cell.forward(Tensor::ones(&[2, 3]));
    /// assert_eq!(cell.step(&Tensor::ones(&[2, 3]), Some(&h)).shape(), &[2, 4]);
    /// ```
    GruCell
);

impl<E: Float> GruCell<E> {
    /// A cell with biases, weights from `U(-1/sqrt(H), 1/sqrt(H))`.
    ///
    /// ```
    /// let cell = forge::nn::GruCell::<f32>::new(3, 4, &mut forge::Rng::new(0));
    /// assert_eq!(cell.weight_ih.shape(), &[12, 3]);
    /// ```
    pub fn new(input_size: usize, hidden_size: usize, rng: &mut Rng) -> Self {
        Self::with_bias(input_size, hidden_size, true, rng)
    }

    /// A cell with or without biases.
    ///
    /// ```
    /// let cell = forge::nn::GruCell::<f32>::with_bias(3, 4, false, &mut forge::Rng::new(0));
    /// assert!(cell.bias_ih.is_none());
    /// ```
    pub fn with_bias(input_size: usize, hidden_size: usize, bias: bool, rng: &mut Rng) -> Self {
        let (weight_ih, weight_hh, bias_ih, bias_hh) =
            cell_weights(3, input_size, hidden_size, bias, rng);
        GruCell {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            input_size,
            hidden_size,
        }
    }

    /// One step from state `h` (zeros when `None`).
    ///
    /// # Panics
    /// When the shapes do not fit.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let cell = forge::nn::GruCell::<f64>::new(2, 3, &mut Rng::new(1));
    /// assert_eq!(cell.step(&Tensor::ones(&[2]), None).shape(), &[3]);
    /// ```
    pub fn step(&self, x: &Tensor<E>, h: Option<&Tensor<E>>) -> Tensor<E> {
        let h = h
            .cloned()
            .unwrap_or_else(|| zeros_state(x, self.hidden_size));
        let (a, b) = self.affine(x, &h);
        let (gi, gh) = (a.chunk(3, -1), b.chunk(3, -1));
        let r = gi[0].add(&gh[0]).sigmoid();
        let z = gi[1].add(&gh[1]).sigmoid();
        let n = gi[2].add(&r.mul(&gh[2])).tanh();
        // (1 - z) n + z h = n + z (h - n)
        n.add(&z.mul(&h.sub(&n)))
    }
}

impl<E: Float> Forward<Tensor<E>> for GruCell<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, self.step(&x, None))
    }
}

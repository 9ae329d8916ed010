//! More activation layers, as `torch.nn`: [`Hardswish`], [`Hardsigmoid`],
//! [`Relu6`], [`Hardtanh`], [`PRelu`] (learnable slopes), [`Selu`],
//! [`Celu`], [`Glu`], [`LogSigmoid`], [`Softsign`]. Each wraps the tensor
//! method of the same name.

use super::forward::Forward;
use super::summary::record_output;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

macro_rules! plain_activation {
    ($(#[$doc:meta])* $name:ident, $op:ident, $input:expr, $output:expr) => {
        $(#[$doc])*
        ///
        /// # Shapes
        /// Any input shape; the output has the same shape.
        ///
        /// ```
        /// use forge::prelude::*;
        #[doc = concat!("let y = forge::nn::", stringify!($name), ".forward(Tensor::<f64>::from_vec(vec!", stringify!($input), ", &[2]));")]
        #[doc = concat!("let want: Vec<f64> = vec!", stringify!($output), ";")]
        /// for (a, b) in y.to_vec().iter().zip(&want) {
        ///     assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        /// }
        /// ```
        #[derive(Layer, Clone, Copy, Debug, Default, PartialEq)]
        pub struct $name;

        impl<E: Float> Forward<Tensor<E>> for $name {
            type Output = Tensor<E>;
            fn forward(&self, x: Tensor<E>) -> Tensor<E> {
                record_output(self, x.$op())
            }
        }
    };
}

plain_activation!(
    /// `x * relu6(x + 3) / 6` (PyTorch's `nn.Hardswish`).
    Hardswish, hardswish, [-4.0, 1.0], [0.0, 0.6666666666666666]
);
plain_activation!(
    /// `relu6(x + 3) / 6` (PyTorch's `nn.Hardsigmoid`).
    Hardsigmoid, hardsigmoid, [-4.0, 0.0], [0.0, 0.5]
);
plain_activation!(
    /// `min(max(x, 0), 6)` (PyTorch's `nn.ReLU6`).
    Relu6, relu6, [-1.0, 7.0], [0.0, 6.0]
);
plain_activation!(
    /// `scale * elu(x, alpha)` with PyTorch's constants (`nn.SELU`).
    Selu, selu, [0.0, 1.0], [0.0, 1.0507009873554805]
);
plain_activation!(
    /// `log(sigmoid(x))`, computed stably (PyTorch's `nn.LogSigmoid`).
    LogSigmoid, log_sigmoid, [0.0, 800.0], [-0.6931471805599453, 0.0]
);
plain_activation!(
    /// `x / (1 + |x|)` (PyTorch's `nn.Softsign`).
    Softsign, softsign, [1.0, -3.0], [0.5, -0.75]
);

/// `min(max(x, min_val), max_val)` (PyTorch's `nn.Hardtanh`, defaults
/// -1 and 1).
///
/// # Shapes
/// Any input shape; the output has the same shape.
///
/// ```
/// use forge::prelude::*;
/// let y = forge::nn::Hardtanh::default().forward(Tensor::<f64>::from_vec(vec![-2.0, 0.5], &[2]));
/// assert_eq!(y.to_vec(), vec![-1.0, 0.5]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct Hardtanh {
    /// The lower bound.
    #[skip]
    pub min_val: f64,
    /// The upper bound.
    #[skip]
    pub max_val: f64,
}

impl Default for Hardtanh {
    fn default() -> Self {
        Hardtanh {
            min_val: -1.0,
            max_val: 1.0,
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for Hardtanh {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.hardtanh(self.min_val, self.max_val))
    }
}

/// `max(0, x) + min(0, alpha (exp(x / alpha) - 1))` (PyTorch's `nn.CELU`,
/// default alpha 1).
///
/// # Shapes
/// Any input shape; the output has the same shape.
///
/// ```
/// use forge::prelude::*;
/// let y = forge::nn::Celu::default().forward(Tensor::<f64>::from_vec(vec![2.0, 0.0], &[2]));
/// assert_eq!(y.to_vec(), vec![2.0, 0.0]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct Celu {
    /// The scale of the negative part.
    #[skip]
    pub alpha: f64,
}

impl Default for Celu {
    fn default() -> Self {
        Celu { alpha: 1.0 }
    }
}

impl<E: Float> Forward<Tensor<E>> for Celu {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.celu(self.alpha))
    }
}

/// The gated linear unit along `dim` (PyTorch's `nn.GLU`, default dim
/// -1): halves `a`, `b`, output `a * sigmoid(b)`.
///
/// # Shapes
/// Input with an even size along `dim`; the output has half of it.
///
/// # Panics
/// When that size is odd.
///
/// ```
/// use forge::prelude::*;
/// let y = forge::nn::Glu::default().forward(Tensor::<f64>::zeros(&[3, 4]));
/// assert_eq!(y.shape(), &[3, 2]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct Glu {
    /// The dimension split in halves.
    #[skip]
    pub dim: isize,
}

impl Default for Glu {
    fn default() -> Self {
        Glu { dim: -1 }
    }
}

impl<E: Float> Forward<Tensor<E>> for Glu {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.glu(self.dim))
    }
}

/// `x` where positive, `weight * x` elsewhere, with learnable slopes
/// (PyTorch's `nn.PReLU(num_parameters, init)`): one slope shared by all
/// channels, or one per channel (dimension 1 of the input).
///
/// # Shapes
/// Any input; with more than one slope, dimension 1 is the channel.
///
/// # Panics
/// When the slopes do not match the channels.
///
/// ```
/// use forge::prelude::*;
/// let p = forge::nn::PRelu::<f64>::new(1, 0.25);
/// let y = p.forward(Tensor::from_vec(vec![-4.0, 2.0], &[2]));
/// assert_eq!(y.to_vec(), vec![-1.0, 2.0]);
/// assert_eq!(p.parameters().len(), 1);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct PRelu<E: Float = f32> {
    /// The slopes (`[num_parameters]`, trainable).
    pub weight: Tensor<E>,
}

impl<E: Float> PRelu<E> {
    /// `num_parameters` slopes, each `init` (PyTorch's defaults: 1 and
    /// 0.25).
    ///
    /// ```
    /// let p = forge::nn::PRelu::<f32>::new(3, 0.25);
    /// assert_eq!(p.weight.to_vec(), vec![0.25; 3]);
    /// ```
    pub fn new(num_parameters: usize, init: f64) -> Self {
        PRelu {
            weight: Tensor::full(&[num_parameters], E::from_f64(init)).requires_grad(),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for PRelu<E> {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.prelu(&self.weight))
    }
}

//! Activation layers: stateless wrappers of the elementwise ops in
//! `forge::ops::unary`, usable in a [`Sequential`](super::Sequential).
//! They hold no tensors and work for every float element type.

use super::forward::Forward;
use super::summary::record_output;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

macro_rules! simple_activation {
    ($(#[$doc:meta])* $name:ident, $op:ident, $input:expr, $output:expr) => {
        $(#[$doc])*
        ///
        /// # Shapes
        /// Any input shape; the output has the same shape.
        ///
        /// ```
        /// use forge::prelude::*;
        #[doc = concat!("let y = ", stringify!($name), ".forward(Tensor::<f64>::from_vec(vec!", stringify!($input), ", &[2]));")]
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

simple_activation!(
    /// `max(x, 0)`.
    Relu, relu, [-1.0, 2.0], [0.0, 2.0]
);
simple_activation!(
    /// The hyperbolic tangent.
    Tanh, tanh, [0.0, 1.0], [0.0, 0.7615941559557649]
);
simple_activation!(
    /// `1 / (1 + exp(-x))`.
    Sigmoid, sigmoid, [0.0, 2.0], [0.5, 0.8807970779778823]
);
simple_activation!(
    /// GELU with the exact erf form, `x Φ(x)` (PyTorch's default).
    Gelu, gelu, [0.0, 1.0], [0.0, 0.8413447460685429]
);
simple_activation!(
    /// GELU with the tanh approximation (`approximate='tanh'`).
    GeluTanh, gelu_tanh, [0.0, 1.0], [0.0, 0.8411919906082768]
);
simple_activation!(
    /// SiLU (swish), `x σ(x)`.
    Silu, silu, [0.0, 1.0], [0.0, 0.7310585786300049]
);
simple_activation!(
    /// Mish, `x tanh(softplus(x))`.
    Mish, mish, [0.0, 1.0], [0.0, 0.8650983882673103]
);

/// `x` for `x >= 0`, `slope * x` otherwise (PyTorch's default slope 0.01).
///
/// # Shapes
/// Any input shape; the output has the same shape.
///
/// ```
/// use forge::prelude::*;
/// let y = LeakyRelu { slope: 0.1 }.forward(Tensor::<f64>::from_vec(vec![-2.0, 3.0], &[2]));
/// assert_eq!(y.to_vec(), vec![-0.2, 3.0]);
/// assert_eq!(LeakyRelu::default().slope, 0.01);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct LeakyRelu {
    /// The slope for negative inputs.
    #[skip]
    pub slope: f64,
}

impl Default for LeakyRelu {
    fn default() -> Self {
        LeakyRelu { slope: 0.01 }
    }
}

impl<E: Float> Forward<Tensor<E>> for LeakyRelu {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.leaky_relu(self.slope))
    }
}

/// `x` for `x > 0`, `alpha (exp(x) - 1)` otherwise (default alpha 1).
///
/// # Shapes
/// Any input shape; the output has the same shape.
///
/// ```
/// use forge::prelude::*;
/// let y = Elu::default().forward(Tensor::<f64>::from_vec(vec![0.0, 2.0], &[2]));
/// assert_eq!(y.to_vec(), vec![0.0, 2.0]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct Elu {
    /// The scale of the negative part.
    #[skip]
    pub alpha: f64,
}

impl Default for Elu {
    fn default() -> Self {
        Elu { alpha: 1.0 }
    }
}

impl<E: Float> Forward<Tensor<E>> for Elu {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.elu(self.alpha))
    }
}

/// `log(1 + exp(beta x)) / beta`, linear where `beta x > threshold`
/// (defaults as in PyTorch: beta 1, threshold 20).
///
/// # Shapes
/// Any input shape; the output has the same shape.
///
/// ```
/// use forge::prelude::*;
/// let y = Softplus::default().forward(Tensor::<f64>::from_vec(vec![0.0, 30.0], &[2]));
/// assert!((y.to_vec()[0] - 2f64.ln()).abs() < 1e-12);
/// assert_eq!(y.to_vec()[1], 30.0);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct Softplus {
    /// The sharpness.
    #[skip]
    pub beta: f64,
    /// Above `beta x > threshold` the layer is the identity.
    #[skip]
    pub threshold: f64,
}

impl Default for Softplus {
    fn default() -> Self {
        Softplus {
            beta: 1.0,
            threshold: 20.0,
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for Softplus {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.softplus(self.beta, self.threshold))
    }
}

/// `exp(x) / sum(exp(x))` along `axis` (negative counts from the end).
///
/// # Shapes
/// Any input shape with the axis in range; the output has the same shape.
///
/// # Panics
/// When the axis is out of range for the input.
///
/// ```
/// use forge::prelude::*;
/// let y = Softmax { axis: -1 }.forward(Tensor::<f64>::from_vec(vec![0.0, 0.0], &[1, 2]));
/// assert_eq!(y.to_vec(), vec![0.5, 0.5]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct Softmax {
    /// The axis that sums to one.
    #[skip]
    pub axis: isize,
}

impl<E: Float> Forward<Tensor<E>> for Softmax {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.softmax(self.axis))
    }
}

/// `log(softmax(x))` along `axis`, computed stably.
///
/// # Shapes
/// Any input shape with the axis in range; the output has the same shape.
///
/// # Panics
/// When the axis is out of range for the input.
///
/// ```
/// use forge::prelude::*;
/// let y = LogSoftmax { axis: 0 }.forward(Tensor::<f64>::from_vec(vec![0.0, 0.0], &[2]));
/// assert!((y.to_vec()[0] + 2f64.ln()).abs() < 1e-15);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq)]
pub struct LogSoftmax {
    /// The axis of the distribution.
    #[skip]
    pub axis: isize,
}

impl<E: Float> Forward<Tensor<E>> for LogSoftmax {
    type Output = Tensor<E>;
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        record_output(self, x.log_softmax(self.axis))
    }
}

//! Instance normalisation (PyTorch's `nn.InstanceNorm1d` / `nn.InstanceNorm2d`
//! and `F.instance_norm` with input statistics): each channel of each
//! sample is normalised over its spatial positions. That is group
//! normalisation with one group per channel, so it runs the fused
//! `group_norm` kernel.

use super::forward::Forward;
use super::summary::record_output;
use crate::ops::norm::group_norm;
use crate::tensor::{Device, Float, Tensor};
use forge_macros::Layer;

/// `F.instance_norm(input, weight=weight, bias=bias, eps=eps)` with the
/// statistics of the input (no running statistics): every `(n, c)` slice
/// of `[N, C, *spatial]` is normalised over `*spatial` (biased variance,
/// `eps` inside the square root), then `* weight[c] + bias[c]`.
///
/// # Panics
/// When the rank is below 3, or a weight or bias does not have shape
/// `[C]`.
///
/// ```
/// use forge::nn::functional::instance_norm;
/// use forge::Tensor;
/// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0, 10.0, 20.0], &[1, 2, 2]);
/// assert_eq!(instance_norm(&x, None, None, 0.0).to_vec(), vec![-1.0, 1.0, -1.0, 1.0]);
/// ```
#[track_caller]
pub fn instance_norm<E: Float, D: Device>(
    input: &Tensor<E, D>,
    weight: Option<&Tensor<E, D>>,
    bias: Option<&Tensor<E, D>>,
    eps: f64,
) -> Tensor<E, D> {
    shape_assert!(
        input.rank() >= 3,
        "instance_norm: expected an input [N, C, *spatial], got shape {:?}",
        input.shape()
    );
    group_norm(input, input.shape()[1], weight, bias, eps)
}

macro_rules! instance_norm_layer {
    ($(#[$doc:meta])* $name:ident, $rank:literal, $torch:literal, $shape:expr) => {
        $(#[$doc])*
        ///
        /// # Panics
        /// When the input does not have the layer's rank or channel count.
        ///
        /// ```
        /// use forge::prelude::*;
        #[doc = concat!("let layer = forge::nn::", stringify!($name), "::<f64>::new(3).affine();")]
        #[doc = concat!("let y = layer.forward(Tensor::ones(&", stringify!($shape), "));")]
        #[doc = concat!("assert_eq!(y.shape(), &", stringify!($shape), ");")]
        /// assert_eq!(layer.parameters().len(), 2);
        /// ```
        #[derive(Layer, Clone, Debug)]
        pub struct $name<E: Float = f32> {
            /// Per-channel scale `[C]` (initialised to 1), if affine.
            pub weight: Option<Tensor<E>>,
            /// Per-channel shift `[C]` (initialised to 0), if affine.
            pub bias: Option<Tensor<E>>,
            /// The number of channels `C`.
            #[skip]
            pub num_features: usize,
            /// Added to the variance (1e-5).
            #[skip]
            pub eps: f64,
        }

        impl<E: Float> $name<E> {
            #[doc = concat!("PyTorch's defaults for `", $torch, "(num_features)`: no affine parameters, eps 1e-5, no running statistics.")]
            ///
            /// ```
            #[doc = concat!("let n = forge::nn::", stringify!($name), "::<f32>::new(4);")]
            /// assert!(n.weight.is_none() && n.eps == 1e-5);
            /// ```
            pub fn new(num_features: usize) -> Self {
                $name {
                    weight: None,
                    bias: None,
                    num_features,
                    eps: 1e-5,
                }
            }

            /// The same layer with a trainable weight (ones) and bias
            /// (zeros) (`affine=True`).
            ///
            /// ```
            #[doc = concat!("let n = forge::nn::", stringify!($name), "::<f32>::new(4).affine();")]
            /// assert_eq!(n.weight.as_ref().unwrap().shape(), &[4]);
            /// ```
            pub fn affine(mut self) -> Self {
                self.weight = Some(Tensor::ones(&[self.num_features]).requires_grad());
                self.bias = Some(Tensor::zeros(&[self.num_features]).requires_grad());
                self
            }
        }

        impl<E: Float> Forward<Tensor<E>> for $name<E> {
            type Output = Tensor<E>;
            fn forward(&self, x: Tensor<E>) -> Tensor<E> {
                shape_assert!(
                    x.rank() == $rank && x.shape()[1] == self.num_features,
                    "{}({}): expected an input of rank {} with {} channels, got shape {:?}",
                    stringify!($name),
                    self.num_features,
                    $rank,
                    self.num_features,
                    x.shape()
                );
                record_output(
                    self,
                    instance_norm(&x, self.weight.as_ref(), self.bias.as_ref(), self.eps),
                )
            }
        }
    };
}

instance_norm_layer!(
    /// Instance normalisation of `[N, C, L]` inputs (PyTorch's
    /// `nn.InstanceNorm1d` with `track_running_stats=False`, its default).
    InstanceNorm1d, 3, "nn.InstanceNorm1d", [2, 3, 5]
);
instance_norm_layer!(
    /// Instance normalisation of `[N, C, H, W]` inputs (PyTorch's
    /// `nn.InstanceNorm2d` with `track_running_stats=False`, its default).
    InstanceNorm2d, 4, "nn.InstanceNorm2d", [2, 3, 4, 5]
);

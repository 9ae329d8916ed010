//! Normalisation layers: [`BatchNorm1d`], [`BatchNorm2d`], [`LayerNorm`],
//! [`GroupNorm`], with PyTorch's parameter names, defaults and semantics.

use super::buffer::Buffer;
use super::forward::Forward;
use super::summary::{record_output, summary_running};
use crate::autograd::is_grad_enabled;
use crate::ops::norm::{add_layer_norm_in_place, batch_norm, group_norm, layer_norm};
use crate::tensor::{Element, Float, Tensor};
use forge_macros::Layer;

macro_rules! batch_norm_layer {
    ($(#[$doc:meta])* $name:ident, $ranks:expr, $layout:literal) => {
        $(#[$doc])*
        #[derive(Layer, Clone, Debug)]
        pub struct $name<E: Float = f32> {
            /// Per-channel scale `[C]` (initialised to 1), if affine.
            pub weight: Option<Tensor<E>>,
            /// Per-channel shift `[C]` (initialised to 0), if affine.
            pub bias: Option<Tensor<E>>,
            /// Running mean `[C]` (initialised to 0), updated in training.
            pub running_mean: Buffer<E>,
            /// Running unbiased variance `[C]` (initialised to 1).
            pub running_var: Buffer<E>,
            /// The number of training batches seen, a 0-d tensor. PyTorch
            /// stores it as int64; forge keeps every tensor of a layer in
            /// its float type, which holds counts exactly up to 2^24 (f32).
            pub num_batches_tracked: Buffer<E>,
            /// Training mode (batch statistics) or evaluation mode (running
            /// statistics); set by `train()`/`eval()`.
            #[training]
            pub training: bool,
            /// The weight of a new batch in the running statistics (0.1);
            /// `None` is a cumulative average (`1 / num_batches_tracked`).
            #[skip]
            pub momentum: Option<f64>,
            /// Added to the variance (1e-5).
            #[skip]
            pub eps: f64,
        }

        impl<E: Float> $name<E> {
            /// A layer for `num_features` channels with PyTorch's defaults:
            /// affine (weight 1, bias 0, trainable), running statistics
            /// (mean 0, variance 1), momentum 0.1, eps 1e-5, training mode.
            ///
            /// ```
            /// use forge::prelude::*;
            #[doc = concat!("let bn = forge::nn::", stringify!($name), "::<f32>::new(3);")]
            /// let names: Vec<String> = bn.state_dict().into_keys().collect();
            /// assert_eq!(names, ["bias", "num_batches_tracked", "running_mean", "running_var", "weight"]);
            /// assert_eq!(bn.parameters().len(), 2);
            /// ```
            pub fn new(num_features: usize) -> Self {
                $name {
                    weight: Some(Tensor::ones(&[num_features]).requires_grad()),
                    bias: Some(Tensor::zeros(&[num_features]).requires_grad()),
                    running_mean: Buffer::new(Tensor::zeros(&[num_features])),
                    running_var: Buffer::new(Tensor::ones(&[num_features])),
                    num_batches_tracked: Buffer::new(Tensor::scalar(E::zero())),
                    training: true,
                    momentum: Some(0.1),
                    eps: 1e-5,
                }
            }

            /// The number of channels.
            ///
            /// ```
            #[doc = concat!("assert_eq!(forge::nn::", stringify!($name), "::<f32>::new(3).num_features(), 3);")]
            /// ```
            pub fn num_features(&self) -> usize {
                self.running_mean.get().numel()
            }
        }

        impl<E: Float> Forward<Tensor<E>> for $name<E> {
            type Output = Tensor<E>;

            /// Normalises per channel (dimension 1): with the batch
            /// statistics in training (and updates the running
            /// statistics and `num_batches_tracked`), with the running
            /// statistics in evaluation.
            ///
            /// # Panics
            /// When the rank or the number of channels is wrong; the
            /// message names the layer and both shapes.
            fn forward(&self, x: Tensor<E>) -> Tensor<E> {
                let c = self.num_features();
                shape_assert!(
                    $ranks.contains(&x.rank()) && x.shape()[1] == c,
                    "{}({c}): expected input of shape {}, got {:?}",
                    stringify!($name),
                    format!($layout, c),
                    x.shape()
                );
                let rm = self.running_mean.get();
                let rv = self.running_var.get();
                if !self.training {
                    let (y, _, _) = batch_norm(
                        &x, Some(&rm), Some(&rv), self.weight.as_ref(), self.bias.as_ref(),
                        false, 0.0, self.eps,
                    );
                    return record_output(self, y);
                }
                let n = self.num_batches_tracked.get().add_scalar(E::one());
                let momentum = self.momentum.unwrap_or(1.0 / Element::to_f64(n.item()));
                let (y, m, v) = batch_norm(
                    &x, Some(&rm), Some(&rv), self.weight.as_ref(), self.bias.as_ref(),
                    true, momentum, self.eps,
                );
                if let (Some(m), Some(v)) = (m, v) {
                    self.running_mean.set(m);
                    self.running_var.set(v);
                }
                self.num_batches_tracked.set(n);
                record_output(self, y)
            }
        }
    };
}

batch_norm_layer!(
    /// Batch normalisation of `(N, C)` or `(N, C, L)` inputs over the batch
    /// (and length) per channel, PyTorch's `nn.BatchNorm1d`: see
    /// [`batch_norm`](crate::nn::functional::batch_norm) for the statistics.
    ///
    /// # Shapes
    /// - `weight`, `bias`, `running_mean`, `running_var`: `[C]`;
    ///   `num_batches_tracked`: `[]`
    /// - input `[N, C]` or `[N, C, L]`; output the same shape
    ///
    /// ```
    /// use forge::prelude::*;
    /// let mut bn = forge::nn::BatchNorm1d::<f64>::new(2);
    /// let x = Tensor::from_vec(vec![1.0, 10.0, 3.0, 30.0], &[2, 2]);
    /// let y = bn.forward(x.clone());
    /// assert_eq!(y.shape(), &[2, 2]);
    /// assert_eq!(bn.num_batches_tracked.get().item(), 1.0);
    /// bn.eval();
    /// let before = bn.running_mean.get().to_vec();
    /// bn.forward(x);
    /// assert_eq!(bn.running_mean.get().to_vec(), before);
    /// ```
    BatchNorm1d, [2, 3], "[N, {}] or [N, {0}, L]"
);

batch_norm_layer!(
    /// Batch normalisation of `(N, C, H, W)` inputs over `(N, H, W)` per
    /// channel, PyTorch's `nn.BatchNorm2d`: see
    /// [`batch_norm`](crate::nn::functional::batch_norm) for the statistics.
    ///
    /// # Shapes
    /// - `weight`, `bias`, `running_mean`, `running_var`: `[C]`;
    ///   `num_batches_tracked`: `[]`
    /// - input `[N, C, H, W]`; output the same shape
    ///
    /// ```
    /// use forge::prelude::*;
    /// let bn = forge::nn::BatchNorm2d::<f32>::new(3);
    /// let y = bn.forward(Tensor::ones(&[2, 3, 4, 4]));
    /// assert_eq!(y.shape(), &[2, 3, 4, 4]);
    /// ```
    BatchNorm2d, [4], "[N, {}, H, W]"
);

/// Layer normalisation over the trailing `normalized_shape` dimensions
/// (PyTorch's `nn.LayerNorm`), with an elementwise affine transform.
///
/// # Shapes
/// - `weight`, `bias`: `normalized_shape`
/// - input `[.., *normalized_shape]`; output the same shape
///
/// ```
/// use forge::prelude::*;
/// let ln = forge::nn::LayerNorm::<f64>::new(&[4]);
/// let y = ln.forward(Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[1, 4]));
/// assert!(y.sum().item().abs() < 1e-12);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct LayerNorm<E: Float = f32> {
    /// Scale (initialised to 1), if affine.
    pub weight: Option<Tensor<E>>,
    /// Shift (initialised to 0), if affine.
    pub bias: Option<Tensor<E>>,
    /// The trailing shape normalised over.
    #[skip]
    pub normalized_shape: Vec<usize>,
    /// Added to the variance (1e-5).
    #[skip]
    pub eps: f64,
}

impl<E: Float> LayerNorm<E> {
    /// A layer over `normalized_shape` with PyTorch's defaults: trainable
    /// weight 1 and bias 0, eps 1e-5.
    ///
    /// ```
    /// let ln = forge::nn::LayerNorm::<f32>::new(&[3, 4]);
    /// assert_eq!(ln.weight.as_ref().unwrap().shape(), &[3, 4]);
    /// ```
    pub fn new(normalized_shape: &[usize]) -> Self {
        LayerNorm {
            weight: Some(Tensor::ones(normalized_shape).requires_grad()),
            bias: Some(Tensor::zeros(normalized_shape).requires_grad()),
            normalized_shape: normalized_shape.to_vec(),
            eps: 1e-5,
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for LayerNorm<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When the input shape does not end with `normalized_shape`; the
    /// message names the layer and both shapes.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let ns = &self.normalized_shape;
        let r = x.rank();
        shape_assert!(
            r >= ns.len() && &x.shape()[r - ns.len()..] == ns.as_slice(),
            "LayerNorm({ns:?}): expected input of shape [.., {}], got {:?}",
            ns.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            x.shape()
        );
        record_output(
            self,
            layer_norm(&x, ns, self.weight.as_ref(), self.bias.as_ref(), self.eps),
        )
    }
}

impl<E: Float> LayerNorm<E> {
    /// `self.forward(residual.add(&y))`, a post-norm block's residual add
    /// and norm. Outside autograd (nothing recorded: gradients off, or no
    /// operand tracked), with no [`summary`](crate::nn::summary) running,
    /// an affine norm over the last dimension and `y` an unshared tensor
    /// of `residual`'s shape, the add and the norm run as one pass per row
    /// block in `y`'s buffer: each row's arithmetic is the composed ops'
    /// (the sum, then `layer_norm`'s statistics and affine step), so the
    /// values are the same bit for bit. The tools see one `layer_norm`.
    ///
    /// # Panics
    /// As [`Forward::forward`] and [`Tensor::add`], when the shapes do
    /// not fit.
    pub(crate) fn forward_residual(&self, y: Tensor<E>, residual: &Tensor<E>) -> Tensor<E> {
        let (Some(w), Some(b)) = (&self.weight, &self.bias) else {
            return self.forward(residual.add(&y));
        };
        let m = y.shape().last().copied().unwrap_or(0);
        let recording = is_grad_enabled() && [&y, residual, w, b].iter().any(|t| t.is_tracked());
        let fits = m > 0
            && y.shape() == residual.shape()
            && self.normalized_shape == [m]
            && residual.is_contiguous();
        let mut y = y;
        let values = if recording || summary_running() || !fits {
            None
        } else {
            y.values_mut()
        };
        let Some(v) = values else {
            return self.forward(residual.add(&y));
        };
        add_layer_norm_in_place(
            v,
            residual.as_slice(),
            m,
            w.as_slice(),
            b.as_slice(),
            self.eps,
            |_, _| {},
        );
        // nothing recorded: the tools see the norm (the residual add in it)
        record_output(self, y.seen("layer_norm", [residual, w, b]))
    }
}

/// Group normalisation (PyTorch's `nn.GroupNorm`): the channels are split
/// into `num_groups` groups, each normalised over its channels and the
/// trailing dimensions, then a per-channel affine transform.
///
/// # Shapes
/// - `weight`, `bias`: `[C]`
/// - input `[N, C, ..]`; output the same shape
///
/// ```
/// use forge::prelude::*;
/// let gn = forge::nn::GroupNorm::<f32>::new(2, 4);
/// assert_eq!(gn.forward(Tensor::ones(&[3, 4, 5])).shape(), &[3, 4, 5]);
/// ```
#[derive(Layer, Clone, Debug)]
pub struct GroupNorm<E: Float = f32> {
    /// Per-channel scale `[C]` (initialised to 1), if affine.
    pub weight: Option<Tensor<E>>,
    /// Per-channel shift `[C]` (initialised to 0), if affine.
    pub bias: Option<Tensor<E>>,
    /// The number of groups; divides the number of channels.
    #[skip]
    pub num_groups: usize,
    /// The number of channels `C`.
    #[skip]
    pub num_channels: usize,
    /// Added to the variance (1e-5).
    #[skip]
    pub eps: f64,
}

impl<E: Float> GroupNorm<E> {
    /// `num_groups` groups over `num_channels` channels, affine (weight 1,
    /// bias 0), eps 1e-5.
    ///
    /// # Panics
    /// When `num_groups` does not divide `num_channels`.
    ///
    /// ```
    /// let gn = forge::nn::GroupNorm::<f32>::new(3, 6);
    /// assert_eq!(gn.num_groups, 3);
    /// ```
    pub fn new(num_groups: usize, num_channels: usize) -> Self {
        shape_assert!(
            num_groups > 0 && num_channels.is_multiple_of(num_groups),
            "GroupNorm: {num_groups} groups do not divide {num_channels} channels"
        );
        GroupNorm {
            weight: Some(Tensor::ones(&[num_channels]).requires_grad()),
            bias: Some(Tensor::zeros(&[num_channels]).requires_grad()),
            num_groups,
            num_channels,
            eps: 1e-5,
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for GroupNorm<E> {
    type Output = Tensor<E>;

    /// # Panics
    /// When the rank is below 2 or the number of channels is wrong; the
    /// message names the layer and both shapes.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let c = self.num_channels;
        shape_assert!(
            x.rank() >= 2 && x.shape()[1] == c,
            "GroupNorm({}, {c}): expected input of shape [N, {c}, ..], got {:?}",
            self.num_groups,
            x.shape()
        );
        let y = group_norm(
            &x,
            self.num_groups,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        );
        record_output(self, y)
    }
}

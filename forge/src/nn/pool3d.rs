//! 3-d pooling layers (`torch.nn.MaxPool3d`, `AvgPool3d`,
//! `AdaptiveAvgPool3d`, `AdaptiveMaxPool3d`) and the `return_indices` forms
//! of the max poolings ([`MaxPool3d::forward_with_indices`],
//! [`AdaptiveMaxPool2d::forward_with_indices`](super::AdaptiveMaxPool2d::forward_with_indices)).
//! They hold no tensors, accept batched `[N, C, D, H, W]` and unbatched
//! `[C, D, H, W]` inputs, and default the stride to the kernel size.
//!
//! ```
//! use forge::prelude::*;
//! use forge::nn::{AvgPool3d, MaxPool3d};
//! let x = Tensor::<f32>::zeros(&[2, 3, 4, 8, 8]);
//! assert_eq!(MaxPool3d::new(2).forward(x.clone()).shape(), &[2, 3, 2, 4, 4]);
//! assert_eq!(AvgPool3d::new([1, 2, 2]).forward(x).shape(), &[2, 3, 4, 4, 4]);
//! ```

use super::builder::size_setters;
use super::conv3d::IntoTriple;
use super::forward::Forward;
use super::pool::{AdaptiveMaxPool1d, AdaptiveMaxPool2d};
use super::summary::record_output;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

/// Checks the rank (5 batched or 4 unbatched) and applies `f` to the
/// batched form.
fn pooled3<E: Float, T>(
    layer: &str,
    x: Tensor<E>,
    f: impl FnOnce(&Tensor<E>) -> T,
    unbatch: impl FnOnce(T) -> T,
) -> T {
    shape_assert!(
        x.rank() == 5 || x.rank() == 4,
        "{layer}: expected input [N, C, D, H, W] or [C, D, H, W], got {:?}",
        x.shape()
    );
    if x.rank() == 4 {
        unbatch(f(&x.unsqueeze(0)))
    } else {
        f(&x)
    }
}

/// 3-d max pooling (`torch.nn.MaxPool3d`: padding counts as -inf; floor
/// mode unless [`ceil_mode`](Self::ceil_mode); optional dilation).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::MaxPool3d::new(3).stride(2).padding(1);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[1, 1, 5, 7, 6])).shape(), &[1, 1, 3, 4, 3]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool3d {
    /// Window size (depth, rows, columns).
    #[skip]
    pub kernel: [usize; 3],
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: [usize; 3],
    /// Padding on each side (at most half the kernel).
    #[skip]
    pub padding: [usize; 3],
    /// The step between window positions (default 1).
    #[skip]
    pub dilation: [usize; 3],
    /// Round the output size up instead of down (default `false`).
    #[skip]
    pub ceil_mode: bool,
}

impl MaxPool3d {
    /// Max pooling over `kernel` windows, stride = kernel, no padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool3d::new([1, 2, 3]).stride, [1, 2, 3]);
    /// ```
    pub fn new(kernel: impl IntoTriple) -> Self {
        let kernel = kernel.into_triple();
        MaxPool3d {
            kernel,
            stride: kernel,
            padding: [0; 3],
            dilation: [1; 3],
            ceil_mode: false,
        }
    }

    size_setters! {
        impl IntoTriple, IntoTriple::into_triple,
        "forge::nn::MaxPool3d::new(3)", "[2, 2, 2]";
        dilation: "the dilation (the step between window positions)";
        stride: "the stride";
        padding: "the padding";
    }

    /// Sets ceil mode: the output size rounds up, keeping a last partial
    /// window that starts inside the input or its left padding.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::MaxPool3d::new(2).ceil_mode(true);
    /// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[1, 1, 3, 5, 5])).shape(), &[1, 1, 2, 3, 3]);
    /// ```
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// The pooling with `return_indices=True`: the output and each
    /// maximum's flat position inside its `D x H x W` volume.
    ///
    /// # Panics
    /// As [`forward`](Forward::forward).
    ///
    /// ```
    /// use forge::prelude::*;
    /// let x = Tensor::<f32>::from_vec(vec![0.0, 2.0, 1.0, 0.5], &[1, 1, 2, 2]);
    /// let (y, i) = forge::nn::MaxPool3d::new([1, 2, 2]).forward_with_indices(x);
    /// assert_eq!((y.to_vec(), i.to_vec()), (vec![2.0], vec![1]));
    /// ```
    pub fn forward_with_indices<E: Float>(&self, x: Tensor<E>) -> (Tensor<E>, Tensor<i64>) {
        let name = format!("MaxPool3d(kernel {:?})", self.kernel);
        pooled3(
            &name,
            x,
            |x| {
                x.max_pool3d_with_indices(
                    self.kernel,
                    self.stride,
                    self.padding,
                    self.dilation,
                    self.ceil_mode,
                )
            },
            |(y, i)| (y.squeeze(0), i.squeeze(0)),
        )
    }
}

impl<E: Float> Forward<Tensor<E>> for MaxPool3d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, D, H, W]` or `[C, D, H, W]` (the message
    /// names the layer, the expected and the received shapes), or is smaller
    /// than the kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("MaxPool3d(kernel {:?})", self.kernel);
        let y = pooled3(
            &name,
            x,
            |x| {
                x.max_pool3d_with(
                    self.kernel,
                    self.stride,
                    self.padding,
                    self.dilation,
                    self.ceil_mode,
                )
            },
            |y| y.squeeze(0),
        );
        record_output(self, y)
    }
}

/// 3-d average pooling (`torch.nn.AvgPool3d`: floor mode unless
/// [`ceil_mode`](Self::ceil_mode); optional `divisor_override`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AvgPool3d::new(3).stride(1).padding(1).count_include_pad(false);
/// let y = pool.forward(Tensor::<f64>::ones(&[1, 1, 2, 3, 3]));
/// assert_eq!(y.to_vec(), vec![1.0; 18]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool3d {
    /// Window size (depth, rows, columns).
    #[skip]
    pub kernel: [usize; 3],
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: [usize; 3],
    /// Zero padding on each side (at most half the kernel).
    #[skip]
    pub padding: [usize; 3],
    /// Whether padding counts in the divisor (default `true`).
    #[skip]
    pub count_include_pad: bool,
    /// Round the output size up instead of down (default `false`).
    #[skip]
    pub ceil_mode: bool,
    /// Divide every window sum by this instead (default `None`).
    #[skip]
    pub divisor_override: Option<usize>,
}

impl AvgPool3d {
    /// Average pooling over `kernel` windows, stride = kernel, no padding,
    /// padding counted in the divisor.
    ///
    /// ```
    /// assert!(forge::nn::AvgPool3d::new(2).count_include_pad);
    /// ```
    pub fn new(kernel: impl IntoTriple) -> Self {
        let kernel = kernel.into_triple();
        AvgPool3d {
            kernel,
            stride: kernel,
            padding: [0; 3],
            count_include_pad: true,
            ceil_mode: false,
            divisor_override: None,
        }
    }

    /// Sets ceil mode.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AvgPool3d::new(2).ceil_mode(true);
    /// assert_eq!(pool.forward(Tensor::<f32>::ones(&[1, 1, 3, 3, 3])).to_vec(), vec![1.0; 8]);
    /// ```
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// Divides every window sum by `divisor` instead of the window size.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AvgPool3d::new(2).divisor_override(Some(16));
    /// assert_eq!(pool.forward(Tensor::<f32>::ones(&[1, 1, 2, 2, 2])).to_vec(), vec![0.5]);
    /// ```
    pub fn divisor_override(mut self, divisor: Option<usize>) -> Self {
        self.divisor_override = divisor;
        self
    }

    size_setters! {
        impl IntoTriple, IntoTriple::into_triple,
        "forge::nn::AvgPool3d::new(3)", "[2, 2, 2]";
        stride: "the stride";
        padding: "the padding";
    }

    /// Sets whether padding counts in the divisor.
    ///
    /// ```
    /// assert!(!forge::nn::AvgPool3d::new(3).count_include_pad(false).count_include_pad);
    /// ```
    pub fn count_include_pad(mut self, include: bool) -> Self {
        self.count_include_pad = include;
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for AvgPool3d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, D, H, W]` or `[C, D, H, W]` (the message
    /// names the layer, the expected and the received shapes), or is smaller
    /// than the kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AvgPool3d(kernel {:?})", self.kernel);
        let y = pooled3(
            &name,
            x,
            |x| {
                x.avg_pool3d_with(
                    self.kernel,
                    self.stride,
                    self.padding,
                    self.ceil_mode,
                    self.count_include_pad,
                    self.divisor_override,
                )
            },
            |y| y.squeeze(0),
        );
        record_output(self, y)
    }
}

/// Adaptive 3-d average pooling to a fixed output size
/// (`torch.nn.AdaptiveAvgPool3d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AdaptiveAvgPool3d::new([1, 3, 2]);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[2, 3, 4, 7, 5])).shape(), &[2, 3, 1, 3, 2]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveAvgPool3d {
    /// Output size (depth, rows, columns).
    #[skip]
    pub output_size: [usize; 3],
}

impl AdaptiveAvgPool3d {
    /// Pools any input to `output_size`.
    ///
    /// ```
    /// assert_eq!(forge::nn::AdaptiveAvgPool3d::new(1).output_size, [1, 1, 1]);
    /// ```
    pub fn new(output_size: impl IntoTriple) -> Self {
        AdaptiveAvgPool3d {
            output_size: output_size.into_triple(),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for AdaptiveAvgPool3d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, D, H, W]` or `[C, D, H, W]`.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AdaptiveAvgPool3d({:?})", self.output_size);
        let y = pooled3(
            &name,
            x,
            |x| x.adaptive_avg_pool3d(self.output_size),
            |y| y.squeeze(0),
        );
        record_output(self, y)
    }
}

/// Adaptive 3-d max pooling to a fixed output size
/// (`torch.nn.AdaptiveMaxPool3d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AdaptiveMaxPool3d::new(2);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[3, 4, 7, 5])).shape(), &[3, 2, 2, 2]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveMaxPool3d {
    /// Output size (depth, rows, columns).
    #[skip]
    pub output_size: [usize; 3],
}

impl AdaptiveMaxPool3d {
    /// Pools any input to `output_size`.
    ///
    /// ```
    /// assert_eq!(forge::nn::AdaptiveMaxPool3d::new([1, 2, 3]).output_size, [1, 2, 3]);
    /// ```
    pub fn new(output_size: impl IntoTriple) -> Self {
        AdaptiveMaxPool3d {
            output_size: output_size.into_triple(),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for AdaptiveMaxPool3d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, D, H, W]` or `[C, D, H, W]`.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AdaptiveMaxPool3d({:?})", self.output_size);
        let y = pooled3(
            &name,
            x,
            |x| x.adaptive_max_pool3d(self.output_size),
            |y| y.squeeze(0),
        );
        record_output(self, y)
    }
}

impl AdaptiveMaxPool2d {
    /// The pooling with `return_indices=True`: the output and each
    /// maximum's flat position inside its `H x W` plane.
    ///
    /// # Panics
    /// When `x` is not `[N, C, H, W]` or `[C, H, W]`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 5.0, 2.0, 3.0], &[1, 2, 2]);
    /// let (y, i) = forge::nn::AdaptiveMaxPool2d::new(1).forward_with_indices(x);
    /// assert_eq!((y.to_vec(), i.to_vec()), (vec![5.0], vec![1]));
    /// ```
    pub fn forward_with_indices<E: Float>(&self, x: Tensor<E>) -> (Tensor<E>, Tensor<i64>) {
        shape_assert!(
            x.rank() == 4 || x.rank() == 3,
            "AdaptiveMaxPool2d({:?}): expected input [N, C, H, W] or [C, H, W], got {:?}",
            self.output_size,
            x.shape()
        );
        if x.rank() == 3 {
            let (y, i) = x
                .unsqueeze(0)
                .adaptive_max_pool2d_with_indices(self.output_size);
            (y.squeeze(0), i.squeeze(0))
        } else {
            x.adaptive_max_pool2d_with_indices(self.output_size)
        }
    }
}

impl AdaptiveMaxPool1d {
    /// The pooling with `return_indices=True`: the output and each
    /// maximum's position along `L`.
    ///
    /// # Panics
    /// When `x` is not `[N, C, L]` or `[C, L]`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 5.0, 2.0, 3.0], &[1, 4]);
    /// let (y, i) = forge::nn::AdaptiveMaxPool1d::new(2).forward_with_indices(x);
    /// assert_eq!((y.to_vec(), i.to_vec()), (vec![5.0, 3.0], vec![1, 3]));
    /// ```
    pub fn forward_with_indices<E: Float>(&self, x: Tensor<E>) -> (Tensor<E>, Tensor<i64>) {
        shape_assert!(
            x.rank() == 3 || x.rank() == 2,
            "AdaptiveMaxPool1d({}): expected input [N, C, L] or [C, L], got {:?}",
            self.output_size,
            x.shape()
        );
        if x.rank() == 2 {
            let (y, i) = x
                .unsqueeze(0)
                .adaptive_max_pool1d_with_indices(self.output_size);
            (y.squeeze(0), i.squeeze(0))
        } else {
            x.adaptive_max_pool1d_with_indices(self.output_size)
        }
    }
}

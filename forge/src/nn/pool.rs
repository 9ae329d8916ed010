//! Pooling layers (`torch.nn.MaxPool2d`, `AvgPool2d`, `AdaptiveAvgPool2d`,
//! `AdaptiveMaxPool2d` and their 1-d forms). They hold no tensors, work for
//! every float element type, accept batched (`[N, C, ..]`) and unbatched
//! (`[C, ..]`) inputs, and default the stride to the kernel size as PyTorch.
//!
//! ```
//! use forge::prelude::*;
//! use forge::nn::{AdaptiveAvgPool2d, MaxPool2d};
//! let x = Tensor::<f32>::zeros(&[2, 3, 8, 8]);
//! assert_eq!(MaxPool2d::new(2).forward(x.clone()).shape(), &[2, 3, 4, 4]);
//! assert_eq!(AdaptiveAvgPool2d::new(1).forward(x).shape(), &[2, 3, 1, 1]);
//! ```

use super::conv::IntoPair;
use super::forward::Forward;
use crate::tensor::{Float, Tensor};
use forge_macros::Layer;

/// Checks the rank (`rank` batched or `rank - 1` unbatched) and applies `f`
/// to the batched form.
fn pooled<E: Float>(
    layer: &str,
    x: Tensor<E>,
    rank: usize,
    f: impl FnOnce(&Tensor<E>) -> Tensor<E>,
) -> Tensor<E> {
    let (batched, unbatched) = if rank == 4 {
        ("[N, C, H, W]", "[C, H, W]")
    } else {
        ("[N, C, L]", "[C, L]")
    };
    assert!(
        x.rank() == rank || x.rank() + 1 == rank,
        "{layer}: expected input {batched} or {unbatched}, got {:?}",
        x.shape()
    );
    if x.rank() + 1 == rank {
        f(&x.unsqueeze(0)).squeeze(0)
    } else {
        f(&x)
    }
}

/// 2-d max pooling (`torch.nn.MaxPool2d`: padding counts as -inf; floor
/// mode unless [`ceil_mode`](Self::ceil_mode); optional dilation).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::MaxPool2d::new(3).stride(2).padding(1);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[1, 1, 7, 6])).shape(), &[1, 1, 4, 3]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool2d {
    /// Window size (rows, columns).
    #[skip]
    pub kernel: [usize; 2],
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: [usize; 2],
    /// Padding on each side (at most half the kernel).
    #[skip]
    pub padding: [usize; 2],
    /// The step between window positions (default 1).
    #[skip]
    pub dilation: [usize; 2],
    /// Round the output size up instead of down (default `false`).
    #[skip]
    pub ceil_mode: bool,
}

impl MaxPool2d {
    /// Max pooling over `kernel` windows, stride = kernel, no padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool2d::new([2, 3]).stride, [2, 3]);
    /// ```
    pub fn new(kernel: impl IntoPair) -> Self {
        let kernel = kernel.into_pair();
        MaxPool2d {
            kernel,
            stride: kernel,
            padding: [0, 0],
            dilation: [1, 1],
            ceil_mode: false,
        }
    }

    /// Sets the dilation (the step between window positions).
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool2d::new(3).dilation(2).dilation, [2, 2]);
    /// ```
    pub fn dilation(mut self, dilation: impl IntoPair) -> Self {
        self.dilation = dilation.into_pair();
        self
    }

    /// Sets ceil mode: the output size rounds up, keeping a last partial
    /// window that starts inside the input or its left padding.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::MaxPool2d::new(2).ceil_mode(true);
    /// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[1, 1, 5, 5])).shape(), &[1, 1, 3, 3]);
    /// ```
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// Sets the stride.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool2d::new(3).stride(1).stride, [1, 1]);
    /// ```
    pub fn stride(mut self, stride: impl IntoPair) -> Self {
        self.stride = stride.into_pair();
        self
    }

    /// Sets the padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool2d::new(3).padding(1).padding, [1, 1]);
    /// ```
    pub fn padding(mut self, padding: impl IntoPair) -> Self {
        self.padding = padding.into_pair();
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for MaxPool2d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, H, W]` or `[C, H, W]` (the message names the
    /// layer, the expected and the received shapes), or is smaller than the
    /// kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("MaxPool2d(kernel {:?})", self.kernel);
        pooled(&name, x, 4, |x| {
            x.max_pool2d_with(
                self.kernel,
                self.stride,
                self.padding,
                self.dilation,
                self.ceil_mode,
            )
        })
    }
}

/// 2-d average pooling (`torch.nn.AvgPool2d`: floor mode unless
/// [`ceil_mode`](Self::ceil_mode); optional `divisor_override`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AvgPool2d::new(3).stride(1).padding(1).count_include_pad(false);
/// let y = pool.forward(Tensor::<f64>::ones(&[1, 1, 4, 4]));
/// assert_eq!(y.to_vec(), vec![1.0; 16]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool2d {
    /// Window size (rows, columns).
    #[skip]
    pub kernel: [usize; 2],
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: [usize; 2],
    /// Zero padding on each side (at most half the kernel).
    #[skip]
    pub padding: [usize; 2],
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

impl AvgPool2d {
    /// Average pooling over `kernel` windows, stride = kernel, no padding,
    /// padding counted in the divisor.
    ///
    /// ```
    /// assert!(forge::nn::AvgPool2d::new(2).count_include_pad);
    /// ```
    pub fn new(kernel: impl IntoPair) -> Self {
        let kernel = kernel.into_pair();
        AvgPool2d {
            kernel,
            stride: kernel,
            padding: [0, 0],
            count_include_pad: true,
            ceil_mode: false,
            divisor_override: None,
        }
    }

    /// Sets ceil mode: the output size rounds up, keeping a last partial
    /// window that starts inside the input or its left padding.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AvgPool2d::new(2).ceil_mode(true);
    /// assert_eq!(pool.forward(Tensor::<f32>::ones(&[1, 1, 3, 3])).to_vec(), vec![1.0; 4]);
    /// ```
    pub fn ceil_mode(mut self, ceil_mode: bool) -> Self {
        self.ceil_mode = ceil_mode;
        self
    }

    /// Divides every window sum by `divisor` instead of the window size.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let pool = forge::nn::AvgPool2d::new(2).divisor_override(Some(8));
    /// assert_eq!(pool.forward(Tensor::<f32>::ones(&[1, 1, 2, 2])).to_vec(), vec![0.5]);
    /// ```
    pub fn divisor_override(mut self, divisor: Option<usize>) -> Self {
        self.divisor_override = divisor;
        self
    }

    /// Sets the stride.
    ///
    /// ```
    /// assert_eq!(forge::nn::AvgPool2d::new(3).stride(1).stride, [1, 1]);
    /// ```
    pub fn stride(mut self, stride: impl IntoPair) -> Self {
        self.stride = stride.into_pair();
        self
    }

    /// Sets the padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::AvgPool2d::new(3).padding(1).padding, [1, 1]);
    /// ```
    pub fn padding(mut self, padding: impl IntoPair) -> Self {
        self.padding = padding.into_pair();
        self
    }

    /// Sets whether padding counts in the divisor.
    ///
    /// ```
    /// assert!(!forge::nn::AvgPool2d::new(3).count_include_pad(false).count_include_pad);
    /// ```
    pub fn count_include_pad(mut self, include: bool) -> Self {
        self.count_include_pad = include;
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for AvgPool2d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, H, W]` or `[C, H, W]` (the message names the
    /// layer, the expected and the received shapes), or is smaller than the
    /// kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AvgPool2d(kernel {:?})", self.kernel);
        pooled(&name, x, 4, |x| {
            x.avg_pool2d_with(
                self.kernel,
                self.stride,
                self.padding,
                self.ceil_mode,
                self.count_include_pad,
                self.divisor_override,
            )
        })
    }
}

/// Adaptive 2-d average pooling to a fixed output size
/// (`torch.nn.AdaptiveAvgPool2d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AdaptiveAvgPool2d::new([3, 2]);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[2, 3, 7, 5])).shape(), &[2, 3, 3, 2]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveAvgPool2d {
    /// Output size (rows, columns).
    #[skip]
    pub output_size: [usize; 2],
}

impl AdaptiveAvgPool2d {
    /// Pools any input to `output_size`.
    ///
    /// ```
    /// assert_eq!(forge::nn::AdaptiveAvgPool2d::new(1).output_size, [1, 1]);
    /// ```
    pub fn new(output_size: impl IntoPair) -> Self {
        AdaptiveAvgPool2d {
            output_size: output_size.into_pair(),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for AdaptiveAvgPool2d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, H, W]` or `[C, H, W]` (the message names the
    /// layer, the expected and the received shapes).
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AdaptiveAvgPool2d({:?})", self.output_size);
        pooled(&name, x, 4, |x| x.adaptive_avg_pool2d(self.output_size))
    }
}

/// Adaptive 2-d max pooling to a fixed output size
/// (`torch.nn.AdaptiveMaxPool2d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AdaptiveMaxPool2d::new(2);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[3, 7, 5])).shape(), &[3, 2, 2]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveMaxPool2d {
    /// Output size (rows, columns).
    #[skip]
    pub output_size: [usize; 2],
}

impl AdaptiveMaxPool2d {
    /// Pools any input to `output_size`.
    ///
    /// ```
    /// assert_eq!(forge::nn::AdaptiveMaxPool2d::new([2, 3]).output_size, [2, 3]);
    /// ```
    pub fn new(output_size: impl IntoPair) -> Self {
        AdaptiveMaxPool2d {
            output_size: output_size.into_pair(),
        }
    }
}

impl<E: Float> Forward<Tensor<E>> for AdaptiveMaxPool2d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, H, W]` or `[C, H, W]` (the message names the
    /// layer, the expected and the received shapes).
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AdaptiveMaxPool2d({:?})", self.output_size);
        pooled(&name, x, 4, |x| x.adaptive_max_pool2d(self.output_size))
    }
}

/// 1-d max pooling (`torch.nn.MaxPool1d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::MaxPool1d::new(2);
/// assert_eq!(pool.forward(Tensor::<f32>::zeros(&[2, 3, 9])).shape(), &[2, 3, 4]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxPool1d {
    /// Window size.
    #[skip]
    pub kernel: usize,
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: usize,
    /// Padding on each side (at most half the kernel).
    #[skip]
    pub padding: usize,
}

impl MaxPool1d {
    /// Max pooling over `kernel` windows, stride = kernel, no padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool1d::new(3).stride, 3);
    /// ```
    pub fn new(kernel: usize) -> Self {
        MaxPool1d {
            kernel,
            stride: kernel,
            padding: 0,
        }
    }

    /// Sets the stride.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool1d::new(3).stride(1).stride, 1);
    /// ```
    pub fn stride(mut self, stride: usize) -> Self {
        self.stride = stride;
        self
    }

    /// Sets the padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::MaxPool1d::new(3).padding(1).padding, 1);
    /// ```
    pub fn padding(mut self, padding: usize) -> Self {
        self.padding = padding;
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for MaxPool1d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, L]` or `[C, L]` (the message names the layer,
    /// the expected and the received shapes), or is shorter than the kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("MaxPool1d(kernel {})", self.kernel);
        pooled(&name, x, 3, |x| {
            x.max_pool1d(self.kernel, self.stride, self.padding)
        })
    }
}

/// 1-d average pooling (`torch.nn.AvgPool1d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AvgPool1d::new(2);
/// let y = pool.forward(Tensor::<f64>::from_vec(vec![1.0, 3.0, 5.0, 7.0], &[1, 1, 4]));
/// assert_eq!(y.to_vec(), vec![2.0, 6.0]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvgPool1d {
    /// Window size.
    #[skip]
    pub kernel: usize,
    /// Stride (defaults to the kernel size).
    #[skip]
    pub stride: usize,
    /// Zero padding on each side (at most half the kernel).
    #[skip]
    pub padding: usize,
    /// Whether padding counts in the divisor (default `true`).
    #[skip]
    pub count_include_pad: bool,
}

impl AvgPool1d {
    /// Average pooling over `kernel` windows, stride = kernel, no padding,
    /// padding counted in the divisor.
    ///
    /// ```
    /// assert_eq!(forge::nn::AvgPool1d::new(3).stride, 3);
    /// ```
    pub fn new(kernel: usize) -> Self {
        AvgPool1d {
            kernel,
            stride: kernel,
            padding: 0,
            count_include_pad: true,
        }
    }

    /// Sets the stride.
    ///
    /// ```
    /// assert_eq!(forge::nn::AvgPool1d::new(3).stride(1).stride, 1);
    /// ```
    pub fn stride(mut self, stride: usize) -> Self {
        self.stride = stride;
        self
    }

    /// Sets the padding.
    ///
    /// ```
    /// assert_eq!(forge::nn::AvgPool1d::new(3).padding(1).padding, 1);
    /// ```
    pub fn padding(mut self, padding: usize) -> Self {
        self.padding = padding;
        self
    }

    /// Sets whether padding counts in the divisor.
    ///
    /// ```
    /// assert!(!forge::nn::AvgPool1d::new(3).count_include_pad(false).count_include_pad);
    /// ```
    pub fn count_include_pad(mut self, include: bool) -> Self {
        self.count_include_pad = include;
        self
    }
}

impl<E: Float> Forward<Tensor<E>> for AvgPool1d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, L]` or `[C, L]` (the message names the layer,
    /// the expected and the received shapes), or is shorter than the kernel.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AvgPool1d(kernel {})", self.kernel);
        pooled(&name, x, 3, |x| {
            x.avg_pool1d(
                self.kernel,
                self.stride,
                self.padding,
                self.count_include_pad,
            )
        })
    }
}

/// Adaptive 1-d average pooling (`torch.nn.AdaptiveAvgPool1d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AdaptiveAvgPool1d::new(1);
/// let y = pool.forward(Tensor::<f64>::from_vec(vec![1.0, 3.0, 5.0], &[1, 3]));
/// assert_eq!(y.to_vec(), vec![3.0]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveAvgPool1d {
    /// Output length.
    #[skip]
    pub output_size: usize,
}

impl AdaptiveAvgPool1d {
    /// Pools any input to `output_size`.
    ///
    /// ```
    /// assert_eq!(forge::nn::AdaptiveAvgPool1d::new(4).output_size, 4);
    /// ```
    pub fn new(output_size: usize) -> Self {
        AdaptiveAvgPool1d { output_size }
    }
}

impl<E: Float> Forward<Tensor<E>> for AdaptiveAvgPool1d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, L]` or `[C, L]` (the message names the layer,
    /// the expected and the received shapes).
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AdaptiveAvgPool1d({})", self.output_size);
        pooled(&name, x, 3, |x| x.adaptive_avg_pool1d(self.output_size))
    }
}

/// Adaptive 1-d max pooling (`torch.nn.AdaptiveMaxPool1d`).
///
/// ```
/// use forge::prelude::*;
/// let pool = forge::nn::AdaptiveMaxPool1d::new(2);
/// let y = pool.forward(Tensor::<f64>::from_vec(vec![1.0, 3.0, 5.0, 2.0], &[1, 1, 4]));
/// assert_eq!(y.to_vec(), vec![3.0, 5.0]);
/// ```
#[derive(Layer, Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveMaxPool1d {
    /// Output length.
    #[skip]
    pub output_size: usize,
}

impl AdaptiveMaxPool1d {
    /// Pools any input to `output_size`.
    ///
    /// ```
    /// assert_eq!(forge::nn::AdaptiveMaxPool1d::new(4).output_size, 4);
    /// ```
    pub fn new(output_size: usize) -> Self {
        AdaptiveMaxPool1d { output_size }
    }
}

impl<E: Float> Forward<Tensor<E>> for AdaptiveMaxPool1d {
    type Output = Tensor<E>;

    /// # Panics
    /// When `x` is not `[N, C, L]` or `[C, L]` (the message names the layer,
    /// the expected and the received shapes).
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        let name = format!("AdaptiveMaxPool1d({})", self.output_size);
        pooled(&name, x, 3, |x| x.adaptive_max_pool1d(self.output_size))
    }
}

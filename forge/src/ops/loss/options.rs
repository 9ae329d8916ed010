//! The options of the pointwise, margin and likelihood losses: one struct
//! per loss, named after it, with PyTorch's argument names and PyTorch's
//! defaults (`Default`). Every loss has a short form under PyTorch's name
//! taking only the tensors (`mse_loss(&x, &y)`) and one `_with` form taking
//! its options struct (`mse_loss_with(&x, &y, MseLossOptions { .. })`).
//!
//! A leaf: it imports only [`Reduction`]. [`KlDivReduction`] lives here too.

use super::spec::Reduction;
use crate::tensor::{Device, Element, Tensor};

/// Declares an options struct of `Copy` fields with its `Default`.
macro_rules! options {
    (
        $(#[doc = $doc:literal])*
        $name:ident { $( $(#[doc = $fdoc:literal])* $field:ident: $ty:ty = $default:expr, )* }
    ) => {
        $(#[doc = $doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name {
            $( $(#[doc = $fdoc])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }
    };
}

options! {
    /// Options of [`mse_loss_with`](super::mse_loss_with), as
    /// `F.mse_loss`.
    ///
    /// ```
    /// use forge::nn::functional::{MseLossOptions, Reduction};
    /// assert_eq!(MseLossOptions::default().reduction, Reduction::Mean);
    /// ```
    MseLossOptions {
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
    }
}

options! {
    /// Options of [`l1_loss_with`](super::l1_loss_with), as `F.l1_loss`.
    ///
    /// ```
    /// use forge::nn::functional::{L1LossOptions, Reduction};
    /// assert_eq!(L1LossOptions::default().reduction, Reduction::Mean);
    /// ```
    L1LossOptions {
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
    }
}

options! {
    /// Options of [`smooth_l1_loss_with`](super::smooth_l1_loss_with), as
    /// `F.smooth_l1_loss`.
    ///
    /// ```
    /// use forge::nn::functional::SmoothL1LossOptions;
    /// assert_eq!(SmoothL1LossOptions::default().beta, 1.0);
    /// ```
    SmoothL1LossOptions {
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
        /// Where the loss turns from quadratic to linear (default 1, at least 0).
        beta: f64 = 1.0,
    }
}

options! {
    /// Options of [`huber_loss_with`](super::huber_loss_with), as
    /// `F.huber_loss`.
    ///
    /// ```
    /// use forge::nn::functional::HuberLossOptions;
    /// assert_eq!(HuberLossOptions::default().delta, 1.0);
    /// ```
    HuberLossOptions {
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
        /// Where the loss turns from quadratic to linear (default 1, positive).
        delta: f64 = 1.0,
    }
}

options! {
    /// Options of [`kl_div_with`](super::kl_div_with), as `F.kl_div`.
    ///
    /// ```
    /// use forge::nn::functional::{KlDivOptions, KlDivReduction};
    /// assert_eq!(KlDivOptions::default().reduction, KlDivReduction::Mean);
    /// ```
    KlDivOptions {
        /// Default `Mean` (PyTorch's default; `BatchMean` is the true KL).
        reduction: KlDivReduction = KlDivReduction::Mean,
        /// The target is given as log-probabilities (default `false`).
        log_target: bool = false,
    }
}

options! {
    /// Options of [`poisson_nll_loss_with`](super::poisson_nll_loss_with),
    /// as `F.poisson_nll_loss`.
    ///
    /// ```
    /// use forge::nn::functional::PoissonNllLossOptions;
    /// let o = PoissonNllLossOptions::default();
    /// assert!(o.log_input && !o.full && o.eps == 1e-8);
    /// ```
    PoissonNllLossOptions {
        /// The input is the log of the rate (default `true`).
        log_input: bool = true,
        /// Adds Stirling's approximation term (default `false`).
        full: bool = false,
        /// Added to the rate before its log when `log_input` is false (default 1e-8).
        eps: f64 = 1e-8,
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
    }
}

options! {
    /// Options of [`gaussian_nll_loss_with`](super::gaussian_nll_loss_with),
    /// as `F.gaussian_nll_loss`.
    ///
    /// ```
    /// use forge::nn::functional::GaussianNllLossOptions;
    /// assert_eq!(GaussianNllLossOptions::default().eps, 1e-6);
    /// ```
    GaussianNllLossOptions {
        /// Adds the constant `log(2 pi) / 2` (default `false`).
        full: bool = false,
        /// The variance's lower clamp (default 1e-6).
        eps: f64 = 1e-6,
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
    }
}

options! {
    /// Options of
    /// [`cosine_embedding_loss_with`](super::cosine_embedding_loss_with),
    /// as `F.cosine_embedding_loss`.
    ///
    /// ```
    /// use forge::nn::functional::CosineEmbeddingLossOptions;
    /// assert_eq!(CosineEmbeddingLossOptions::default().margin, 0.0);
    /// ```
    CosineEmbeddingLossOptions {
        /// Default 0.
        margin: f64 = 0.0,
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
    }
}

options! {
    /// Options of
    /// [`margin_ranking_loss_with`](super::margin_ranking_loss_with), as
    /// `F.margin_ranking_loss`.
    ///
    /// ```
    /// use forge::nn::functional::MarginRankingLossOptions;
    /// assert_eq!(MarginRankingLossOptions::default().margin, 0.0);
    /// ```
    MarginRankingLossOptions {
        /// Default 0.
        margin: f64 = 0.0,
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
    }
}

options! {
    /// Options of
    /// [`triplet_margin_loss_with`](super::triplet_margin_loss_with), as
    /// `F.triplet_margin_loss`.
    ///
    /// ```
    /// use forge::nn::functional::TripletMarginLossOptions;
    /// let o = TripletMarginLossOptions::default();
    /// assert_eq!((o.margin, o.p, o.eps, o.swap), (1.0, 2.0, 1e-6, false));
    /// ```
    TripletMarginLossOptions {
        /// Default 1.
        margin: f64 = 1.0,
        /// The norm's degree (default 2).
        p: f64 = 2.0,
        /// Added to the differences before the norm (default 1e-6).
        eps: f64 = 1e-6,
        /// Use the distance positive-negative when smaller (default `false`).
        swap: bool = false,
        /// Default `Mean`.
        reduction: Reduction = Reduction::Mean,
    }
}

/// Options of [`binary_cross_entropy_with`](super::binary_cross_entropy_with),
/// as `F.binary_cross_entropy`.
///
/// ```
/// use forge::nn::functional::{BinaryCrossEntropyOptions, Reduction};
/// let o = BinaryCrossEntropyOptions::<f32>::default();
/// assert!(o.weight.is_none() && o.reduction == Reduction::Mean);
/// ```
#[derive(Clone, Debug)]
pub struct BinaryCrossEntropyOptions<E: Element = f32, D: Device = crate::Cpu> {
    /// Per-element weights, broadcast to the input (default none).
    pub weight: Option<Tensor<E, D>>,
    /// Default `Mean`.
    pub reduction: Reduction,
}

impl<E: Element, D: Device> Default for BinaryCrossEntropyOptions<E, D> {
    fn default() -> Self {
        BinaryCrossEntropyOptions {
            weight: None,
            reduction: Reduction::Mean,
        }
    }
}

/// Options of
/// [`binary_cross_entropy_with_logits_with`](super::binary_cross_entropy_with_logits_with),
/// as `F.binary_cross_entropy_with_logits`.
///
/// ```
/// use forge::nn::functional::BinaryCrossEntropyWithLogitsOptions;
/// let o = BinaryCrossEntropyWithLogitsOptions::<f32>::default();
/// assert!(o.weight.is_none() && o.pos_weight.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct BinaryCrossEntropyWithLogitsOptions<E: Element = f32, D: Device = crate::Cpu> {
    /// Per-element weights, broadcast to the input (default none).
    pub weight: Option<Tensor<E, D>>,
    /// Weights of the positive term, broadcast over the classes (default none).
    pub pos_weight: Option<Tensor<E, D>>,
    /// Default `Mean`.
    pub reduction: Reduction,
}

impl<E: Element, D: Device> Default for BinaryCrossEntropyWithLogitsOptions<E, D> {
    fn default() -> Self {
        BinaryCrossEntropyWithLogitsOptions {
            weight: None,
            pos_weight: None,
            reduction: Reduction::Mean,
        }
    }
}

/// Options of
/// [`multilabel_soft_margin_loss_with`](super::multilabel_soft_margin_loss_with),
/// as `F.multilabel_soft_margin_loss`.
///
/// ```
/// use forge::nn::functional::MultilabelSoftMarginLossOptions;
/// assert!(MultilabelSoftMarginLossOptions::<f32>::default().weight.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct MultilabelSoftMarginLossOptions<E: Element = f32, D: Device = crate::Cpu> {
    /// Per-class weights `[C]` (default none).
    pub weight: Option<Tensor<E, D>>,
    /// Default `Mean`.
    pub reduction: Reduction,
}

impl<E: Element, D: Device> Default for MultilabelSoftMarginLossOptions<E, D> {
    fn default() -> Self {
        MultilabelSoftMarginLossOptions {
            weight: None,
            reduction: Reduction::Mean,
        }
    }
}

/// How [`kl_div_with`](super::kl_div_with) reduces: PyTorch's `reduction`, including `batchmean`.
///
/// ```
/// assert_ne!(forge::nn::functional::KlDivReduction::BatchMean,
///            forge::nn::functional::KlDivReduction::Mean);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KlDivReduction {
    /// The mean over every element (PyTorch's default, not the true KL).
    #[default]
    Mean,
    /// The sum divided by the batch size (`input.shape()[0]`): the true KL
    /// divergence per sample.
    BatchMean,
    /// The sum over every element.
    Sum,
    /// No reduction.
    None,
}

//! The leaf of the loss files: [`Reduction`] (every loss's `reduction`
//! argument) and the constants and options of the fused class losses,
//! shared by `class.rs` (the public functions), `class_fused.rs` (the fused
//! op) and `cross_entropy.rs` (its log-softmax kernels). It imports no other
//! loss file.

use crate::tensor::{Device, Float, Tensor};

/// How a loss reduces its per-element values: PyTorch's `reduction`
/// argument.
///
/// ```
/// use forge::nn::functional::*;
/// use forge::Tensor;
/// let a = Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2]);
/// let b = Tensor::<f64>::zeros(&[2]);
/// assert_eq!(mse_loss_with(&a, &b, MseLossOptions { reduction: Reduction::Mean }).item(), 5.0);
/// assert_eq!(mse_loss_with(&a, &b, MseLossOptions { reduction: Reduction::Sum }).item(), 10.0);
/// assert_eq!(mse_loss_with(&a, &b, MseLossOptions { reduction: Reduction::None }).to_vec(), vec![1.0, 9.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean over the elements (weighted losses divide by the total weight).
    #[default]
    Mean,
    /// The sum over the elements.
    Sum,
    /// No reduction: one value per element (per sample for class losses).
    None,
}

/// Applies `reduction` to per-element losses (plain mean for `Mean`).
#[track_caller]
pub(crate) fn reduce<E: Float, D: Device>(
    loss: Tensor<E, D>,
    reduction: Reduction,
) -> Tensor<E, D> {
    match reduction {
        Reduction::Mean => loss.mean(),
        Reduction::Sum => loss.sum(),
        Reduction::None => loss,
    }
}

/// Which loss: the input's meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Logits: `log p = x - lse` (`cross_entropy_with`).
    CrossEntropy,
    /// Log-probabilities: `log p = x` (`nll_loss`).
    Nll,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::CrossEntropy => "cross_entropy",
            Kind::Nll => "nll_loss",
        }
    }
}

/// The loss's constants, shared by the passes.
pub(super) struct Spec<E> {
    pub(super) kind: Kind,
    /// Images (1 for `(C,)` input), classes, positions per image.
    pub(super) n: usize,
    pub(super) c: usize,
    pub(super) inner: usize,
    pub(super) ignore: i64,
    /// The weight's values (tracked or not).
    pub(super) w: Option<Vec<E>>,
    /// `sum(w)` (`C` without weights).
    pub(super) w_sum: E,
    /// `1 - ls` and `ls / C`.
    pub(super) keep: E,
    pub(super) smooth: E,
    pub(super) smoothing: bool,
}

impl<E: Float> Spec<E> {
    /// The weight of class `k` (1 without weights).
    pub(super) fn wc(&self, k: usize) -> E {
        self.w.as_ref().map_or(E::one(), |w| w[k])
    }

    /// The flat index of class `k` at position `p` in the input.
    pub(super) fn at(&self, p: usize, k: usize) -> usize {
        ((p / self.inner) * self.c + k) * self.inner + p % self.inner
    }
}

/// A class loss's options, as given to the public functions.
pub(super) struct Options<'a, E: Float, D: Device> {
    pub(super) weight: Option<&'a Tensor<E, D>>,
    pub(super) ignore_index: i64,
    /// 0 for `nll_loss`.
    pub(super) label_smoothing: f64,
    pub(super) reduction: Reduction,
}

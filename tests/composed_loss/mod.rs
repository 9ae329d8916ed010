//! The class losses written in composed tensor ops, as the reference for
//! the fused ones (`forge/src/ops/loss_class.rs`): the target classes
//! picked with a one-hot mask built from the integer targets (a constant),
//! `log_softmax` for cross-entropy, sums over the class axis, and the
//! reductions, so every gradient (of any order, in the input and the
//! weight) comes from ordinary tensor ops.
#![allow(dead_code)]

use forge::nn::functional::Reduction;
use forge::{Rng, Tensor};

/// `N(0, 1.5^2)` values of shape `shape` from seed `seed`.
pub fn randn(shape: &[usize], seed: u64) -> Tensor<f64> {
    Tensor::normal(shape, 0.0, 1.5, &mut Rng::new(seed))
}

/// `|a - b| <= 1e-12 max(|b|, 1)` elementwise: a fused op (`a`) against
/// the composed ops (`b`), the same sums in other orders.
pub fn close(a: &Tensor<f64>, b: &Tensor<f64>, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    for (i, (p, q)) in a.to_vec().iter().zip(b.to_vec()).enumerate() {
        assert!(
            (p - q).abs() <= 1e-12 * q.abs().max(1.0),
            "{what} [{i}]: fused {p} vs composed {q}"
        );
    }
}

/// The class axis (1, or 0 for `(C,)` input), the class count and the
/// positions per image of an input of shape `shape`.
fn axis_c_inner(shape: &[usize]) -> (usize, usize, usize) {
    let axis = usize::from(shape.len() > 1);
    (axis, shape[axis], shape[axis + 1..].iter().product())
}

/// `x * m` with the entries where `m` is 0 set to 0 first (a `-inf` log
/// probability that the loss does not use gives 0, not NaN).
fn pick(x: &Tensor<f64>, m: &Tensor<f64>) -> Tensor<f64> {
    let off: Vec<bool> = m.as_slice().iter().map(|&v| v == 0.0).collect();
    x.masked_fill(&Tensor::<bool>::from_vec(off, m.shape()), 0.0)
        .mul(m)
}

/// PyTorch's `cross_entropy` (`log_softmax = true`, on logits) or
/// `nll_loss` (on log-probabilities, `ls` must be 0) in composed ops:
/// `(1 - ls) nll + ls / C sum_c(-w_c log p_c)`, both terms reduced alike
/// (the mean divides by the summed weights of the targets not ignored).
pub fn class_loss(
    x: &Tensor<f64>,
    targets: &Tensor<i64>,
    weight: Option<&Tensor<f64>>,
    ignore: i64,
    ls: f64,
    reduction: Reduction,
    log_softmax: bool,
) -> Tensor<f64> {
    let shape = x.shape();
    let (axis, c, inner) = axis_c_inner(shape);
    let mut mask = vec![0.0; x.numel()];
    for (p, &t) in targets.as_slice().iter().enumerate() {
        if t != ignore {
            mask[((p / inner) * c + t as usize) * inner + p % inner] = 1.0;
        }
    }
    let mask = Tensor::from_vec(mask, shape);
    let lp = if log_softmax {
        x.log_softmax(axis as isize)
    } else {
        x.clone()
    };
    let mut view = vec![1; shape.len()];
    view[axis] = c;
    let w = weight.map(|w| w.view(&view));
    let wmask = w.as_ref().map_or(mask.clone(), |w| mask.mul(w));
    let ax = [axis as isize];
    let nll = pick(&lp, &wmask).sum_dim(&ax, false).neg();
    let reduce = |per: Tensor<f64>| match reduction {
        Reduction::Mean => per.sum().div(&wmask.sum()),
        Reduction::Sum => per.sum(),
        Reduction::None => per,
    };
    if ls == 0.0 {
        return reduce(nll);
    }
    let valid = mask.sum_dim(&ax, false);
    let weighted = w.as_ref().map_or(lp.clone(), |w| lp.mul(w));
    let smooth = weighted.sum_dim(&ax, false).neg().mul(&valid);
    reduce(nll)
        .mul_scalar(1.0 - ls)
        .add(&reduce(smooth).mul_scalar(ls / c as f64))
}

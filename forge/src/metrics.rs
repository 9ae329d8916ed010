//! Evaluation metrics on model outputs.
//!
//! ```
//! use forge::prelude::*;
//! let logits = Tensor::<f32>::from_vec(vec![0.9, 0.1, 0.2, 0.8, 0.7, 0.3], &[3, 2]);
//! let y = Tensor::<i64>::from_vec(vec![0, 1, 1], &[3]);
//! assert_eq!(metrics::correct(&logits, &y), 2);
//! assert!((metrics::accuracy(&logits, &y) - 2.0 / 3.0).abs() < 1e-12);
//! ```

use crate::tensor::{Device, Float, Tensor};

/// The number of rows of `scores` (`[N, C]`: logits, log-probabilities or
/// probabilities) whose largest entry is at the class in `targets`
/// (`[N]`). Ties go to the lowest class index, as `argmax` does.
///
/// # Panics
/// When `scores` is not `[N, C]` or `targets` is not `[N]`.
///
/// ```
/// use forge::prelude::*;
/// let s = Tensor::<f64>::from_vec(vec![1.0, 2.0], &[1, 2]);
/// assert_eq!(metrics::correct(&s, &Tensor::from_vec(vec![1i64], &[1])), 1);
/// ```
#[track_caller]
pub fn correct<E: Float, D: Device>(scores: &Tensor<E, D>, targets: &Tensor<i64, D>) -> usize {
    assert!(
        scores.rank() == 2 && targets.shape() == [scores.shape()[0]],
        "accuracy: scores {:?} need [N, C] and targets [N], got targets {:?}",
        scores.shape(),
        targets.shape()
    );
    let c = scores.shape()[1];
    if c == 0 {
        return 0;
    }
    scores
        .as_slice()
        .chunks(c)
        .zip(targets.as_slice())
        .filter(|&(row, &t)| {
            let mut best = 0;
            for (i, v) in row.iter().enumerate() {
                if *v > row[best] {
                    best = i;
                }
            }
            best as i64 == t
        })
        .count()
}

/// The fraction of rows classified right ([`correct`] over `N`; 0 for no
/// rows).
///
/// # Panics
/// As [`correct`].
///
/// ```
/// use forge::prelude::*;
/// let s = Tensor::<f32>::from_vec(vec![0.0, 1.0, 1.0, 0.0], &[2, 2]);
/// let y = Tensor::<i64>::from_vec(vec![1, 1], &[2]);
/// assert_eq!(metrics::accuracy(&s, &y), 0.5);
/// ```
#[track_caller]
pub fn accuracy<E: Float, D: Device>(scores: &Tensor<E, D>, targets: &Tensor<i64, D>) -> f64 {
    let n = targets.numel();
    let k = correct(scores, targets);
    if n == 0 {
        0.0
    } else {
        k as f64 / n as f64
    }
}

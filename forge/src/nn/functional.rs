//! Functional forms of the layers and the losses, as
//! `torch.nn.functional`: free functions on tensors with no parameters of
//! their own.
//!
//! ```
//! use forge::nn::functional::{cross_entropy, CrossEntropyOptions};
//! use forge::Tensor;
//! let logits = Tensor::<f64>::from_vec(vec![2.0, 0.0, 0.0, 2.0], &[2, 2]).requires_grad();
//! let targets = Tensor::<i64>::from_vec(vec![0, 1], &[2]);
//! let loss = cross_entropy(&logits, &targets, CrossEntropyOptions::default());
//! let g = loss.backward();
//! assert_eq!(g.get(&logits).unwrap().shape(), &[2, 2]);
//! ```

pub use crate::ops::attention::scaled_dot_product_attention;
pub use crate::ops::dropout::dropout;
pub use crate::ops::embedding::embedding;
pub use crate::ops::loss::{
    cross_entropy, nll_loss, CrossEntropyOptions, NllLossOptions, Reduction,
};
pub use crate::ops::loss_pointwise::{
    binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, kl_div, l1_loss,
    l1_penalty, l2_penalty, mse_loss, smooth_l1_loss, KlDivReduction,
};
pub use crate::ops::norm::{batch_norm, group_norm, layer_norm};

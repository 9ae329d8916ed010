//! Inverted dropout.

use crate::tensor::{Device, Float, Rng, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// Inverted dropout: in training, each element is zeroed with
    /// probability `p` and the survivors are scaled by `1 / (1 - p)`, so the
    /// expectation is unchanged; outside training (or with `p = 0`) the
    /// input is returned as is. The mask is drawn from `rng` (one uniform
    /// per element, in order), so a seed reproduces it. The gradient is the
    /// same mask times the upstream gradient.
    ///
    /// # Panics
    /// When `p` is outside `[0, 1]`.
    ///
    /// ```
    /// use forge::{Rng, Tensor};
    /// let x = Tensor::<f64>::ones(&[1000]);
    /// let y = x.dropout(0.5, true, &mut Rng::new(7));
    /// assert!(y.to_vec().iter().all(|&v| v == 0.0 || v == 2.0));
    /// assert_eq!(y.to_vec(), x.dropout(0.5, true, &mut Rng::new(7)).to_vec());
    /// assert_eq!(x.dropout(0.5, false, &mut Rng::new(7)).to_vec(), x.to_vec());
    /// ```
    #[track_caller]
    pub fn dropout(&self, p: f64, training: bool, rng: &mut Rng) -> Self {
        shape_assert!(
            (0.0..=1.0).contains(&p),
            "dropout: probability {p} is outside [0, 1]"
        );
        if !training || p == 0.0 {
            return self.clone();
        }
        let scale = if p < 1.0 {
            E::from_f64(1.0 / (1.0 - p))
        } else {
            E::zero()
        };
        let mask: Vec<E> = (0..self.numel())
            .map(|_| if rng.uniform() >= p { scale } else { E::zero() })
            .collect();
        self.mul(&Tensor::from_vec(mask, self.shape()))
    }
}

/// [`Tensor::dropout`] as a free function (`torch.nn.functional.dropout`).
///
/// # Panics
/// When `p` is outside `[0, 1]`.
///
/// ```
/// use forge::nn::functional::dropout;
/// use forge::{Rng, Tensor};
/// let y = dropout(&Tensor::<f32>::ones(&[4]), 1.0, true, &mut Rng::new(0));
/// assert_eq!(y.to_vec(), vec![0.0; 4]);
/// ```
#[track_caller]
pub fn dropout<E: Float, D: Device>(
    x: &Tensor<E, D>,
    p: f64,
    training: bool,
    rng: &mut Rng,
) -> Tensor<E, D> {
    x.dropout(p, training, rng)
}

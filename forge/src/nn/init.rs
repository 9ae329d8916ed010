//! Weight initialisers with PyTorch's formulas (`torch.nn.init`), drawn from
//! a seedable [`Rng`] so that every initialisation is reproducible.
//!
//! Tensors are immutable in forge, so each initialiser *returns* a new
//! untracked tensor of the requested shape (call
//! [`requires_grad`](Tensor::requires_grad) to make it a parameter).
//!
//! | function | distribution |
//! |---|---|
//! | [`uniform`] | `U(low, high)` |
//! | [`normal`] | `N(mean, std^2)` |
//! | [`xavier_uniform`] | `U(-a, a)`, `a = gain sqrt(6 / (fan_in + fan_out))` |
//! | [`xavier_normal`] | `N(0, gain^2 2 / (fan_in + fan_out))` |
//! | [`kaiming_uniform`] | `U(-b, b)`, `b = gain sqrt(3 / fan_mode)` |
//! | [`kaiming_normal`] | `N(0, gain^2 / fan_mode)` |
//!
//! For a shape `(d0, d1, k...)`, `fan_in = d1 prod(k)` and
//! `fan_out = d0 prod(k)` ([`fans`]).

use crate::tensor::{Float, Rng, Tensor};

/// Which fan [`kaiming_uniform`] and [`kaiming_normal`] scale by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// `fan_in`: preserves the variance of activations in the forward pass.
    FanIn,
    /// `fan_out`: preserves the variance of gradients in the backward pass.
    FanOut,
}

/// The nonlinearity a gain is computed for ([`calculate_gain`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nonlinearity {
    /// Identity, linear and convolution layers: gain 1.
    Linear,
    /// Sigmoid: gain 1.
    Sigmoid,
    /// Tanh: gain 5/3.
    Tanh,
    /// ReLU: gain sqrt(2).
    Relu,
    /// Leaky ReLU with the given negative slope: gain `sqrt(2 / (1 + slope^2))`.
    LeakyRelu(f64),
    /// SELU: gain 3/4.
    Selu,
}

/// PyTorch's recommended gain for a nonlinearity
/// (`torch.nn.init.calculate_gain`).
///
/// ```
/// use forge::nn::init::{calculate_gain, Nonlinearity};
/// assert_eq!(calculate_gain(Nonlinearity::Relu), 2f64.sqrt());
/// assert!((calculate_gain(Nonlinearity::LeakyRelu(5f64.sqrt())) - (1.0f64 / 3.0).sqrt()).abs() < 1e-15);
/// ```
pub fn calculate_gain(nonlinearity: Nonlinearity) -> f64 {
    match nonlinearity {
        Nonlinearity::Linear | Nonlinearity::Sigmoid => 1.0,
        Nonlinearity::Tanh => 5.0 / 3.0,
        Nonlinearity::Relu => 2f64.sqrt(),
        Nonlinearity::LeakyRelu(slope) => (2.0 / (1.0 + slope * slope)).sqrt(),
        Nonlinearity::Selu => 0.75,
    }
}

/// `(fan_in, fan_out)` of a weight of shape `(d0, d1, k...)`:
/// `(d1 prod(k), d0 prod(k))`.
///
/// # Panics
/// When the shape has fewer than two dimensions (as PyTorch).
///
/// ```
/// assert_eq!(forge::nn::init::fans(&[16, 3, 3, 3]), (27, 144));
/// assert_eq!(forge::nn::init::fans(&[10, 4]), (4, 10));
/// ```
pub fn fans(shape: &[usize]) -> (usize, usize) {
    shape_assert!(
        shape.len() >= 2,
        "init: fan in and fan out need a shape of at least 2 dimensions, got {shape:?}"
    );
    let receptive: usize = shape[2..].iter().product();
    (shape[1] * receptive, shape[0] * receptive)
}

fn fan(shape: &[usize], mode: FanMode) -> usize {
    let (fan_in, fan_out) = fans(shape);
    let f = match mode {
        FanMode::FanIn => fan_in,
        FanMode::FanOut => fan_out,
    };
    shape_assert!(f > 0, "init: shape {shape:?} has a zero {mode:?}");
    f
}

/// Values drawn from `U(low, high)`.
///
/// ```
/// let t = forge::nn::init::uniform::<f32>(&[100], -0.5, 0.5, &mut forge::Rng::new(0));
/// assert!(t.to_vec().iter().all(|v| v.abs() <= 0.5));
/// ```
pub fn uniform<E: Float>(shape: &[usize], low: f64, high: f64, rng: &mut Rng) -> Tensor<E> {
    Tensor::uniform(shape, low, high, rng)
}

/// Values drawn from `N(mean, std^2)`.
///
/// ```
/// let t = forge::nn::init::normal::<f64>(&[4, 4], 1.0, 0.0, &mut forge::Rng::new(0));
/// assert_eq!(t.to_vec(), vec![1.0; 16]);
/// ```
pub fn normal<E: Float>(shape: &[usize], mean: f64, std: f64, rng: &mut Rng) -> Tensor<E> {
    Tensor::normal(shape, mean, std, rng)
}

/// Zeros.
///
/// ```
/// assert_eq!(forge::nn::init::zeros::<f32>(&[2]).to_vec(), vec![0.0, 0.0]);
/// ```
pub fn zeros<E: Float>(shape: &[usize]) -> Tensor<E> {
    Tensor::zeros(shape)
}

/// Ones.
///
/// ```
/// assert_eq!(forge::nn::init::ones::<f32>(&[2]).to_vec(), vec![1.0, 1.0]);
/// ```
pub fn ones<E: Float>(shape: &[usize]) -> Tensor<E> {
    Tensor::ones(shape)
}

/// Glorot / Xavier uniform: `U(-a, a)`, `a = gain sqrt(6 / (fan_in + fan_out))`.
///
/// # Panics
/// When the shape has fewer than two dimensions.
///
/// ```
/// let t = forge::nn::init::xavier_uniform::<f32>(&[30, 20], 1.0, &mut forge::Rng::new(0));
/// assert!(t.to_vec().iter().all(|v| v.abs() <= (6.0f32 / 50.0).sqrt()));
/// ```
pub fn xavier_uniform<E: Float>(shape: &[usize], gain: f64, rng: &mut Rng) -> Tensor<E> {
    let (fi, fo) = fans(shape);
    let a = gain * (6.0 / (fi + fo) as f64).sqrt();
    Tensor::uniform(shape, -a, a, rng)
}

/// Glorot / Xavier normal: `N(0, gain^2 2 / (fan_in + fan_out))`.
///
/// # Panics
/// When the shape has fewer than two dimensions.
///
/// ```
/// let t = forge::nn::init::xavier_normal::<f64>(&[30, 20], 1.0, &mut forge::Rng::new(0));
/// assert_eq!(t.shape(), &[30, 20]);
/// ```
pub fn xavier_normal<E: Float>(shape: &[usize], gain: f64, rng: &mut Rng) -> Tensor<E> {
    let (fi, fo) = fans(shape);
    let std = gain * (2.0 / (fi + fo) as f64).sqrt();
    Tensor::normal(shape, 0.0, std, rng)
}

/// He / Kaiming uniform: `U(-b, b)`, `b = gain sqrt(3 / fan)` with
/// `gain = calculate_gain(nonlinearity)`. As in PyTorch, `a` is the negative
/// slope used when `nonlinearity` is [`Nonlinearity::LeakyRelu`] (whose own
/// slope is then ignored) and ignored otherwise; PyTorch's layer default is
/// `kaiming_uniform(shape, 5f64.sqrt(), FanMode::FanIn, Nonlinearity::LeakyRelu(0.0), rng)`,
/// which is `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`.
///
/// # Panics
/// When the shape has fewer than two dimensions or the chosen fan is zero.
///
/// ```
/// use forge::nn::init::{kaiming_uniform, FanMode, Nonlinearity};
/// let t = kaiming_uniform::<f64>(&[8, 4, 3, 3], 5f64.sqrt(), FanMode::FanIn,
///     Nonlinearity::LeakyRelu(0.0), &mut forge::Rng::new(0));
/// assert!(t.to_vec().iter().all(|v| v.abs() <= 1.0 / 6.0)); // fan_in 36
/// ```
pub fn kaiming_uniform<E: Float>(
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: Nonlinearity,
    rng: &mut Rng,
) -> Tensor<E> {
    let b = kaiming_gain(a, nonlinearity) * (3.0 / fan(shape, mode) as f64).sqrt();
    Tensor::uniform(shape, -b, b, rng)
}

/// He / Kaiming normal: `N(0, (gain / sqrt(fan))^2)`, `a` as in
/// [`kaiming_uniform`]. torchvision's ResNet convolutions use
/// `kaiming_normal(shape, 0.0, FanMode::FanOut, Nonlinearity::Relu, rng)`.
///
/// # Panics
/// When the shape has fewer than two dimensions or the chosen fan is zero.
///
/// ```
/// use forge::nn::init::{kaiming_normal, FanMode, Nonlinearity};
/// let t = kaiming_normal::<f32>(&[64, 3, 7, 7], 0.0, FanMode::FanOut, Nonlinearity::Relu,
///     &mut forge::Rng::new(0));
/// assert_eq!(t.shape(), &[64, 3, 7, 7]);
/// ```
pub fn kaiming_normal<E: Float>(
    shape: &[usize],
    a: f64,
    mode: FanMode,
    nonlinearity: Nonlinearity,
    rng: &mut Rng,
) -> Tensor<E> {
    let std = kaiming_gain(a, nonlinearity) / (fan(shape, mode) as f64).sqrt();
    Tensor::normal(shape, 0.0, std, rng)
}

fn kaiming_gain(a: f64, nonlinearity: Nonlinearity) -> f64 {
    match nonlinearity {
        Nonlinearity::LeakyRelu(_) => calculate_gain(Nonlinearity::LeakyRelu(a)),
        other => calculate_gain(other),
    }
}

/// PyTorch's default initialisation of a layer's weight and bias given the
/// weight's fan-in: both `U(-1/sqrt(fan_in), 1/sqrt(fan_in))`
/// (kaiming-uniform with `a = sqrt(5)` for the weight). Used by the
/// convolution layers.
///
/// ```
/// assert_eq!(forge::nn::init::default_bound(16), 0.25);
/// ```
pub fn default_bound(fan_in: usize) -> f64 {
    1.0 / (fan_in.max(1) as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(t: &Tensor<f64>) -> (f64, f64, f64) {
        let v = t.to_vec();
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        (mean, var.sqrt(), max)
    }

    const SHAPE: [usize; 4] = [64, 32, 3, 3]; // fan_in 288, fan_out 576, 18432 values

    #[test]
    fn uniform_initialisers_fill_their_bounds() {
        let (fi, fo) = (288.0f64, 576.0f64);
        let cases: [(f64, Tensor<f64>); 3] = [
            (
                (6.0 / (fi + fo)).sqrt() * 2.0,
                xavier_uniform(&SHAPE, 2.0, &mut Rng::new(1)),
            ),
            (
                1.0 / fi.sqrt(),
                kaiming_uniform(
                    &SHAPE,
                    5f64.sqrt(),
                    FanMode::FanIn,
                    Nonlinearity::LeakyRelu(0.0),
                    &mut Rng::new(2),
                ),
            ),
            (
                (6.0 / fo).sqrt(),
                kaiming_uniform(
                    &SHAPE,
                    0.0,
                    FanMode::FanOut,
                    Nonlinearity::Relu,
                    &mut Rng::new(3),
                ),
            ),
        ];
        for (bound, t) in cases {
            let (mean, std, max) = stats(&t);
            assert!(max <= bound, "max {max} above bound {bound}");
            assert!(max > 0.99 * bound, "max {max} far below bound {bound}");
            // U(-b, b) has std b / sqrt(3); 18432 samples give ~1% accuracy.
            assert!(
                (std / (bound / 3f64.sqrt()) - 1.0).abs() < 0.03,
                "std {std}"
            );
            assert!(mean.abs() < 0.03 * bound, "mean {mean}");
        }
    }

    #[test]
    fn normal_initialisers_have_their_std() {
        let (fi, fo) = (288.0f64, 576.0f64);
        let cases: [(f64, Tensor<f64>); 3] = [
            (
                0.5 * (2.0 / (fi + fo)).sqrt(),
                xavier_normal(&SHAPE, 0.5, &mut Rng::new(4)),
            ),
            (
                (2.0 / fo).sqrt(),
                kaiming_normal(
                    &SHAPE,
                    0.0,
                    FanMode::FanOut,
                    Nonlinearity::Relu,
                    &mut Rng::new(5),
                ),
            ),
            (
                (5.0 / 3.0) / fi.sqrt(),
                kaiming_normal(
                    &SHAPE,
                    0.0,
                    FanMode::FanIn,
                    Nonlinearity::Tanh,
                    &mut Rng::new(6),
                ),
            ),
        ];
        for (expected, t) in cases {
            let (mean, std, _) = stats(&t);
            assert!(
                (std / expected - 1.0).abs() < 0.03,
                "std {std} vs {expected}"
            );
            assert!(mean.abs() < 0.03 * expected, "mean {mean}");
        }
        let (mean, std, _) = stats(&normal(&[20000], 2.0, 0.5, &mut Rng::new(7)));
        assert!((mean - 2.0).abs() < 0.02 && (std - 0.5).abs() < 0.02);
    }

    #[test]
    fn initialisers_are_reproducible_from_a_seed() {
        let a: Tensor<f32> = kaiming_uniform(
            &[4, 3],
            0.0,
            FanMode::FanIn,
            Nonlinearity::Relu,
            &mut Rng::new(9),
        );
        let b: Tensor<f32> = kaiming_uniform(
            &[4, 3],
            0.0,
            FanMode::FanIn,
            Nonlinearity::Relu,
            &mut Rng::new(9),
        );
        let c: Tensor<f32> = kaiming_uniform(
            &[4, 3],
            0.0,
            FanMode::FanIn,
            Nonlinearity::Relu,
            &mut Rng::new(10),
        );
        assert_eq!(a.to_vec(), b.to_vec());
        assert_ne!(a.to_vec(), c.to_vec());
        assert_eq!(zeros::<f64>(&[3]).to_vec(), vec![0.0; 3]);
        assert_eq!(ones::<f64>(&[3]).to_vec(), vec![1.0; 3]);
    }

    #[test]
    fn gains_follow_pytorch() {
        assert_eq!(calculate_gain(Nonlinearity::Linear), 1.0);
        assert_eq!(calculate_gain(Nonlinearity::Sigmoid), 1.0);
        assert_eq!(calculate_gain(Nonlinearity::Tanh), 5.0 / 3.0);
        assert_eq!(calculate_gain(Nonlinearity::Selu), 0.75);
        assert_eq!(calculate_gain(Nonlinearity::LeakyRelu(0.0)), 2f64.sqrt());
        assert_eq!(default_bound(16), 0.25);
    }

    #[test]
    #[should_panic(
        expected = "init: fan in and fan out need a shape of at least 2 dimensions, got [5]"
    )]
    fn fans_of_a_vector_panic() {
        xavier_uniform::<f32>(&[5], 1.0, &mut Rng::new(0));
    }
}

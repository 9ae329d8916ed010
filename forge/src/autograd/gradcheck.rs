//! Finite-difference gradient checking, as `torch.autograd.gradcheck`.

use crate::tensor::{Rng, Tensor};

/// The worst disagreement found by [`gradcheck`].
#[derive(Clone, Debug, PartialEq)]
pub struct GradcheckReport {
    /// Largest `|analytic - numeric|` over every input element.
    pub max_abs_err: f64,
    /// Input index and flat element index of that worst element.
    pub worst: (usize, usize),
    /// Number of input elements checked.
    pub checked: usize,
}

/// Checks the analytic vector-Jacobian product of `f` against central finite
/// differences in f64.
///
/// `f` maps the inputs to an output of any shape. A fixed random upstream
/// gradient `u` reduces it to the scalar `sum(f(x) * u)`, whose gradient is
/// computed both by [`Tensor::backward_with`] and by
/// `(s(x + eps e_j) - s(x - eps e_j)) / (2 eps)` for every element `j` of every
/// input. Each element must satisfy `|analytic - numeric| <= atol + rtol *
/// |numeric|`. Central differences have error `O(eps^2 f''')` plus rounding
/// `O(ulp(s) / eps)`; with `eps = 1e-6` both are near `1e-9` for functions
/// of order one, so `atol = rtol = 1e-6` separates a correct rule from a
/// wrong one by many orders of magnitude.
///
/// # Errors
/// A message naming the input, the element, and both values, at the first
/// element out of tolerance.
///
/// ```
/// use forge::{gradcheck, Tensor};
/// let x = Tensor::<f64>::from_vec(vec![0.3, -0.7, 1.1], &[3]);
/// let report = gradcheck(|v| v[0].tanh(), &[x], 1e-6, 1e-6, 1e-6).unwrap();
/// assert!(report.max_abs_err < 1e-8);
/// ```
pub fn gradcheck(
    f: impl Fn(&[Tensor<f64>]) -> Tensor<f64>,
    inputs: &[Tensor<f64>],
    eps: f64,
    atol: f64,
    rtol: f64,
) -> Result<GradcheckReport, String> {
    let tracked: Vec<Tensor<f64>> = inputs.iter().map(|t| t.detach().requires_grad()).collect();
    let y = f(&tracked);
    let mut rng = Rng::new(0x5eed);
    let u = Tensor::<f64>::normal(y.shape(), 0.0, 1.0, &mut rng);
    let grads = y.backward_with(&u, false);
    let scalar = |xs: &[Tensor<f64>]| -> f64 {
        let y = crate::no_grad(|| f(xs));
        y.as_slice()
            .iter()
            .zip(u.as_slice())
            .map(|(a, b)| a * b)
            .sum()
    };
    let mut report = GradcheckReport {
        max_abs_err: 0.0,
        worst: (0, 0),
        checked: 0,
    };
    for (i, x) in inputs.iter().enumerate() {
        let analytic = grads
            .get(&tracked[i])
            .map(|g| g.to_vec())
            .unwrap_or_else(|| vec![0.0; x.numel()]);
        for j in 0..x.numel() {
            let mut xs: Vec<Tensor<f64>> = inputs.iter().map(|t| t.detach()).collect();
            let mut plus = x.to_vec();
            plus[j] += eps;
            xs[i] = Tensor::from_vec(plus, x.shape());
            let fp = scalar(&xs);
            let mut minus = x.to_vec();
            minus[j] -= eps;
            xs[i] = Tensor::from_vec(minus, x.shape());
            let fm = scalar(&xs);
            let numeric = (fp - fm) / (2.0 * eps);
            let err = (analytic[j] - numeric).abs();
            if err.is_nan() || err > atol + rtol * numeric.abs() {
                return Err(format!(
                    "gradcheck: input {i}, element {j}: analytic {} vs numeric {numeric} (|diff| {err:e})",
                    analytic[j]
                ));
            }
            if err > report.max_abs_err {
                report.max_abs_err = err;
                report.worst = (i, j);
            }
            report.checked += 1;
        }
    }
    Ok(report)
}

//! Unary elementwise ops and activation functions.
//!
//! Each rule is `grad * f'(x)` with `f'` written in tensor ops. Rules that
//! are cheapest in terms of the output `y = f(x)` use the saved output in a
//! plain backward pass, and recompute `y` from `x` on the tape when the
//! gradient must be differentiable again.

use crate::autograd::BackwardCtx;
use crate::cpu::elementwise;
use crate::cpu::vmath;
use crate::tensor::{Device, Float, Tensor};

type Rule<E, D> = fn(&Tensor<E, D>, &Tensor<E, D>, &Tensor<E, D>) -> Tensor<E, D>;

impl<E: Float, D: Device> Tensor<E, D> {
    /// Applies `f` elementwise with no recording.
    #[track_caller]
    pub(crate) fn map(&self, f: impl Fn(E) -> E + Sync) -> Self {
        Tensor::from_parts(D::map(self.as_slice(), f), self.shape.clone(), None)
    }

    /// Applies a slice kernel (`crate::cpu::vmath`) to a copy of the data,
    /// with no recording; in parallel fixed chunks when large
    /// ([`elementwise::map_slices`]).
    #[track_caller]
    pub(crate) fn map_slice(&self, f: impl Fn(&mut [E]) + Sync) -> Self {
        let data = elementwise::map_slices(self.as_slice(), f);
        Tensor::from_parts(data, self.shape.clone(), None)
    }

    /// Applies a two-slice kernel `f(z, copy)` (a vector-math gradient) to
    /// a copy of the data, `z` (same shape) read at the same indices, with
    /// no recording; in parallel fixed chunks when large
    /// ([`elementwise::zip_slices`]).
    #[track_caller]
    pub(crate) fn zip_slice(&self, z: &Self, f: impl Fn(&[E], &mut [E]) + Sync) -> Self {
        let data = elementwise::zip_slices(z.as_slice(), self.as_slice(), f);
        Tensor::from_parts(data, self.shape.clone(), None)
    }

    /// Applies an out-of-place slice kernel `f(x, out)` (a `crate::cpu::vmath`
    /// `_into` function, which writes every element of `out`) with no
    /// recording: [`map_slice`](Self::map_slice) in one pass, without the
    /// copy of the data ([`elementwise::map_slices_into`]).
    #[track_caller]
    pub(crate) fn map_slice_into(
        &self,
        f: impl Fn(&[E], &mut [std::mem::MaybeUninit<E>]) + Sync,
    ) -> Self {
        let data = elementwise::map_slices_into(self.as_slice(), f);
        Tensor::from_parts(data, self.shape.clone(), None)
    }

    /// Applies an out-of-place two-slice kernel `f(z, self, out)` (a
    /// vector-math `_into` gradient) with no recording:
    /// [`zip_slice`](Self::zip_slice) in one pass, without the copy of the
    /// data ([`elementwise::zip_slices_into`]).
    #[track_caller]
    pub(crate) fn zip_slice_into(
        &self,
        z: &Self,
        f: impl Fn(&[E], &[E], &mut [std::mem::MaybeUninit<E>]) + Sync,
    ) -> Self {
        let data = elementwise::zip_slices_into(z.as_slice(), self.as_slice(), f);
        Tensor::from_parts(data, self.shape.clone(), None)
    }

    /// `y = f(x)` by a slice kernel; the backward pass is `grad * f'` in one
    /// fused pass `raw(z, grad)`, where `z` is the input or (when
    /// `on_output`) the saved output. Under `create_graph` it falls back to
    /// the composed, differentiable `rule(grad, x, fwd(x))`.
    #[track_caller]
    fn unary_fused(
        &self,
        name: &'static str,
        f: fn(&mut [E]),
        fwd: fn(&Self) -> Self,
        rule: Rule<E, D>,
        raw: fn(&[E], &mut [E]),
        on_output: bool,
    ) -> Self {
        let y = self.map_slice(f);
        let saved = on_output.then(|| y.clone());
        y.record(
            name,
            vec![self.clone()],
            move |ctx: &BackwardCtx<'_, E, D>| {
                let x = &ctx.inputs[0];
                if ctx.create_graph {
                    return vec![Some(rule(ctx.grad, x, &fwd(x)))];
                }
                let z = saved.as_ref().unwrap_or(x);
                vec![Some(ctx.grad.zip_slice(z, raw))]
            },
        )
    }

    /// `y = f(x)`; the rule maps `(grad, x, y)` to the input gradient, and
    /// `fwd` recomputes `y` on the tape for higher-order gradients.
    #[track_caller]
    fn unary(
        &self,
        name: &'static str,
        f: impl Fn(E) -> E + Sync,
        fwd: fn(&Self) -> Self,
        rule: Rule<E, D>,
    ) -> Self {
        let y = self.map(f);
        let saved = y.clone();
        y.record(
            name,
            vec![self.clone()],
            move |ctx: &BackwardCtx<'_, E, D>| {
                let x = &ctx.inputs[0];
                let y = if ctx.create_graph {
                    fwd(x)
                } else {
                    saved.clone()
                };
                vec![Some(rule(ctx.grad, x, &y))]
            },
        )
    }

    /// `-x`. Also available as the unary `-` operator.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, -2.0], &[2]);
    /// assert_eq!(t.neg().to_vec(), vec![-1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn neg(&self) -> Self {
        self.map(|x| -x)
            .record("neg", vec![self.clone()], |ctx| vec![Some(ctx.grad.neg())])
    }

    /// `e^x`.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::zeros(&[1]);
    /// assert_eq!(t.exp().item(), 1.0);
    /// ```
    #[track_caller]
    pub fn exp(&self) -> Self {
        let y = self.map_slice(vmath::exp);
        let saved = y.clone();
        y.record("exp", vec![self.clone()], move |ctx| {
            let y = if ctx.create_graph {
                ctx.inputs[0].exp()
            } else {
                saved.clone()
            };
            vec![Some(ctx.grad.mul(&y))]
        })
    }

    /// Natural logarithm.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::ones(&[1]);
    /// assert_eq!(t.log().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn log(&self) -> Self {
        self.map_slice(vmath::ln)
            .record("log", vec![self.clone()], |ctx| {
                vec![Some(ctx.grad.div(&ctx.inputs[0]))]
            })
    }

    /// `ln(1 + x)`, accurate for small `x`.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::zeros(&[1]);
    /// assert_eq!(t.log1p().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn log1p(&self) -> Self {
        self.unary(
            "log1p",
            |x| x.ln_1p(),
            |t| t.log1p(),
            |g, x, _| g.div(&x.add_scalar(E::one())),
        )
    }

    /// Square root.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![4.0], &[1]);
    /// assert_eq!(t.sqrt().item(), 2.0);
    /// ```
    #[track_caller]
    pub fn sqrt(&self) -> Self {
        self.unary(
            "sqrt",
            |x| x.sqrt(),
            |t| t.sqrt(),
            |g, _, y| g.div(&y.mul_scalar(E::from_f64(2.0))),
        )
    }

    /// `1 / sqrt(x)`.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![4.0], &[1]);
    /// assert_eq!(t.rsqrt().item(), 0.5);
    /// ```
    #[track_caller]
    pub fn rsqrt(&self) -> Self {
        // d/dx x^(-1/2) = -1/2 y^3
        self.unary(
            "rsqrt",
            |x| x.sqrt().recip(),
            |t| t.rsqrt(),
            |g, _, y| g.mul(&y.mul(y).mul(y)).mul_scalar(E::from_f64(-0.5)),
        )
    }

    /// `|x|`; the gradient at 0 is 0, as in PyTorch.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-3.0], &[1]);
    /// assert_eq!(t.abs().item(), 3.0);
    /// ```
    #[track_caller]
    pub fn abs(&self) -> Self {
        self.unary("abs", |x| x.abs(), |t| t.abs(), |g, x, _| g.mul(&x.sign()))
    }

    /// The sign of each element (-1, 0 or 1). Its gradient is zero (as
    /// PyTorch's, the derivative almost everywhere).
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-3.0, 0.0, 2.0], &[3]);
    /// assert_eq!(t.sign().to_vec(), vec![-1.0, 0.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn sign(&self) -> Self {
        self.map(|x| {
            if x > E::zero() {
                E::one()
            } else if x < E::zero() {
                -E::one()
            } else {
                E::zero()
            }
        })
        .record("sign", vec![self.clone()], |ctx| {
            vec![Some(Tensor::zeros_in(ctx.grad.shape()))]
        })
    }

    /// Sine.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).sin().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn sin(&self) -> Self {
        self.unary("sin", |x| x.sin(), |t| t.sin(), |g, x, _| g.mul(&x.cos()))
    }

    /// Cosine.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).cos().item(), 1.0);
    /// ```
    #[track_caller]
    pub fn cos(&self) -> Self {
        self.unary(
            "cos",
            |x| x.cos(),
            |t| t.cos(),
            |g, x, _| g.mul(&x.sin()).neg(),
        )
    }

    /// Tangent.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).tan().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn tan(&self) -> Self {
        self.unary(
            "tan",
            |x| x.tan(),
            |t| t.tan(),
            |g, _, y| g.mul(&y.mul(y).add_scalar(E::one())),
        )
    }

    /// Hyperbolic tangent.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).tanh().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn tanh(&self) -> Self {
        self.unary_fused(
            "tanh",
            vmath::tanh,
            |t| t.tanh(),
            |g, _, y| g.mul(&y.mul(y).rsub_scalar(E::one())),
            vmath::tanh_grad,
            true,
        )
    }

    /// The logistic function `1 / (1 + e^-x)`.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).sigmoid().item(), 0.5);
    /// ```
    #[track_caller]
    pub fn sigmoid(&self) -> Self {
        self.unary_fused(
            "sigmoid",
            vmath::sigmoid,
            |t| t.sigmoid(),
            |g, _, y| g.mul(&y.mul(&y.rsub_scalar(E::one()))),
            vmath::sigmoid_grad,
            true,
        )
    }

    /// `max(x, 0)`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-1.0, 2.0], &[2]);
    /// assert_eq!(t.relu().to_vec(), vec![0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn relu(&self) -> Self {
        let y = self.map(|x| if x > E::zero() { x } else { E::zero() });
        y.record("relu", vec![self.clone()], |ctx: &BackwardCtx<'_, E, D>| {
            let x = &ctx.inputs[0];
            if ctx.create_graph {
                return vec![Some(ctx.grad.mul(&relu_mask(x)))];
            }
            // `grad * mask` in one pass, the mask computed per element
            // (the composed rule above builds the mask, then multiplies):
            // the same product, so the same bits.
            let data = elementwise::zip(ctx.grad.as_slice(), x.as_slice(), |g, v| {
                g * if v > E::zero() { E::one() } else { E::zero() }
            });
            vec![Some(Tensor::from_parts(data, x.shape.clone(), None))]
        })
    }

    /// `x` for `x > 0`, `slope * x` otherwise.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-1.0, 2.0], &[2]);
    /// assert_eq!(t.leaky_relu(0.1).to_vec(), vec![-0.1, 2.0]);
    /// ```
    #[track_caller]
    pub fn leaky_relu(&self, slope: f64) -> Self {
        let s = E::from_f64(slope);
        self.map(|x| if x > E::zero() { x } else { x * s }).record(
            "leaky_relu",
            vec![self.clone()],
            move |ctx| {
                let w = ctx.inputs[0].map(|v| if v > E::zero() { E::one() } else { s });
                vec![Some(ctx.grad.mul(&w))]
            },
        )
    }

    /// `x` for `x > 0`, `alpha (e^x - 1)` otherwise.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![2.0], &[1]);
    /// assert_eq!(t.elu(1.0).item(), 2.0);
    /// ```
    #[track_caller]
    pub fn elu(&self, alpha: f64) -> Self {
        let a = E::from_f64(alpha);
        self.map(|x| if x > E::zero() { x } else { a * x.exp_m1() })
            .record("elu", vec![self.clone()], move |ctx| {
                let x = &ctx.inputs[0];
                let pos = x.map(|v| if v > E::zero() { E::one() } else { E::zero() });
                let neg = pos.rsub_scalar(E::one());
                // d/dx = 1 on the positive side, alpha e^x on the other.
                let d = pos.add(&neg.mul(&x.exp()).mul_scalar(a));
                vec![Some(ctx.grad.mul(&d))]
            })
    }

    /// The Gauss error function.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).erf().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn erf(&self) -> Self {
        self.unary_fused(
            "erf",
            vmath::erf,
            |t| t.erf(),
            |g, x, _| {
                // d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
                let c = E::from_f64(std::f64::consts::FRAC_2_SQRT_PI);
                g.mul(&x.square().neg().exp()).mul_scalar(c)
            },
            vmath::erf_grad,
            false,
        )
    }

    /// GELU, exact form: `x Phi(x) = x/2 (1 + erf(x / sqrt 2))`.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).gelu().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn gelu(&self) -> Self {
        let half = E::from_f64(0.5);
        let r2 = E::from_f64(std::f64::consts::FRAC_1_SQRT_2);
        self.map_slice(vmath::gelu)
            .record("gelu", vec![self.clone()], move |ctx| {
                let x = &ctx.inputs[0];
                if !ctx.create_graph {
                    return vec![Some(ctx.grad.zip_slice(x, vmath::gelu_grad))];
                }
                // Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi)
                let cdf = x.mul_scalar(r2).erf().add_scalar(E::one()).mul_scalar(half);
                let inv_sqrt_2pi =
                    E::from_f64(0.5 * std::f64::consts::FRAC_2_SQRT_PI * r2.to_f64());
                let pdf = x.square().mul_scalar(-half).exp().mul_scalar(inv_sqrt_2pi);
                vec![Some(ctx.grad.mul(&cdf.add(&x.mul(&pdf))))]
            })
    }

    /// GELU, tanh approximation:
    /// `x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).gelu_tanh().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn gelu_tanh(&self) -> Self {
        let half = E::from_f64(0.5);
        let c = E::from_f64((2.0 / std::f64::consts::PI).sqrt());
        let k = E::from_f64(0.044715);
        self.map_slice_into(vmath::gelu_tanh_into).record(
            "gelu_tanh",
            vec![self.clone()],
            move |ctx| {
                let x = &ctx.inputs[0];
                if !ctx.create_graph {
                    return vec![Some(ctx.grad.zip_slice_into(x, vmath::gelu_tanh_grad_into))];
                }
                let x2 = x.square();
                let t = x.add(&x2.mul(x).mul_scalar(k)).mul_scalar(c).tanh();
                let dt = t.square().rsub_scalar(E::one());
                let du = x2
                    .mul_scalar(k * E::from_f64(3.0))
                    .add_scalar(E::one())
                    .mul_scalar(c);
                // 1/2 (1 + t) + 1/2 x (1 - t^2) u'
                let d = t
                    .add_scalar(E::one())
                    .mul_scalar(half)
                    .add(&x.mul(&dt).mul(&du).mul_scalar(half));
                vec![Some(ctx.grad.mul(&d))]
            },
        )
    }

    /// SiLU (swish with beta 1): `x sigmoid(x)`.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).silu().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn silu(&self) -> Self {
        self.map_slice(vmath::silu)
            .record("silu", vec![self.clone()], |ctx| {
                let x = &ctx.inputs[0];
                if !ctx.create_graph {
                    return vec![Some(ctx.grad.zip_slice(x, vmath::silu_grad))];
                }
                let s = x.sigmoid();
                // s (1 + x (1 - s))
                let d = s.mul(&x.mul(&s.rsub_scalar(E::one())).add_scalar(E::one()));
                vec![Some(ctx.grad.mul(&d))]
            })
    }

    /// Mish: `x tanh(softplus(x))`.
    ///
    /// ```
    /// assert_eq!(forge::Tensor::<f64>::zeros(&[1]).mish().item(), 0.0);
    /// ```
    #[track_caller]
    pub fn mish(&self) -> Self {
        self.map_slice(vmath::mish)
            .record("mish", vec![self.clone()], |ctx| {
                let x = &ctx.inputs[0];
                if !ctx.create_graph {
                    return vec![Some(ctx.grad.zip_slice(x, vmath::mish_grad))];
                }
                let t = x.softplus(1.0, 20.0).tanh();
                // tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x)
                let d = t.add(&x.mul(&t.square().rsub_scalar(E::one())).mul(&x.sigmoid()));
                vec![Some(ctx.grad.mul(&d))]
            })
    }

    /// Softplus `1/beta ln(1 + e^(beta x))`, linear where `beta x > threshold`
    /// (PyTorch's defaults are `beta = 1`, `threshold = 20`).
    ///
    /// ```
    /// let y = forge::Tensor::<f64>::zeros(&[1]).softplus(1.0, 20.0).item();
    /// assert!((y - 2f64.ln()).abs() < 1e-15);
    /// ```
    #[track_caller]
    pub fn softplus(&self, beta: f64, threshold: f64) -> Self {
        let (b, th) = (E::from_f64(beta), E::from_f64(threshold));
        self.map_slice(|v| vmath::softplus(v, b, th)).record(
            "softplus",
            vec![self.clone()],
            move |ctx| {
                let x = &ctx.inputs[0];
                if !ctx.create_graph {
                    return vec![Some(
                        ctx.grad
                            .zip_slice(x, |x, g| vmath::softplus_grad(x, g, b, th)),
                    )];
                }
                let lin = x.map(|v| if v * b > th { E::one() } else { E::zero() });
                // sigmoid(beta x) below the threshold, 1 above it.
                let d = x
                    .mul_scalar(b)
                    .sigmoid()
                    .mul(&lin.rsub_scalar(E::one()))
                    .add(&lin);
                vec![Some(ctx.grad.mul(&d))]
            },
        )
    }

    /// `x^2`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![3.0], &[1]);
    /// assert_eq!(t.square().item(), 9.0);
    /// ```
    #[track_caller]
    pub fn square(&self) -> Self {
        self.map(|x| x * x)
            .record("square", vec![self.clone()], |ctx| {
                vec![Some(
                    ctx.grad.mul(&ctx.inputs[0]).mul_scalar(E::from_f64(2.0)),
                )]
            })
    }

    /// `1 / x`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![4.0], &[1]);
    /// assert_eq!(t.reciprocal().item(), 0.25);
    /// ```
    #[track_caller]
    pub fn reciprocal(&self) -> Self {
        self.unary(
            "reciprocal",
            |x| x.recip(),
            |t| t.reciprocal(),
            |g, _, y| g.mul(&y.square()).neg(),
        )
    }

    /// `x^p` for a constant exponent.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![4.0], &[1]);
    /// assert_eq!(t.powf(1.5).item(), 8.0);
    /// ```
    #[track_caller]
    pub fn powf(&self, p: f64) -> Self {
        let pe = E::from_f64(p);
        self.map(|x| x.powf(pe))
            .record("powf", vec![self.clone()], move |ctx| {
                let x = &ctx.inputs[0];
                vec![Some(ctx.grad.mul(&x.powf(p - 1.0)).mul_scalar(pe))]
            })
    }

    /// Clamps every element into `[min, max]`; `None` leaves a side open.
    /// The gradient passes where `min <= x <= max`, as in PyTorch.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-2.0, 0.5, 3.0], &[3]);
    /// assert_eq!(t.clamp(Some(-1.0), Some(1.0)).to_vec(), vec![-1.0, 0.5, 1.0]);
    /// ```
    #[track_caller]
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Self {
        let lo = min.map(E::from_f64);
        let hi = max.map(E::from_f64);
        let inside = move |x: E| lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h);
        self.map(move |x| {
            let x = lo.map_or(x, |l| if x < l { l } else { x });
            hi.map_or(x, |h| if x > h { h } else { x })
        })
        .record("clamp", vec![self.clone()], move |ctx| {
            let m = ctx.inputs[0].map(|v| if inside(v) { E::one() } else { E::zero() });
            vec![Some(ctx.grad.mul(&m))]
        })
    }
}

/// ReLU's derivative as a tensor: 1 where `x > 0`, else 0 (a NaN gets 0).
fn relu_mask<E: Float, D: Device>(x: &Tensor<E, D>) -> Tensor<E, D> {
    x.map(|v| if v > E::zero() { E::one() } else { E::zero() })
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    /// ReLU's one-pass backward gives the bits of the composed rule
    /// (`grad * mask`, which `create_graph` still runs) and of the
    /// definition, with negative gradients over zeros of either sign and
    /// NaNs (`-g * 0` is `-0.0`), long enough to run in parallel chunks.
    #[test]
    fn relu_backward_has_the_bits_of_grad_times_mask() {
        let n = 70_001;
        let specials = [
            0.0f32,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
        ];
        let x: Vec<f32> = (0..n)
            .map(|i| match i % 11 {
                0..=5 => specials[i % 11],
                _ => ((i * 7919) % 201) as f32 / 10.0 - 10.0,
            })
            .collect();
        let g: Vec<f32> = (0..n)
            .map(|i| ((i * 104_729) % 97) as f32 / 8.0 - 6.0)
            .collect();
        let xt = Tensor::<f32>::from_vec(x.clone(), &[n]).requires_grad();
        let gt = Tensor::<f32>::from_vec(g.clone(), &[n]);
        let fused = xt.relu().backward_with(&gt, false);
        let composed = xt.relu().backward_with(&gt, true);
        let (a, b) = (
            fused.get(&xt).unwrap().to_vec(),
            composed.get(&xt).unwrap().to_vec(),
        );
        for i in 0..n {
            let want = g[i] * if x[i] > 0.0 { 1.0 } else { 0.0 };
            assert_eq!(a[i].to_bits(), want.to_bits(), "one pass, at {i}");
            assert_eq!(b[i].to_bits(), want.to_bits(), "composed, at {i}");
        }
    }
}

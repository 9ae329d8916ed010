//! `interpolate` (PyTorch's `F.interpolate`, without antialiasing): nearest,
//! nearest-exact, linear, bilinear, bicubic and trilinear resampling of the
//! spatial dimensions of an `[N, C, *spatial]` tensor, to a `size` or by a
//! `scale_factor`, with `align_corners` either way.
//!
//! Every mode is separable: along each spatial axis, output index `o` is a
//! fixed weighted sum of a few input indices (1 for nearest, 2 for linear,
//! 4 for cubic), computed with PyTorch's index arithmetic (in the element
//! type, as PyTorch's CPU kernels do) and applied one axis at a time by
//! [`crate::cpu::resample`]. The map is linear in the input, so its
//! gradient is the transposed map, and the transposed map's gradient is
//! the map again: gradients of any order come for free.

use crate::cpu::index::split_at_axis;
use crate::cpu::resample::{self, AxisMap};
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

/// The resampling kernel of [`Interpolate`], named as PyTorch's `mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InterpolateMode {
    /// `'nearest'`: input index `floor(o * scale)` (PyTorch's, which is
    /// not rounding to the nearest).
    #[default]
    Nearest,
    /// `'nearest-exact'`: input index `floor((o + 0.5) * scale)`, the
    /// nearest pixel centre.
    NearestExact,
    /// `'linear'`: 1 spatial dimension (`[N, C, L]`), 2 taps.
    Linear,
    /// `'bilinear'`: 2 spatial dimensions (`[N, C, H, W]`), 2 taps each.
    Bilinear,
    /// `'bicubic'`: 2 spatial dimensions, 4 taps each (Keys' cubic with
    /// `A = -0.75`, border indices clamped), as PyTorch.
    Bicubic,
    /// `'trilinear'`: 3 spatial dimensions (`[N, C, D, H, W]`).
    Trilinear,
}

impl InterpolateMode {
    /// PyTorch's name of the mode (`"bilinear"`, `"nearest-exact"`, ...).
    ///
    /// ```
    /// use forge::ops::InterpolateMode;
    /// assert_eq!(InterpolateMode::NearestExact.name(), "nearest-exact");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Self::Nearest => "nearest",
            Self::NearestExact => "nearest-exact",
            Self::Linear => "linear",
            Self::Bilinear => "bilinear",
            Self::Bicubic => "bicubic",
            Self::Trilinear => "trilinear",
        }
    }

    /// The mode of a PyTorch name, `None` for an unknown one.
    ///
    /// ```
    /// use forge::ops::InterpolateMode;
    /// assert_eq!(InterpolateMode::from_name("bicubic"), Some(InterpolateMode::Bicubic));
    /// assert_eq!(InterpolateMode::from_name("area"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Nearest,
            Self::NearestExact,
            Self::Linear,
            Self::Bilinear,
            Self::Bicubic,
            Self::Trilinear,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }

    /// The number of spatial dimensions the mode requires (`None`: any of
    /// 1, 2 or 3).
    fn spatial_dims(self) -> Option<usize> {
        match self {
            Self::Nearest | Self::NearestExact => None,
            Self::Linear => Some(1),
            Self::Bilinear | Self::Bicubic => Some(2),
            Self::Trilinear => Some(3),
        }
    }

    fn interpolating(self) -> bool {
        !matches!(self, Self::Nearest | Self::NearestExact)
    }
}

/// The options of [`Tensor::interpolate`], as PyTorch's `F.interpolate`
/// arguments: exactly one of `size` and `scale_factor`, a `mode`
/// (default nearest) and `align_corners` (only for the interpolating
/// modes; `None` means `false`). `recompute_scale_factor` is PyTorch's
/// default: a given `scale_factor` is used as given in the index
/// arithmetic, and the output size is `floor(input_size * scale_factor)`.
///
/// ```
/// use forge::ops::{Interpolate, InterpolateMode};
/// let o = Interpolate::scale_factor(2.0).mode(InterpolateMode::Bilinear).align_corners(true);
/// assert_eq!(o.mode, InterpolateMode::Bilinear);
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Interpolate {
    /// The output size of each spatial dimension (one value for all, or
    /// one per dimension).
    pub size: Option<Vec<usize>>,
    /// The factor of each spatial dimension (one value for all, or one per
    /// dimension).
    pub scale_factor: Option<Vec<f64>>,
    /// The kernel.
    pub mode: InterpolateMode,
    /// Whether the corner pixels of input and output are aligned (their
    /// centres coincide) rather than their outer edges.
    pub align_corners: Option<bool>,
}

impl Interpolate {
    /// Resample to `size` (one entry for every spatial dimension, or one
    /// per dimension), nearest mode.
    ///
    /// ```
    /// use forge::ops::Interpolate;
    /// assert_eq!(Interpolate::size(&[4, 6]).size, Some(vec![4, 6]));
    /// ```
    pub fn size(size: &[usize]) -> Self {
        Interpolate {
            size: Some(size.to_vec()),
            ..Self::default()
        }
    }

    /// Resample by `factor` along every spatial dimension, nearest mode.
    ///
    /// ```
    /// use forge::ops::Interpolate;
    /// assert_eq!(Interpolate::scale_factor(2.0).scale_factor, Some(vec![2.0]));
    /// ```
    pub fn scale_factor(factor: f64) -> Self {
        Self::scale_factors(&[factor])
    }

    /// Resample by one factor per spatial dimension, nearest mode.
    ///
    /// ```
    /// use forge::ops::Interpolate;
    /// let o = Interpolate::scale_factors(&[2.0, 0.5]);
    /// assert_eq!(o.scale_factor, Some(vec![2.0, 0.5]));
    /// ```
    pub fn scale_factors(factors: &[f64]) -> Self {
        Interpolate {
            scale_factor: Some(factors.to_vec()),
            ..Self::default()
        }
    }

    /// The same options with another mode.
    ///
    /// ```
    /// use forge::ops::{Interpolate, InterpolateMode};
    /// let o = Interpolate::size(&[3]).mode(InterpolateMode::Linear);
    /// assert_eq!(o.mode, InterpolateMode::Linear);
    /// ```
    pub fn mode(mut self, mode: InterpolateMode) -> Self {
        self.mode = mode;
        self
    }

    /// The same options with `align_corners` set.
    ///
    /// ```
    /// use forge::ops::Interpolate;
    /// assert_eq!(Interpolate::size(&[3]).align_corners(true).align_corners, Some(true));
    /// ```
    pub fn align_corners(mut self, align: bool) -> Self {
        self.align_corners = Some(align);
        self
    }
}

/// The output sizes and the per-axis scales handed to the kernels.
#[track_caller]
fn plan_sizes(shape: &[usize], o: &Interpolate) -> (Vec<usize>, Vec<Option<f64>>) {
    let rank = shape.len();
    shape_assert!(
        (3..=5).contains(&rank),
        "interpolate: expected an input [N, C, *spatial] with 1 to 3 spatial dimensions, got shape {shape:?}"
    );
    let k = rank - 2;
    if let Some(want) = o.mode.spatial_dims() {
        shape_assert!(
            want == k,
            "interpolate: mode {:?} needs a {}-d input, got shape {shape:?}",
            o.mode.name(),
            want + 2
        );
    }
    shape_assert!(
        o.mode.interpolating() || o.align_corners.is_none(),
        "interpolate: align_corners can only be set with the interpolating modes \
         (linear, bilinear, bicubic, trilinear), not {:?}",
        o.mode.name()
    );
    let spread = |n: usize, what: &str| {
        shape_assert!(
            n == 1 || n == k,
            "interpolate: {n} values of {what} for {k} spatial dimensions of shape {shape:?}"
        );
    };
    match (&o.size, &o.scale_factor) {
        (Some(size), None) => {
            spread(size.len(), "size");
            let out: Vec<usize> = (0..k).map(|i| size[i.min(size.len() - 1)]).collect();
            shape_assert!(
                out.iter().all(|&s| s > 0),
                "interpolate: output size {out:?} for shape {shape:?} has a zero"
            );
            (out, vec![None; k])
        }
        (None, Some(f)) => {
            spread(f.len(), "scale_factor");
            let f: Vec<f64> = (0..k).map(|i| f[i.min(f.len() - 1)]).collect();
            let out: Vec<usize> = (0..k)
                .map(|i| {
                    shape_assert!(
                        f[i] > 0.0 && f[i].is_finite(),
                        "interpolate: scale_factor {} must be positive and finite",
                        f[i]
                    );
                    (shape[i + 2] as f64 * f[i]).floor() as usize
                })
                .collect();
            shape_assert!(
                out.iter().all(|&s| s > 0),
                "interpolate: scale_factor {f:?} gives an empty output for shape {shape:?}"
            );
            (out, f.into_iter().map(Some).collect())
        }
        _ => shape_panic!(
            "interpolate: give exactly one of size ({:?}) and scale_factor ({:?})",
            o.size,
            o.scale_factor
        ),
    }
}

/// PyTorch's `area_pixel_compute_scale`, in the element type.
fn area_scale<E: Float>(inp: usize, out: usize, align: bool, scale: Option<f64>) -> E {
    if align {
        if out > 1 {
            E::from_f64((inp - 1) as f64) / E::from_f64((out - 1) as f64)
        } else {
            E::zero()
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => E::from_f64(1.0 / s),
            _ => E::from_f64(inp as f64) / E::from_f64(out as f64),
        }
    }
}

/// PyTorch's `area_pixel_compute_source_index`.
fn source_index<E: Float>(scale: E, o: usize, align: bool, cubic: bool) -> E {
    let o = E::from_f64(o as f64);
    if align {
        scale * o
    } else {
        let half = E::from_f64(0.5);
        let src = scale * (o + half) - half;
        if !cubic && src < E::zero() {
            E::zero()
        } else {
            src
        }
    }
}

/// `floorf` of a value of the element type, as PyTorch's kernels (which
/// round to `float` first).
fn floorf<E: Float>(v: E) -> i64 {
    (v.to_f64() as f32).floor() as i64
}

/// PyTorch's `guard_index_and_lambda`: the lower index and the fraction.
fn index_and_lambda<E: Float>(real: E, inp: usize) -> (i64, E) {
    let idx = floorf(real).min(inp as i64 - 1);
    let lambda = (real - E::from_f64(idx as f64))
        .max(E::zero())
        .min(E::one());
    (idx, lambda)
}

/// The cubic convolution weights of the 4 taps at fraction `t` (`A = -0.75`).
fn cubic_weights<E: Float>(t: E) -> [E; 4] {
    let a = E::from_f64(-0.75);
    let c = E::from_f64;
    let near = |x: E| ((a + c(2.0)) * x - (a + c(3.0))) * x * x + E::one();
    let far = |x: E| ((a * x - c(5.0) * a) * x + c(8.0) * a) * x - c(4.0) * a;
    let one = E::one();
    [far(t + one), near(t), near(one - t), far(c(2.0) - t)]
}

/// The map of one spatial axis from `inp` to `out` indices.
fn axis_map<E: Float>(
    mode: InterpolateMode,
    inp: usize,
    out: usize,
    align: bool,
    scale: Option<f64>,
) -> AxisMap<E> {
    let mut start = vec![0usize];
    let mut src = Vec::new();
    let mut weight = Vec::new();
    let last = inp as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last) as usize;
    for o in 0..out {
        match mode {
            InterpolateMode::Nearest | InterpolateMode::NearestExact => {
                let scale = area_scale::<E>(inp, out, false, scale);
                let i = if mode == InterpolateMode::Nearest {
                    floorf(source_index(scale, o, true, false))
                } else {
                    floorf(source_index(scale, o, false, false) + E::from_f64(0.5))
                };
                src.push(clamp(i));
                weight.push(E::one());
            }
            InterpolateMode::Linear | InterpolateMode::Bilinear | InterpolateMode::Trilinear => {
                let (i0, l1) = if inp == out {
                    (o as i64, E::zero())
                } else {
                    let scale = area_scale::<E>(inp, out, align, scale);
                    index_and_lambda(source_index(scale, o, align, false), inp)
                };
                let i1 = if i0 < last { i0 + 1 } else { i0 };
                src.extend([clamp(i0), clamp(i1)]);
                weight.extend([E::one() - l1, l1]);
            }
            InterpolateMode::Bicubic => {
                let scale = area_scale::<E>(inp, out, align, scale);
                let (i, t) = index_and_lambda(source_index(scale, o, align, true), inp);
                for (j, w) in cubic_weights(t).into_iter().enumerate() {
                    src.push(clamp(i - 1 + j as i64));
                    weight.push(w);
                }
            }
        }
        start.push(src.len());
    }
    AxisMap::new(inp, start, src, weight)
}

/// `F.interpolate(input, ...)`: [`Tensor::interpolate`] as a free function.
///
/// # Panics
/// As [`Tensor::interpolate`].
///
/// ```
/// use forge::nn::functional::interpolate;
/// use forge::ops::{Interpolate, InterpolateMode};
/// use forge::Tensor;
/// let x = Tensor::<f64>::ones(&[2, 3, 4, 4]);
/// let o = Interpolate::size(&[6, 5]).mode(InterpolateMode::Bicubic);
/// assert_eq!(interpolate(&x, &o).shape(), &[2, 3, 6, 5]);
/// ```
#[track_caller]
pub fn interpolate<E: Float, D: Device>(
    input: &Tensor<E, D>,
    options: &Interpolate,
) -> Tensor<E, D> {
    input.interpolate(options)
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Resamples the spatial dimensions of an `[N, C, *spatial]` tensor
    /// (1 to 3 spatial dimensions), as PyTorch's
    /// `F.interpolate(input, size, scale_factor, mode, align_corners)`
    /// without antialiasing. Index arithmetic follows PyTorch's CPU kernels
    /// (in the element type), so results agree to rounding.
    ///
    /// # Panics
    /// When the rank is not 3 to 5, the mode needs another rank, both or
    /// neither of `size` and `scale_factor` are given, either has neither
    /// 1 nor one entry per spatial dimension, the output would be empty, or
    /// `align_corners` is set for a nearest mode.
    ///
    /// ```
    /// use forge::ops::{Interpolate, InterpolateMode};
    /// use forge::Tensor;
    /// let x = Tensor::<f64>::from_vec(vec![1.0, 3.0], &[1, 1, 2]);
    /// let near = x.interpolate(&Interpolate::size(&[4]));
    /// assert_eq!(near.to_vec(), vec![1.0, 1.0, 3.0, 3.0]);
    /// let lin = x.interpolate(&Interpolate::size(&[3]).mode(InterpolateMode::Linear).align_corners(true));
    /// assert_eq!(lin.to_vec(), vec![1.0, 2.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn interpolate(&self, options: &Interpolate) -> Self {
        let (sizes, scales) = plan_sizes(self.shape(), options);
        let align = options.align_corners.unwrap_or(false);
        let mut y = self.clone();
        for (k, (&out, &scale)) in sizes.iter().zip(&scales).enumerate() {
            let axis = k + 2;
            let inp = self.shape()[axis];
            let map = axis_map::<E>(options.mode, inp, out, align, scale);
            // An identity map (same size, each output reads its own index
            // with weight 1) is skipped.
            if map.is_identity(E::one()) {
                continue;
            }
            let t = map.transpose();
            y = y.resample_axis(axis, Arc::new(map), Arc::new(t));
        }
        y
    }

    /// Applies `map` along `axis`; the gradient applies `transposed`.
    fn resample_axis(
        &self,
        axis: usize,
        map: Arc<AxisMap<E>>,
        transposed: Arc<AxisMap<E>>,
    ) -> Self {
        let (outer, _, inner) = split_at_axis(self.shape(), axis);
        let data = resample::apply(self.as_slice(), outer, inner, &map);
        let mut shape = self.shape().to_vec();
        shape[axis] = map.out_len();
        Tensor::from_parts(data, shape.into(), None).record(
            "interpolate",
            vec![self.clone()],
            move |ctx| {
                vec![Some(ctx.grad.resample_axis(
                    axis,
                    transposed.clone(),
                    map.clone(),
                ))]
            },
        )
    }
}

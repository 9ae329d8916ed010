//! `Debug` and `Display` in PyTorch's style: nested brackets, one number
//! format chosen for the whole tensor (integers as `1.`, fixed with 4
//! decimals, or scientific when the magnitudes span more than 1000x), values
//! right-aligned to a common width, rows wrapped at 80 columns, tensors of
//! more than 1000 elements elided to their first and last 3 entries per
//! dimension with `...`; then the shape and dtype.
//!
//! ```
//! let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
//! assert_eq!(t.to_string(), "\
//! tensor([[1., 2.],
//!         [3., 4.]], shape=[2, 2], dtype=float32)");
//! ```

use super::{DType, Device, Element, Tensor};
use std::fmt;

/// Tensors with more elements than this are elided (PyTorch's `threshold`).
const THRESHOLD: usize = 1000;
/// Entries kept at each end of an elided dimension (`edgeitems`).
const EDGE: usize = 3;
/// Decimal places (`precision`).
const PRECISION: usize = 4;
/// Line width rows are wrapped at (`linewidth`).
const LINE_WIDTH: usize = 80;
/// `tensor(`
const PREFIX: usize = 7;

/// How every value of one tensor is written (PyTorch's `_Formatter`).
struct Formatter {
    float: bool,
    int_mode: bool,
    sci_mode: bool,
    width: usize,
}

/// Python's `{:.4e}`: a mantissa and a signed exponent of at least two
/// digits (`1.0000e-05`).
fn sci(x: f64) -> String {
    let s = format!("{x:.PRECISION$e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let e: i32 = exp.parse().unwrap_or(0);
            let sign = if e < 0 { '-' } else { '+' };
            format!("{mantissa}e{sign}{:02}", e.abs())
        }
        None => s, // inf and nan have no exponent
    }
}

/// Python's spelling of non-finite floats.
fn non_finite(x: f64) -> Option<String> {
    if x.is_nan() {
        Some("nan".into())
    } else if x.is_infinite() {
        Some(if x > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        None
    }
}

impl Formatter {
    /// Chooses the format from the values that will be shown.
    fn new<E: Element>(values: &[E]) -> Self {
        let float = matches!(E::DTYPE, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
        let mut f = Formatter {
            float,
            int_mode: true,
            sci_mode: false,
            width: 1,
        };
        if !float {
            f.width = values
                .iter()
                .map(|&v| f.raw(v).len())
                .max()
                .unwrap_or(1)
                .max(1);
            return f;
        }
        let finite: Vec<f64> = values
            .iter()
            .map(|v| v.to_f64())
            .filter(|x| x.is_finite() && *x != 0.0)
            .collect();
        if finite.is_empty() {
            return f;
        }
        let (min, max) = finite.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
            (lo.min(x.abs()), hi.max(x.abs()))
        });
        f.int_mode = finite.iter().all(|x| x.ceil() == *x);
        f.sci_mode = max / min > 1000.0 || max > 1e8 || (!f.int_mode && min < 1e-4);
        f.width = finite
            .iter()
            .map(|&x| f.raw_f64(x).len())
            .max()
            .unwrap_or(1);
        f
    }

    fn raw_f64(&self, x: f64) -> String {
        if let Some(s) = non_finite(x) {
            s
        } else if self.sci_mode {
            sci(x)
        } else if self.int_mode {
            format!("{x:.0}.")
        } else {
            format!("{x:.PRECISION$}")
        }
    }

    /// One value, unpadded.
    fn raw<E: Element>(&self, v: E) -> String {
        if self.float {
            self.raw_f64(v.to_f64())
        } else if E::DTYPE == DType::Bool {
            if v.to_f64() != 0.0 { "True" } else { "False" }.into()
        } else {
            v.to_string()
        }
    }

    /// One value, right-aligned to the common width.
    fn format<E: Element>(&self, v: E) -> String {
        format!("{:>w$}", self.raw(v), w = self.width)
    }
}

/// The indices shown along a dimension of size `n`: all of them, or the
/// first and last [`EDGE`] with `None` marking the ellipsis.
fn shown(n: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && n > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    }
}

impl<E: Element, D: Device> Tensor<E, D> {
    /// Collects the values that will be printed, in order.
    fn shown_values(&self, axis: usize, offset: usize, summarize: bool, out: &mut Vec<E>) {
        let shape = self.shape();
        let stride: usize = shape[axis + 1..].iter().product();
        for i in shown(shape[axis], summarize).into_iter().flatten() {
            if axis + 1 == shape.len() {
                out.push(self.as_slice()[offset + i]);
            } else {
                self.shown_values(axis + 1, offset + i * stride, summarize, out);
            }
        }
    }

    /// The bracketed values, without the `tensor(` prefix.
    fn render(&self) -> String {
        if self.rank() == 0 {
            return Formatter::new(self.as_slice()).raw(self.as_slice()[0]);
        }
        if self.numel() == 0 {
            return "[]".into();
        }
        let summarize = self.numel() > THRESHOLD;
        let mut values = Vec::new();
        self.shown_values(0, 0, summarize, &mut values);
        let f = Formatter::new(&values);
        self.render_dim(0, 0, PREFIX, summarize, &f)
    }

    fn render_dim(
        &self,
        axis: usize,
        offset: usize,
        indent: usize,
        summarize: bool,
        f: &Formatter,
    ) -> String {
        let shape = self.shape();
        let idx = shown(shape[axis], summarize);
        if axis + 1 == shape.len() {
            let items: Vec<String> = idx
                .iter()
                .map(|i| match i {
                    Some(i) => f.format(self.as_slice()[offset + i]),
                    None => " ...".into(),
                })
                .collect();
            let per_line = (LINE_WIDTH.saturating_sub(indent) / (f.width + 2)).max(1);
            let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
            return format!(
                "[{}]",
                lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
            );
        }
        let stride: usize = shape[axis + 1..].iter().product();
        let rows: Vec<String> = idx
            .iter()
            .map(|i| match i {
                Some(i) => self.render_dim(axis + 1, offset + i * stride, indent + 1, summarize, f),
                None => "...".into(),
            })
            .collect();
        let sep = format!(
            ",{}{}",
            "\n".repeat(shape.len() - axis - 1),
            " ".repeat(indent + 1)
        );
        format!("[{}]", rows.join(&sep))
    }
}

impl<E: Element, D: Device> fmt::Display for Tensor<E, D> {
    /// Prints the values as PyTorch does, then `shape=[..]`, `dtype=..` and,
    /// for a tensor on the tape, `requires_grad=True` (a leaf) or
    /// `grad_fn=<op>` naming the op that made it (PyTorch's `grad_fn`).
    ///
    /// ```
    /// use forge::Tensor;
    /// let t = Tensor::<f32>::from_vec(vec![1.0, 2.5], &[2]);
    /// assert_eq!(t.to_string(), "tensor([1.0000, 2.5000], shape=[2], dtype=float32)");
    /// // One format for the whole tensor: scientific when magnitudes differ widely.
    /// let t = Tensor::<f64>::from_vec(vec![1e-5, 1.0], &[2]);
    /// assert_eq!(t.to_string(), "tensor([1.0000e-05, 1.0000e+00], shape=[2], dtype=float64)");
    /// // Aligned to a common width, integers and booleans as PyTorch spells them.
    /// let t = Tensor::<i64>::from_vec(vec![-1, 10, 200], &[3]);
    /// assert_eq!(t.to_string(), "tensor([ -1,  10, 200], shape=[3], dtype=int64)");
    /// let t = Tensor::<bool>::from_vec(vec![true, false], &[2]);
    /// assert_eq!(t.to_string(), "tensor([ True, False], shape=[2], dtype=bool)");
    /// // Large tensors are elided.
    /// let t = Tensor::<i32>::from_fn(&[2000], |i| i as i32);
    /// assert_eq!(t.to_string(),
    ///     "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], shape=[2000], dtype=int32)");
    /// // Scalars, empty tensors, non-finite values, tracked tensors.
    /// assert_eq!(Tensor::<f32>::scalar(3.5).to_string(), "tensor(3.5000, shape=[], dtype=float32)");
    /// assert_eq!(Tensor::<f32>::zeros(&[0, 3]).to_string(), "tensor([], shape=[0, 3], dtype=float32)");
    /// let t = Tensor::<f32>::from_vec(vec![0.0, 1.0, f32::NAN, f32::NEG_INFINITY], &[4]);
    /// assert_eq!(t.to_string(), "tensor([0., 1., nan, -inf], shape=[4], dtype=float32)");
    /// let w = Tensor::<f32>::ones(&[1]).requires_grad();
    /// assert_eq!(w.to_string(), "tensor([1.], shape=[1], dtype=float32, requires_grad=True)");
    /// let y = w.mul_scalar(2.0);
    /// assert_eq!(y.to_string(), "tensor([2.], shape=[1], dtype=float32, grad_fn=<mul_scalar>)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tensor({}, shape={:?}, dtype={}",
            self.render(),
            self.shape(),
            E::DTYPE
        )?;
        // PyTorch's suffixes: a leaf that records its gradient, or the op
        // that made a tensor on the tape.
        match &self.node {
            Some(node) if node.name == "leaf" => write!(f, ", requires_grad=True")?,
            Some(node) => write!(f, ", grad_fn=<{}>", node.name)?,
            None => {}
        }
        write!(f, ")")
    }
}

impl<E: Element, D: Device> fmt::Debug for Tensor<E, D> {
    /// The same text as `Display` (PyTorch's `repr` and `str` agree too).
    ///
    /// ```
    /// let t = forge::Tensor::<u8>::from_vec(vec![1, 2], &[2]);
    /// assert_eq!(format!("{t:?}"), t.to_string());
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    /// The values part of the text (drops the shape/dtype suffix).
    fn body<E: crate::Element>(t: &Tensor<E>) -> String {
        let s = t.to_string();
        let cut = s.rfind(", shape=").unwrap();
        format!("{})", &s[..cut])
    }

    // Expected texts are PyTorch 2.x's `str(tensor)` for the same values.
    #[test]
    fn matches_pytorch_layouts() {
        let t = Tensor::<f32>::from_fn(&[2, 2, 2], |i| i as f32 + 0.5);
        assert_eq!(
            body(&t),
            "tensor([[[0.5000, 1.5000],\n         [2.5000, 3.5000]],\n\n        \
             [[4.5000, 5.5000],\n         [6.5000, 7.5000]]])"
        );
        let t = Tensor::<f32>::from_vec(vec![-1.5, 10.25, 0.0], &[3]);
        assert_eq!(body(&t), "tensor([-1.5000, 10.2500,  0.0000])");
        let t = Tensor::<f64>::from_vec(vec![1.0, 1e9], &[2]);
        assert_eq!(body(&t), "tensor([1.0000e+00, 1.0000e+09])");
        let t = Tensor::<f32>::zeros(&[2000]);
        assert_eq!(body(&t), "tensor([0., 0., 0.,  ..., 0., 0., 0.])");
    }

    #[test]
    fn long_rows_wrap_at_80_columns() {
        let t = Tensor::<f32>::from_fn(&[20], |i| i as f32 + 0.5);
        assert_eq!(
            body(&t),
            "tensor([ 0.5000,  1.5000,  2.5000,  3.5000,  4.5000,  5.5000,  6.5000,  7.5000,\n         \
             8.5000,  9.5000, 10.5000, 11.5000, 12.5000, 13.5000, 14.5000, 15.5000,\n        \
             16.5000, 17.5000, 18.5000, 19.5000])"
        );
        for line in t.to_string().lines() {
            assert!(line.len() <= 80, "{line:?}");
        }
    }

    #[test]
    fn large_matrices_elide_rows_and_columns() {
        let t = Tensor::<f32>::from_fn(&[100, 100], |i| i as f32);
        assert_eq!(
            body(&t),
            "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.7000e+01, 9.8000e+01,\n         \
             9.9000e+01],\n        \
             [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.9700e+02, 1.9800e+02,\n         \
             1.9900e+02],\n        \
             [2.0000e+02, 2.0100e+02, 2.0200e+02,  ..., 2.9700e+02, 2.9800e+02,\n         \
             2.9900e+02],\n        \
             ...,\n        \
             [9.7000e+03, 9.7010e+03, 9.7020e+03,  ..., 9.7970e+03, 9.7980e+03,\n         \
             9.7990e+03],\n        \
             [9.8000e+03, 9.8010e+03, 9.8020e+03,  ..., 9.8970e+03, 9.8980e+03,\n         \
             9.8990e+03],\n        \
             [9.9000e+03, 9.9010e+03, 9.9020e+03,  ..., 9.9970e+03, 9.9980e+03,\n         \
             9.9990e+03]])"
        );
    }
}

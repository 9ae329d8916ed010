//! `Debug` and `Display` in PyTorch's style: nested brackets, values aligned,
//! long dimensions elided with `...`, then the shape and dtype.

use super::{Device, Element, Tensor};
use std::fmt;

/// Dimensions longer than this print their first and last `EDGE` entries.
const THRESHOLD: usize = 1000;
const EDGE: usize = 3;

fn fmt_value<E: Element>(v: E, float: bool) -> String {
    if float {
        let x = v.to_f64();
        if x.is_finite() && x != 0.0 && (x.abs() >= 1e8 || x.abs() < 1e-4) {
            format!("{x:.4e}")
        } else {
            format!("{x:.4}")
        }
    } else {
        format!("{v}")
    }
}

impl<E: Element, D: Device> Tensor<E, D> {
    fn render(&self) -> String {
        let float = matches!(
            E::DTYPE,
            super::DType::F16 | super::DType::BF16 | super::DType::F32 | super::DType::F64
        );
        let elide = self.numel() > THRESHOLD;
        let values: Vec<String> = self
            .as_slice()
            .iter()
            .map(|&v| fmt_value(v, float))
            .collect();
        let width = values.iter().map(|s| s.len()).max().unwrap_or(0);
        if self.rank() == 0 {
            return values[0].clone();
        }
        let mut out = String::new();
        self.render_dim(0, 0, &values, width, elide, &mut out);
        out
    }

    fn render_dim(
        &self,
        axis: usize,
        offset: usize,
        values: &[String],
        width: usize,
        elide: bool,
        out: &mut String,
    ) {
        let shape = self.shape();
        let n = shape[axis];
        let stride: usize = shape[axis + 1..].iter().product();
        let indent = " ".repeat(axis + 8);
        out.push('[');
        let show: Vec<Option<usize>> = if elide && n > 2 * EDGE {
            (0..EDGE)
                .map(Some)
                .chain(std::iter::once(None))
                .chain((n - EDGE..n).map(Some))
                .collect()
        } else {
            (0..n).map(Some).collect()
        };
        for (k, i) in show.iter().enumerate() {
            if k > 0 {
                out.push(',');
                if axis + 1 == shape.len() {
                    out.push(' ');
                } else {
                    out.push_str(&"\n".repeat(shape.len() - axis - 1));
                    out.push_str(&indent[..axis + 8]);
                }
            }
            match i {
                None => out.push_str("..."),
                Some(i) if axis + 1 == shape.len() => {
                    out.push_str(&format!("{:>width$}", values[offset + i]))
                }
                Some(i) => {
                    self.render_dim(axis + 1, offset + i * stride, values, width, elide, out)
                }
            }
        }
        out.push(']');
    }
}

impl<E: Element, D: Device> fmt::Display for Tensor<E, D> {
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, 2.5], &[2]);
    /// assert_eq!(t.to_string(), "tensor([1.0000, 2.5000], shape=[2], dtype=float32)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tensor({}, shape={:?}, dtype={}",
            self.render(),
            self.shape(),
            E::DTYPE
        )?;
        if self.is_tracked() {
            write!(f, ", tracked")?;
        }
        write!(f, ")")
    }
}

impl<E: Element, D: Device> fmt::Debug for Tensor<E, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

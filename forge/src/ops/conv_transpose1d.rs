//! `conv_transpose1d`: the 1-d transposed convolution, as the 2-d one over
//! a unit height (so it shares its kernels and its differentiable backward).

use crate::tensor::{Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// `F.conv_transpose1d(x, weight, bias, stride, padding, output_padding,
    /// groups, dilation)`: input `[N, C_in, L]`, `weight [C_in, C_out /
    /// groups, k]`, optional `bias [C_out]`; the output is `[N, C_out, OL]`
    /// with `OL = (L - 1) stride - 2 padding + dilation (k - 1) +
    /// output_padding + 1`. Differentiable in the input, weight and bias.
    ///
    /// # Panics
    /// When the ranks, channel counts, groups or bias shape do not fit, a
    /// stride or dilation is zero, `output_padding` is not smaller than the
    /// stride or the dilation, or the output would be empty (the message
    /// names `conv_transpose1d` or the 2-d op it runs as, and the shapes).
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 1, 2]);
    /// let w = Tensor::<f32>::from_vec(vec![1.0, 10.0], &[1, 1, 2]);
    /// let y = x.conv_transpose1d(&w, None, 2, 0, 0, 1, 1);
    /// assert_eq!(y.to_vec(), vec![1.0, 10.0, 2.0, 20.0]);
    /// ```
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn conv_transpose1d(
        &self,
        weight: &Self,
        bias: Option<&Self>,
        stride: usize,
        padding: usize,
        output_padding: usize,
        groups: usize,
        dilation: usize,
    ) -> Self {
        let (xs, ws) = (self.shape(), weight.shape());
        assert!(
            xs.len() == 3 && ws.len() == 3,
            "conv_transpose1d: input {xs:?} must be [N, C_in, L] and weight {ws:?} [C_in, C_out/groups, k]"
        );
        let y = self.view(&[xs[0], xs[1], 1, xs[2]]).conv_transpose2d(
            &weight.view(&[ws[0], ws[1], 1, ws[2]]),
            bias,
            [1, stride],
            [0, padding],
            [0, output_padding],
            groups,
            [1, dilation],
        );
        let ys = y.shape().to_vec();
        y.view(&[ys[0], ys[1], ys[3]])
    }
}

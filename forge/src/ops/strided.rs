//! Two crate-internal differentiable primitives that many layout and
//! indexing ops reduce to, each the other's adjoint:
//!
//! - `strided_view`: a strided view of the input (slice with step, narrow,
//!   select, diagonal, split), sharing its storage when the view has no
//!   negative stride, read into a new tensor otherwise (flip);
//! - `strided_embed`: write the input into a strided view of a new tensor
//!   filled with a constant (constant padding, and the gradients of the
//!   reads).
//!
//! The views used here never address one element twice, so the two are
//! exact adjoints and each backward rule is the other op: gradients of any
//! order come for free.

use crate::cpu::strided::{strided_read, strided_write};
use crate::tensor::{numel, Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// The strided view `(offset, shape, strides)` of `self` (counted in
    /// `self`'s row-major order), recorded as `name`: a handle on `self`'s
    /// storage when the layouts compose (see `Tensor::view_of`), otherwise
    /// a copy. The view must be injective.
    #[track_caller]
    pub(crate) fn strided_view(
        &self,
        name: &'static str,
        offset: usize,
        shape: &[usize],
        strides: &[isize],
    ) -> Self {
        let out = self.view_of(offset, shape, strides).unwrap_or_else(|| {
            let data = strided_read(self.as_slice(), offset, shape, strides);
            Tensor::from_parts(data, shape.into(), None)
        });
        let strides = strides.to_vec();
        out.record(name, vec![self.clone()], move |ctx| {
            let x = &ctx.inputs[0];
            vec![Some(ctx.grad.strided_embed(
                "strided_embed",
                x.shape(),
                offset,
                &strides,
                E::zero(),
            ))]
        })
    }

    /// A tensor of `shape` filled with `fill` whose strided view
    /// `(offset, self.shape(), strides)` holds `self`, recorded as `name`.
    /// The view must be injective.
    #[track_caller]
    pub(crate) fn strided_embed(
        &self,
        name: &'static str,
        shape: &[usize],
        offset: usize,
        strides: &[isize],
        fill: E,
    ) -> Self {
        let mut data = D::filled(numel(shape), fill);
        strided_write(&mut data, offset, self.shape(), strides, self.as_slice());
        let strides = strides.to_vec();
        Tensor::from_parts(data, shape.into(), None).record(name, vec![self.clone()], move |ctx| {
            let x = &ctx.inputs[0];
            vec![Some(ctx.grad.strided_view(
                "strided_view",
                offset,
                x.shape(),
                &strides,
            ))]
        })
    }
}

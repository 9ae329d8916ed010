//! How a layer reports an int8 weight to the tensor visitors: the integer
//! values under the weight's own name and the scales under `<name>_scale`,
//! and, when a visitor replaces them (loading a checkpoint), the weight
//! rebuilt from the new tensors.

use super::int8::Int8Weight;
use crate::nn::{TensorKind, TensorVisitor, TensorVisitorMut};
use crate::tensor::{Element, Float, Tensor};
use std::sync::Arc;

/// Reports `q` as `name` (its integers, through
/// [`TensorVisitor::visit_int8`]) and `name_scale` (its scales, frozen).
pub(crate) fn visit_int8<E: Float>(v: &mut dyn TensorVisitor<E>, name: &str, q: &Int8Weight) {
    v.visit_int8(name, q);
    v.visit(
        &format!("{name}_scale"),
        &q.scale_tensor(),
        TensorKind::Frozen,
    );
}

/// Reports `q` as two frozen tensors, `name` (the integer values, of the
/// weight's shape) and `name_scale`; a visitor that replaces either gets
/// the weight rebuilt from them (rounded and clamped to `i8`).
///
/// # Panics
/// When replaced tensors do not fit a weight (a checkpoint's shapes are
/// checked against the model's before anything is replaced).
pub(crate) fn visit_int8_mut<E: Float>(
    v: &mut dyn TensorVisitorMut<E>,
    name: &str,
    q: &mut Arc<Int8Weight>,
) {
    let (values, scales) = (q.values_tensor::<E>(), q.scale_tensor::<E>());
    let (mut w, mut s) = (values.clone(), scales.clone());
    v.visit(name, &mut w, TensorKind::Frozen);
    v.visit(&format!("{name}_scale"), &mut s, TensorKind::Frozen);
    if !w.shares_data(&values) || !s.shares_data(&scales) {
        *q = Arc::new(from_tensors(&w, &s));
    }
}

/// An int8 weight from tensors of its integer values (first dimension the
/// output channels) and scales (`[1]` or `[out]`).
fn from_tensors<E: Float>(w: &Tensor<E>, s: &Tensor<E>) -> Int8Weight {
    assert!(
        w.rank() >= 2,
        "int8 weight: expected at least 2 dimensions, got {:?}",
        w.shape()
    );
    let values: Vec<i8> = w
        .to_vec()
        .iter()
        .map(|&v| <i8 as Element>::from_f64(Element::to_f64(v)))
        .collect();
    let scales = s
        .to_vec()
        .iter()
        .map(|&v| Element::to_f64(v) as f32)
        .collect();
    let out = w.shape()[0];
    Int8Weight::from_values(&values, scales, out, w.numel() / out.max(1)).with_shape(w.shape())
}

//! The panics a user meets first, pinned word for word: shape errors name
//! the op and both shapes (or the axis and the rank), so a message that
//! regresses to a bare index panic fails here; a `Sequential` names the
//! layer (index and type) that received the wrong shape.

use forge::Tensor;

fn t(shape: &[usize]) -> Tensor<f32> {
    Tensor::zeros(shape)
}

#[test]
#[should_panic(expected = "matmul: [2, 3] x [4, 5]: inner dimensions 3 and 4 differ")]
fn matmul_inner_dimension_mismatch() {
    t(&[2, 3]).matmul(&t(&[4, 5]));
}

#[test]
#[should_panic(expected = "matmul: [2, 3, 4] x [5, 4, 2]: batch dimensions cannot be broadcast")]
fn matmul_batch_dimension_mismatch() {
    t(&[2, 3, 4]).matmul(&t(&[5, 4, 2]));
}

#[test]
#[should_panic(expected = "add: shapes [2, 3] and [4] cannot be broadcast together")]
fn add_broadcast_mismatch() {
    let _ = t(&[2, 3]).add(&t(&[4]));
}

#[test]
#[should_panic(expected = "mul: shapes [3, 1, 5] and [2, 4] cannot be broadcast together")]
fn mul_operator_broadcast_mismatch() {
    let _ = &t(&[3, 1, 5]) * &t(&[2, 4]);
}

#[test]
#[should_panic(expected = "sum: axis 2 is out of range for a tensor of rank 2")]
fn reduction_axis_out_of_range() {
    t(&[2, 3]).sum_dim(&[2], false);
}

#[test]
#[should_panic(expected = "mean: axis -3 is out of range for a tensor of rank 2")]
fn negative_reduction_axis_out_of_range() {
    t(&[2, 3]).mean_dim(&[-3], false);
}

#[test]
#[should_panic(expected = "permute: axis 3 is out of range for a tensor of rank 3")]
fn permute_axis_out_of_range() {
    t(&[2, 3, 4]).permute(&[0, 3, 1]);
}

#[test]
#[should_panic(expected = "permute: [0, 0, 1] is not a permutation of the axes of shape [2, 3, 4]")]
fn permute_repeated_axis() {
    t(&[2, 3, 4]).permute(&[0, 0, 1]);
}

#[test]
#[should_panic(
    expected = "backward: called on a tensor of shape [2, 3]; it needs one element (use backward_with)"
)]
fn backward_on_a_non_scalar() {
    let x = t(&[2, 3]).requires_grad();
    x.mul_scalar(2.0).backward();
}

/// A `Sequential` names the layer that received the wrong shape (its index
/// and type) before the layer's own message; deeper cases are pinned in
/// `tests/misc/usability.rs`.
#[test]
#[should_panic(
    expected = "Sequential layer 0 (Linear): Linear(3 -> 4): expected input of shape [.., 3], got [2, 5]"
)]
fn sequential_names_the_first_layer_when_the_input_does_not_fit() {
    use forge::prelude::*;
    let mut rng = Rng::new(0);
    let model = sequential![
        Linear::new(3, 4, &mut rng),
        Relu,
        Linear::new(4, 2, &mut rng)
    ];
    model.forward(Tensor::<f32>::zeros(&[2, 5]));
}

//! `qkv_attention`: multi-head self-attention read straight from a packed
//! `[B, T, 3C]` projection (the GPT layout), one op with a fused backward.
//!
//! Math: per batch entry and head, `O = softmax(Q K^T / sqrt(d) (+ causal
//! mask)) V`, heads side by side in `[B, T, C]`. Checks:
//! - the same values and `qkv` gradients, exactly (`==` per element), as
//!   the composed form (split, permute to heads, `scaled_dot_product_attention`,
//!   permute back), in f64 and f32, causal or not, for small shapes, the
//!   GPT bench's (`[16, 64, 384]`, 4 heads: the packed gemm path) and
//!   causal heads long enough to be multiplied in row blocks (64, 97, 100
//!   and 128 tokens: ragged and joined last blocks); the fused
//!   op runs each product and elementwise step in the composed ops' order;
//! - an f64 gradcheck (eps 1e-6, atol = rtol = 1e-6, the project's standard);
//! - Hessian-vector products through `backward_with_graph` (the tensor-op
//!   fallback) against central differences of the fused gradient (1e-6);
//! - under `no_grad` the same values; 1 and 2 threads the same bits;
//! - bad shapes panic with the op's name and the shape.

use crate::common;

use forge::nn::functional::{qkv_attention, scaled_dot_product_attention as sdpa};
use forge::{gradcheck, no_grad, Float, Rng, Tensor};

fn randn<E: Float>(shape: &[usize], seed: u64) -> Tensor<E> {
    Tensor::normal(shape, 0.0, 1.0, &mut Rng::new(seed))
}

/// The composed form: what the GPT's attention did before the fused op.
fn composed<E: Float>(qkv: &Tensor<E>, n_head: usize, causal: bool) -> Tensor<E> {
    let (b, t, c) = (qkv.dim(0) as isize, qkv.dim(1) as isize, qkv.dim(2) / 3);
    let (nh, hd) = (n_head as isize, (c / n_head) as isize);
    let parts = qkv.split(c, -1);
    let heads = |z: &Tensor<E>| z.reshape(&[b, t, nh, hd]).permute(&[0, 2, 1, 3]);
    sdpa(
        &heads(&parts[0]),
        &heads(&parts[1]),
        &heads(&parts[2]),
        None,
        causal,
    )
    .permute(&[0, 2, 1, 3])
    .reshape(&[b, t, c as isize])
}

/// The output and the `qkv` gradient for the upstream gradient `u`.
fn value_and_grad<E: Float>(
    f: impl Fn(&Tensor<E>) -> Tensor<E>,
    qkv: &Tensor<E>,
    u: &Tensor<E>,
) -> (Vec<E>, Vec<E>) {
    let x = qkv.detach().requires_grad();
    let y = f(&x);
    let g = y.backward_with(u, false);
    (y.to_vec(), g.get(&x).expect("qkv gradient").to_vec())
}

fn fused_equals_composed<E: Float>(b: usize, t: usize, c: usize, n_head: usize, seed: u64) {
    let qkv = randn::<E>(&[b, t, 3 * c], seed);
    let u = randn::<E>(&[b, t, c], seed + 1);
    for causal in [true, false] {
        let fused = value_and_grad(|x| qkv_attention(x, n_head, causal), &qkv, &u);
        let reference = value_and_grad(|x| composed(x, n_head, causal), &qkv, &u);
        let what = format!(
            "{} [{b}, {t}, {}] {n_head} heads causal {causal}",
            std::any::type_name::<E>(),
            3 * c
        );
        assert!(fused.0 == reference.0, "{what}: outputs differ");
        assert!(fused.1 == reference.1, "{what}: qkv gradients differ");
        let inference = no_grad(|| qkv_attention(&qkv, n_head, causal)).to_vec();
        assert!(inference == fused.0, "{what}: no_grad output differs");
    }
}

#[test]
fn fused_equals_composed_f64_and_f32() {
    fused_equals_composed::<f64>(2, 5, 8, 2, 1);
    fused_equals_composed::<f32>(2, 5, 8, 2, 3);
    fused_equals_composed::<f64>(3, 9, 12, 3, 5);
    fused_equals_composed::<f32>(1, 1, 4, 4, 7);
    // the GPT bench's shape: 64-token sequences, 4 heads of 32
    fused_equals_composed::<f32>(16, 64, 128, 4, 9);
    // causal heads multiplied in row blocks of 32 queries: a ragged last
    // block (100 = 3 x 32 + 4), a last block of one row joined to the one
    // before (97), and 128 tokens in four blocks
    fused_equals_composed::<f32>(2, 100, 48, 2, 11);
    fused_equals_composed::<f32>(2, 97, 48, 2, 13);
    fused_equals_composed::<f32>(1, 128, 128, 2, 15);
}

#[test]
fn qkv_attention_passes_gradcheck() {
    for causal in [true, false] {
        let qkv = randn::<f64>(&[2, 4, 12], 11);
        let u = randn::<f64>(&[2, 4, 4], 12);
        gradcheck(
            |v| qkv_attention(&v[0], 2, causal).mul(&u),
            &[qkv],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("causal {causal}: {e}"));
    }
}

#[test]
fn gradients_of_gradients_through_qkv_attention() {
    let qkv = randn::<f64>(&[2, 4, 12], 13);
    let u = randn::<f64>(&[2, 4, 4], 14);
    for causal in [true, false] {
        let f = |x: &Tensor<f64>| qkv_attention(x, 2, causal).mul(&u).sum();
        common::assert_hvp(f, &qkv, 15, &format!("causal {causal}"));
    }
}

#[test]
fn qkv_attention_is_bit_identical_for_1_and_2_threads() {
    let _threads = crate::common::lock_thread_count();
    let qkv = randn::<f32>(&[16, 64, 384], 21);
    let u = randn::<f32>(&[16, 64, 128], 22);
    let run = || {
        let (y, g) = value_and_grad(|x| qkv_attention(x, 4, true), &qkv, &u);
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        (bits(y), bits(g))
    };
    let (one, two, dispatched) = crate::common::at_1_and_2_threads(run);
    assert!(dispatched, "no parallel dispatch at 2 threads");
    assert!(one == two, "1 and 2 threads differ");
}

#[test]
#[should_panic(expected = "qkv_attention: qkv of shape [2, 3, 10] with 2 heads")]
fn a_width_not_three_heads_wide_names_the_shape() {
    let _ = qkv_attention(&Tensor::<f32>::zeros(&[2, 3, 10]), 2, true);
}

#[test]
#[should_panic(expected = "qkv_attention: qkv of shape [2, 12] with 2 heads")]
fn a_rank_other_than_three_names_the_shape() {
    let _ = qkv_attention(&Tensor::<f32>::zeros(&[2, 12]), 2, true);
}

//! Attention with explicit masks applied inside the softmax kernel
//! (`softmax_masked`): boolean attention masks broadcast over `(..., L, S)`
//! and `MultiheadAttention`'s key padding mask `[N, S]`, with or without
//! the causal mask, are read in place instead of being expanded into an
//! additive `-inf` tensor.
//!
//! Math: `y = softmax(q k^T / sqrt(d) + m) v` with `m = 0` where attention
//! is allowed and `-inf` elsewhere. Checks: the fused path gives the same
//! bits as that formula written with tensor ops (forward and the
//! gradients of q, k, v and the layer's weights, f64 and f32); f64
//! gradchecks (eps 1e-6, atol = rtol = 1e-6); Hessian-vector products of
//! the `create_graph` rule against central differences of the fused
//! gradient (1e-6); a query with every key masked is NaN (PyTorch gives
//! NaN there too); 1 and 2 threads give the same bits.

use crate::common;

use forge::nn::functional::scaled_dot_product_attention as sdpa;
use forge::nn::MultiheadAttention;
use forge::{gradcheck, Float, Rng, Tensor};

fn randn<E: Float>(shape: &[usize], seed: u64) -> Tensor<E> {
    Tensor::normal(shape, 0.0, 1.0, &mut Rng::new(seed))
}

/// The additive mask of `allowed` (shape `[.., L, S]`), with the causal
/// mask on top when `causal`: 0 where allowed, `-inf` elsewhere.
fn additive<E: Float>(allowed: &Tensor<bool>, causal: bool) -> Tensor<E> {
    let (l, s) = (allowed.dim(-2), allowed.dim(-1));
    let data = allowed
        .as_slice()
        .iter()
        .enumerate()
        .map(|(k, &ok)| {
            let (i, j) = ((k / s) % l, k % s);
            if ok && (!causal || j <= i) {
                E::zero()
            } else {
                E::neg_infinity()
            }
        })
        .collect();
    Tensor::from_vec(data, allowed.shape())
}

/// Attention written with tensor ops: the scores plus the additive mask.
fn composed<E: Float>(
    q: &Tensor<E>,
    k: &Tensor<E>,
    v: &Tensor<E>,
    allowed: &Tensor<bool>,
    causal: bool,
) -> Tensor<E> {
    let scale = E::from_f64(1.0 / (q.dim(-1) as f64).sqrt());
    q.matmul_t(k)
        .mul_scalar(scale)
        .add(&additive(allowed, causal))
        .softmax(-1)
        .matmul(v)
}

/// `mask` broadcast (aligned on the right) to `shape`, materialised.
fn expand(mask: &Tensor<bool>, shape: &[usize]) -> Tensor<bool> {
    let off = shape.len() - mask.rank();
    let data = (0..shape.iter().product::<usize>())
        .map(|k| {
            let (mut rest, mut at, mut step) = (k, 0, 1);
            for a in (0..shape.len()).rev() {
                let i = rest % shape[a];
                rest /= shape[a];
                if a >= off && mask.shape()[a - off] != 1 {
                    at += i * step;
                    step *= mask.shape()[a - off];
                }
            }
            mask.as_slice()[at]
        })
        .collect();
    Tensor::from_vec(data, shape)
}

fn bits<E: Float>(t: &Tensor<E>) -> Vec<u64> {
    t.to_vec()
        .iter()
        .map(|v| v.to_f64().unwrap().to_bits())
        .collect()
}

/// `y` and the gradients of `inputs` for the loss `sum(y * u)`.
fn value_and_grads<E: Float>(
    f: impl Fn(&[Tensor<E>]) -> Tensor<E>,
    inputs: &[Tensor<E>],
    u_seed: u64,
) -> Vec<Vec<u64>> {
    let xs: Vec<Tensor<E>> = inputs.iter().map(|t| t.detach().requires_grad()).collect();
    let y = f(&xs);
    let u = randn::<E>(y.shape(), u_seed);
    let g = y.mul(&u).sum().backward();
    let mut out = vec![bits(&y)];
    out.extend(xs.iter().map(|x| bits(g.get(x).expect("gradient"))));
    out
}

/// A padding-style mask `[B, 1, 1, S]` (the last `pad[b]` keys of row `b`
/// hidden) and a mask `[L, S]` with a few holes, neither hiding key 0.
fn masks(b: usize, l: usize, s: usize) -> (Tensor<bool>, Tensor<bool>) {
    let pad: Vec<bool> = (0..b * s).map(|k| k % s < s - (k / s) % s.min(3)).collect();
    let holes: Vec<bool> = (0..l * s).map(|k| k % s == 0 || k % 5 != 2).collect();
    (
        Tensor::from_vec(pad, &[b, 1, 1, s]),
        Tensor::from_vec(holes, &[l, s]),
    )
}

/// The fused path's outputs and gradients equal the composed formula's,
/// bit for bit, for broadcast masks with and without the causal mask.
fn sdpa_fused_equals_composed<E: Float>() {
    let (b, h, l, s, d) = (3, 2, 4, 5, 3);
    let inputs = [
        randn::<E>(&[b, h, l, d], 1),
        randn::<E>(&[b, h, s, d], 2),
        randn::<E>(&[b, h, s, 2], 3),
    ];
    let (pad, holes) = masks(b, l, s);
    let both = Tensor::<bool>::from_vec(
        (0..b * l * s)
            .map(|k| pad.as_slice()[(k / (l * s)) * s + k % s] && holes.as_slice()[k % (l * s)])
            .collect(),
        &[b, 1, l, s],
    );
    for mask in [&pad, &holes, &both] {
        let full = mask;
        for causal in [false, true] {
            let fused = value_and_grads(
                |t| sdpa(&t[0], &t[1], &t[2], Some(mask), causal),
                &inputs,
                4,
            );
            let reference = value_and_grads(
                |t| composed(&t[0], &t[1], &t[2], &expand(full, &[b, 1, l, s]), causal),
                &inputs,
                4,
            );
            assert!(
                fused == reference,
                "mask {:?}, causal {causal}: fused != composed",
                mask.shape()
            );
        }
    }
}

#[test]
fn sdpa_masked_fused_equals_composed_f64_and_f32() {
    sdpa_fused_equals_composed::<f64>();
    sdpa_fused_equals_composed::<f32>();
}

/// `MultiheadAttention` with a key padding mask `[N, S]` and an attention
/// mask, written out with tensor ops (projections, heads, additive mask
/// `[N, 1, L, S]`, softmax, output projection).
fn mha_composed<E: Float>(
    m: &MultiheadAttention<E>,
    x: &Tensor<E>,
    pad: &Tensor<bool>,
    attn: &Tensor<bool>,
    causal: bool,
) -> Tensor<E> {
    let (n, t, e) = (x.dim(0), x.dim(1), x.dim(2));
    let h = m.num_heads;
    let b = m.in_proj_bias.as_ref().unwrap();
    let proj = |i: usize| {
        x.matmul_t(&m.in_proj_weight.narrow(0, i * e, e))
            .add(&b.narrow(0, i * e, e))
            .view(&[n, t, h, e / h])
            .permute(&[0, 2, 1, 3])
    };
    let ok: Vec<bool> = (0..n * t * t)
        .map(|k| {
            let (bi, i, j) = (k / (t * t), (k / t) % t, k % t);
            !pad.as_slice()[bi * t + j] && !attn.as_slice()[i * t + j]
        })
        .collect();
    let ok = Tensor::from_vec(ok, &[n, 1, t, t]);
    let y = composed(&proj(0), &proj(1), &proj(2), &ok, causal);
    let y = y.permute(&[0, 2, 1, 3]).view(&[n, t, e]);
    y.matmul_t(&m.out_proj.weight)
        .add(m.out_proj.bias.as_ref().unwrap())
}

fn mha_fused_equals_composed<E: Float>() {
    let mha = MultiheadAttention::<E>::new(8, 2, 0.0, true, &mut Rng::new(5));
    let (n, t) = (3, 5);
    let x = randn::<E>(&[n, t, 8], 6);
    let pad: Vec<bool> = (0..n * t).map(|k| k % t >= t - k / t).collect();
    let pad = Tensor::from_vec(pad, &[n, t]);
    let attn: Vec<bool> = (0..t * t).map(|k| k % t != 0 && k % 7 == 3).collect();
    let attn = Tensor::from_vec(attn, &[t, t]);
    let inputs = vec![
        x,
        mha.in_proj_weight.clone(),
        mha.in_proj_bias.clone().unwrap(),
        mha.out_proj.weight.clone(),
        mha.out_proj.bias.clone().unwrap(),
    ];
    for causal in [false, true] {
        let with = |t: &[Tensor<E>]| {
            let mut m = mha.clone();
            m.in_proj_weight = t[1].clone();
            m.in_proj_bias = Some(t[2].clone());
            m.out_proj.weight = t[3].clone();
            m.out_proj.bias = Some(t[4].clone());
            m
        };
        let fused = value_and_grads(
            |t| {
                with(t)
                    .attend(&t[0], &t[0], &t[0], Some(&pad), Some(&attn), causal)
                    .0
            },
            &inputs,
            7,
        );
        let reference = value_and_grads(
            |t| mha_composed(&with(t), &t[0], &pad, &attn, causal),
            &inputs,
            7,
        );
        assert!(fused == reference, "causal {causal}: fused != composed");
    }
}

#[test]
fn multihead_key_padding_fused_equals_composed_f64_and_f32() {
    mha_fused_equals_composed::<f64>();
    mha_fused_equals_composed::<f32>();
}

#[test]
fn masked_attention_gradcheck_and_second_order() {
    let (b, h, l, s) = (2, 2, 3, 4);
    let inputs = [
        randn::<f64>(&[b, h, l, 3], 11),
        randn::<f64>(&[b, h, s, 3], 12),
        randn::<f64>(&[b, h, s, 2], 13),
    ];
    let (pad, holes) = masks(b, l, s);
    let u = randn::<f64>(&[b, h, l, 2], 14);
    for mask in [&pad, &holes] {
        for causal in [false, true] {
            let f = |t: &[Tensor<f64>]| sdpa(&t[0], &t[1], &t[2], Some(mask), causal);
            gradcheck(f, &inputs, 1e-6, 1e-6, 1e-6).unwrap();
            let (k, v) = (&inputs[1], &inputs[2]);
            common::assert_hvp(
                |q| sdpa(q, k, v, Some(mask), causal).mul(&u).sum(),
                &inputs[0],
                15,
                "q",
            );
            let q = &inputs[0];
            common::assert_hvp(
                |k| sdpa(q, k, v, Some(mask), causal).mul(&u).sum(),
                k,
                16,
                "k",
            );
        }
    }
    // The layer with a key padding mask: gradcheck in the input and a
    // Hessian-vector product.
    let mha = MultiheadAttention::<f64>::new(4, 2, 0.0, true, &mut Rng::new(17));
    let pad = Tensor::<bool>::from_vec(vec![false, false, true, false, true, true], &[2, 3]);
    let x = randn::<f64>(&[2, 3, 4], 18);
    let f = |x: &Tensor<f64>| mha.attend(x, x, x, Some(&pad), None, false).0;
    gradcheck(|t| f(&t[0]), std::slice::from_ref(&x), 1e-6, 1e-6, 1e-6).unwrap();
    let w = randn::<f64>(&[2, 3, 4], 19);
    common::assert_hvp(|x| f(x).mul(&w).sum(), &x, 20, "");
}

/// A query whose keys are all masked gets NaN in every output, like
/// PyTorch's `0 / 0`; the other queries are unaffected.
#[test]
fn fully_masked_queries_are_nan() {
    let (q, k, v) = (
        randn::<f64>(&[2, 3], 21),
        randn::<f64>(&[4, 3], 22),
        randn::<f64>(&[4, 2], 23),
    );
    // Query 1 sees nothing; query 2 only key 0 (and with the causal mask,
    // query 0 sees only key 0, which query 0's row of `hide0` masks).
    let allowed = Tensor::<bool>::from_vec(
        vec![true, true, false, true, false, false, false, false],
        &[2, 4],
    );
    let y = sdpa(&q, &k, &v, Some(&allowed), false).to_vec();
    assert!(y[..2].iter().all(|v| v.is_finite()), "{y:?}");
    assert!(y[2..].iter().all(|v| v.is_nan()), "{y:?}");
    let hide0 = Tensor::<bool>::from_vec(
        vec![false, true, true, true, true, true, true, true],
        &[2, 4],
    );
    let y = sdpa(&q, &k, &v, Some(&hide0), true).to_vec();
    assert!(y[..2].iter().all(|v| v.is_nan()), "{y:?}");
    assert!(y[2..].iter().all(|v| v.is_finite()), "{y:?}");
    // A fully padded batch row of the layer.
    let mha = MultiheadAttention::<f64>::new(4, 2, 0.0, true, &mut Rng::new(24));
    let pad = Tensor::<bool>::from_vec(vec![false, true, true, true], &[2, 2]);
    let x = randn::<f64>(&[2, 2, 4], 25);
    let (out, w) = mha.attend(&x, &x, &x, Some(&pad), None, false);
    let (out, w) = (out.to_vec(), w.to_vec());
    assert!(out[..8].iter().chain(&w[..4]).all(|v| v.is_finite()));
    assert!(out[8..].iter().chain(&w[4..]).all(|v| v.is_nan()));
}

/// Scores `[4, 4, 128, 128]` (256K elements: the softmax and the zeroing
/// of its output run in parallel at 2 threads): the outputs and gradients
/// are the same bits at 1 and 2 threads, and the composed formula's.
#[test]
fn masked_attention_is_bit_identical_for_1_and_2_threads() {
    let _threads = crate::common::lock_thread_count();
    let inputs = [
        randn::<f32>(&[4, 4, 128, 16], 31),
        randn::<f32>(&[4, 4, 128, 16], 32),
        randn::<f32>(&[4, 4, 128, 16], 33),
    ];
    let pad: Vec<bool> = (0..4 * 128)
        .map(|k| k % 128 < 128 - 9 * (k / 128))
        .collect();
    let pad = Tensor::<bool>::from_vec(pad, &[4, 1, 1, 128]);
    let run = || value_and_grads(|t| sdpa(&t[0], &t[1], &t[2], Some(&pad), true), &inputs, 34);
    let (one, two, dispatched) = crate::common::at_1_and_2_threads(run);
    assert!(dispatched, "no parallel dispatch at 2 threads");
    assert!(one == two, "1 and 2 threads differ");
    let full = expand(&pad, &[4, 1, 128, 128]);
    let reference = value_and_grads(|t| composed(&t[0], &t[1], &t[2], &full, true), &inputs, 34);
    assert!(two == reference, "fused != composed at 2 threads");
}

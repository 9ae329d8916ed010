//! Parity of attention with PyTorch (fixtures `nn/attention_*`: outputs,
//! every input and weight gradient, head-averaged attention weights), and
//! gradient checks of `scaled_dot_product_attention` in f64.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

mod common;
mod second_order;
use common::Fixture;
use forge::nn::functional::scaled_dot_product_attention;
use forge::{gradcheck, Rng, Tensor};

/// `x W^T + b`.
fn linear(x: &Tensor<f64>, w: &Tensor<f64>, b: &Tensor<f64>) -> Tensor<f64> {
    x.matmul_t(w).add(b)
}

/// `(B, T, C)` to `(B, H, T, C / H)`.
fn heads(x: &Tensor<f64>, h: usize) -> Tensor<f64> {
    let (b, t, c) = (x.dim(0), x.dim(1), x.dim(2));
    x.view(&[b, t, h, c / h]).permute(&[0, 2, 1, 3])
}

fn merge(y: &Tensor<f64>) -> Tensor<f64> {
    let (b, h, t, d) = (y.dim(0), y.dim(1), y.dim(2), y.dim(3));
    y.permute(&[0, 2, 1, 3]).view(&[b, t, h * d])
}

const CAUSAL_PARAMS: [&str; 9] = [
    "x", "q.weight", "q.bias", "k.weight", "k.bias", "v.weight", "v.bias", "o.weight", "o.bias",
];

fn causal_self_attention(v: &[Tensor<f64>], h: usize) -> Tensor<f64> {
    let x = &v[0];
    let q = heads(&linear(x, &v[1], &v[2]), h);
    let k = heads(&linear(x, &v[3], &v[4]), h);
    let val = heads(&linear(x, &v[5], &v[6]), h);
    let y = scaled_dot_product_attention(&q, &k, &val, None, true);
    linear(&merge(&y), &v[7], &v[8])
}

#[test]
fn causal_self_attention_matches_pytorch() {
    let f = Fixture::load("nn/attention_mhsa_causal.safetensors");
    let h: usize = f.meta("num_heads").parse().unwrap();
    let v: Vec<Tensor<f64>> = CAUSAL_PARAMS
        .iter()
        .map(|n| f.t(n).requires_grad())
        .collect();
    let out = causal_self_attention(&v, h);
    f.check("out", &out);
    let g = out.backward_with(&f.t("gout"), false);
    for (i, n) in CAUSAL_PARAMS.iter().enumerate() {
        f.check(&format!("grad_{n}"), g.get(&v[i]).unwrap());
    }
}

fn qkv(rng: &mut Rng) -> Vec<Tensor<f64>> {
    vec![
        Tensor::normal(&[2, 3, 4], 0.0, 1.0, rng),
        Tensor::normal(&[2, 5, 4], 0.0, 1.0, rng),
        Tensor::normal(&[2, 5, 3], 0.0, 1.0, rng),
    ]
}

#[test]
fn sdpa_passes_gradcheck_with_masks() {
    let mut rng = Rng::new(1);
    let v = qkv(&mut rng);
    // Query 1 may not see keys 0 and 3; every query keeps some key.
    let mut allowed = vec![true; 15];
    allowed[5] = false;
    allowed[8] = false;
    let mask = Tensor::<bool>::from_vec(allowed, &[3, 5]);
    for (m, causal) in [
        (None, false),
        (None, true),
        (Some(&mask), false),
        (Some(&mask), true),
    ] {
        gradcheck(
            |t| scaled_dot_product_attention(&t[0], &t[1], &t[2], m, causal),
            &v,
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap();
        second_order::check(
            "sdpa",
            |q| scaled_dot_product_attention(q, &v[1], &v[2], m, causal),
            &v[0],
            1e-6,
        );
    }
}

#[test]
fn sdpa_masked_keys_get_zero_weight() {
    let mut rng = Rng::new(2);
    let v = qkv(&mut rng);
    let mut allowed = vec![true; 5];
    allowed[4] = false;
    let mask = Tensor::<bool>::from_vec(allowed, &[1, 5]);
    let y = scaled_dot_product_attention(&v[0], &v[1], &v[2], Some(&mask), false);
    // Changing the masked key's value does not change the output.
    let mut vv = v[2].to_vec();
    for c in 0..3 {
        vv[4 * 3 + c] = 1e3;
        vv[15 + 4 * 3 + c] = -1e3;
    }
    let y2 = scaled_dot_product_attention(
        &v[0],
        &v[1],
        &Tensor::from_vec(vv, &[2, 5, 3]),
        Some(&mask),
        false,
    );
    assert_eq!(y.to_vec(), y2.to_vec());
}

#[test]
#[should_panic(expected = "scaled_dot_product_attention: q [2, 3, 4], k [2, 5, 3], v [2, 5, 3]")]
fn sdpa_rejects_mismatched_features() {
    let mut rng = Rng::new(3);
    let v = qkv(&mut rng);
    scaled_dot_product_attention(&v[0], &v[2], &v[2], None, false);
}

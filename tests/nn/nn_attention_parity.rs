//! Parity of attention with PyTorch (fixtures `nn/attention_*`: outputs,
//! every input and weight gradient, head-averaged attention weights), and
//! gradient checks of `scaled_dot_product_attention` in f64.
//!
//! The fixtures are checked in f64 and in f32 (`f32_rtol`/`f32_atol`).
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64);
//! see tests/fixtures/README.md for how they were established.

use crate::common;
use crate::second_order;
use common::Fixture;
use forge::nn::functional::scaled_dot_product_attention;
use forge::{gradcheck, Float, Rng, Tensor};

/// `x W^T + b`.
fn linear<E: Float>(x: &Tensor<E>, w: &Tensor<E>, b: &Tensor<E>) -> Tensor<E> {
    x.matmul_t(w).add(b)
}

/// `(B, T, C)` to `(B, H, T, C / H)`.
fn heads<E: Float>(x: &Tensor<E>, h: usize) -> Tensor<E> {
    let (b, t, c) = (x.dim(0), x.dim(1), x.dim(2));
    x.view(&[b, t, h, c / h]).permute(&[0, 2, 1, 3])
}

fn merge<E: Float>(y: &Tensor<E>) -> Tensor<E> {
    let (b, h, t, d) = (y.dim(0), y.dim(1), y.dim(2), y.dim(3));
    y.permute(&[0, 2, 1, 3]).view(&[b, t, h * d])
}

const CAUSAL_PARAMS: [&str; 9] = [
    "x", "q.weight", "q.bias", "k.weight", "k.bias", "v.weight", "v.bias", "o.weight", "o.bias",
];

fn causal_self_attention<E: Float>(v: &[Tensor<E>], h: usize) -> Tensor<E> {
    let x = &v[0];
    let q = heads(&linear(x, &v[1], &v[2]), h);
    let k = heads(&linear(x, &v[3], &v[4]), h);
    let val = heads(&linear(x, &v[5], &v[6]), h);
    let y = scaled_dot_product_attention(&q, &k, &val, None, true);
    linear(&merge(&y), &v[7], &v[8])
}

fn causal_file<E: Float>(f: &Fixture) {
    assert_eq!(f.meta_list("inputs"), CAUSAL_PARAMS, "{}", f.name);
    let h: usize = f.parse("num_heads");
    let v: Vec<Tensor<E>> = CAUSAL_PARAMS
        .iter()
        .map(|n| f.input::<E>(n).requires_grad())
        .collect();
    let out = causal_self_attention(&v, h);
    f.check_as("out", &out);
    let g = out.backward_with(&f.input::<E>("gout"), false);
    for (i, n) in CAUSAL_PARAMS.iter().enumerate() {
        f.check_as(&format!("grad_{n}"), g.get(&v[i]).unwrap());
    }
}

#[test]
fn causal_self_attention_matches_pytorch() {
    let files = common::fixtures_with_prefix("nn", "attention_mhsa");
    assert!(!files.is_empty(), "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        causal_file::<f64>(&f);
        causal_file::<f32>(&f);
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

// ---- layers ----

use forge::nn::{Layer, MultiheadAttention};
use std::collections::BTreeMap;

const MHA_PARAMS: [&str; 4] = [
    "in_proj_weight",
    "in_proj_bias",
    "out_proj.weight",
    "out_proj.bias",
];

fn fixture_mha<E: Float>(f: &Fixture) -> MultiheadAttention<E> {
    let e: usize = f.parse("embed_dim");
    let h: usize = f.parse("num_heads");
    let mut mha = MultiheadAttention::<E>::new(
        e,
        h,
        f.meta_f64("dropout"),
        f.flag("batch_first"),
        &mut Rng::new(9),
    );
    let sd: BTreeMap<String, Tensor<E>> = MHA_PARAMS
        .iter()
        .map(|n| (n.to_string(), f.input::<E>(n)))
        .collect();
    mha.load_state_dict(&sd).unwrap();
    mha
}

fn mha_file<E: Float>(f: &Fixture) {
    let mha = fixture_mha::<E>(f);
    let pad = f.i("key_padding_mask").cast::<bool>();
    let x = f.input::<E>("x").requires_grad();
    let (out, w) = mha.attend(&x, &x, &x, Some(&pad), None, false);
    f.check_as("out", &out);
    f.check_as("attn_weights", &w);
    let g = out.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_x", g.get(&x).unwrap());
    let params = mha.named_parameters();
    assert_eq!(params.len(), f.meta_list("grads").len() - 1, "{}", f.name);
    for (name, p) in params {
        f.check_as(&format!("grad_{name}"), g.get(&p).unwrap());
    }
}

#[test]
fn multihead_attention_with_key_padding_matches_pytorch() {
    let files = common::fixtures_with_prefix("nn", "attention_nn_multihead");
    assert!(!files.is_empty(), "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        mha_file::<f64>(&f);
        mha_file::<f32>(&f);
    }
}

#[test]
fn multihead_attention_second_order_and_other_layout() {
    for file in common::fixtures_with_prefix("nn", "attention_nn_multihead") {
        mha_second_order_and_other_layout(&Fixture::load(&file));
    }
}

fn mha_second_order_and_other_layout(f: &Fixture) {
    let mha = fixture_mha::<f64>(f);
    let pad = f.i("key_padding_mask").cast::<bool>();
    // A small slice of the input (the first 3 positions, or fewer) keeps
    // the finite differences quick; its key padding mask is the fixture's,
    // sliced the same way, with the first key never padded (a fully padded
    // row has no softmax).
    let full = f.t("x");
    let time = usize::from(mha.batch_first);
    let t = full.shape()[time].min(3);
    let x = full.narrow(time as isize, 0, t);
    let mut mask = f.i("key_padding_mask").narrow(1, 0, t).to_vec();
    for row in mask.chunks_mut(t) {
        row[0] = 0;
    }
    let pad3 = Tensor::<i64>::from_vec(mask, &[full.shape()[1 - time], t]).cast::<bool>();
    second_order::check(
        "MultiheadAttention",
        |x| mha.attend(x, x, x, Some(&pad3), None, true).0,
        &x,
        1e-6,
    );
    // The same layer with the other layout on transposed inputs.
    let mut seq_first = mha.clone();
    seq_first.batch_first = !mha.batch_first;
    let x = f.t("x");
    let (a, wa) = mha.attend(&x, &x, &x, Some(&pad), None, false);
    let xt = x.transpose(0, 1);
    let (b, wb) = seq_first.attend(&xt, &xt, &xt, Some(&pad), None, false);
    assert_eq!(a.to_vec(), b.transpose(0, 1).to_vec());
    assert_eq!(wa.to_vec(), wb.to_vec());
}

#[test]
fn multihead_attention_masks_follow_pytorch_conventions() {
    let mut rng = Rng::new(4);
    let mha = MultiheadAttention::<f64>::new(8, 2, 0.0, true, &mut rng);
    let x = Tensor::<f64>::normal(&[2, 4, 8], 0.0, 1.0, &mut rng);
    // attn_mask true = not allowed: an upper-triangular mask is causal.
    let tri: Vec<bool> = (0..16).map(|k| k % 4 > k / 4).collect();
    let tri = Tensor::<bool>::from_vec(tri, &[4, 4]);
    let (a, wa) = mha.attend(&x, &x, &x, None, Some(&tri), false);
    let (b, wb) = mha.attend(&x, &x, &x, None, None, true);
    assert_eq!(a.to_vec(), b.to_vec());
    assert_eq!(wa.to_vec(), wb.to_vec());
    // Per-head masks [N * H, L, S] broadcast the same way.
    let per_head = Tensor::<bool>::from_vec(tri.to_vec().repeat(4), &[4, 4, 4]);
    let (c, _) = mha.attend(&x, &x, &x, None, Some(&per_head), false);
    assert_eq!(a.to_vec(), c.to_vec());
}

#[test]
fn multihead_attention_state_dict_round_trip() {
    let a = MultiheadAttention::<f32>::new(8, 4, 0.0, true, &mut Rng::new(1));
    let mut b = MultiheadAttention::<f32>::new(8, 4, 0.0, true, &mut Rng::new(2));
    let x = Tensor::<f32>::normal(&[2, 3, 8], 0.0, 1.0, &mut Rng::new(3));
    assert_ne!(
        a.forward(x.clone()).0.to_vec(),
        b.forward(x.clone()).0.to_vec()
    );
    b.load_state_dict(&a.state_dict()).unwrap();
    assert_eq!(a.forward(x.clone()).0.to_vec(), b.forward(x).0.to_vec());
    assert_eq!(b.parameters().len(), 4);
}

use forge::nn::Forward;

#[test]
#[should_panic(
    expected = "MultiheadAttention(embed_dim 8, 4 heads): expected query of shape [N, L, E] with E = 8, got [2, 3, 6]"
)]
fn multihead_attention_rejects_wrong_width() {
    let a = MultiheadAttention::<f32>::new(8, 4, 0.0, true, &mut Rng::new(1));
    a.forward(Tensor::zeros(&[2, 3, 6]));
}

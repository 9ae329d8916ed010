//! Parity of `embedding` with PyTorch (fixtures `nn/embedding*`: lookup,
//! accumulated gradient over repeated indices, no gradient to
//! `padding_idx`), second-order gradients, and `dropout`.
//!
//! Tolerances: each fixture's own `rtol`/`atol`; the lookup is pure data
//! movement, so its output is compared exactly.

use crate::common;
use crate::second_order;
use common::Fixture;
use forge::nn::functional::{dropout, embedding};
use forge::{gradcheck, Float, Rng, Tensor};

fn padding(f: &Fixture) -> Option<usize> {
    f.meta.get("padding_idx").map(|p| p.parse().unwrap())
}

#[test]
fn embedding_matches_pytorch() {
    let files = common::fixtures_for_ops("nn", "embedding", &["embedding"]);
    assert!(!files.is_empty());
    for file in files {
        let f = Fixture::load(&file);
        check_file::<f64>(&f);
        check_file::<f32>(&f);
    }
}

fn check_file<E: Float>(f: &Fixture) {
    let w = f.input::<E>("weight").requires_grad();
    let e = embedding(&w, &f.i("indices"), padding(f));
    assert_eq!(
        e.to_vec(),
        f.input::<E>("out").to_vec(),
        "{}: lookup is exact",
        f.name
    );
    f.check_as("out", &e);
    let g = e.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_weight", g.get(&w).unwrap());
}

#[test]
fn embedding_gradcheck_first_and_second_order() {
    for file in common::fixtures_for_ops("nn", "embedding", &["embedding"]) {
        let f = Fixture::load(&file);
        let idx = f.i("indices");
        let p = padding(&f);
        // Squared, so the second derivative is not zero.
        let fun = |w: &Tensor<f64>| embedding(w, &idx, p).square();
        // The padding row is looked up but gets no gradient by definition,
        // so finite differences disagree there on purpose: first order is
        // checked without padding (the padded case is pinned by the fixture).
        if p.is_none() {
            gradcheck(|v| fun(&v[0]), &[f.t("weight")], 1e-6, 1e-6, 1e-6)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        // Second order holds with padding too: the gradient never depends
        // on the padding row.
        second_order::check(&file, fun, &f.t("weight"), 1e-6);
    }
}

#[test]
#[should_panic(
    expected = "embedding: index 10 is out of range for 10 embeddings (weight shape [10, 3])"
)]
fn embedding_rejects_bad_index() {
    let idx = Tensor::<i64>::from_vec(vec![1, 10], &[2]);
    embedding(&Tensor::<f32>::zeros(&[10, 3]), &idx, None);
}

#[test]
fn dropout_is_inverted_reproducible_and_identity_in_eval() {
    let x = Tensor::<f64>::ones(&[10_000]).requires_grad();
    let y = dropout(&x, 0.25, true, &mut Rng::new(42));
    let kept = y.to_vec().iter().filter(|&&v| v != 0.0).count();
    assert!(y.to_vec().iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
    // 7500 expected; 5 standard deviations is about 217.
    assert!((kept as i64 - 7500).abs() < 220, "kept {kept}");
    assert_eq!(
        y.to_vec(),
        dropout(&x, 0.25, true, &mut Rng::new(42)).to_vec()
    );
    assert_ne!(
        y.to_vec(),
        dropout(&x, 0.25, true, &mut Rng::new(43)).to_vec()
    );
    // The gradient is the same mask.
    let g = y.sum().backward();
    assert_eq!(g.get(&x).unwrap().to_vec(), y.to_vec());
    let e = dropout(&x, 0.25, false, &mut Rng::new(42));
    assert_eq!(e.to_vec(), x.to_vec());
}

#[test]
#[should_panic(expected = "dropout: probability 1.5 is outside [0, 1]")]
fn dropout_rejects_bad_probability() {
    dropout(&Tensor::<f32>::ones(&[2]), 1.5, true, &mut Rng::new(0));
}

//! The normalisation, embedding, dropout and softmax layers: PyTorch
//! fixtures through the layers in f64 and f32 (every hyperparameter, shape
//! and optional parameter read from the file's metadata; running statistics
//! included), train versus
//! eval behaviour, state_dict round trips, and one pinned shape-error
//! message per layer family.

use crate::common;
use common::Fixture;
use forge::nn::{
    BatchNorm1d, BatchNorm2d, Dropout, Embedding, Forward, GroupNorm, Layer, LayerNorm, LogSoftmax,
    Softmax,
};
use forge::{Element, Float, Rng, Tensor};
use std::collections::BTreeMap;

/// Loads every tensor of `f` listed in `names` (state-dict key, fixture
/// name) into `layer`, cast to `E`.
fn load<E: Float, L: Layer<E>>(layer: &mut L, f: &Fixture, names: &[(&str, &str)]) {
    let mut sd: BTreeMap<String, Tensor<E>> = layer.state_dict();
    for (key, fixture_name) in names {
        let t = if f.floats.contains_key(*fixture_name) {
            f.input::<E>(fixture_name)
        } else {
            f.i(fixture_name).cast::<E>()
        };
        sd.insert(key.to_string(), t);
    }
    layer.load_state_dict(&sd).unwrap();
}

/// The fixture's inputs that are state-dict entries of the layer, as
/// (key, fixture name) pairs: every listed input but `x` and `indices`.
fn state_inputs(f: &Fixture) -> Vec<(String, String)> {
    f.meta_list("inputs")
        .into_iter()
        .filter(|n| n != "x" && n != "indices")
        .map(|n| (n.clone(), n))
        .collect()
}

fn pairs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

/// The optional affine parameters: present exactly when the file lists
/// them as inputs.
fn affine<E: Float>(f: &Fixture, w: &mut Option<Tensor<E>>, b: &mut Option<Tensor<E>>) {
    let inputs = f.meta_list("inputs");
    if !inputs.iter().any(|n| n == "weight") {
        *w = None;
    }
    if !inputs.iter().any(|n| n == "bias") {
        *b = None;
    }
}

fn momentum(f: &Fixture) -> Option<f64> {
    match f.meta("momentum") {
        "none" => None,
        _ => Some(f.meta_f64("momentum")),
    }
}

/// Checks the gradient of every input the file lists in `grads`: `x`, or a
/// parameter of the layer by its state-dict name.
fn check_grads<E: Float>(
    f: &Fixture,
    y: &Tensor<E>,
    x: &Tensor<E>,
    params: &BTreeMap<String, Tensor<E>>,
) {
    let g = y.backward_with(&f.input::<E>("gout"), false);
    let grads = f.meta_list("grads");
    assert!(!grads.is_empty(), "{}", f.name);
    for n in grads {
        let t = if n == "x" { x } else { &params[&n] };
        let gt = g
            .get(t)
            .unwrap_or_else(|| panic!("{}: no gradient for {n}", f.name));
        f.check_as(&format!("grad_{n}"), gt);
    }
}

fn batch_norm_file<E: Float>(f: &Fixture) {
    let x = f.input::<E>("x").requires_grad();
    let c = x.shape()[1];
    let training = f.flag("training");
    let names = state_inputs(f);
    macro_rules! run {
        ($layer:ident) => {{
            let mut bn = $layer::<E>::new(c);
            affine(f, &mut bn.weight, &mut bn.bias);
            bn.eps = f.meta_f64("eps");
            bn.momentum = momentum(f);
            load(&mut bn, f, &pairs(&names));
            if !training {
                bn.eval();
            }
            let before = Element::to_f64(bn.num_batches_tracked.get().item());
            let y = bn.forward(x.clone());
            let params: BTreeMap<String, Tensor<E>> = bn.named_parameters().into_iter().collect();
            (
                y,
                bn.running_mean.get(),
                bn.running_var.get(),
                before,
                Element::to_f64(bn.num_batches_tracked.get().item()),
                params,
            )
        }};
    }
    let (y, mean, var, before, after, params) = match x.rank() {
        2 | 3 => run!(BatchNorm1d),
        4 => run!(BatchNorm2d),
        r => panic!("{}: rank {r}", f.name),
    };
    f.check_as("out", &y);
    f.check_as("running_mean_new", &mean);
    f.check_as("running_var_new", &var);
    let expected = if f.has("num_batches_tracked_new") {
        f.i("num_batches_tracked_new").item() as f64
    } else {
        before + if training { 1.0 } else { 0.0 }
    };
    assert_eq!(after, expected, "{}: num_batches_tracked", f.name);
    check_grads(f, &y, &x, &params);
}

#[test]
fn batch_norm_layers_match_pytorch_in_train_and_eval() {
    let files = common::fixtures_with_prefix("nn", "batch_norm");
    assert!(files.len() >= 4, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        batch_norm_file::<f64>(&f);
        batch_norm_file::<f32>(&f);
    }
}

#[test]
fn batch_norm_eval_uses_running_stats_and_train_updates_them() {
    let x = Tensor::<f64>::normal(&[4, 3, 2, 2], 1.0, 2.0, &mut Rng::new(5));
    let mut bn = BatchNorm2d::<f64>::new(3);
    let first = bn.forward(x.clone());
    let rm1 = bn.running_mean.get().to_vec();
    assert_ne!(rm1, vec![0.0; 3], "training updates the running mean");
    bn.forward(x.clone());
    assert_eq!(bn.num_batches_tracked.get().item(), 2.0);
    bn.eval();
    let rm2 = bn.running_mean.get().to_vec();
    let e1 = bn.forward(x.clone());
    let e2 = bn.forward(x.clone());
    assert_eq!(e1.to_vec(), e2.to_vec());
    assert_eq!(
        bn.running_mean.get().to_vec(),
        rm2,
        "eval leaves the stats alone"
    );
    assert_ne!(
        e1.to_vec(),
        first.to_vec(),
        "eval normalises with the running stats"
    );
    // momentum None: cumulative average over the batches seen.
    let mut cma = BatchNorm1d::<f64>::new(1);
    cma.momentum = None;
    cma.forward(Tensor::from_vec(vec![1.0, 3.0], &[2, 1]));
    cma.forward(Tensor::from_vec(vec![5.0, 7.0], &[2, 1]));
    assert_eq!(cma.running_mean.get().to_vec(), vec![4.0]);
}

#[test]
fn norm_layers_state_dict_round_trip() {
    let x = Tensor::<f64>::normal(&[2, 4, 3], 0.0, 1.0, &mut Rng::new(6));
    // Trained stats and perturbed affine parameters, copied into fresh layers.
    let mut a = BatchNorm1d::<f64>::new(4);
    a.forward(x.clone());
    a.weight = Some(Tensor::from_vec(vec![0.5, 1.5, -1.0, 2.0], &[4]).requires_grad());
    a.eval();
    let mut b = BatchNorm1d::<f64>::new(4);
    b.load_state_dict(&a.state_dict()).unwrap();
    b.eval();
    assert_eq!(a.forward(x.clone()).to_vec(), b.forward(x.clone()).to_vec());
    assert_eq!(b.state_dict()["num_batches_tracked"].item(), 1.0);

    let mut ln = LayerNorm::<f64>::new(&[3]);
    ln.bias = Some(Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3]).requires_grad());
    let mut ln2 = LayerNorm::<f64>::new(&[3]);
    ln2.load_state_dict(&ln.state_dict()).unwrap();
    assert_eq!(
        ln.forward(x.clone()).to_vec(),
        ln2.forward(x.clone()).to_vec()
    );

    let mut gn = GroupNorm::<f64>::new(2, 4);
    gn.weight = Some(Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4]).requires_grad());
    let mut gn2 = GroupNorm::<f64>::new(2, 4);
    gn2.load_state_dict(&gn.state_dict()).unwrap();
    assert_eq!(gn.forward(x.clone()).to_vec(), gn2.forward(x).to_vec());
    let keys: Vec<String> = gn2.state_dict().into_keys().collect();
    assert_eq!(keys, ["bias", "weight"]);
}

fn layer_or_group_norm_file<E: Float>(f: &Fixture) {
    let x = f.input::<E>("x").requires_grad();
    let names = state_inputs(f);
    let eps = f.meta_f64("eps");
    let (y, params) = match f.meta("op") {
        "layer_norm" => {
            let mut l = LayerNorm::<E>::new(&f.usizes("normalized_shape"));
            affine(f, &mut l.weight, &mut l.bias);
            l.eps = eps;
            load(&mut l, f, &pairs(&names));
            (l.forward(x.clone()), l.named_parameters())
        }
        "group_norm" => {
            let mut l = GroupNorm::<E>::new(f.parse("num_groups"), x.shape()[1]);
            affine(f, &mut l.weight, &mut l.bias);
            l.eps = eps;
            load(&mut l, f, &pairs(&names));
            (l.forward(x.clone()), l.named_parameters())
        }
        op => panic!("{}: op {op}", f.name),
    };
    f.check_as("out", &y);
    check_grads(f, &y, &x, &params.into_iter().collect());
}

#[test]
fn layer_and_group_norm_layers_match_pytorch() {
    let files: Vec<String> = common::fixtures_with_prefix("nn", "layer_norm")
        .into_iter()
        .chain(common::fixtures_with_prefix("nn", "group_norm"))
        .collect();
    assert!(files.len() >= 4, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        layer_or_group_norm_file::<f64>(&f);
        layer_or_group_norm_file::<f32>(&f);
    }
}

fn embedding_file<E: Float>(f: &Fixture) {
    let padding = f
        .meta
        .get("padding_idx")
        .map(|_| f.parse::<usize>("padding_idx"));
    let (n, d) = (f.parse("num_embeddings"), f.parse("embedding_dim"));
    let mut e = Embedding::<E>::new(n, d, padding, &mut Rng::new(0));
    load(&mut e, f, &[("weight", "weight")]);
    let y = e.forward(f.i("indices"));
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_weight", g.get(&e.weight).unwrap());
    let mut e2 = Embedding::<E>::new(n, d, padding, &mut Rng::new(1));
    e2.load_state_dict(&e.state_dict()).unwrap();
    assert_eq!(e2.forward(f.i("indices")).to_vec(), y.to_vec());
}

#[test]
fn embedding_layer_matches_pytorch_and_round_trips() {
    let files = common::fixtures_for_ops("nn", "embedding", &["embedding"]);
    assert!(!files.is_empty(), "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        embedding_file::<f64>(&f);
        embedding_file::<f32>(&f);
    }
}

#[test]
fn dropout_layer_train_eval_and_reproducibility() {
    let x = Tensor::<f32>::ones(&[2000]);
    let mut a = Dropout::new(0.3, 11);
    let b = Dropout::new(0.3, 11);
    let ya = a.forward(x.clone());
    assert_eq!(
        ya.to_vec(),
        b.forward(x.clone()).to_vec(),
        "same seed, same mask"
    );
    assert_ne!(
        ya.to_vec(),
        a.forward(x.clone()).to_vec(),
        "the generator advances"
    );
    assert!(ya
        .to_vec()
        .iter()
        .all(|&v| v == 0.0 || (v - 1.0 / 0.7).abs() < 1e-6));
    Layer::<f32>::eval(&mut a);
    assert!(!Layer::<f32>::is_training(&a));
    assert_eq!(a.forward(x.clone()).to_vec(), x.to_vec());
    // No tensors: an empty state dict round trips.
    assert!(Layer::<f32>::state_dict(&a).is_empty());
}

#[test]
fn softmax_layers() {
    let x = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_eq!(
        Softmax { axis: 0 }.forward(x.clone()).to_vec(),
        x.softmax(0).to_vec()
    );
    assert_eq!(
        LogSoftmax { axis: -1 }.forward(x.clone()).to_vec(),
        x.log_softmax(-1).to_vec()
    );
}

#[test]
#[should_panic(expected = "BatchNorm2d(3): expected input of shape [N, 3, H, W], got [2, 4, 5, 5]")]
fn batch_norm_names_layer_and_shapes() {
    BatchNorm2d::<f32>::new(3).forward(Tensor::zeros(&[2, 4, 5, 5]));
}

#[test]
#[should_panic(
    expected = "BatchNorm1d(3): expected input of shape [N, 3] or [N, 3, L], got [2, 3, 4, 4]"
)]
fn batch_norm1d_rejects_wrong_rank() {
    BatchNorm1d::<f32>::new(3).forward(Tensor::zeros(&[2, 3, 4, 4]));
}

#[test]
#[should_panic(expected = "LayerNorm([4, 6]): expected input of shape [.., 4, 6], got [3, 6, 4]")]
fn layer_norm_names_layer_and_shapes() {
    LayerNorm::<f32>::new(&[4, 6]).forward(Tensor::zeros(&[3, 6, 4]));
}

#[test]
#[should_panic(expected = "GroupNorm(2, 4): expected input of shape [N, 4, ..], got [2, 6, 3]")]
fn group_norm_names_layer_and_shapes() {
    GroupNorm::<f32>::new(2, 4).forward(Tensor::zeros(&[2, 6, 3]));
}

#[test]
#[should_panic(
    expected = "Embedding(10, 6): index 12 is out of range (weight shape [10, 6], input shape [2])"
)]
fn embedding_names_layer_and_index() {
    let e = Embedding::<f32>::new(10, 6, None, &mut Rng::new(0));
    e.forward(Tensor::from_vec(vec![1, 12], &[2]));
}

#[test]
#[should_panic(expected = "Dropout: probability -0.5 is outside [0, 1]")]
fn dropout_rejects_bad_probability() {
    Dropout::new(-0.5, 0);
}

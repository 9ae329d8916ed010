//! The normalisation, embedding, dropout and softmax layers: PyTorch
//! fixtures through the layers (running statistics included), train versus
//! eval behaviour, state_dict round trips, and one pinned shape-error
//! message per layer family.

mod common;
use common::Fixture;
use forge::nn::{
    BatchNorm1d, BatchNorm2d, Dropout, Embedding, Forward, GroupNorm, Layer, LayerNorm, LogSoftmax,
    Softmax,
};
use forge::{Rng, Tensor};
use std::collections::BTreeMap;

fn load<L: Layer<f64>>(layer: &mut L, f: &Fixture, names: &[(&str, &str)]) {
    let mut sd: BTreeMap<String, Tensor<f64>> = layer.state_dict();
    for (key, fixture_name) in names {
        sd.insert(key.to_string(), f.t(fixture_name));
    }
    layer.load_state_dict(&sd).unwrap();
}

const BN: [(&str, &str); 4] = [
    ("weight", "weight"),
    ("bias", "bias"),
    ("running_mean", "running_mean"),
    ("running_var", "running_var"),
];

#[test]
fn batch_norm_layers_match_pytorch_in_train_and_eval() {
    for file in common::fixtures_with_prefix("nn", "batch_norm") {
        let f = Fixture::load(&file);
        let x = f.t("x").requires_grad();
        let c = x.shape()[1];
        let training = f.meta("training") == "true";
        let (y, mean, var, nbt, params) = if x.rank() == 2 {
            let mut bn = BatchNorm1d::<f64>::new(c);
            load(&mut bn, &f, &BN);
            if !training {
                bn.eval();
            }
            let y = bn.forward(x.clone());
            let p = bn.parameters();
            (
                y,
                bn.running_mean.get(),
                bn.running_var.get(),
                bn.num_batches_tracked.get(),
                p,
            )
        } else {
            let mut bn = BatchNorm2d::<f64>::new(c);
            load(&mut bn, &f, &BN);
            if !training {
                bn.eval();
            }
            let y = bn.forward(x.clone());
            let p = bn.parameters();
            (
                y,
                bn.running_mean.get(),
                bn.running_var.get(),
                bn.num_batches_tracked.get(),
                p,
            )
        };
        f.check("out", &y);
        f.check("running_mean_new", &mean);
        f.check("running_var_new", &var);
        assert_eq!(nbt.item(), if training { 1.0 } else { 0.0 }, "{file}");
        let g = y.backward_with(&f.t("gout"), false);
        f.check("grad_x", g.get(&x).unwrap());
        f.check("grad_weight", g.get(&params[0]).unwrap());
        f.check("grad_bias", g.get(&params[1]).unwrap());
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

#[test]
fn layer_and_group_norm_layers_match_pytorch() {
    for file in common::fixtures_with_prefix("nn", "layer_norm")
        .into_iter()
        .chain(common::fixtures_with_prefix("nn", "group_norm"))
    {
        let f = Fixture::load(&file);
        let x = f.t("x");
        let y = if f.meta("op") == "layer_norm" {
            let mut l = LayerNorm::<f64>::new(f.t("weight").shape());
            load(&mut l, &f, &[("weight", "weight"), ("bias", "bias")]);
            l.forward(x)
        } else {
            let g = f.meta("num_groups").parse().unwrap();
            let mut l = GroupNorm::<f64>::new(g, x.shape()[1]);
            load(&mut l, &f, &[("weight", "weight"), ("bias", "bias")]);
            l.forward(x)
        };
        f.check("out", &y);
    }
}

#[test]
fn embedding_layer_matches_pytorch_and_round_trips() {
    let f = Fixture::load("nn/embedding_padding_idx.safetensors");
    let mut e = Embedding::<f64>::new(10, 6, Some(0), &mut Rng::new(0));
    load(&mut e, &f, &[("weight", "weight")]);
    let y = e.forward(f.i("indices"));
    f.check("out", &y);
    let g = y.backward_with(&f.t("gout"), false);
    f.check("grad_weight", g.get(&e.weight).unwrap());
    let mut e2 = Embedding::<f64>::new(10, 6, Some(0), &mut Rng::new(1));
    e2.load_state_dict(&e.state_dict()).unwrap();
    assert_eq!(e2.forward(f.i("indices")).to_vec(), y.to_vec());
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

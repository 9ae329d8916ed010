//! The convolution and pooling layers: PyTorch parity through the layers
//! in f64 and f32 (every fixture of each kind, the layer built from the
//! file's metadata and weight shape, weights loaded by their state_dict
//! names), default
//! initialisation bounds, state_dict round trips, unbatched inputs, and the
//! shape-error message of each family.

use crate::common;
use common::Fixture;
use forge::nn::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
    AvgPool2d, Conv1d, Conv2d, ConvTranspose2d, MaxPool1d, MaxPool2d,
};
use forge::{Float, Forward, Layer, Rng, Tensor};
use std::collections::BTreeMap;

/// Loads `weight` / `bias` from the fixture into `layer` by name, runs it,
/// and checks the output and every gradient, in element type `E`.
fn check_layer<E: Float, L: Layer<E> + Forward<Tensor<E>, Output = Tensor<E>>>(
    f: &Fixture,
    mut layer: L,
) {
    let mut dict = BTreeMap::new();
    dict.insert("weight".to_string(), f.input::<E>("weight"));
    assert_eq!(f.flag("bias"), f.has("bias"), "{}", f.name);
    if f.has("bias") {
        dict.insert("bias".to_string(), f.input::<E>("bias"));
    }
    layer.load_state_dict(&dict).unwrap();
    let x = f.input::<E>("x").requires_grad();
    let y = layer.forward(x.clone());
    f.check_as("out", &y);
    let params = layer.named_parameters();
    let g = y.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_x", g.get(&x).unwrap());
    for (name, p) in &params {
        f.check_as(&format!("grad_{name}"), g.get(p).unwrap());
    }
    assert_eq!(params.len(), dict.len(), "{}", f.name);
}

fn pair(f: &Fixture, key: &str) -> [usize; 2] {
    match f.usizes(key).as_slice() {
        [a] => [*a, *a],
        [a, b] => [*a, *b],
        other => panic!("{}: {key} = {other:?}", f.name),
    }
}

fn single(f: &Fixture, key: &str) -> usize {
    match f.usizes(key).as_slice() {
        [a] => *a,
        other => panic!("{}: {key} = {other:?}", f.name),
    }
}

/// Builds the layer the file describes (channels and kernel from the weight
/// shape, every other hyperparameter from the metadata) and checks it.
fn check_conv_file<E: Float>(f: &Fixture) {
    let w = f.t("weight");
    let ws = w.shape();
    let groups: usize = f.parse("groups");
    let mut rng = Rng::new(0);
    match f.meta("op") {
        "conv2d" => {
            let mut c = Conv2d::<E>::new(ws[1] * groups, ws[0], [ws[2], ws[3]], &mut rng)
                .stride(pair(f, "stride"))
                .padding(pair(f, "padding"))
                .dilation(pair(f, "dilation"))
                .groups(groups);
            if !f.flag("bias") {
                c = c.no_bias();
            }
            check_layer(f, c);
        }
        "conv1d" => {
            let mut c = Conv1d::<E>::new(ws[1] * groups, ws[0], ws[2], &mut rng)
                .stride(single(f, "stride"))
                .padding(single(f, "padding"))
                .dilation(single(f, "dilation"))
                .groups(groups);
            if !f.flag("bias") {
                c = c.no_bias();
            }
            check_layer(f, c);
        }
        "conv_transpose2d" => {
            let mut c = ConvTranspose2d::<E>::new(ws[0], ws[1] * groups, [ws[2], ws[3]], &mut rng)
                .stride(pair(f, "stride"))
                .padding(pair(f, "padding"))
                .output_padding(pair(f, "output_padding"))
                .dilation(pair(f, "dilation"))
                .groups(groups);
            if !f.flag("bias") {
                c = c.no_bias();
            }
            check_layer(f, c);
        }
        op => panic!("{}: op {op}", f.name),
    }
}

#[test]
fn conv_layers_match_pytorch_fixtures() {
    let files = common::fixtures_for_ops("nn", "conv", &["conv1d", "conv2d", "conv_transpose2d"]);
    assert!(files.len() >= 3, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        check_conv_file::<f64>(&f);
        check_conv_file::<f32>(&f);
    }
}

fn max_abs(t: &Tensor<f64>) -> f64 {
    t.as_slice().iter().fold(0.0, |m, v| m.max(v.abs()))
}

/// PyTorch's default bound 1/sqrt(fan_in), with ConvTranspose2d's fan-in
/// from weight dimension 1; grouped layers keep the grouped fan-in.
#[test]
fn conv_layers_use_pytorch_default_init() {
    let mut rng = Rng::new(1);
    let cases: Vec<(Tensor<f64>, Tensor<f64>, f64)> = vec![
        {
            let c = Conv2d::new(8, 64, 3, &mut rng);
            (c.weight, c.bias.unwrap(), 72.0)
        },
        {
            let c = Conv2d::new(8, 64, 3, &mut rng).groups(4);
            (c.weight, c.bias.unwrap(), 18.0)
        },
        {
            let c = Conv1d::new(6, 64, 5, &mut rng);
            (c.weight, c.bias.unwrap(), 30.0)
        },
        {
            let c = ConvTranspose2d::new(64, 8, 3, &mut rng);
            (c.weight, c.bias.unwrap(), 72.0)
        },
        {
            let c = ConvTranspose2d::new(64, 8, 3, &mut rng).groups(2);
            (c.weight, c.bias.unwrap(), 36.0)
        },
    ];
    for (i, (w, b, fan_in)) in cases.into_iter().enumerate() {
        let bound = 1.0 / f64::sqrt(fan_in);
        let m = max_abs(&w);
        assert!(
            m <= bound && m > 0.95 * bound,
            "case {i}: weight max {m}, bound {bound}"
        );
        assert!(max_abs(&b) <= bound, "case {i}: bias");
    }
}

#[test]
fn init_is_reproducible_from_a_seed() {
    let a = Conv2d::<f32>::new(3, 4, 3, &mut Rng::new(5));
    let b = Conv2d::<f32>::new(3, 4, 3, &mut Rng::new(5));
    assert_eq!(a.weight.to_vec(), b.weight.to_vec());
    assert_eq!(a.bias.unwrap().to_vec(), b.bias.unwrap().to_vec());
}

/// Saves one layer's state and loads it into a differently initialised
/// twin: the state is bit-identical and so are the outputs.
fn round_trip<L>(a: L, mut b: L, x: Tensor<f64>)
where
    L: Layer<f64> + Forward<Tensor<f64>, Output = Tensor<f64>>,
{
    let dict = a.state_dict();
    b.load_state_dict(&dict).unwrap();
    let back = b.state_dict();
    assert_eq!(
        dict.keys().collect::<Vec<_>>(),
        back.keys().collect::<Vec<_>>()
    );
    for (k, v) in &dict {
        assert_eq!(v.to_vec(), back[k].to_vec(), "{k}");
    }
    assert_eq!(a.forward(x.clone()).to_vec(), b.forward(x).to_vec());
}

#[test]
fn every_layer_survives_a_state_dict_round_trip() {
    let (mut r1, mut r2) = (Rng::new(1), Rng::new(2));
    let x2 = Tensor::<f64>::normal(&[2, 4, 9, 8], 0.0, 1.0, &mut Rng::new(3));
    let x1 = Tensor::<f64>::normal(&[2, 4, 9], 0.0, 1.0, &mut Rng::new(4));
    let conv = |r: &mut Rng| Conv2d::new(4, 6, 3, r).padding(1).groups(2);
    round_trip(conv(&mut r1), conv(&mut r2), x2.clone());
    let conv1 = |r: &mut Rng| Conv1d::new(4, 3, 3, r).stride(2);
    round_trip(conv1(&mut r1), conv1(&mut r2), x1.clone());
    let up = |r: &mut Rng| ConvTranspose2d::new(4, 2, 2, r).stride(2);
    round_trip(up(&mut r1), up(&mut r2), x2.clone());
    let names = Conv2d::<f64>::new(1, 1, 1, &mut r1).state_dict();
    assert_eq!(names.keys().collect::<Vec<_>>(), ["bias", "weight"]);

    round_trip(MaxPool2d::new(2), MaxPool2d::new(2), x2.clone());
    round_trip(
        AvgPool2d::new(3).stride(1).padding(1),
        AvgPool2d::new(3).stride(1).padding(1),
        x2.clone(),
    );
    round_trip(
        AdaptiveAvgPool2d::new([3, 2]),
        AdaptiveAvgPool2d::new([3, 2]),
        x2.clone(),
    );
    round_trip(AdaptiveMaxPool2d::new(2), AdaptiveMaxPool2d::new(2), x2);
    round_trip(MaxPool1d::new(2), MaxPool1d::new(2), x1.clone());
    round_trip(AvgPool1d::new(2), AvgPool1d::new(2), x1.clone());
    round_trip(
        AdaptiveAvgPool1d::new(4),
        AdaptiveAvgPool1d::new(4),
        x1.clone(),
    );
    round_trip(AdaptiveMaxPool1d::new(4), AdaptiveMaxPool1d::new(4), x1);
    assert!(Layer::<f64>::state_dict(&MaxPool2d::new(2)).is_empty());
}

/// Every pooling fixture through its layer, hyperparameters from the
/// metadata, in f64 and f32.
fn check_pool_file<E: Float>(f: &Fixture) {
    let x = f.input::<E>("x");
    let y = match f.meta("op") {
        "max_pool2d" => MaxPool2d::new(pair(f, "kernel_size"))
            .stride(pair(f, "stride"))
            .padding(pair(f, "padding"))
            .dilation(pair(f, "dilation"))
            .ceil_mode(f.flag("ceil_mode"))
            .forward(x),
        "avg_pool2d" => {
            let divisor = match f.meta.get("divisor_override").map(String::as_str) {
                None | Some("none") => None,
                Some(_) => Some(f.parse::<usize>("divisor_override")),
            };
            AvgPool2d::new(pair(f, "kernel_size"))
                .stride(pair(f, "stride"))
                .padding(pair(f, "padding"))
                .count_include_pad(f.flag("count_include_pad"))
                .ceil_mode(f.flag("ceil_mode"))
                .divisor_override(divisor)
                .forward(x)
        }
        "adaptive_avg_pool2d" => AdaptiveAvgPool2d::new(pair(f, "output_size")).forward(x),
        "adaptive_max_pool2d" => AdaptiveMaxPool2d::new(pair(f, "output_size")).forward(x),
        op => panic!("{}: op {op}", f.name),
    };
    f.check_as("out", &y);
}

#[test]
fn pool_layers_match_pytorch_fixtures() {
    let mut files = Vec::new();
    for prefix in ["max_pool", "avg_pool", "adaptive_"] {
        // The 2-d ops this file knows (the 3-d ones: ops_conv3d_pool3d.rs).
        files.extend(common::fixtures_for_ops(
            "nn",
            prefix,
            &[
                "max_pool2d",
                "avg_pool2d",
                "adaptive_avg_pool2d",
                "adaptive_max_pool2d",
            ],
        ));
    }
    assert!(files.len() >= 12, "{files:?}");
    for file in files {
        let f = Fixture::load(&file);
        check_pool_file::<f64>(&f);
        check_pool_file::<f32>(&f);
    }
}

#[test]
fn layers_accept_unbatched_inputs() {
    let mut rng = Rng::new(0);
    let conv = Conv2d::<f64>::new(2, 3, 3, &mut rng).padding(1);
    let x = Tensor::<f64>::normal(&[2, 5, 5], 0.0, 1.0, &mut rng);
    let y = conv.forward(x.clone());
    assert_eq!(y.shape(), &[3, 5, 5]);
    assert_eq!(y.to_vec(), conv.forward(x.view(&[1, 2, 5, 5])).to_vec());
    assert_eq!(MaxPool2d::new(2).forward(x).shape(), &[2, 2, 2]);
    let x1 = Tensor::<f64>::zeros(&[2, 7]);
    assert_eq!(
        Conv1d::new(2, 4, 3, &mut rng).forward(x1.clone()).shape(),
        &[4, 5]
    );
    assert_eq!(AdaptiveMaxPool1d::new(3).forward(x1).shape(), &[2, 3]);
}

#[test]
#[should_panic(
    expected = "Conv2d(3 -> 16, kernel [3, 3]): expected input [N, 3, H, W] or [3, H, W], got [2, 4, 8, 8]"
)]
fn conv2d_layer_names_expected_and_received_shapes() {
    let conv = Conv2d::<f32>::new(3, 16, 3, &mut Rng::new(0));
    conv.forward(Tensor::zeros(&[2, 4, 8, 8]));
}

#[test]
#[should_panic(
    expected = "Conv1d(3 -> 4, kernel 3): expected input [N, 3, L] or [3, L], got [2, 3, 4, 4]"
)]
fn conv1d_layer_names_expected_and_received_shapes() {
    let conv = Conv1d::<f32>::new(3, 4, 3, &mut Rng::new(0));
    conv.forward(Tensor::zeros(&[2, 3, 4, 4]));
}

#[test]
#[should_panic(
    expected = "ConvTranspose2d(8 -> 4, kernel [2, 2]): expected input [N, 8, H, W] or [8, H, W], got [1, 4, 5, 5]"
)]
fn conv_transpose2d_layer_names_expected_and_received_shapes() {
    let up = ConvTranspose2d::<f32>::new(8, 4, 2, &mut Rng::new(0));
    up.forward(Tensor::zeros(&[1, 4, 5, 5]));
}

#[test]
#[should_panic(
    expected = "MaxPool2d(kernel [2, 2]): expected input [N, C, H, W] or [C, H, W], got [8, 8]"
)]
fn pool2d_layer_names_expected_and_received_shapes() {
    MaxPool2d::new(2).forward(Tensor::<f32>::zeros(&[8, 8]));
}

#[test]
#[should_panic(
    expected = "AdaptiveAvgPool1d(4): expected input [N, C, L] or [C, L], got [1, 2, 3, 4]"
)]
fn pool1d_layer_names_expected_and_received_shapes() {
    AdaptiveAvgPool1d::new(4).forward(Tensor::<f32>::zeros(&[1, 2, 3, 4]));
}

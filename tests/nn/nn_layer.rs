//! Runtime tests of the traversal written by `#[derive(Layer)]`: paths,
//! frozen tensors, freezing by prefix, state dicts, train/eval.

use forge::nn::TensorKind;
use forge::prelude::*;
use std::collections::BTreeMap;

#[derive(Layer)]
struct Attn {
    wq: Linear<f64>,
    wk: Linear<f64>,
}

#[derive(Layer)]
struct EncoderBlock {
    attn: Attn,
    norm_scale: Tensor<f64>,
    #[frozen]
    running_mean: Tensor<f64>,
    #[training]
    training: bool,
}

#[derive(Layer)]
struct Encoder {
    blocks: Vec<EncoderBlock>,
    #[skip]
    depth: usize,
}

#[derive(Layer)]
struct Model {
    encoder: Encoder,
    head: sequential_type![Linear<f64>, Tanh, Linear<f64>],
    pair: [Linear<f64>; 2],
    extra: Option<Box<Linear<f64>>>,
    none: Option<Linear<f64>>,
    #[frozen]
    buffers: Vec<Tensor<f64>>,
}

fn block(rng: &mut Rng) -> EncoderBlock {
    EncoderBlock {
        attn: Attn {
            wq: Linear::new(3, 3, rng),
            wk: Linear::new_no_bias(3, 3, rng),
        },
        norm_scale: Tensor::ones(&[3]).requires_grad(),
        running_mean: Tensor::zeros(&[3]),
        training: true,
    }
}

fn model(seed: u64) -> Model {
    let mut rng = Rng::new(seed);
    Model {
        encoder: Encoder {
            blocks: vec![block(&mut rng), block(&mut rng)],
            depth: 2,
        },
        head: sequential![
            Linear::new(3, 4, &mut rng),
            Tanh,
            Linear::new(4, 2, &mut rng)
        ],
        pair: [Linear::new(2, 2, &mut rng), Linear::new(2, 2, &mut rng)],
        extra: Some(Box::new(Linear::new_no_bias(2, 1, &mut rng))),
        none: None,
        buffers: vec![Tensor::ones(&[1]), Tensor::ones(&[2])],
    }
}

const ALL_PATHS: [&str; 21] = [
    "encoder.blocks.0.attn.wq.weight",
    "encoder.blocks.0.attn.wq.bias",
    "encoder.blocks.0.attn.wk.weight",
    "encoder.blocks.0.norm_scale",
    "encoder.blocks.0.running_mean",
    "encoder.blocks.1.attn.wq.weight",
    "encoder.blocks.1.attn.wq.bias",
    "encoder.blocks.1.attn.wk.weight",
    "encoder.blocks.1.norm_scale",
    "encoder.blocks.1.running_mean",
    "head.0.weight",
    "head.0.bias",
    "head.2.weight",
    "head.2.bias",
    "pair.0.weight",
    "pair.0.bias",
    "pair.1.weight",
    "pair.1.bias",
    "extra.weight",
    "buffers.0",
    "buffers.1",
];

fn paths_of(m: &Model) -> Vec<String> {
    m.named_tensors().into_iter().map(|(p, _, _)| p).collect()
}

fn param_names(m: &Model) -> Vec<String> {
    m.named_parameters().into_iter().map(|(p, _)| p).collect()
}

#[test]
fn nested_model_has_exact_paths_in_field_order() {
    let m = model(0);
    assert_eq!(paths_of(&m), ALL_PATHS);
    assert_eq!(m.encoder.depth, 2);
    let frozen: Vec<String> = m
        .named_tensors()
        .into_iter()
        .filter(|(_, _, k)| *k == TensorKind::Frozen)
        .map(|(p, _, _)| p)
        .collect();
    assert_eq!(
        frozen,
        [
            "encoder.blocks.0.running_mean",
            "encoder.blocks.1.running_mean",
            "buffers.0",
            "buffers.1"
        ]
    );
    let layers: Vec<String> = m.named_layers().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        layers,
        [
            "encoder",
            "encoder.blocks.0",
            "encoder.blocks.0.attn",
            "encoder.blocks.0.attn.wq",
            "encoder.blocks.0.attn.wk",
            "encoder.blocks.1",
            "encoder.blocks.1.attn",
            "encoder.blocks.1.attn.wq",
            "encoder.blocks.1.attn.wk",
            "head",
            "head.0",
            "head.1",
            "head.2",
            "pair.0",
            "pair.1",
            "extra",
        ]
    );
}

#[test]
fn frozen_tensors_are_saved_but_never_trained() {
    let mut m = model(1);
    let names = param_names(&m);
    assert!(names
        .iter()
        .all(|n| !n.contains("running_mean") && !n.starts_with("buffers")));
    assert_eq!(names.len(), 17);
    let sd = m.state_dict();
    assert!(sd.contains_key("encoder.blocks.1.running_mean"));
    assert!(sd.contains_key("buffers.1"));
    assert_eq!(m.parameters().len(), 17);
    assert_eq!(
        m.num_parameters(),
        2 * (9 + 3 + 9 + 3) + (12 + 4 + 8 + 2) + 2 * (4 + 2) + 2
    );

    // A training step: loss touches every tensor, frozen ones included.
    let before = m.state_dict();
    let x = Tensor::<f64>::ones(&[5, 3]);
    let mut h = x.clone();
    for b in &m.encoder.blocks {
        let a = b.attn.wq.forward(h.clone()) + b.attn.wk.forward(h.clone());
        h = (a * &b.norm_scale - &b.running_mean).tanh();
    }
    let y = m.head.forward(h);
    let y = m.pair[1].forward(m.pair[0].forward(y));
    let y = m.extra.as_ref().unwrap().forward(y);
    let loss = (y + &m.buffers[0]).square().sum() + m.buffers[1].sum();
    let grads = loss.backward();
    let mut updated = 0;
    m.for_each_parameter_mut(&mut |_, w| {
        let g = grads.get(w).expect("every parameter has a gradient");
        *w = (&*w - &g.mul_scalar(0.1)).detach().requires_grad();
        updated += 1;
    });
    assert_eq!(updated, 17);
    let after = m.state_dict();
    for (k, v) in &before {
        let same = v.to_vec() == after[k].to_vec();
        let frozen = k.contains("running_mean") || k.starts_with("buffers");
        assert_eq!(same, frozen, "{k}: changed = {}", !same);
    }
}

#[test]
fn freeze_prefix_stops_exactly_the_encoder() {
    let mut m = model(2);
    m.freeze_prefix("encoder");
    let names = param_names(&m);
    assert_eq!(
        names,
        [
            "head.0.weight",
            "head.0.bias",
            "head.2.weight",
            "head.2.bias",
            "pair.0.weight",
            "pair.0.bias",
            "pair.1.weight",
            "pair.1.bias",
            "extra.weight"
        ]
    );
    // values unchanged, tensors still listed
    assert_eq!(paths_of(&m).len(), 21);
    // segment boundaries: "pair.1" does not freeze "pair.10"-like paths, "pai" matches nothing
    m.freeze_prefix("pai");
    assert_eq!(param_names(&m).len(), 9);
    m.freeze_prefix("pair.1");
    assert_eq!(param_names(&m).len(), 7);
    m.unfreeze_prefix("encoder.blocks.1.attn");
    assert_eq!(param_names(&m).len(), 10);
    m.unfreeze();
    assert_eq!(param_names(&m).len(), 17);
    // #[frozen] tensors are never unfrozen
    assert!(m
        .encoder
        .blocks
        .iter()
        .all(|b| !b.running_mean.is_tracked()));
    m.freeze();
    assert!(m.parameters().is_empty());
    assert_eq!(m.num_parameters(), 0);
}

#[test]
fn state_dict_round_trip_is_bit_exact() {
    let a = model(3);
    let mut b = model(4);
    b.freeze_prefix("head");
    assert_ne!(
        a.state_dict()["head.0.weight"].to_vec(),
        b.state_dict()["head.0.weight"].to_vec()
    );
    b.load_state_dict(&a.state_dict()).unwrap();
    let (sa, sb) = (a.state_dict(), b.state_dict());
    assert_eq!(sa.keys().collect::<Vec<_>>(), sb.keys().collect::<Vec<_>>());
    for (k, v) in &sa {
        let (x, y) = (v.to_vec(), sb[k].to_vec());
        assert!(
            x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()),
            "{k} differs"
        );
    }
    // loaded tensors keep their trainable/frozen status
    assert!(!b.head.0 .0.weight.is_tracked());
    assert!(b.encoder.blocks[0].attn.wq.weight.is_tracked());
    assert!(!b.encoder.blocks[0].running_mean.is_tracked());
    assert_eq!(param_names(&b).len(), 13);
}

#[test]
fn bad_state_dict_reports_every_problem_and_changes_nothing() {
    let mut m = model(5);
    let before = m.state_dict();
    let mut sd: BTreeMap<String, Tensor<f64>> = model(6).state_dict();
    sd.remove("pair.1.bias");
    sd.remove("encoder.blocks.0.running_mean");
    sd.insert("head.2.weight".into(), Tensor::zeros(&[3, 4]));
    sd.insert("extra.bias".into(), Tensor::zeros(&[1]));
    let err = m.load_state_dict(&sd).unwrap_err();
    match &err {
        forge::ForgeError::StateDict {
            missing,
            unexpected,
            mismatched,
        } => {
            assert_eq!(missing, &["encoder.blocks.0.running_mean", "pair.1.bias"]);
            assert_eq!(unexpected, &["extra.bias"]);
            assert_eq!(
                mismatched,
                &[("head.2.weight".to_string(), vec![2, 4], vec![3, 4])]
            );
        }
        other => panic!("wrong error {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("pair.1.bias") && msg.contains("extra.bias") && msg.contains("head.2.weight")
    );
    for (k, v) in &before {
        assert_eq!(v.to_vec(), m.state_dict()[k].to_vec(), "{k} changed");
    }
}

#[test]
fn train_and_eval_reach_every_training_flag() {
    let mut m = model(7);
    assert!(m.is_training());
    m.eval();
    assert!(!m.is_training());
    assert!(m.encoder.blocks.iter().all(|b| !b.training));
    m.encoder.blocks[1].train();
    assert!(m.is_training());
    m.train();
    assert!(m.encoder.blocks.iter().all(|b| b.training));
    // a model without flags reports training mode, whatever is called
    let mut plain = sequential![Linear::<f32>::new(1, 1, &mut Rng::new(0))];
    plain.eval();
    assert!(plain.is_training());
}

#[test]
fn generic_layers_follow_their_element_type() {
    #[derive(Layer)]
    struct G<E: Float> {
        w: Tensor<E>,
        fc: Linear<E>,
    }
    let mut rng = Rng::new(0);
    let g32 = G::<f32> {
        w: Tensor::ones(&[2]).requires_grad(),
        fc: Linear::new(2, 2, &mut rng),
    };
    let g64 = G::<f64> {
        w: Tensor::ones(&[2]).requires_grad(),
        fc: Linear::new(2, 2, &mut rng),
    };
    let p32: Vec<Tensor<f32>> = g32.parameters();
    let p64: Vec<Tensor<f64>> = g64.parameters();
    assert_eq!((p32.len(), p64.len()), (3, 3));
}

#[test]
fn sequential_paths_stay_flat_whatever_the_nesting() {
    let mut rng = Rng::new(0);
    let m = sequential![
        Linear::<f32>::new(1, 1, &mut rng),
        Relu,
        Relu,
        Relu,
        Relu,
        Relu,
        Relu,
        Relu,
        Relu,
        Relu,
        Relu,
        Linear::new(1, 1, &mut rng),
        sequential![Relu, Linear::new(1, 1, &mut rng)],
    ];
    let names: Vec<String> = m.named_parameters().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        names,
        [
            "0.weight",
            "0.bias",
            "11.weight",
            "11.bias",
            "12.1.weight",
            "12.1.bias"
        ]
    );
    assert_eq!(m.len(), 13);
    assert_eq!(m.forward(Tensor::ones(&[1, 1])).shape(), &[1, 1]);
}

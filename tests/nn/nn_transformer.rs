//! Transformer blocks and stacks: PyTorch parameter names, the post-norm
//! and pre-norm wiring against a composition of the sublayers, causal
//! masking, dropout in training versus evaluation, state_dict round trips,
//! gradient checks in f64, and a pinned shape-error message per family.

use forge::nn::{
    Activation, DecoderMasks, Forward, Layer, PositionalEncoding, TransformerConfig,
    TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
};
use forge::{gradcheck, Rng, Tensor};

fn cfg(norm_first: bool, dropout: f64) -> TransformerConfig {
    TransformerConfig {
        dim_feedforward: 8,
        dropout,
        norm_first,
        activation: Activation::Gelu,
        ..TransformerConfig::new(4, 2)
    }
}

fn keys<L: Layer<f64>>(l: &L) -> Vec<String> {
    let mut k: Vec<String> = l.named_tensors().into_iter().map(|(p, _, _)| p).collect();
    k.sort();
    k
}

#[test]
fn parameter_names_are_pytorch_names() {
    let enc = TransformerEncoderLayer::<f64>::new(cfg(false, 0.1), &mut Rng::new(0));
    let mut want = vec![
        "linear1.bias",
        "linear1.weight",
        "linear2.bias",
        "linear2.weight",
        "norm1.bias",
        "norm1.weight",
        "norm2.bias",
        "norm2.weight",
        "self_attn.in_proj_bias",
        "self_attn.in_proj_weight",
        "self_attn.out_proj.bias",
        "self_attn.out_proj.weight",
    ];
    assert_eq!(keys(&enc), want);
    let dec = TransformerDecoderLayer::<f64>::new(cfg(false, 0.1), &mut Rng::new(0));
    want.extend([
        "multihead_attn.in_proj_bias",
        "multihead_attn.in_proj_weight",
        "multihead_attn.out_proj.bias",
        "multihead_attn.out_proj.weight",
        "norm3.bias",
        "norm3.weight",
    ]);
    want.sort();
    assert_eq!(keys(&dec), want);
    let stack = TransformerEncoder::<f64>::new(cfg(true, 0.1), 2, true, &mut Rng::new(0));
    let k = keys(&stack);
    assert_eq!(k.len(), 2 * 12 + 2);
    assert!(k.contains(&"layers.1.self_attn.out_proj.weight".to_string()));
    assert!(k.contains(&"norm.weight".to_string()));
}

#[test]
fn encoder_layer_wiring_post_and_pre_norm() {
    let x = Tensor::<f64>::normal(&[3, 2, 4], 0.0, 1.0, &mut Rng::new(1));
    for norm_first in [false, true] {
        let l = TransformerEncoderLayer::<f64>::new(cfg(norm_first, 0.0), &mut Rng::new(2));
        let sa = |h: &Tensor<f64>| l.self_attn.forward(h.clone()).0;
        let ff = |h: &Tensor<f64>| l.linear2.forward(l.linear1.forward(h.clone()).gelu());
        let want = if norm_first {
            let h = x.add(&sa(&l.norm1.forward(x.clone())));
            h.add(&ff(&l.norm2.forward(h.clone())))
        } else {
            let h = l.norm1.forward(x.add(&sa(&x)));
            l.norm2.forward(h.add(&ff(&h)))
        };
        assert_eq!(
            l.forward(x.clone()).to_vec(),
            want.to_vec(),
            "norm_first {norm_first}"
        );
    }
}

#[test]
fn decoder_layer_wiring_and_causality() {
    let mut rng = Rng::new(3);
    let tgt = Tensor::<f64>::normal(&[3, 1, 4], 0.0, 1.0, &mut rng);
    let mem = Tensor::<f64>::normal(&[5, 1, 4], 0.0, 1.0, &mut rng);
    let l = TransformerDecoderLayer::<f64>::new(cfg(false, 0.0), &mut Rng::new(4));
    let x = l
        .norm1
        .forward(tgt.add(&l.self_attn.forward(tgt.clone()).0));
    let x = l.norm2.forward(
        x.add(
            &l.multihead_attn
                .forward((x.clone(), mem.clone(), mem.clone()))
                .0,
        ),
    );
    let f = l.linear2.forward(l.linear1.forward(x.clone()).gelu());
    let want = l.norm3.forward(x.add(&f));
    assert_eq!(
        l.forward((tgt.clone(), mem.clone())).to_vec(),
        want.to_vec()
    );

    let m = DecoderMasks {
        tgt_is_causal: true,
        ..Default::default()
    };
    let y = l.forward_masked(&tgt, &mem, m);
    let mut later = tgt.to_vec();
    later[8..].iter_mut().for_each(|v| *v += 10.0);
    let y2 = l.forward_masked(&Tensor::from_vec(later, &[3, 1, 4]), &mem, m);
    assert_eq!(
        &y.to_vec()[..8],
        &y2.to_vec()[..8],
        "positions 0, 1 ignore position 2"
    );
    assert_ne!(&y.to_vec()[8..], &y2.to_vec()[8..]);
}

#[test]
fn dropout_only_in_training() {
    let x = Tensor::<f32>::normal(&[3, 2, 4], 0.0, 1.0, &mut Rng::new(5));
    let mut l = TransformerEncoder::<f32>::new(cfg(true, 0.5), 2, true, &mut Rng::new(6));
    let a = l.forward(x.clone());
    let b = l.forward(x.clone());
    assert_ne!(a.to_vec(), b.to_vec(), "dropout masks differ between calls");
    l.eval();
    assert!(!l.is_training());
    let c = l.forward(x.clone());
    assert_eq!(c.to_vec(), l.forward(x.clone()).to_vec());
    // Eval equals the same weights with dropout 0.
    let mut no_drop = TransformerEncoder::<f32>::new(cfg(true, 0.0), 2, true, &mut Rng::new(7));
    no_drop.load_state_dict(&l.state_dict()).unwrap();
    assert_eq!(no_drop.forward(x).to_vec(), c.to_vec());
}

#[test]
fn stacks_round_trip_through_state_dict() {
    let mut rng = Rng::new(8);
    let src = Tensor::<f64>::normal(&[4, 2, 4], 0.0, 1.0, &mut rng);
    let tgt = Tensor::<f64>::normal(&[3, 2, 4], 0.0, 1.0, &mut rng);
    let enc = TransformerEncoder::<f64>::new(cfg(false, 0.0), 2, false, &mut Rng::new(9));
    let dec = TransformerDecoder::<f64>::new(cfg(true, 0.0), 2, true, &mut Rng::new(10));
    let mut enc2 = TransformerEncoder::<f64>::new(cfg(false, 0.0), 2, false, &mut Rng::new(11));
    let mut dec2 = TransformerDecoder::<f64>::new(cfg(true, 0.0), 2, true, &mut Rng::new(12));
    let mem = enc.forward(src.clone());
    assert_ne!(enc2.forward(src.clone()).to_vec(), mem.to_vec());
    enc2.load_state_dict(&enc.state_dict()).unwrap();
    dec2.load_state_dict(&dec.state_dict()).unwrap();
    assert_eq!(enc2.forward(src).to_vec(), mem.to_vec());
    assert_eq!(
        dec2.forward((tgt.clone(), mem.clone())).to_vec(),
        dec.forward((tgt, mem)).to_vec()
    );
    let pe = PositionalEncoding::<f64>::new(4, 16, 0.0, false, &mut Rng::new(0));
    let mut pe2 = PositionalEncoding::<f64>::new(4, 16, 0.0, false, &mut Rng::new(0));
    pe2.load_state_dict(&pe.state_dict()).unwrap();
    assert_eq!(pe.state_dict()["pe"].shape(), &[16, 4]);
    assert!(pe.parameters().is_empty(), "the table is frozen");
}

#[test]
fn encoder_and_decoder_layers_pass_gradcheck() {
    let mut rng = Rng::new(13);
    let x = Tensor::<f64>::normal(&[3, 1, 4], 0.0, 1.0, &mut rng);
    let mem = Tensor::<f64>::normal(&[2, 1, 4], 0.0, 1.0, &mut rng);
    for norm_first in [false, true] {
        let enc = TransformerEncoderLayer::<f64>::new(cfg(norm_first, 0.0), &mut Rng::new(14));
        gradcheck(
            |v| enc.forward(v[0].clone()),
            std::slice::from_ref(&x),
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap();
        let dec = TransformerDecoderLayer::<f64>::new(cfg(norm_first, 0.0), &mut Rng::new(15));
        gradcheck(
            |v| dec.forward((v[0].clone(), v[1].clone())),
            &[x.clone(), mem.clone()],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap();
        // Every parameter receives a gradient.
        let g = dec
            .forward((x.clone(), mem.clone()))
            .square()
            .sum()
            .backward();
        for (name, p) in dec.named_parameters() {
            let gp = g
                .get(&p)
                .unwrap_or_else(|| panic!("no gradient for {name}"));
            assert!(gp.to_vec().iter().any(|v| *v != 0.0), "{name}");
        }
    }
}

#[test]
fn positional_encoding_values() {
    let pe = PositionalEncoding::<f64>::new(6, 8, 0.0, true, &mut Rng::new(0));
    let t = pe.pe.to_vec();
    for pos in 0..8 {
        for i in 0..3 {
            let a = pos as f64 / 10000f64.powf(2.0 * i as f64 / 6.0);
            assert!((t[pos * 6 + 2 * i] - a.sin()).abs() < 1e-12);
            assert!((t[pos * 6 + 2 * i + 1] - a.cos()).abs() < 1e-12);
        }
    }
    let y = pe.forward(Tensor::zeros(&[2, 3, 6]));
    assert_eq!(&y.to_vec()[..18], &t[..18]);
    assert_eq!(&y.to_vec()[18..], &t[..18]);
}

#[test]
#[should_panic(
    expected = "TransformerEncoderLayer(d_model 4): expected input of shape [T, N, 4], got [3, 2, 5]"
)]
fn encoder_layer_names_layer_and_shapes() {
    let l = TransformerEncoderLayer::<f32>::new(cfg(false, 0.0), &mut Rng::new(0));
    l.forward(Tensor::zeros(&[3, 2, 5]));
}

#[test]
#[should_panic(
    expected = "TransformerDecoderLayer(d_model 4): expected memory of shape [T, N, 4], got [2, 4]"
)]
fn decoder_layer_names_layer_and_shapes() {
    let l = TransformerDecoderLayer::<f32>::new(cfg(true, 0.0), &mut Rng::new(0));
    l.forward((Tensor::zeros(&[3, 2, 4]), Tensor::zeros(&[2, 4])));
}

#[test]
#[should_panic(
    expected = "PositionalEncoding(d_model 6, max_len 8): expected input of shape [N, T <= max_len, d_model], got [1, 9, 6]"
)]
fn positional_encoding_names_layer_and_shapes() {
    let pe = PositionalEncoding::<f32>::new(6, 8, 0.0, true, &mut Rng::new(0));
    pe.forward(Tensor::zeros(&[1, 9, 6]));
}

/// Outside autograd a post-norm encoder layer adds each residual inside its
/// norm's pass (`LayerNorm::forward_residual`): the output equals the same
/// layer's sublayers composed with separate `add` and norm ops, bit for
/// bit, in f32 and f64, on 1 and 2 threads, for widths inside one row
/// block and across several; the profile shows two `layer_norm` calls and
/// no `add`. Recording, the layer runs the composed ops (and the profile
/// shows the adds).
#[test]
fn post_norm_inference_adds_the_residual_inside_the_norm_with_the_same_bits() {
    use forge::runtime::set_num_threads;
    use forge::tools::profile;
    fn case<E: forge::Float>(d: usize, heads: usize, rows: usize) {
        let mut rng = Rng::new(d as u64);
        let mut c = TransformerConfig::new(d, heads);
        (c.dim_feedforward, c.batch_first, c.dropout) = (2 * d + 3, true, 0.0);
        let act = c.activation;
        let l = TransformerEncoderLayer::<E>::new(c, &mut rng);
        let x = Tensor::<E>::normal(&[2, rows, d], 0.0, 1.0, &mut rng);
        let composed = forge::no_grad(|| {
            let h = l.norm1.forward(x.add(&l.self_attn.forward(x.clone()).0));
            let f = l
                .linear2
                .forward(l.linear1.forward_activated(h.clone(), act));
            l.norm2.forward(h.add(&f))
        });
        let bits = |t: &Tensor<E>| {
            t.to_vec()
                .iter()
                .map(|&v| forge::Element::to_f64(v).to_bits())
                .collect::<Vec<_>>()
        };
        for threads in [1, 2] {
            set_num_threads(threads);
            let (y, prof) = profile(|| forge::no_grad(|| l.forward(x.clone())));
            assert_eq!(bits(&y), bits(&composed), "d {d}, {threads} threads");
            let calls = |op: &str| {
                prof.rows()
                    .iter()
                    .find(|r| r.op == op)
                    .map_or(0, |r| r.forward_calls)
            };
            assert_eq!(calls("layer_norm"), 2, "{}", prof.table());
            assert_eq!(calls("add"), 0, "{}", prof.table());
        }
        set_num_threads(1);
        let (_, prof) = profile(|| l.forward(x.clone()));
        let adds = prof
            .rows()
            .iter()
            .find(|r| r.op == "add")
            .map_or(0, |r| r.forward_calls);
        assert_eq!(adds, 2, "recorded: {}", prof.table());
    }
    for (d, heads, rows) in [(8, 2, 5), (64, 4, 9), (264, 4, 40)] {
        case::<f32>(d, heads, rows);
        case::<f64>(d, heads, rows);
    }
}

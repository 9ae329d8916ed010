//! Batch norm folded into the layer before it (fixtures `fuse/*`, made by
//! `torch.nn.utils.fusion.fuse_conv_bn_eval` / `fuse_linear_bn_eval`).
//!
//! Every file gives a convolution (or linear layer) with its options in the
//! metadata, an evaluation-mode batch norm, an input, PyTorch's fused weight
//! and bias, the fused layer's output and the unfused pair's output.
//!
//! Tolerances: in f64 the fused weight and bias must equal PyTorch's bit for
//! bit (forge computes each element with the same operations in the same
//! order: one reciprocal square root, products and sums, each correctly
//! rounded); the outputs use the file's `rtol`/`atol` (1e-13: a gemm's sum
//! in another order). In f32 the fused weights are within 1e-6 relative of
//! PyTorch's f64 ones (three roundings of about 6e-8 each, plus the input's
//! own rounding to f32), the outputs within 1e-4 relative / 1e-5 absolute
//! (the f32 tier of tests/fixtures/README.md: sums of at most 36 products).

use crate::common;
use common::Fixture;
use forge::nn::{
    fuse_conv_bn_eval, fuse_linear_bn_eval, BatchNorm1d, BatchNorm2d, Conv2d, Forward, Layer,
    Linear,
};
use forge::{Float, Tensor};

fn files() -> Vec<String> {
    let v = common::fixtures_with_prefix("fuse", "");
    assert!(v.len() >= 2, "{v:?}");
    v
}

/// The fixture's batch norm statistics into a layer of either kind.
macro_rules! load_bn {
    ($bn:ty, $f:expr, $c:expr) => {{
        let f: &Fixture = $f;
        let mut bn = <$bn>::new($c);
        bn.eps = f.meta_f64("eps");
        bn.running_mean.set(f.input("running_mean"));
        bn.running_var.set(f.input("running_var"));
        if f.flag("affine") {
            bn.weight = Some(f.input("bn_weight"));
            bn.bias = Some(f.input("bn_bias"));
        } else {
            bn.weight = None;
            bn.bias = None;
        }
        bn.eval();
        bn
    }};
}

/// `(fused weight, fused bias, fused output, unfused output)` for file `f`.
fn run<E: Float>(f: &Fixture) -> (Tensor<E>, Tensor<E>, Tensor<E>, Tensor<E>) {
    let bias = f.flag("bias").then(|| f.input::<E>("bias"));
    assert_eq!(f.has("bias"), f.flag("bias"), "{}", f.name);
    let x = f.input::<E>("x");
    let c = f.t("running_mean").numel();
    match f.meta("kind") {
        "conv" => {
            let mut conv = Conv2d::from_weights(f.input::<E>("weight"), bias).unwrap();
            conv.stride = f.meta_pair("stride");
            conv.padding = f.meta_pair("padding");
            conv.dilation = f.meta_pair("dilation");
            conv.groups = f.parse("groups");
            let bn = load_bn!(BatchNorm2d<E>, f, c);
            let fused = fuse_conv_bn_eval(&conv, &bn);
            let unfused = bn.forward(conv.forward(x.clone()));
            let out = fused.forward(x);
            (fused.weight, fused.bias.unwrap(), out, unfused)
        }
        "linear" => {
            let lin = Linear::from_weights(f.input::<E>("weight"), bias).unwrap();
            let bn = load_bn!(BatchNorm1d<E>, f, c);
            let fused = fuse_linear_bn_eval(&lin, &bn);
            let unfused = bn.forward(lin.forward(x.clone()));
            let out = fused.forward(x);
            (fused.weight, fused.bias.unwrap(), out, unfused)
        }
        other => panic!("{}: kind {other}", f.name),
    }
}

#[test]
fn fused_weights_equal_pytorch_bit_for_bit_in_f64() {
    for name in files() {
        let f = Fixture::load(&name);
        let (w, b, out, unfused) = run::<f64>(&f);
        for (what, got) in [("fused_weight", &w), ("fused_bias", &b)] {
            let want = f.t(what);
            assert_eq!(got.shape(), want.shape(), "{name}: {what}");
            for (i, (g, e)) in got.to_vec().iter().zip(want.to_vec()).enumerate() {
                assert_eq!(g.to_bits(), e.to_bits(), "{name}: {what}[{i}]: {g} vs {e}");
            }
        }
        f.check("out", &out);
        f.check("out_unfused", &unfused);
    }
}

#[test]
fn fused_layers_match_pytorch_in_f32() {
    for name in files() {
        let f = Fixture::load(&name);
        let (w, b, out, unfused) = run::<f32>(&f);
        for (what, got) in [("fused_weight", &w), ("fused_bias", &b)] {
            common::assert_close(
                &format!("{name} (f32): {what}"),
                &got.cast(),
                &f.t(what),
                1e-6,
                1e-6,
            );
        }
        for (what, got) in [("out", &out), ("out_unfused", &unfused)] {
            common::assert_close(
                &format!("{name} (f32): {what}"),
                &got.cast(),
                &f.t(what),
                1e-4,
                1e-5,
            );
        }
    }
}

#[test]
fn fused_tensors_are_new_trainable_leaves() {
    let f = Fixture::load(&files()[0]);
    let (w, b, _, _) = run::<f64>(&f);
    // from_weights keeps the file's tensors untracked: so are the fused ones.
    assert!(!w.is_tracked() && !b.is_tracked());
    let conv = Conv2d::<f64>::new(2, 3, 1, &mut forge::Rng::new(0));
    let mut bn = BatchNorm2d::<f64>::new(3);
    bn.eval();
    let fused = fuse_conv_bn_eval(&conv, &bn);
    assert!(fused.weight.is_tracked() && fused.bias.as_ref().unwrap().is_tracked());
    assert_eq!(fused.parameters().len(), 2);
}

#[test]
#[should_panic(expected = "fuse_conv_bn_eval: the batch norm is in training mode")]
fn fusing_a_training_batch_norm_panics() {
    let conv = Conv2d::<f32>::new(2, 3, 1, &mut forge::Rng::new(0));
    fuse_conv_bn_eval(&conv, &BatchNorm2d::new(3));
}

#[test]
#[should_panic(
    expected = "fuse_linear_bn_eval: the linear layer has 3 output channels but the batch norm has 4 features"
)]
fn fusing_mismatched_channels_panics() {
    let lin = Linear::<f32>::new(2, 3, &mut forge::Rng::new(0));
    let mut bn = BatchNorm1d::new(4);
    bn.eval();
    fuse_linear_bn_eval(&lin, &bn);
}

/// The evaluation-mode inference path (`f32`, no autograd): a ResNet
/// [`Downsample`](forge::models::resnet::Downsample) holding the file's
/// convolution and batch norm folds the batch norm into the convolution's
/// packed weights and runs the direct kernel where it applies (one group),
/// the layers in turn elsewhere; either way its output matches PyTorch's
/// fused output within the f32 tier (1e-4 relative / 1e-5 absolute, as
/// above), and a second call (the kept packing) gives the same bits.
#[test]
fn eval_inference_path_matches_pytorch_fused_output() {
    let mut checked = 0;
    for name in files() {
        let f = Fixture::load(&name);
        if f.meta("kind") != "conv" {
            continue;
        }
        let bias = f.flag("bias").then(|| f.input::<f32>("bias"));
        let mut conv = Conv2d::from_weights(f.input::<f32>("weight"), bias).unwrap();
        conv.stride = f.meta_pair("stride");
        conv.padding = f.meta_pair("padding");
        conv.dilation = f.meta_pair("dilation");
        conv.groups = f.parse("groups");
        let c = f.t("running_mean").numel();
        let bn = load_bn!(BatchNorm2d<f32>, &f, c);
        let d = forge::models::resnet::Downsample(conv, bn);
        let x = f.input::<f32>("x");
        let y = forge::no_grad(|| d.forward(x.clone()));
        common::assert_close(
            &format!("{name} (f32, eval inference path): out"),
            &y.cast(),
            &f.t("out"),
            1e-4,
            1e-5,
        );
        let again = forge::no_grad(|| d.forward(x.clone()));
        assert!(
            y.to_vec()
                .iter()
                .map(|v| v.to_bits())
                .eq(again.to_vec().iter().map(|v| v.to_bits())),
            "{name}: second call"
        );
        checked += 1;
    }
    assert!(checked >= 1);
}

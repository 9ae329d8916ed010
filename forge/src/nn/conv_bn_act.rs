//! Inference epilogue of a convolution followed by an evaluation-mode batch
//! norm, an optional residual sum and an optional ReLU.
//!
//! **Folded (f32, the direct kernel's shapes).** Where the direct
//! convolution takes the convolution (`ops/conv_infer.rs`: `f32`, one
//! group, small batches), the batch norm is folded into the convolution's
//! weights and bias exactly as PyTorch's `fuse_conv_bn_eval` computes them
//! (`nn/fuse.rs`'s `conv_bn_scale_bias`, shared with
//! [`fuse_conv_bn_eval`](super::fuse_conv_bn_eval)), the folded weights are
//! packed once and kept on the weight's storage (rebuilt after any write
//! to it, or when the batch norm's statistics, affine parameters, eps or
//! the convolution's bias differ from those folded: their bits are the
//! key), and the bias, the residual and the ReLU are applied in the
//! kernel's output pass. The result equals `fuse_conv_bn_eval(conv, bn)`'s
//! forward (plus residual, ReLU) bit for bit, and differs from the layers in
//! turn by rounding (the scale moves inside the products). An fp8
//! convolution (`conv2d_fp8.rs`) folds the same way with no f32 weight:
//! each byte decoded, times its row's fp8 scale, times the batch norm's
//! scale, as the direct kernel's blocks are packed for the call
//! (`ops/conv_fp8.rs`); that packing is not cached (it would be an f32
//! copy of the weight), so the fold and the packing run on every call.
//!
//! **Otherwise: one pass in place, same bits.** Each element is computed
//! with the composite's operations in the composite's order: the batch
//! norm's `(v - mean) * k + beta` (`k = weight / sqrt(var + eps)`, as
//! `batch_norm`'s evaluation kernel forms it), then `+ residual`, then
//! `relu` (`y > 0 ? y : 0`), in place over the convolution's output
//! instead of one new tensor (and one sweep over memory) per op. So that
//! path equals `relu(bn(conv(x)) + residual)` bit for bit, which the tests
//! check on random data.
//!
//! Both run only where nothing can tell the difference: the batch norm in
//! evaluation mode, no tape recording (`no_grad`), no model summary
//! capturing layer outputs, and (for the in-place pass) a convolution
//! output that nothing else holds. Anywhere else the layers' own forwards
//! run one after the other.
//!
//! Measured (perf, ResNet-18 inference at batch 32, 3x32x32, one thread):
//! the batch norm, residual-add and ReLU sweeps and their fresh buffers'
//! page touches were 6-8% of the cycles before the in-place pass.

use super::conv::Conv2d;
use super::forward::Forward;
use super::fuse::{conv_bn_scale_bias, scaled_rows};
use super::norm::BatchNorm2d;
use super::summary::recording_mark;
use crate::autograd::is_grad_enabled;
use crate::cpu::buffers::for_each_row_work;
use crate::cpu::conv::ConvGeom;
use crate::ops::conv_fp8::conv2d_fp8_folded;
use crate::ops::conv_infer::conv2d_folded;
use crate::tensor::{Float, Tensor};

/// `relu?(bn(conv(x)) + residual?)` for `conv` followed by `bn`, fused into
/// one in-place pass over the convolution's output when `bn` is in
/// evaluation mode and nothing records (see the module docs), else the
/// layers' forwards in turn. Same bits either way.
///
/// # Panics
/// As the layers' forwards (wrong ranks or channel counts), or the residual
/// sum when the shapes do not broadcast.
pub(crate) fn conv_bn_act<E: Float>(
    conv: &Conv2d<E>,
    bn: &BatchNorm2d<E>,
    x: Tensor<E>,
    residual: Option<&Tensor<E>>,
    relu: bool,
) -> Tensor<E> {
    if let Some(y) = folded(conv, bn, &x, residual, relu) {
        return y;
    }
    let y = conv.forward(x);
    let fusable = !bn.training
        && !is_grad_enabled()
        && recording_mark().is_none()
        && y.rank() == 4
        && y.shape()[1] == bn.num_features()
        && residual.is_none_or(|r| r.shape() == y.shape());
    if fusable {
        match epilogue(bn, y, residual, relu) {
            Ok(y) => return y,
            Err(y) => return composite(bn, y, residual, relu),
        }
    }
    composite(bn, y, residual, relu)
}

/// The evaluation-mode path with the batch norm folded into the
/// convolution's packed weights (`ops/conv_infer.rs`), where the direct
/// kernel takes the convolution; `None` elsewhere.
fn folded<E: Float>(
    conv: &Conv2d<E>,
    bn: &BatchNorm2d<E>,
    x: &Tensor<E>,
    residual: Option<&Tensor<E>>,
    relu: bool,
) -> Option<Tensor<E>> {
    // an fp8 weight's shape is its own (`conv.weight` is then empty)
    let ws = conv
        .fp8
        .as_ref()
        .map_or(conv.weight.shape(), |q| q.weight_shape());
    let xs: [usize; 4] = x.shape().try_into().ok()?;
    if bn.training
        || is_grad_enabled()
        || recording_mark().is_some()
        || conv.int8.is_some()
        || ws.len() != 4
        || xs[1] != ws[1] * conv.groups
        || bn.num_features() != ws[0]
    {
        return None;
    }
    let geom = ConvGeom::new(
        xs,
        [ws[0], ws[1], ws[2], ws[3]],
        conv.stride,
        conv.padding,
        conv.dilation,
        conv.groups,
    )?;
    if residual.is_some_and(|r| r.shape() != [geom.n, geom.o, geom.oh, geom.ow]) {
        return None;
    }
    if let Some(q) = &conv.fp8 {
        // folded into the direct kernel's blocks as they are decoded, for
        // this call (`ops/conv_fp8.rs`)
        let fold = || conv_bn_scale_bias(conv, bn);
        return conv2d_fp8_folded(x, q.panels(), &geom, fold, residual, relu);
    }
    // Everything the fold reads besides the weight, as bits: the folded
    // weights are reused while these are unchanged. Compared in place
    // against the kept key (`matches`); the key is made only for a new
    // fold (making it on every call, five tensors copied out and widened,
    // was 1.9% of the one-thread batch-1 forward).
    let parts = [
        Some(bn.running_mean.get()),
        Some(bn.running_var.get()),
        bn.weight.clone(),
        bn.bias.clone(),
        conv.bias.clone(),
    ];
    let eps = bn.eps.to_bits();
    let matches = |kept: &[u64]| key_matches(eps, &parts, kept);
    let key = || key_words(eps, &parts);
    let fold = || {
        let (scale, bias) = conv_bn_scale_bias(conv, bn);
        (scaled_rows(conv.weight.as_slice(), &scale), bias)
    };
    conv2d_folded(x, &conv.weight, &geom, (matches, key), fold, residual, relu)
}

/// The words of a fold's key, in order: `eps`'s bits, then per tensor of
/// `parts` its element count and its values' bits (as `f64`), or
/// `u64::MAX` for an absent one.
fn key_words<E: Float>(eps: u64, parts: &[Option<Tensor<E>>]) -> Vec<u64> {
    let mut key = vec![eps];
    for t in parts {
        match t {
            Some(t) => {
                key.push(t.numel() as u64);
                key.extend(
                    t.as_slice()
                        .iter()
                        .map(|&v| crate::base::Element::to_f64(v).to_bits()),
                );
            }
            None => key.push(u64::MAX),
        }
    }
    key
}

/// Whether `kept` holds exactly the words [`key_words`] makes of `eps`
/// and `parts`: compared a tensor at a time, each in one pass without an
/// early exit at the widest vector width (walking the words one call at a
/// time was 1.2% of ResNet-18's one-thread batch-1 forward).
fn key_matches<E: Float>(eps: u64, parts: &[Option<Tensor<E>>], kept: &[u64]) -> bool {
    let Some((&first, mut rest)) = kept.split_first() else {
        return false;
    };
    if first != eps {
        return false;
    }
    for t in parts {
        let Some((&count, after)) = rest.split_first() else {
            return false;
        };
        rest = after;
        match t {
            Some(t) => {
                let vals = t.as_slice();
                if count != vals.len() as u64 || rest.len() < vals.len() {
                    return false;
                }
                let (words, after) = rest.split_at(vals.len());
                let same = crate::cpu::elementwise::widest(
                    #[inline(always)]
                    || {
                        vals.iter().zip(words).fold(true, |same, (&v, &w)| {
                            same & (crate::base::Element::to_f64(v).to_bits() == w)
                        })
                    },
                );
                if !same {
                    return false;
                }
                rest = after;
            }
            None if count != u64::MAX => return false,
            None => {}
        }
    }
    rest.is_empty()
}

/// The layers one after the other.
fn composite<E: Float>(
    bn: &BatchNorm2d<E>,
    y: Tensor<E>,
    residual: Option<&Tensor<E>>,
    relu: bool,
) -> Tensor<E> {
    let y = bn.forward(y);
    let y = match residual {
        Some(r) => &y + r,
        None => y,
    };
    if relu {
        y.relu()
    } else {
        y
    }
}

/// The fused pass over `y [n, c, h, w]` in place; `Err(y)` when `y`'s
/// storage is shared (the caller then runs the composite).
fn epilogue<E: Float>(
    bn: &BatchNorm2d<E>,
    mut y: Tensor<E>,
    residual: Option<&Tensor<E>>,
    relu: bool,
) -> Result<Tensor<E>, Tensor<E>> {
    let c = y.shape()[1];
    let sp = y.shape()[2] * y.shape()[3];
    let e = E::from_f64(bn.eps);
    let mean = bn.running_mean.get().to_vec();
    let var = bn.running_var.get().to_vec();
    let w = bn.weight.as_ref().map(Tensor::to_vec);
    let b = bn.bias.as_ref().map(Tensor::to_vec);
    // batch_norm's evaluation coefficients, formed as it forms them.
    let coef: Vec<(E, E, E)> = (0..c)
        .map(|ch| {
            let rstd = (var[ch] + e).sqrt().recip();
            let k = rstd * w.as_ref().map_or(E::one(), |w| w[ch]);
            (mean[ch], k, b.as_ref().map_or(E::zero(), |b| b[ch]))
        })
        .collect();
    let res = residual.map(|r| r.as_slice());
    let Some(vals) = y.values_mut() else {
        return Err(y);
    };
    for_each_row_work(vals, sp, 3 * sp, |row, out| {
        let (m, k, bb) = coef[row % c];
        let at = row * sp;
        match res {
            Some(r) => {
                let len = out.len();
                for (o, &rv) in out.iter_mut().zip(&r[at..at + len]) {
                    let v = ((*o - m) * k + bb) + rv;
                    *o = if !relu || v > E::zero() { v } else { E::zero() };
                }
            }
            None => {
                for o in out.iter_mut() {
                    let v = (*o - m) * k + bb;
                    *o = if !relu || v > E::zero() { v } else { E::zero() };
                }
            }
        }
    });
    Ok(y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{fuse_conv_bn_eval, Layer};
    use crate::no_grad;
    use crate::tensor::Rng;

    /// A batch norm in eval mode with random statistics and affine
    /// parameters (or none).
    fn bn<E: Float>(c: usize, affine: bool, rng: &mut Rng) -> BatchNorm2d<E> {
        let mut bn = BatchNorm2d::<E>::new(c);
        bn.running_mean.set(Tensor::uniform(&[c], -1.0, 1.0, rng));
        bn.running_var.set(Tensor::uniform(&[c], 0.1, 3.0, rng));
        if affine {
            bn.weight = Some(Tensor::uniform(&[c], -2.0, 2.0, rng));
            bn.bias = Some(Tensor::uniform(&[c], -1.0, 1.0, rng));
        } else {
            bn.weight = None;
            bn.bias = None;
        }
        bn.eval();
        bn
    }

    fn bits<E: Float>(t: &Tensor<E>) -> Vec<u64> {
        t.to_vec()
            .iter()
            .map(|&v| crate::base::Element::to_f64(v).to_bits())
            .collect()
    }

    /// The in-place pass (f64: the folded path is f32 only) gives the
    /// composite's bits, for every combination of residual, ReLU, affine
    /// and plane size (1x1 planes included).
    #[test]
    fn same_bits_as_the_layers_in_turn() {
        let mut rng = Rng::new(7);
        for (hw, affine, relu, with_res) in [
            (5, true, true, true),
            (5, true, false, false),
            (1, false, true, false),
            (3, true, true, false),
            (2, false, false, true),
        ] {
            let conv = Conv2d::<f64>::new(3, 6, 3, &mut rng).padding(1);
            let bn = bn::<f64>(6, affine, &mut rng);
            let x = Tensor::<f64>::uniform(&[2, 3, hw, hw], -1.0, 1.0, &mut rng);
            let r = Tensor::<f64>::uniform(&[2, 6, hw, hw], -1.0, 1.0, &mut rng);
            let res = with_res.then_some(&r);
            assert!(no_grad(|| folded(&conv, &bn, &x, res, relu)).is_none());
            let fused = no_grad(|| conv_bn_act(&conv, &bn, x.clone(), res, relu));
            let plain = no_grad(|| composite(&bn, conv.forward(x.clone()), res, relu));
            assert_eq!(
                bits(&fused),
                bits(&plain),
                "hw {hw} affine {affine} relu {relu}"
            );
            if relu {
                assert!(fused.to_vec().contains(&0.0));
            }
        }
    }

    /// `relu?(fuse_conv_bn_eval(conv, bn)(x) + residual?)` with the fused
    /// layer's forward, the residual sum and the ReLU as separate ops.
    fn via_fuse(
        conv: &Conv2d<f32>,
        bn: &BatchNorm2d<f32>,
        x: &Tensor<f32>,
        res: Option<&Tensor<f32>>,
        relu: bool,
    ) -> Tensor<f32> {
        let y = no_grad(|| fuse_conv_bn_eval(conv, bn).forward(x.clone()));
        let y = match res {
            Some(r) => &y + r,
            None => y,
        };
        if relu {
            y.relu()
        } else {
            y
        }
    }

    /// The folded path (f32) equals PyTorch's fold as `fuse_conv_bn_eval`
    /// computes it (checked against PyTorch by `tests/nn/nn_fuse_parity.rs`)
    /// followed by the residual sum and the ReLU, bit for bit; and it is
    /// close to the layers in turn (rounding only: a 3x3 over 3 channels,
    /// 28 terms, 1e-5 absolute on values of order 1).
    #[test]
    fn folded_path_equals_fuse_conv_bn_eval() {
        let mut rng = Rng::new(8);
        for (hw, k, stride, bias, affine, relu, with_res) in [
            (5, 3, 1, false, true, true, true),
            (4, 3, 2, true, true, false, false),
            (1, 3, 1, false, false, true, false),
            (6, 1, 2, false, true, false, false),
            (3, 3, 1, true, false, true, true),
        ] {
            let mut conv = Conv2d::<f32>::new(3, 40, k, &mut rng)
                .padding(k / 2)
                .stride(stride);
            if !bias {
                conv.bias = None;
            }
            let bn = bn::<f32>(40, affine, &mut rng);
            let x = Tensor::<f32>::uniform(&[2, 3, hw, hw], -1.0, 1.0, &mut rng);
            let oh = (hw + 2 * (k / 2) - k) / stride + 1;
            let r = Tensor::<f32>::uniform(&[2, 40, oh, oh], -1.0, 1.0, &mut rng);
            let res = with_res.then_some(&r);
            let got = no_grad(|| folded(&conv, &bn, &x, res, relu)).expect("folded path");
            let want = via_fuse(&conv, &bn, &x, res, relu);
            assert_eq!(bits(&got), bits(&want), "hw {hw} k {k} stride {stride}");
            let again = no_grad(|| conv_bn_act(&conv, &bn, x.clone(), res, relu));
            assert_eq!(bits(&again), bits(&want), "reused packing");
            let layers = no_grad(|| composite(&bn, conv.forward(x.clone()), res, relu));
            for (a, b) in got.to_vec().iter().zip(layers.to_vec()) {
                assert!((a - b).abs() <= 1e-5, "{a} vs {b}");
            }
        }
    }

    /// Under bf16 autocast the folded path folds the batch norm into the
    /// f32 weights, rounds them to bf16 and runs the bf16 direct kernel:
    /// it equals `fuse_conv_bn_eval`'s layer run under autocast (then the
    /// residual sum and the ReLU) bit for bit, differs from the f32 folded
    /// path, and stays within the weights' bf16 rounding of the unfused bf16
    /// ops (`conv2d` under autocast, then the batch norm, residual and ReLU
    /// in f32): each product `bf16(k w) bf16(x)` against `k bf16(w) bf16(x)`,
    /// `2^-7 |k w x|` apart at most (two roundings to bf16, each within
    /// `2^-8` relative), plus f32 rounding.
    #[test]
    fn folded_bf16_path_under_autocast() {
        use crate::autocast::autocast;
        use crate::base::DType;
        let mut rng = Rng::new(18);
        for (hw, c, k, stride, bias, affine, relu, with_res) in [
            (5, 3, 3, 1, false, true, true, true),
            (4, 8, 3, 2, true, true, false, false),
            (1, 16, 3, 1, false, false, true, false),
            (6, 6, 1, 2, false, true, false, false),
            (3, 5, 3, 1, true, false, true, true),
        ] {
            let mut conv = Conv2d::<f32>::new(c, 40, k, &mut rng)
                .padding(k / 2)
                .stride(stride);
            if !bias {
                conv.bias = None;
            }
            let bn = bn::<f32>(40, affine, &mut rng);
            let x = Tensor::<f32>::uniform(&[2, c, hw, hw], -1.0, 1.0, &mut rng);
            let oh = (hw + 2 * (k / 2) - k) / stride + 1;
            let r = Tensor::<f32>::uniform(&[2, 40, oh, oh], -1.0, 1.0, &mut rng);
            let res = with_res.then_some(&r);
            let bf16 = |f: &dyn Fn() -> Tensor<f32>| no_grad(|| autocast(DType::BF16, f));
            let got = bf16(&|| folded(&conv, &bn, &x, res, relu).expect("folded path"));
            let want = bf16(&|| via_fuse(&conv, &bn, &x, res, relu));
            assert_eq!(bits(&got), bits(&want), "hw {hw} c {c} k {k}");
            let f32_path = no_grad(|| folded(&conv, &bn, &x, res, relu)).expect("folded");
            assert_ne!(bits(&got), bits(&f32_path), "ran in bf16");
            let layers = bf16(&|| composite(&bn, conv.forward(x.clone()), res, relu));
            let (scale, _) = conv_bn_scale_bias(&conv, &bn);
            let mag = no_grad(|| {
                x.abs().conv2d(
                    &conv.weight.abs(),
                    None,
                    conv.stride,
                    conv.padding,
                    [1, 1],
                    1,
                )
            });
            let l = oh * oh;
            for (i, ((a, b), m)) in got
                .to_vec()
                .iter()
                .zip(layers.to_vec())
                .zip(mag.to_vec())
                .enumerate()
            {
                let bound = 1.01 * (2f32).powi(-7) * scale[i / l % 40].abs() * m + 1e-5;
                assert!((a - b).abs() <= bound, "[{i}] {a} vs {b} (bound {bound})");
            }
        }
    }

    /// The folded weights kept on the weight's storage are rebuilt after
    /// every change to what they were folded from: an optimizer step on the
    /// weight, a state-dict load, new running statistics, eps, the affine
    /// parameters.
    #[test]
    fn every_change_refolds() {
        let mut rng = Rng::new(9);
        let mut conv = Conv2d::<f32>::new(8, 32, 3, &mut rng).padding(1);
        conv.bias = None;
        let mut bn = bn::<f32>(32, true, &mut rng);
        let x = Tensor::<f32>::uniform(&[1, 8, 4, 4], -1.0, 1.0, &mut rng);
        let check = |conv: &Conv2d<f32>, bn: &BatchNorm2d<f32>, what: &str| {
            let got = no_grad(|| conv_bn_act(conv, bn, x.clone(), None, true));
            assert_eq!(
                bits(&got),
                bits(&via_fuse(conv, bn, &x, None, true)),
                "stale folded weights after {what}"
            );
        };
        check(&conv, &bn, "nothing");
        // an optimizer step writes the weight
        let y = conv.forward(x.clone()).sum();
        let g = y.backward();
        crate::optim::Sgd::<f32>::new(0.5)
            .step(&mut conv, &g)
            .unwrap();
        check(&conv, &bn, "an optimizer step");
        // a load replaces the weight
        let other = Conv2d::<f32>::new(8, 32, 3, &mut rng).padding(1);
        let mut sd = other.state_dict();
        sd.remove("bias");
        conv.load_state_dict(&sd).unwrap();
        check(&conv, &bn, "load_state_dict");
        bn.running_mean
            .set(Tensor::uniform(&[32], -1.0, 1.0, &mut rng));
        check(&conv, &bn, "new running mean");
        bn.running_var
            .set(Tensor::uniform(&[32], 0.5, 2.0, &mut rng));
        check(&conv, &bn, "new running variance");
        bn.eps = 1e-3;
        check(&conv, &bn, "another eps");
        bn.weight = Some(Tensor::uniform(&[32], -1.0, 1.0, &mut rng));
        check(&conv, &bn, "new affine weight");
        bn.bias = None;
        check(&conv, &bn, "no affine bias");
    }

    /// A kept key matches exactly the words [`key_words`] makes: not after
    /// any one bit of a value changes (`0.0` to `-0.0` included), a tensor
    /// goes missing or grows, eps changes, or the key is cut or extended.
    #[test]
    fn key_matches_only_the_same_bits() {
        let t = |v: Vec<f32>| Some(Tensor::from_vec(v.clone(), &[v.len()]));
        let parts = [t(vec![1.0, 0.0, -2.5]), None, t(vec![3.0; 37])];
        let eps = 1e-5f64.to_bits();
        let key = key_words(eps, &parts);
        assert!(key_matches(eps, &parts, &key));
        assert!(!key_matches(eps + 1, &parts, &key));
        assert!(!key_matches(eps, &parts, &key[..key.len() - 1]));
        let mut longer = key.clone();
        longer.push(0);
        assert!(!key_matches(eps, &parts, &longer));
        for other in [
            [t(vec![1.0, -0.0, -2.5]), None, t(vec![3.0; 37])],
            [t(vec![1.0, 0.0, -2.5]), t(vec![]), t(vec![3.0; 37])],
            [t(vec![1.0, 0.0]), None, t(vec![3.0; 37])],
            [t(vec![1.0, 0.0, -2.5]), None, t(vec![3.0; 38])],
            [None, None, t(vec![3.0; 37])],
        ] {
            assert!(!key_matches(eps, &other, &key));
        }
        let mut changed = parts.clone();
        let mut last = vec![3.0; 37];
        last[36] = f32::from_bits(3.0f32.to_bits() + 1);
        changed[2] = t(last);
        assert!(!key_matches(eps, &changed, &key));
    }

    /// In training mode the batch statistics are used (the composite
    /// runs), so the running statistics are updated as by the layers.
    #[test]
    fn training_mode_runs_the_layers() {
        let mut rng = Rng::new(3);
        let conv = Conv2d::<f32>::new(2, 4, 1, &mut rng);
        let bn = BatchNorm2d::<f32>::new(4);
        let x = Tensor::<f32>::uniform(&[3, 2, 4, 4], -1.0, 1.0, &mut rng);
        let y = conv_bn_act(&conv, &bn, x, None, false);
        let v = y.to_vec();
        let mean: f32 = v.iter().sum::<f32>() / v.len() as f32;
        assert!(mean.abs() < 1e-4, "batch statistics normalise: mean {mean}");
        assert_ne!(bn.running_mean.get().to_vec(), vec![0.0; 4]);
    }
}

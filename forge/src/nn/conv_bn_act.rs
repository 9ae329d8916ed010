//! Inference epilogue of a convolution followed by an evaluation-mode batch
//! norm, an optional residual sum and an optional ReLU: one pass over the
//! convolution's output, in place, instead of one new tensor (and one
//! sweep over memory) per op.
//!
//! **Same bits.** Each element is computed with the composite's operations
//! in the composite's order: the batch norm's `(v - mean) * k + beta`
//! (`k = weight / sqrt(var + eps)`, as `batch_norm`'s evaluation kernel
//! forms it), then `+ residual`, then `relu` (`y > 0 ? y : 0`). So the
//! fused path equals `relu(bn(conv(x)) + residual)` bit for bit, which the
//! tests check on random data.
//!
//! The fused path runs only where nothing can tell the difference: the
//! batch norm in evaluation mode, no tape recording (`no_grad`), no
//! model summary capturing layer outputs, and a
//! convolution output that nothing else holds. Anywhere else the layers'
//! own forwards run one after the other.
//!
//! Measured (perf, ResNet-18 inference at batch 32, 3x32x32, one thread):
//! the batch norm, residual-add and ReLU sweeps and their fresh buffers'
//! page touches were 6-8% of the cycles before; see the commit message for
//! the figures of the change.

use super::conv::Conv2d;
use super::forward::Forward;
use super::norm::BatchNorm2d;
use super::summary::recording_mark;
use crate::autograd::is_grad_enabled;
use crate::cpu::buffers::for_each_row_work;
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
    use crate::nn::Layer;
    use crate::no_grad;
    use crate::tensor::Rng;

    /// A batch norm in eval mode with random statistics and affine
    /// parameters (or none).
    fn bn(c: usize, affine: bool, rng: &mut Rng) -> BatchNorm2d<f32> {
        let mut bn = BatchNorm2d::<f32>::new(c);
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

    /// The fused pass gives the composite's bits, for every combination
    /// of residual, ReLU, affine and plane size (1x1 planes included).
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
            let conv = Conv2d::<f32>::new(3, 6, 3, &mut rng).padding(1);
            let bn = bn(6, affine, &mut rng);
            let x = Tensor::<f32>::uniform(&[2, 3, hw, hw], -1.0, 1.0, &mut rng);
            let r = Tensor::<f32>::uniform(&[2, 6, hw, hw], -1.0, 1.0, &mut rng);
            let res = with_res.then_some(&r);
            let fused = no_grad(|| conv_bn_act(&conv, &bn, x.clone(), res, relu));
            let plain = no_grad(|| composite(&bn, conv.forward(x.clone()), res, relu));
            let bits = |t: &Tensor<f32>| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
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

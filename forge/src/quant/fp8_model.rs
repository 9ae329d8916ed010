//! Models with 8-bit float weights: [`to_fp8`] (every `Linear`,
//! `Conv2d` and recurrent layer of a model in place), how a layer reports an [`Fp8Weight`] to the tensor
//! visitors, and loading an FP8 checkpoint straight into such a model
//! (the bytes become the layer's weight without an f32 copy).

use super::fp8::Fp8Format;
use super::fp8_weight::{from_float_tensors, Fp8Weight};
use super::int8::{Granularity, Quantizable};
use crate::error::{ForgeError, Result};
use crate::io::{AnyTensor, SafeTensorsData};
use crate::nn::{Layer, TensorKind, TensorVisitor, TensorVisitorMut};
use crate::tensor::{Element, Float, Tensor};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Converts every [`Linear`](crate::nn::Linear),
/// [`Conv2d`](crate::nn::Conv2d), [`Lstm`](crate::nn::Lstm),
/// [`Gru`](crate::nn::Gru) and [`Rnn`](crate::nn::Rnn) of `model` in place
/// to weights held as 8-bit floats of `format` with `f32` scales (one per
/// tensor or per output row / channel, `granularity`; a recurrent layer's
/// `weight_ih` and `weight_hh` each), and returns how many layers it
/// converted. A weight takes about a quarter of the f32 bytes. A
/// `Linear`'s forward pass decodes it panel by panel inside the f32 gemm
/// (the full f32 weight never exists); a convolution or recurrent layer
/// decodes it with the same decoder into a pooled f32 weight for the call
/// (packed by the call's kernel, dropped after it). Either way the output
/// equals, bit for bit, the f32 layer whose weight is
/// [`Fp8Weight::dequantize`] (in its shape). The layers are inference
/// only: the weight is frozen (not a parameter), and a backward pass that
/// reaches a converted layer's output panics naming it.
///
/// ```
/// use forge::prelude::*;
/// use forge::quant::{resident_bytes, to_fp8, Fp8Format, Granularity};
/// let mut rng = Rng::new(0);
/// let mut fc = Linear::<f32>::new(64, 64, &mut rng);
/// let f32_bytes = resident_bytes(&fc);
/// assert_eq!(to_fp8(&mut fc, Fp8Format::E4M3, Granularity::PerChannel), 1);
/// assert!(resident_bytes(&fc) * 3 < f32_bytes);
///
/// // the same bits as the f32 layer holding the dequantized weight
/// let w = Tensor::from_vec(fc.fp8().unwrap().dequantize(), &[64, 64]);
/// let reference = Linear::from_weights(w, fc.bias.clone()).unwrap();
/// let x = Tensor::<f32>::normal(&[5, 64], 0.0, 1.0, &mut rng);
/// assert_eq!(fc.forward(x.clone()).to_vec(), reference.forward(x).to_vec());
///
/// // a convolution: the f32 layer holding the decoded weight, bit for bit
/// let mut conv = forge::nn::Conv2d::<f32>::new(3, 8, 3, &mut rng).padding(1);
/// assert_eq!(to_fp8(&mut conv, Fp8Format::E5M2, Granularity::PerTensor), 1);
/// let q = conv.fp8().unwrap();
/// let w = Tensor::from_vec(q.dequantize(), q.weight_shape());
/// let reference = forge::nn::Conv2d::from_weights(w, conv.bias.clone()).unwrap().padding(1);
/// let img = Tensor::<f32>::normal(&[2, 3, 8, 8], 0.0, 1.0, &mut rng);
/// assert_eq!(conv.forward(img.clone()).to_vec(), reference.forward(img).to_vec());
/// ```
pub fn to_fp8<E: Float, L: Layer<E> + ?Sized>(
    model: &mut L,
    format: Fp8Format,
    granularity: Granularity,
) -> usize {
    struct Convert {
        format: Fp8Format,
        granularity: Granularity,
        count: usize,
    }
    impl<E: Float> TensorVisitorMut<E> for Convert {
        fn visit(&mut self, _: &str, _: &mut Tensor<E>, _: TensorKind) {}
        fn visit_quantizable(&mut self, _: &str, layer: &mut dyn Quantizable) {
            if layer.quantize_fp8(self.format, self.granularity) {
                self.count += 1;
            }
        }
    }
    let mut v = Convert {
        format,
        granularity,
        count: 0,
    };
    model.visit_tensors_mut(&mut v);
    v.count
}

/// The granularity a weight was quantized with.
fn granularity_of(w: &Fp8Weight) -> Granularity {
    if w.scales().len() == 1 {
        Granularity::PerTensor
    } else {
        Granularity::PerChannel
    }
}

/// The model's fp8 weights by path, as a checkpoint stores them: the bytes
/// as `F8_E4M3` / `F8_E5M2` under the path, the scales as `F32` under
/// `<path>_scale` (`[]` for one, `[out, 1]` for one per row).
pub(crate) fn fp8_checkpoint_tensors<E: Float, L: Layer<E> + ?Sized>(
    model: &L,
) -> BTreeMap<String, AnyTensor> {
    struct Collect(BTreeMap<String, AnyTensor>);
    impl<E: Float> TensorVisitor<E> for Collect {
        fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
        fn visit_fp8(&mut self, path: &str, w: &Fp8Weight) {
            let bytes = Tensor::from_vec(w.values(), w.weight_shape());
            let t = match w.format() {
                Fp8Format::E4M3 => AnyTensor::F8E4M3(bytes),
                Fp8Format::E5M2 => AnyTensor::F8E5M2(bytes),
            };
            self.0.insert(path.to_string(), t);
            self.0.insert(
                format!("{path}_scale"),
                AnyTensor::F32(w.scale_tensor::<f32>()),
            );
        }
    }
    let mut v = Collect(BTreeMap::new());
    model.visit_tensors(&mut v);
    v.0
}

/// The model's fp8 weights: path, shape and granularity.
fn fp8_layout<E: Float, L: Layer<E> + ?Sized>(model: &L) -> BTreeMap<String, Vec<usize>> {
    struct Paths(BTreeMap<String, Vec<usize>>);
    impl<E: Float> TensorVisitor<E> for Paths {
        fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
        fn visit_fp8(&mut self, path: &str, w: &Fp8Weight) {
            self.0.insert(path.to_string(), w.weight_shape().to_vec());
        }
    }
    let mut v = Paths(BTreeMap::new());
    model.visit_tensors(&mut v);
    v.0
}

/// Whether `model` holds any fp8 weight (then a checkpoint loads through
/// [`load_fp8_model`]).
pub(crate) fn has_fp8<E: Float, L: Layer<E> + ?Sized>(model: &L) -> bool {
    !fp8_layout(model).is_empty()
}

/// Loads a checkpoint into a model holding fp8 weights: each fp8 weight
/// whose file tensor is `F8_E4M3` / `F8_E5M2` becomes the layer's weight
/// as it is (bytes and scale, no f32 copy, whatever the format the layer
/// had); one stored as floats (an f32 checkpoint) is quantized as the
/// layer was; every other tensor loads as [`Layer::load_state_dict`]
/// loads it, from `float_dict(data without the fp8 weights)`. Nothing
/// changes unless the whole file fits.
///
/// # Errors
/// [`ForgeError::StateDict`] listing missing, unexpected and mis-shaped
/// keys; the errors of [`Fp8Weight::from_tensors`] and of `float_dict`.
pub(crate) fn load_fp8_model<E: Float, L: Layer<E> + ?Sized>(
    model: &mut L,
    data: &SafeTensorsData,
    float_dict: impl Fn(&SafeTensorsData) -> Result<BTreeMap<String, Tensor<E>>>,
) -> Result<()> {
    let layout = fp8_layout(model);
    let mut direct = BTreeMap::new();
    let mut rest = SafeTensorsData {
        tensors: data.tensors.clone(),
        metadata: data.metadata.clone(),
    };
    for path in layout.keys() {
        let Some(t) = data.tensors.get(path) else {
            continue;
        };
        if !matches!(t, AnyTensor::F8E4M3(_) | AnyTensor::F8E5M2(_)) {
            continue;
        }
        let scale_name = format!("{path}_scale");
        let w = Fp8Weight::from_tensors(path, t, data.tensors.get(&scale_name))?;
        direct.insert(path.clone(), Arc::new(w));
        rest.tensors.remove(path);
        rest.tensors.remove(&scale_name);
        // the static activation scale FP8 checkpoints store beside a
        // weight is not used
        if let Some(p) = path.strip_suffix("weight") {
            rest.tensors.remove(&format!("{p}input_scale"));
        }
    }
    let dict = float_dict(&rest)?;

    // check everything first
    struct Check<'a, E: Float> {
        dict: &'a BTreeMap<String, Tensor<E>>,
        direct: &'a BTreeMap<String, Arc<Fp8Weight>>,
        seen: BTreeSet<String>,
        missing: Vec<String>,
        mismatched: Vec<(String, Vec<usize>, Vec<usize>)>,
    }
    impl<E: Float> Check<'_, E> {
        fn expect(&mut self, path: &str, shape: &[usize], found: Option<&[usize]>) {
            self.seen.insert(path.to_string());
            match found {
                None => self.missing.push(path.to_string()),
                Some(f) if f != shape => {
                    self.mismatched
                        .push((path.to_string(), shape.to_vec(), f.to_vec()))
                }
                Some(_) => {}
            }
        }
    }
    impl<E: Float> TensorVisitor<E> for Check<'_, E> {
        fn visit(&mut self, path: &str, t: &Tensor<E>, _: TensorKind) {
            let found = self.dict.get(path).map(|d| d.shape().to_vec());
            self.expect(path, t.shape(), found.as_deref());
        }
        fn visit_fp8(&mut self, path: &str, w: &Fp8Weight) {
            let scale = format!("{path}_scale");
            self.seen.insert(scale.clone());
            if let Some(d) = self.direct.get(path) {
                self.expect(path, w.weight_shape(), Some(d.weight_shape()));
                return;
            }
            // a float tensor: the decoded values with their scale (a
            // state dict), or a plain f32 weight to quantize
            let found = self.dict.get(path).map(|d| d.shape().to_vec());
            self.expect(path, w.weight_shape(), found.as_deref());
        }
    }
    let mut check = Check {
        dict: &dict,
        direct: &direct,
        seen: BTreeSet::new(),
        missing: Vec::new(),
        mismatched: Vec::new(),
    };
    model.visit_tensors(&mut check);
    let unexpected: Vec<String> = dict
        .keys()
        .filter(|k| !check.seen.contains(k.as_str()))
        .cloned()
        .collect();
    if !(check.missing.is_empty() && unexpected.is_empty() && check.mismatched.is_empty()) {
        return Err(ForgeError::StateDict {
            missing: check.missing,
            unexpected,
            mismatched: check.mismatched,
        });
    }
    // the float weights quantized (or rebuilt) before anything is replaced
    let mut built = direct;
    for (path, shape) in &layout {
        if built.contains_key(path) {
            continue;
        }
        let values = &dict[path];
        let granularity = {
            struct Of<'a>(&'a str, Option<(Granularity, Fp8Format)>);
            impl<E: Float> TensorVisitor<E> for Of<'_> {
                fn visit(&mut self, _: &str, _: &Tensor<E>, _: TensorKind) {}
                fn visit_fp8(&mut self, path: &str, w: &Fp8Weight) {
                    if path == self.0 {
                        self.1 = Some((granularity_of(w), w.format()));
                    }
                }
            }
            let mut of = Of(path, None);
            model.visit_tensors(&mut of);
            of.1.expect("the path is an fp8 weight of the model")
        };
        let (g, format) = granularity;
        let w = match dict.get(&format!("{path}_scale")) {
            Some(s) => {
                let n = s.numel();
                if !(n == 1 || n == shape[0]) {
                    return Err(ForgeError::Shape {
                        name: format!("{path}_scale"),
                        expected: vec![shape[0], 1],
                        found: s.shape().to_vec(),
                    });
                }
                from_float_tensors(values, s, format)
            }
            None => {
                let v: Vec<f32> = values
                    .to_vec()
                    .iter()
                    .map(|&x| Element::to_f64(x) as f32)
                    .collect();
                Fp8Weight::quantize(&v, shape[0], shape[1..].iter().product(), format, g)
                    .with_shape(shape)
            }
        };
        built.insert(path.clone(), Arc::new(w));
    }

    struct Set<'a, E: Float> {
        dict: &'a BTreeMap<String, Tensor<E>>,
        built: &'a BTreeMap<String, Arc<Fp8Weight>>,
    }
    impl<E: Float> TensorVisitorMut<E> for Set<'_, E> {
        fn visit(&mut self, path: &str, t: &mut Tensor<E>, k: TensorKind) {
            let new = &self.dict[path];
            *t = if k == TensorKind::Weight && t.is_tracked() {
                new.requires_grad()
            } else {
                new.detach()
            };
        }
        fn visit_fp8(&mut self, path: &str, w: &mut Arc<Fp8Weight>) {
            *w = self.built[path].clone();
        }
    }
    model.visit_tensors_mut(&mut Set {
        dict: &dict,
        built: &built,
    });
    Ok(())
}

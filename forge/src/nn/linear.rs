//! [`Linear`]: `y = x W^T + b`.

use super::activation_kind::Activation;
use super::forward::Forward;
use super::layer::{enter_layer, enter_layer_mut, Layer};
use super::summary::{record_output, summary_running};
use super::visit::{TensorKind, TensorVisitor, TensorVisitorMut, Visit, Visitable};
use crate::cpu::memory::Storage;
use crate::error::{ForgeError, Result};
use crate::quant::{
    f32_values, inference_only, tensor_from_f32, visit_int8, visit_int8_mut, Fp8Format, Fp8Weight,
    Granularity, Int8Weight, Quantizable,
};
use crate::tensor::{Element, Float, Rng, Tensor};
use std::sync::Arc;

/// A fully connected layer, `y = x W^T + b`, with PyTorch's names and
/// layout so that PyTorch checkpoints load by name.
///
/// # Shapes
/// - `weight`: `[out_features, in_features]`
/// - `bias`: `[out_features]` (absent with [`Linear::new_no_bias`])
/// - input `[.., in_features]` (any number of leading dimensions, at least one)
/// - output `[.., out_features]`
///
/// ```
/// use forge::prelude::*;
/// let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
/// let y = fc.forward(Tensor::ones(&[4, 5, 3]));
/// assert_eq!(y.shape(), &[4, 5, 2]);
/// ```
///
/// # Int8
/// [`quantize_dynamic`](crate::quant::quantize_dynamic) converts the weight
/// to int8 ([`Linear::int8`]); `weight` is then empty (`[0, in_features]`)
/// and the state dict holds the integer values as `weight` and their
/// scales as `weight_scale`.
///
/// # FP8
/// [`to_fp8`](crate::quant::to_fp8) keeps the weight as 8-bit floats with
/// `f32` scales ([`Linear::fp8`]), decoded inside the f32 gemm's packing
/// step; `weight` is then empty (`[0, in_features]`), the state dict holds
/// the decoded values as `weight` and the scales as `weight_scale`, and a
/// checkpoint stores the bytes as `F8_E4M3` / `F8_E5M2`. The layer is
/// inference only: a backward pass through its output panics.
#[derive(Clone, Debug)]
pub struct Linear<E: Float = f32> {
    /// `[out_features, in_features]` (`[0, in_features]` once quantized).
    pub weight: Tensor<E>,
    /// `[out_features]`, if the layer has a bias.
    pub bias: Option<Tensor<E>>,
    /// The int8 weight, once quantized.
    int8: Option<Arc<Int8Weight>>,
    /// The 8-bit float weight, once converted.
    fp8: Option<Arc<Fp8Weight>>,
}

impl<E: Float> Linear<E> {
    /// A trainable layer initialised as PyTorch does: weight and bias drawn
    /// from `U(-1/sqrt(in), 1/sqrt(in))` (kaiming-uniform with `a = sqrt(5)`).
    ///
    /// # Panics
    /// When `in_features` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f64>::new(4, 3, &mut Rng::new(7));
    /// assert_eq!(fc.weight.shape(), &[3, 4]);
    /// assert!(fc.weight.to_vec().iter().all(|w| w.abs() <= 0.5));
    /// assert!(fc.weight.is_tracked());
    /// ```
    pub fn new(in_features: usize, out_features: usize, rng: &mut Rng) -> Self {
        let bound = Self::bound(in_features);
        let weight = Tensor::uniform(&[out_features, in_features], -bound, bound, rng);
        let bias = Tensor::uniform(&[out_features], -bound, bound, rng);
        Linear {
            weight: weight.requires_grad(),
            bias: Some(bias.requires_grad()),
            int8: None,
            fp8: None,
        }
    }

    /// A trainable layer without bias, the weight initialised as in
    /// [`Linear::new`].
    ///
    /// # Panics
    /// When `in_features` is zero.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let fc = Linear::<f32>::new_no_bias(4, 3, &mut Rng::new(7));
    /// assert!(fc.bias.is_none());
    /// assert_eq!(fc.num_parameters(), 12);
    /// ```
    pub fn new_no_bias(in_features: usize, out_features: usize, rng: &mut Rng) -> Self {
        let bound = Self::bound(in_features);
        let weight = Tensor::uniform(&[out_features, in_features], -bound, bound, rng);
        Linear {
            weight: weight.requires_grad(),
            bias: None,
            int8: None,
            fp8: None,
        }
    }

    fn bound(in_features: usize) -> f64 {
        shape_assert!(in_features > 0, "Linear: in_features must be at least 1");
        1.0 / (in_features as f64).sqrt()
    }

    /// A layer with the given weight `[out, in]` and optional bias `[out]`,
    /// used as given: they are trainable if they are tracked.
    ///
    /// # Errors
    /// [`ForgeError::Shape`] when the weight is not 2-D or the bias is not
    /// `[out]`.
    ///
    /// ```
    /// use forge::prelude::*;
    /// let w = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[1, 2]);
    /// let fc = Linear::from_weights(w, Some(Tensor::from_vec(vec![0.5], &[1]))).unwrap();
    /// let y = fc.forward(Tensor::from_vec(vec![1.0, 1.0], &[1, 2]));
    /// assert_eq!(y.to_vec(), vec![3.5]);
    /// assert!(Linear::from_weights(Tensor::<f32>::zeros(&[2]), None).is_err());
    /// ```
    pub fn from_weights(weight: Tensor<E>, bias: Option<Tensor<E>>) -> Result<Self> {
        if weight.rank() != 2 {
            return Err(ForgeError::Shape {
                name: "Linear.weight".into(),
                expected: vec![0, 0],
                found: weight.shape().to_vec(),
            });
        }
        if let Some(b) = &bias
            && b.shape() != [weight.shape()[0]]
        {
            return Err(ForgeError::Shape {
                name: "Linear.bias".into(),
                expected: vec![weight.shape()[0]],
                found: b.shape().to_vec(),
            });
        }
        Ok(Linear {
            weight,
            bias,
            int8: None,
            fp8: None,
        })
    }

    /// The input size (`weight.shape()[1]`).
    ///
    /// ```
    /// let fc = forge::nn::Linear::<f32>::new(3, 2, &mut forge::Rng::new(0));
    /// assert_eq!(fc.in_features(), 3);
    /// ```
    pub fn in_features(&self) -> usize {
        self.weight.shape()[1]
    }

    /// The output size (`weight.shape()[0]`).
    ///
    /// ```
    /// let fc = forge::nn::Linear::<f32>::new(3, 2, &mut forge::Rng::new(0));
    /// assert_eq!(fc.out_features(), 2);
    /// ```
    pub fn out_features(&self) -> usize {
        match (&self.int8, &self.fp8) {
            (Some(q), _) => q.out_features(),
            (_, Some(q)) => q.shape()[0],
            _ => self.weight.shape()[0],
        }
    }

    /// The int8 weight, once the layer is quantized.
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{Granularity, Quantizable};
    /// let mut fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// assert!(fc.int8().is_none());
    /// fc.quantize_int8(Granularity::PerChannel);
    /// assert_eq!(fc.int8().unwrap().scales().len(), 2);
    /// assert_eq!(fc.out_features(), 2);
    /// ```
    pub fn int8(&self) -> Option<&Int8Weight> {
        self.int8.as_deref()
    }

    /// The 8-bit float weight, once the layer is converted by
    /// [`to_fp8`](crate::quant::to_fp8).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::quant::{to_fp8, Fp8Format, Granularity};
    /// let mut fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
    /// assert!(fc.fp8().is_none());
    /// to_fp8(&mut fc, Fp8Format::E4M3, Granularity::PerChannel);
    /// assert_eq!(fc.fp8().unwrap().scales().len(), 2);
    /// assert_eq!(fc.out_features(), 2);
    /// ```
    pub fn fp8(&self) -> Option<&Fp8Weight> {
        self.fp8.as_deref()
    }

    /// The 8-bit float forward pass: `x` to `f32`, the product with the
    /// weight decoded in the gemm's packing step, back.
    fn forward_fp8(&self, q: &Fp8Weight, x: &Tensor<E>) -> Tensor<E> {
        let xs = f32_values(x.as_slice());
        let bias = self.bias.as_ref().map(|b| f32_values(b.as_slice()));
        let y = q.linear_pooled(&xs, bias.as_deref());
        self.inference_only(y, x, "linear_fp8")
    }

    /// `act` applied to [`forward`](Forward::forward)`(x)`, the same values
    /// (bit for bit). For an int8 layer in `f32` the
    /// activation runs in the product's epilogue, on each block of outputs
    /// while it is in cache, instead of as a pass of its own (unless a
    /// [`summary`](crate::nn::summary) is recording outputs, which must see
    /// the layer's own).
    ///
    /// ```
    /// use forge::nn::{Activation, Forward, Linear};
    /// use forge::quant::{quantize_dynamic, Granularity};
    /// let mut rng = forge::Rng::new(0);
    /// let mut fc = Linear::<f32>::new(8, 4, &mut rng);
    /// quantize_dynamic(&mut fc, Granularity::PerChannel);
    /// let x = forge::Tensor::<f32>::normal(&[3, 8], 0.0, 1.0, &mut rng);
    /// let fused = fc.forward_activated(x.clone(), Activation::Gelu);
    /// assert_eq!(fused.to_vec(), fc.forward(x.clone()).gelu().to_vec());
    /// let fused = fc.forward_activated(x.clone(), Activation::Relu);
    /// assert_eq!(fused.to_vec(), fc.forward(x).relu().to_vec());
    /// ```
    ///
    /// # Panics
    /// As [`forward`](Forward::forward).
    #[track_caller]
    pub fn forward_activated(&self, x: Tensor<E>, act: Activation) -> Tensor<E> {
        let fused = match &self.int8 {
            Some(q)
                if std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>()
                    && !summary_running() =>
            {
                Some(q)
            }
            _ => None,
        };
        match fused {
            Some(q) => {
                self.check_input(&x);
                self.forward_int8(q, &x, Some(act.f32_in_place()))
            }
            None => match self.forward_f32_then(&x, act) {
                Some(y) => y,
                None => act.apply(&self.forward(x)),
            },
        }
    }

    /// An `f32` layer's `act(forward(x))` outside autograd with the bias
    /// and the activation in the product's epilogue (see
    /// [`Tensor::linear_then`]); `None` where that does not apply (autograd
    /// recording, a quantized weight, a summary or another tool watching
    /// the ops, shapes the packed kernel does not take).
    #[track_caller]
    fn forward_f32_then(&self, x: &Tensor<E>, act: Activation) -> Option<Tensor<E>> {
        self.forward_f32_with(x, act.f32_in_place())
    }

    /// `gelu_tanh(forward(x))` (GPT-2's feed-forward activation), with the
    /// activation in the product's epilogue where
    /// [`forward_activated`](Linear::forward_activated) fuses its
    /// activations (the same bits as the two ops).
    #[track_caller]
    pub(crate) fn forward_gelu_tanh(&self, x: Tensor<E>) -> Tensor<E> {
        match self.forward_f32_with(&x, crate::cpu::vmath::gelu_tanh::<f32>) {
            Some(y) => y,
            None => self.forward(x).gelu_tanh(),
        }
    }

    /// An `f32` layer's `f(forward(x))` outside autograd with the bias and
    /// `f` in the product's epilogue; `None` where that does not apply (see
    /// [`forward_f32_then`](Linear::forward_f32_then)).
    #[track_caller]
    fn forward_f32_with(&self, x: &Tensor<E>, f: fn(&mut [f32])) -> Option<Tensor<E>> {
        if std::any::TypeId::of::<E>() != std::any::TypeId::of::<f32>()
            || self.int8.is_some()
            || self.fp8.is_some()
            || crate::autograd::is_grad_enabled()
            || summary_running()
        {
            return None;
        }
        self.check_input(x);
        x.linear_then(&self.weight, self.bias.as_ref(), f)
    }

    /// Panics naming the layer when `x`'s last dimension is not
    /// `in_features`.
    #[track_caller]
    fn check_input(&self, x: &Tensor<E>) {
        let fan_in = self.in_features();
        shape_assert!(
            x.rank() >= 1 && x.shape()[x.rank() - 1] == fan_in,
            "Linear({fan_in} -> {}): expected input of shape [.., {fan_in}], got {:?}",
            self.out_features(),
            x.shape()
        );
    }

    /// The int8 forward pass: `x` to `f32`, the dynamic int8 product (and
    /// `act` in its epilogue), back.
    fn forward_int8(
        &self,
        q: &Int8Weight,
        x: &Tensor<E>,
        act: Option<fn(&mut [f32])>,
    ) -> Tensor<E> {
        let xs = f32_values(x.as_slice());
        let bias = self.bias.as_ref().map(|b| f32_values(b.as_slice()));
        let y = q.linear_pooled(&xs, bias.as_deref(), act);
        self.inference_only(y, x, "linear_int8")
    }

    /// The output `y` (rows of `out_features`) of a quantized weight's
    /// product with `x`, recorded so that a backward pass reaching it fails
    /// loudly, naming the layer, instead of leaving the layers before it
    /// without gradients.
    fn inference_only(&self, y: Storage<f32>, x: &Tensor<E>, op: &'static str) -> Tensor<E> {
        let (out, fan_in) = (self.out_features(), self.in_features());
        let dtype = op.trim_start_matches("linear_");
        let mut shape = x.shape().to_vec();
        *shape.last_mut().expect("checked rank") = out;
        let mut inputs = vec![x.clone()];
        inputs.extend(self.bias.clone());
        let layer = format!("Linear({fan_in} -> {out}) with an {dtype} weight");
        inference_only(tensor_from_f32(y, &shape), inputs, op, layer)
    }
}

impl<E: Float> Quantizable for Linear<E> {
    fn quantize_int8(&mut self, granularity: Granularity) -> bool {
        if self.int8.is_some() || self.fp8.is_some() {
            return false;
        }
        let (out, fan_in) = (self.out_features(), self.in_features());
        let w: Vec<f32> = self
            .weight
            .as_slice()
            .iter()
            .map(|&v| Element::to_f64(v) as f32)
            .collect();
        self.int8 = Some(Arc::new(Int8Weight::quantize(&w, out, fan_in, granularity)));
        self.weight = Tensor::zeros(&[0, fan_in]);
        true
    }

    fn quantize_fp8(&mut self, format: Fp8Format, granularity: Granularity) -> bool {
        if self.int8.is_some() || self.fp8.is_some() {
            return false;
        }
        let (out, fan_in) = (self.out_features(), self.in_features());
        let w: Vec<f32> = self
            .weight
            .as_slice()
            .iter()
            .map(|&v| Element::to_f64(v) as f32)
            .collect();
        let q = Fp8Weight::quantize(&w, out, fan_in, format, granularity);
        self.fp8 = Some(Arc::new(q));
        self.weight = Tensor::zeros(&[0, fan_in]);
        true
    }
}

impl<E: Float> Layer<E> for Linear<E> {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        match (&self.int8, &self.fp8) {
            (Some(q), _) => visit_int8(v, "weight", q),
            (_, Some(q)) => v.visit_fp8("weight", q),
            _ => v.visit("weight", &self.weight, TensorKind::Weight),
        }
        if let Some(b) = &self.bias {
            v.visit("bias", b, TensorKind::Weight);
        }
    }

    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        v.visit_quantizable("", self);
        match (&mut self.int8, &mut self.fp8) {
            (Some(q), _) => visit_int8_mut(v, "weight", q),
            (_, Some(q)) => v.visit_fp8("weight", q),
            _ => v.visit("weight", &mut self.weight, TensorKind::Weight),
        }
        if let Some(b) = &mut self.bias {
            v.visit("bias", b, TensorKind::Weight);
        }
    }
}

impl<E: Float> Visit<E> for Linear<E> {
    fn visit(&self, name: &str, v: &mut dyn TensorVisitor<E>) {
        enter_layer(self, name, v)
    }
    fn visit_mut(&mut self, name: &str, v: &mut dyn TensorVisitorMut<E>) {
        enter_layer_mut(self, name, v)
    }
}

#[diagnostic::do_not_recommend]
impl<E: Float> Visitable for Linear<E> {}

impl<E: Float> Forward<Tensor<E>> for Linear<E> {
    type Output = Tensor<E>;

    /// `x W^T + b` over the last dimension of `x`.
    ///
    /// # Panics
    /// When `x` is 0-d or its last dimension is not `in_features`; the
    /// message names the layer and both shapes.
    fn forward(&self, x: Tensor<E>) -> Tensor<E> {
        self.check_input(&x);
        let y = match (&self.int8, &self.fp8) {
            (Some(q), _) => self.forward_int8(q, &x, None),
            (_, Some(q)) => self.forward_fp8(q, &x),
            _ => x.linear(&self.weight, self.bias.as_ref()),
        };
        record_output(self, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backward_through_an_int8_layer_fails_loudly() {
        use crate::nn::Forward;
        use crate::quant::{quantize_dynamic, Granularity};
        let mut rng = Rng::new(4);
        let first = Linear::<f32>::new(6, 5, &mut rng);
        let mut second = Linear::<f32>::new(5, 3, &mut rng);
        quantize_dynamic(&mut second, Granularity::PerChannel);
        let x = Tensor::<f32>::normal(&[4, 6], 0.0, 1.0, &mut rng);
        let y = second.forward(first.forward(x.clone()));
        let Err(err) =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| y.sum().backward()))
        else {
            panic!("backward through the int8 layer must panic");
        };
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("Linear(5 -> 3) with an int8 weight is inference only"),
            "{msg}"
        );
        // under no_grad nothing is recorded and the values are the same
        let plain = crate::no_grad(|| second.forward(first.forward(x.clone())));
        assert_eq!(plain.to_vec(), second.forward(first.forward(x)).to_vec());
    }

    #[test]
    fn forward_activated_equals_the_activation_after_forward() {
        // the thread count is set below: no other test may change it meanwhile
        let _threads = crate::cpu::threads::lock_thread_count();
        use crate::nn::{summary, Forward};
        use crate::quant::{quantize_dynamic, Granularity};
        let mut rng = Rng::new(3);
        let bits = |t: &Tensor<f32>| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        // odd sizes, rows enough for the AMX path where the CPU has it
        for (rows, fan_in, out) in [(70, 37, 53), (5, 8, 3), (64, 96, 300)] {
            let mut fc = Linear::<f32>::new(fan_in, out, &mut rng);
            let x = Tensor::<f32>::normal(&[rows, fan_in], 0.0, 2.0, &mut rng);
            for act in [Activation::Gelu, Activation::Relu] {
                let want = act.apply(&fc.forward(x.clone()));
                assert_eq!(bits(&fc.forward_activated(x.clone(), act)), bits(&want));
            }
            quantize_dynamic(&mut fc, Granularity::PerChannel);
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                for act in [Activation::Gelu, Activation::Relu] {
                    let want = act.apply(&fc.forward(x.clone()));
                    let got = fc.forward_activated(x.clone(), act);
                    assert_eq!(bits(&got), bits(&want), "{rows}x{fan_in}x{out} {act:?}");
                }
            }
        }
        // f64 computes the int8 product in f32 and the GELU in f64: not fused
        let mut fc = Linear::<f64>::new(16, 24, &mut rng);
        quantize_dynamic(&mut fc, Granularity::PerChannel);
        let x = Tensor::<f64>::normal(&[40, 16], 0.0, 1.0, &mut rng);
        assert_eq!(
            fc.forward_activated(x.clone(), Activation::Gelu).to_vec(),
            fc.forward(x).gelu().to_vec()
        );
        // a summary sees the layer's own output, not the activation's
        struct Block(Linear<f32>);
        impl crate::nn::Layer<f32> for Block {
            fn visit_tensors(&self, v: &mut dyn TensorVisitor<f32>) {
                self.0.visit_tensors(v)
            }
            fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<f32>) {
                self.0.visit_tensors_mut(v)
            }
        }
        impl Forward<Tensor<f32>> for Block {
            type Output = Tensor<f32>;
            fn forward(&self, x: Tensor<f32>) -> Tensor<f32> {
                self.0.forward_activated(x, Activation::Gelu)
            }
        }
        let mut fc = Linear::<f32>::new(8, 4, &mut rng);
        quantize_dynamic(&mut fc, Granularity::PerChannel);
        let s = summary::<f32, _>(&Block(fc), &[70, 8]);
        assert!(s.to_string().contains("[70, 4]"), "{s}");
    }

    // The f32 no-grad epilogue (bias and activation applied by the packed
    // product per tile): the bits of the separate ops, for shapes with
    // several `k` blocks (256 wide), edge tiles in both directions, with
    // and without a bias, on 1 and 2 threads.
    #[test]
    fn no_grad_f32_forward_activated_equals_the_separate_ops() {
        let _threads = crate::cpu::threads::lock_thread_count();
        let mut rng = Rng::new(11);
        let bits = |t: &Tensor<f32>| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let first_difference =
            |a: Vec<u32>, b: Vec<u32>| a.iter().zip(&b).position(|(x, y)| x != y);
        // (64, 128, 512): GPT batch-1 inference's c_fc, whose gelu_tanh
        // runs in the epilogue (`forward_gelu_tanh`)
        for (rows, fan_in, out) in [
            (70, 37, 53),
            (13, 600, 100),
            (200, 300, 300),
            (24, 64, 32),
            (64, 128, 512),
        ] {
            for with_bias in [true, false] {
                let fc = if with_bias {
                    Linear::<f32>::new(fan_in, out, &mut rng)
                } else {
                    Linear::<f32>::new_no_bias(fan_in, out, &mut rng)
                };
                let x = Tensor::<f32>::normal(&[rows, fan_in], 0.0, 2.0, &mut rng);
                for threads in [1, 2] {
                    crate::cpu::set_num_threads(threads);
                    for act in [Activation::Gelu, Activation::Relu] {
                        // the recording ops, one by one
                        let want = act.apply(&fc.forward(x.clone()));
                        let (got, plain) = crate::no_grad(|| {
                            (fc.forward_activated(x.clone(), act), fc.forward(x.clone()))
                        });
                        let what =
                            format!("{rows}x{fan_in}x{out} bias {with_bias} {act:?} {threads} thr");
                        let bad = first_difference(bits(&got), bits(&want));
                        assert_eq!(bad, None, "{what}: fused, first differing element");
                        let bad = first_difference(bits(&act.apply(&plain)), bits(&want));
                        assert_eq!(bad, None, "{what}: plain, first differing element");
                    }
                    let want = fc.forward(x.clone()).gelu_tanh();
                    let got = crate::no_grad(|| fc.forward_gelu_tanh(x.clone()));
                    let bad = first_difference(bits(&got), bits(&want));
                    let what = format!("{rows}x{fan_in}x{out} bias {with_bias} {threads} thr");
                    assert_eq!(
                        bad, None,
                        "{what}: gelu_tanh fused, first differing element"
                    );
                }
            }
        }
        crate::cpu::set_num_threads(1);
    }

    // Weights packed once for no-grad products (cpu/gemm/weight_cache.rs):
    // every way a Linear's weight changes invalidates the packed copy.

    /// `Linear`'s no-grad output (the cached path) against the same
    /// product with autograd on (which packs the weight in the call).
    fn cached_equals_fresh(l: &crate::nn::Linear<f32>, x: &crate::Tensor<f32>, what: &str) {
        use crate::nn::Forward;
        let cached = crate::no_grad(|| l.forward(x.clone()));
        let fresh = l.forward(x.clone());
        assert!(
            cached.to_vec() == fresh.to_vec(),
            "stale packed weight after {what}"
        );
        // the no-grad call left an entry for the current values (a stale
        // one is never used: `derived` checks its version)
        assert!(
            crate::cpu::gemm::holds_packed_weight(&l.weight.storage),
            "no packed weight for the values after {what}"
        );
    }

    fn linear_and_input() -> (crate::nn::Linear<f32>, crate::Tensor<f32>) {
        let mut rng = crate::tensor::Rng::new(9);
        let l = crate::nn::Linear::<f32>::new(40, 48, &mut rng);
        let x = crate::Tensor::<f32>::from_fn(&[6, 40], |_| rng.normal() as f32);
        (l, x)
    }

    /// The gradient of `sum(l(x))` for `l`'s weight and bias.
    fn grads(l: &crate::nn::Linear<f32>, x: &crate::Tensor<f32>) -> crate::Gradients<f32> {
        use crate::nn::Forward;
        l.forward(x.clone()).sum().backward()
    }

    /// An optimizer step that updates the weight in place (its storage is
    /// not shared) invalidates the entry: the write goes through
    /// `values_mut`, a `&mut` access.
    #[test]
    fn an_in_place_optimizer_step_invalidates() {
        if !crate::cpu::gemm::packed_f32_available() {
            return;
        }
        let (mut l, x) = linear_and_input();
        cached_equals_fresh(&l, &x, "nothing");
        let g = grads(&l, &x);
        let v = l.weight.storage.version();
        crate::optim::Sgd::<f32>::new(0.5).step(&mut l, &g).unwrap();
        assert!(l.weight.storage.version() != v, "the step wrote in place");
        cached_equals_fresh(&l, &x, "an in-place optimizer step");
    }

    /// A step on a weight whose storage another handle shares writes a
    /// copy (copy-on-write): the new storage has no entry, and the old
    /// handle's entry still matches its unchanged values.
    #[test]
    fn a_copy_on_write_step_invalidates() {
        if !crate::cpu::gemm::packed_f32_available() {
            return;
        }
        let (mut l, x) = linear_and_input();
        cached_equals_fresh(&l, &x, "nothing");
        let old = l.weight.clone();
        let g = grads(&l, &x);
        crate::optim::Sgd::<f32>::new(0.5).step(&mut l, &g).unwrap();
        assert!(!std::sync::Arc::ptr_eq(&old.storage, &l.weight.storage));
        cached_equals_fresh(&l, &x, "a copy-on-write optimizer step");
        let y_old = crate::no_grad(|| x.linear(&old, l.bias.as_ref()));
        assert!(y_old.to_vec() == x.linear(&old, l.bias.as_ref()).to_vec());
    }

    /// Loading a state dict replaces the weight: the loaded values are
    /// packed, not the old ones.
    #[test]
    fn loading_weights_invalidates() {
        use crate::nn::Layer;
        if !crate::cpu::gemm::packed_f32_available() {
            return;
        }
        let (mut l, x) = linear_and_input();
        cached_equals_fresh(&l, &x, "nothing");
        let mut rng = crate::tensor::Rng::new(10);
        let other = crate::nn::Linear::<f32>::new(40, 48, &mut rng);
        l.load_state_dict(&other.state_dict()).unwrap();
        cached_equals_fresh(&l, &x, "load_state_dict");
    }

    #[test]
    fn forward_matches_hand_computation() {
        let w = Tensor::<f64>::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let b = Tensor::from_vec(vec![0.5, -0.5], &[2]);
        let fc = Linear::from_weights(w, Some(b)).unwrap();
        let x = Tensor::from_vec(vec![1.0, 0.0, -1.0], &[3]);
        assert_eq!(fc.forward(x.clone()).to_vec(), vec![-1.5, -2.5]);
        assert_eq!(fc.forward(x.view(&[1, 1, 3])).shape(), &[1, 1, 2]);
    }

    #[test]
    #[should_panic(expected = "Linear(3 -> 2): expected input of shape [.., 3], got [4, 2]")]
    fn wrong_input_names_the_layer_and_shapes() {
        let fc = Linear::<f32>::new(3, 2, &mut Rng::new(0));
        fc.forward(Tensor::zeros(&[4, 2]));
    }

    #[test]
    fn init_follows_pytorch_bound() {
        let fc = Linear::<f64>::new(16, 64, &mut Rng::new(3));
        let bound = 0.25;
        let w = fc.weight.to_vec();
        assert!(w.iter().all(|v| v.abs() <= bound));
        // the draws fill the interval: both ends come within 5% of the bound
        let max = w.iter().cloned().fold(f64::MIN, f64::max);
        let min = w.iter().cloned().fold(f64::MAX, f64::min);
        assert!(max > 0.95 * bound && min < -0.95 * bound, "{min} {max}");
        let b = fc.bias.unwrap().to_vec();
        assert!(b.iter().all(|v| v.abs() <= bound));
    }
}

//! Custom differentiable ops: a forward you write (any code: loops over
//! slices, a fused kernel, tensor ops) and a backward written with tensor
//! ops, so that gradients of gradients work when your backward is itself
//! differentiable. PyTorch's `torch.autograd.Function`.

use crate::autograd::no_grad;
use crate::tensor::{Device, Float, Tensor};
use std::sync::Arc;

/// What a [`CustomOp`]'s forward may do besides computing: save tensors
/// for the backward and mark outputs as not differentiable.
///
/// ```
/// use forge::tools::ForwardCtx;
/// use forge::Tensor;
/// // Part of a forward (see CustomOp for whole ops): keep the output for
/// // the backward, and return a second output that has no gradient.
/// fn finish(ctx: &mut ForwardCtx<f64>, y: Tensor<f64>, count: Tensor<f64>) -> Vec<Tensor<f64>> {
///     ctx.save(y.clone());
///     ctx.mark_non_differentiable(1);
///     vec![y, count]
/// }
/// ```
pub struct ForwardCtx<E: Float, D: Device = crate::Cpu> {
    saved: Vec<Tensor<E, D>>,
    non_differentiable: Vec<usize>,
}

impl<E: Float, D: Device> ForwardCtx<E, D> {
    /// Keeps `t` for the backward ([`BackwardArgs::saved`], in the order
    /// saved). Saved tensors are made by the forward with recording off, so
    /// to a second backward they are constants: a backward that must be
    /// differentiated again should compute what depends on the inputs from
    /// [`BackwardArgs::inputs`] instead.
    ///
    /// ```
    /// # fn _f(ctx: &mut forge::tools::ForwardCtx<f32>, t: forge::Tensor<f32>) {
    /// ctx.save(t);
    /// # }
    /// ```
    pub fn save(&mut self, t: Tensor<E, D>) {
        self.saved.push(t);
    }

    /// Declares output `i` not differentiable (an index, a mask, a count):
    /// it is returned untracked and never receives a gradient.
    ///
    /// ```
    /// # fn _f(ctx: &mut forge::tools::ForwardCtx<f32>) {
    /// ctx.mark_non_differentiable(1);
    /// # }
    /// ```
    pub fn mark_non_differentiable(&mut self, i: usize) {
        self.non_differentiable.push(i);
    }
}

/// What a [`CustomOp`]'s backward receives (see [`CustomOp`] for whole
/// ops).
///
/// ```
/// use forge::tools::BackwardArgs;
/// use forge::Tensor;
/// // The backward of y = 2 x.
/// fn double_backward(args: &BackwardArgs<'_, f32>) -> Vec<Option<Tensor<f32>>> {
///     vec![args.grads[0].as_ref().map(|g| g * 2.0)]
/// }
/// ```
pub struct BackwardArgs<'a, E: Float, D: Device = crate::Cpu> {
    /// The gradient of each output: `Some` for the output whose gradient
    /// this call computes, `None` for the others (see [`CustomOp::backward`]).
    pub grads: &'a [Option<Tensor<E, D>>],
    /// The op's inputs: tracked (so differentiable again) when
    /// `create_graph` is true.
    pub inputs: &'a [Tensor<E, D>],
    /// The tensors the forward saved, in order.
    pub saved: &'a [Tensor<E, D>],
    /// True in [`Tensor::backward_with_graph`]: the gradients returned
    /// will be differentiated again.
    pub create_graph: bool,
}

impl<E: Float, D: Device> BackwardArgs<'_, E, D> {
    /// Whether input `i` needs a gradient (it is tracked); a backward may
    /// return `None` for the others.
    ///
    /// ```
    /// # fn _f(args: &forge::tools::BackwardArgs<'_, f32>) -> bool {
    /// args.needs(0)
    /// # }
    /// ```
    pub fn needs(&self, i: usize) -> bool {
        self.inputs[i].is_tracked()
    }
}

/// An op with its own forward and backward.
///
/// [`forward`](Self::forward) runs with recording off on the input values,
/// so any code works there (tensor ops, or loops over
/// [`as_slice`](Tensor::as_slice)); it returns one or more outputs.
/// [`backward`](Self::backward) returns one optional gradient per input
/// and should be written with tensor ops from
/// [`BackwardArgs::inputs`] and the output gradient: when it is, a second
/// backward (`backward_with_graph`) differentiates through it.
///
/// A fused SwiGLU, `silu(a) * b`, in one pass forward:
///
/// ```
/// use forge::tools::{apply_op, BackwardArgs, CustomOp, ForwardCtx};
/// use forge::{gradcheck, Tensor};
///
/// struct SwiGlu;
/// impl CustomOp<f64> for SwiGlu {
///     fn name(&self) -> &'static str { "swiglu" }
///     fn forward(&self, _ctx: &mut ForwardCtx<f64>, x: &[Tensor<f64>]) -> Vec<Tensor<f64>> {
///         let out = x[0].as_slice().iter().zip(x[1].as_slice())
///             .map(|(&a, &b)| a / (1.0 + (-a).exp()) * b).collect();
///         vec![Tensor::from_vec(out, x[0].shape())]
///     }
///     fn backward(&self, args: &BackwardArgs<'_, f64>) -> Vec<Option<Tensor<f64>>> {
///         let (a, b, g) = (&args.inputs[0], &args.inputs[1], args.grads[0].as_ref().unwrap());
///         let s = a.sigmoid();
///         // d silu(a) / da = s (1 + a (1 - s))
///         let dsilu = &s * &((a * &(&s * -1.0 + 1.0)) + 1.0);
///         vec![Some(&(g * b) * &dsilu), Some(g * &a.silu())]
///     }
/// }
///
/// let a = Tensor::<f64>::from_vec(vec![0.3, -1.2, 2.0], &[3]);
/// let b = Tensor::<f64>::from_vec(vec![1.5, 0.4, -0.7], &[3]);
/// let report = gradcheck(|x| apply_op(SwiGlu, x).remove(0), &[a, b], 1e-6, 1e-6, 1e-6).unwrap();
/// assert!(report.max_abs_err < 1e-8);
/// ```
pub trait CustomOp<E: Float, D: Device = crate::Cpu>: Send + Sync + 'static {
    /// The op's name on the tape (graph export, anomaly reports).
    fn name(&self) -> &'static str;

    /// Computes the outputs from the inputs' values (recording is off).
    fn forward(&self, ctx: &mut ForwardCtx<E, D>, inputs: &[Tensor<E, D>]) -> Vec<Tensor<E, D>>;

    /// One gradient per input (`None` for an input that gets none), for
    /// the output gradients in [`BackwardArgs::grads`].
    ///
    /// Each differentiable output is its own node on the tape, so this is
    /// called once for each output that a gradient reached, with that
    /// output's gradient `Some` and the others `None`; the tape adds the
    /// results. (A backward is linear in the output gradients, so the sum
    /// is the gradient of all outputs at once.)
    fn backward(&self, args: &BackwardArgs<'_, E, D>) -> Vec<Option<Tensor<E, D>>>;
}

/// Runs a [`CustomOp`] on `inputs` and records it: each differentiable
/// output becomes a node named [`CustomOp::name`] whose rule calls
/// [`CustomOp::backward`]; outputs marked non-differentiable come back
/// untracked.
///
/// # Panics
/// When `backward` returns a number of gradients other than the number of
/// inputs, or a gradient whose shape differs from its input's (the tape
/// names the op), or when an output marked non-differentiable does not
/// exist.
///
/// ```
/// use forge::tools::{apply_op, BackwardArgs, CustomOp, ForwardCtx};
/// use forge::Tensor;
///
/// /// round(x) forward, identity backward (the straight-through
/// /// estimator); a second output, the rounding error, is not differentiable.
/// struct RoundSte;
/// impl CustomOp<f32> for RoundSte {
///     fn name(&self) -> &'static str { "round_ste" }
///     fn forward(&self, ctx: &mut ForwardCtx<f32>, x: &[Tensor<f32>]) -> Vec<Tensor<f32>> {
///         let r = Tensor::from_vec(x[0].as_slice().iter().map(|v| v.round()).collect(), x[0].shape());
///         let err = &r - &x[0];
///         ctx.mark_non_differentiable(1);
///         vec![r, err]
///     }
///     fn backward(&self, args: &BackwardArgs<'_, f32>) -> Vec<Option<Tensor<f32>>> {
///         vec![args.grads[0].clone()]
///     }
/// }
///
/// let x = Tensor::<f32>::from_vec(vec![0.4, 1.6], &[2]).requires_grad();
/// let out = apply_op(RoundSte, &[x.clone()]);
/// assert_eq!(out[0].to_vec(), vec![0.0, 2.0]);
/// assert!(out[0].is_tracked() && !out[1].is_tracked());
/// let g = (&out[0] * 3.0).sum().backward();
/// assert_eq!(g.get(&x).unwrap().to_vec(), vec![3.0, 3.0]);
/// ```
#[track_caller]
pub fn apply_op<E: Float, D: Device, Op: CustomOp<E, D>>(
    op: Op,
    inputs: &[Tensor<E, D>],
) -> Vec<Tensor<E, D>> {
    let mut ctx = ForwardCtx {
        saved: Vec::new(),
        non_differentiable: Vec::new(),
    };
    let outputs = no_grad(|| op.forward(&mut ctx, inputs));
    for &i in &ctx.non_differentiable {
        assert!(
            i < outputs.len(),
            "{}: output {i} marked non-differentiable, but the forward returned {} outputs",
            op.name(),
            outputs.len()
        );
    }
    let op = Arc::new(op);
    let saved: Arc<[Tensor<E, D>]> = ctx.saved.into();
    let n_out = outputs.len();
    let name = op.name();
    let mut results = Vec::with_capacity(n_out);
    // A loop, not a closure: `record` then sees the caller's line.
    for (k, y) in outputs.into_iter().enumerate() {
        let y = y.detach();
        if ctx.non_differentiable.contains(&k) {
            results.push(y);
            continue;
        }
        let (op, saved) = (op.clone(), saved.clone());
        results.push(y.record(name, inputs.to_vec(), move |ctx| {
            let mut grads: Vec<Option<Tensor<E, D>>> = vec![None; n_out];
            grads[k] = Some(ctx.grad.clone());
            let out = op.backward(&BackwardArgs {
                grads: &grads,
                inputs: ctx.inputs,
                saved: &saved,
                create_graph: ctx.create_graph,
            });
            assert_eq!(
                out.len(),
                ctx.inputs.len(),
                "{}: backward returned {} gradients for {} inputs",
                op.name(),
                out.len(),
                ctx.inputs.len()
            );
            out
        }));
    }
    results
}

//! Dynamic int8 quantization for inference, with the semantics of
//! PyTorch's `torch.ao.quantization.quantize_dynamic` on x86 (fbgemm):
//!
//! - weights are quantized once to signed bytes, symmetrically (zero point
//!   0, `scale = max|w| / 127.5`, values clamped to `[-128, 127]`), with one
//!   scale for the whole weight or one per output channel ([`Granularity`]);
//! - activations are quantized at every call to unsigned bytes over their
//!   whole range (`min(x, 0)` to `max(x, 0)`), with a zero point, to 7 bits
//!   (`[0, 127]`: PyTorch's `reduce_range` on x86) and the same rounding;
//! - the products accumulate exactly in `i32` (forge's int8
//!   kernels: AVX-512 VNNI, AVX-VNNI, AVX2 or portable, chosen at run time,
//!   all with the same bits), and each output is
//!   `(acc - zero_point * sum_p w[j][p]) * x_scale * w_scale[j] + bias[j]`
//!   in `f32`.
//!
//! [`quantize_dynamic`] converts every [`Linear`](crate::nn::Linear),
//! [`Lstm`](crate::nn::Lstm), [`Gru`](crate::nn::Gru) and one-group
//! [`Conv2d`](crate::nn::Conv2d) of a model in place (the recurrent layers
//! as PyTorch's dynamic `LSTM`/`GRU`: the input projection of a sequence in
//! one product, the hidden state quantized at every step, the gates in
//! `f32`; the convolution with its unfolded input quantized per call).
//! [`quantize_embeddings`], asked for separately (PyTorch's
//! `quantize_dynamic` leaves embeddings in float), converts the
//! [`Embedding`](crate::nn::Embedding) tables to int8 with a scale per row;
//! a table tied to an output head (GPT-2's) serves that head as an int8
//! product on the same bytes.
//! [`Fp8Format`] converts 8-bit floats for `F8_E4M3` / `F8_E5M2`
//! checkpoints ([`fp8_tensors`]); [`to_fp8`] keeps a model's `Linear`,
//! `Conv2d`, `Lstm`, `Gru` and `Rnn` weights in memory as 8-bit floats
//! ([`Fp8Weight`]), decoded by the f32 gemm's panel decoder (inside its
//! packing step for `Linear`, into the call's f32 weight for the others). A quantized layer is still a layer: it saves its weight
//! as `I8` and its scales as `weight_scale` (a quarter of the f32 file),
//! and loading such a file into a model quantized the same way needs no
//! other code than loading an f32 checkpoint.
//!
//! ```
//! use forge::checkpoint::LayerIo;
//! use forge::prelude::*;
//! use forge::quant::{quantize_dynamic, Granularity};
//! let mut rng = Rng::new(0);
//! let mut model = sequential![Linear::<f32>::new(8, 16, &mut rng), Relu, Linear::new(16, 4, &mut rng)];
//! let x = Tensor::<f32>::normal(&[3, 8], 0.0, 1.0, &mut rng);
//! let exact = model.forward(x.clone());
//! assert_eq!(quantize_dynamic(&mut model, Granularity::PerChannel), 2);
//! let approx = model.forward(x.clone());
//! let err = exact.sub(&approx).abs().max().item();
//! assert!(err < 0.05, "{err}");
//!
//! // saved as int8, loaded into another model quantized the same way
//! let path = std::env::temp_dir().join(format!("forge-quant-doc-{}.safetensors", std::process::id()));
//! model.save(&path).unwrap();
//! let mut other = sequential![Linear::<f32>::new(8, 16, &mut rng), Relu, Linear::new(16, 4, &mut rng)];
//! quantize_dynamic(&mut other, Granularity::PerChannel);
//! other.load_weights(&path).unwrap();
//! assert_eq!(other.forward(x).to_vec(), approx.to_vec());
//! std::fs::remove_file(&path).unwrap();
//! ```

mod buf;
mod conv;
mod dynamic;
mod embedding;
mod fp8;
mod fp8_io;
mod fp8_model;
mod fp8_weight;
mod inference;
mod int8;
mod int8_rows;
mod recurrent;
mod visit;

pub(crate) use buf::{f32_values, tensor_from_f32};
pub(crate) use conv::{conv2d_int8, ConvGeometry};
pub use dynamic::{quantize_dynamic, resident_bytes};
pub use embedding::quantize_embeddings;
pub(crate) use embedding::{attend as attend_int8, lookup as lookup_int8, quantize_table};
pub use fp8::Fp8Format;
pub(crate) use fp8_io::dequantize as dequantize_fp8;
pub use fp8_io::fp8_tensors;
pub use fp8_model::to_fp8;
pub(crate) use fp8_model::{fp8_checkpoint_tensors, has_fp8, load_fp8_model};
pub(crate) use fp8_weight::from_float_tensors as fp8_from_float_tensors;
pub use fp8_weight::Fp8Weight;
#[cfg(test)]
pub(crate) use fp8_weight::WHOLE_DECODES;
pub(crate) use inference::inference_only;
pub use int8::{activation_params, Granularity, Int8Weight, Quantizable};
pub(crate) use recurrent::{int8_sequence, CellKind, Int8Cell};
pub(crate) use visit::{visit_int8, visit_int8_mut};

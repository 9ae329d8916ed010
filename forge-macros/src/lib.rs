//! Procedural macros for forge: [`macro@Layer`], the derive that writes the
//! traversal of a struct's tensors.
//!
//! Use it through `forge` (`use forge::prelude::*;` or `forge::Layer`): the
//! generated code names items of `::forge::nn`.

#![warn(missing_docs)]

mod attrs;
mod expand;

use proc_macro::TokenStream;

/// Derives `forge::nn::Layer` (and `forge::nn::Visit`, so the struct can be
/// a field of another layer) for a struct with named fields, a tuple struct
/// or a unit struct, generic or not.
///
/// Each field is visited under its name (`fc1`, or `0`, `1`, … in a tuple
/// struct), in declaration order:
///
/// - a `Tensor` field is a weight (trainable while it is tracked);
/// - any other field goes through the `forge::nn::Visit` trait, which
///   tensors, derived layers, `Sequential`, and `Option<T>`, `Vec<T>`,
///   `[T; N]`, `Box<T>` of those implement; a field type that does not is a
///   compile error at the field, with the hint to add `#[skip]`;
/// - `#[frozen]` marks a tensor field (`Tensor`, or an `Option`, `Vec`,
///   array or `Box` of tensors) that is saved and loaded but never trained
///   (a batch norm's running statistics);
/// - `#[skip]` leaves a field out (configuration, closures, caches);
/// - `#[training]` marks a `bool` field that holds the layer's mode:
///   `train()` sets it, `eval()` clears it.
///
/// The generated impl is generic over the element type with one
/// where-clause per field type (`impl<__E: Float, …> Layer<__E> for S<…>
/// where FieldTy: Visit<__E>`), so generic structs need no extra bounds and
/// no type name is guessed. Misuse (an enum or union, `#[frozen]` on a
/// non-tensor, `#[training]` on a non-`bool`, attribute arguments,
/// conflicting attributes) is a `compile_error!` at the offending token.
///
/// ```
/// use forge::prelude::*;
///
/// #[derive(Layer)]
/// struct Block<E: Float = f32> {
///     attn: Linear<E>,
///     mlp: Vec<Linear<E>>,
///     #[frozen]
///     mask: Tensor<E>,
///     #[training]
///     training: bool,
///     #[skip]
///     heads: usize,
/// }
///
/// #[derive(Layer)]
/// struct Pair(Linear, Option<Linear>);
///
/// let mut rng = Rng::new(0);
/// let b = Block::<f64> {
///     attn: Linear::new(2, 2, &mut rng),
///     mlp: vec![Linear::new_no_bias(2, 2, &mut rng)],
///     mask: Tensor::ones(&[2]),
///     training: true,
///     heads: 1,
/// };
/// let paths: Vec<String> = b.named_tensors().into_iter().map(|(p, _, _)| p).collect();
/// assert_eq!(paths, ["attn.weight", "attn.bias", "mlp.0.weight", "mask"]);
///
/// let p = Pair(Linear::new(1, 1, &mut rng), None);
/// assert_eq!(p.named_parameters()[0].0, "0.weight");
/// ```
#[proc_macro_derive(Layer, attributes(frozen, skip, training))]
pub fn derive_layer(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    match expand::derive(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

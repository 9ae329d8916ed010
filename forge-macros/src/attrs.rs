//! Field attributes of `#[derive(Layer)]`: parsing and validation.

use syn::spanned::Spanned;
use syn::{Attribute, Error, Field, GenericArgument, Meta, PathArguments, Result, Type};

/// The role a field plays in the traversal.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// Visited through `Visit` (tensors are weights).
    Visit,
    /// Visited through `Visit`, every tensor reported as frozen.
    Frozen,
    /// Not visited.
    Skip,
    /// A `bool` mode flag.
    Training,
}

const NAMES: [&str; 3] = ["frozen", "skip", "training"];

fn is_ours(attr: &Attribute) -> bool {
    NAMES.iter().any(|n| attr.path().is_ident(n))
}

/// Rejects our attributes where they do not belong (on the struct itself).
pub fn reject_on_item(attrs: &[Attribute]) -> Result<()> {
    match attrs.iter().find(|a| is_ours(a)) {
        Some(attr) => {
            let name = attr
                .path()
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            Err(Error::new(
                attr.span(),
                format!("`#[{name}]` applies to fields of a `#[derive(Layer)]` struct, not to the struct itself"),
            ))
        }
        None => Ok(()),
    }
}

/// The role of `field`, checked: at most one of our attributes, without
/// arguments, on a field type that fits it.
pub fn role(field: &Field) -> Result<Role> {
    let mut role: Option<(Role, &Attribute)> = None;
    for attr in field.attrs.iter().filter(|a| is_ours(a)) {
        let name = attr
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        if !matches!(attr.meta, Meta::Path(_)) {
            return Err(Error::new(
                attr.meta.span(),
                format!("`#[{name}]` takes no arguments: write `#[{name}]`"),
            ));
        }
        let this = match name.as_str() {
            "frozen" => Role::Frozen,
            "skip" => Role::Skip,
            _ => Role::Training,
        };
        if let Some((_, first)) = role {
            let first = first
                .path()
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            return Err(Error::new(
                attr.span(),
                format!("`#[{name}]` cannot be combined with `#[{first}]`: a field has one role"),
            ));
        }
        role = Some((this, attr));
    }
    let role = role.map(|(r, _)| r).unwrap_or(Role::Visit);
    match role {
        Role::Frozen if !holds_tensors(&field.ty) => Err(Error::new(
            field.ty.span(),
            "`#[frozen]` applies to tensor fields only (`Tensor`, or an `Option`, `Vec`, array or `Box` of tensors); \
             to stop training a sublayer call `.freeze()` or `.freeze_prefix(..)` on the model",
        )),
        Role::Training if !is_bool(&field.ty) => Err(Error::new(
            field.ty.span(),
            "`#[training]` marks the layer's mode flag and applies to a `bool` field only",
        )),
        r => Ok(r),
    }
}

/// Whether the last path segment of `ty` is `name`, returning its generic
/// arguments.
fn last_segment<'a>(ty: &'a Type, name: &str) -> Option<&'a PathArguments> {
    match ty {
        Type::Path(p) if p.qself.is_none() => {
            let seg = p.path.segments.last()?;
            (seg.ident == name).then_some(&seg.arguments)
        }
        _ => None,
    }
}

fn first_type_arg(args: &PathArguments) -> Option<&Type> {
    match args {
        PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    }
}

/// `Tensor<..>`, or `Option`, `Vec`, `Box`, `[_; N]` of such (syntactically).
fn holds_tensors(ty: &Type) -> bool {
    match ty {
        Type::Paren(p) => holds_tensors(&p.elem),
        Type::Group(g) => holds_tensors(&g.elem),
        Type::Array(a) => holds_tensors(&a.elem),
        _ => {
            if last_segment(ty, "Tensor").is_some() {
                return true;
            }
            ["Option", "Vec", "Box"].iter().any(|c| {
                last_segment(ty, c)
                    .and_then(first_type_arg)
                    .is_some_and(holds_tensors)
            })
        }
    }
}

fn is_bool(ty: &Type) -> bool {
    matches!(last_segment(ty, "bool"), Some(PathArguments::None))
}

//! The code `#[derive(Layer)]` writes.

use crate::attrs::{self, Role};
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, GenericParam, Ident, Index, Member, Result};

/// One visited field.
struct FieldInfo {
    member: Member,
    segment: String,
    ty: syn::Type,
    role: Role,
}

pub fn derive(input: &DeriveInput) -> Result<TokenStream> {
    let fields = match &input.data {
        Data::Struct(s) => &s.fields,
        Data::Enum(e) => {
            return Err(Error::new(
                e.enum_token.span(),
                "`#[derive(Layer)]` applies to structs only: an enum's tensors depend on the variant, so it has no fixed paths",
            ))
        }
        Data::Union(u) => {
            return Err(Error::new(
                u.union_token.span(),
                "`#[derive(Layer)]` applies to structs only, not to unions",
            ))
        }
    };
    attrs::reject_on_item(&input.attrs)?;

    let mut infos = Vec::new();
    let mut errors: Option<Error> = None;
    let list: Vec<&syn::Field> = match fields {
        Fields::Named(f) => f.named.iter().collect(),
        Fields::Unnamed(f) => f.unnamed.iter().collect(),
        Fields::Unit => Vec::new(),
    };
    for (i, field) in list.into_iter().enumerate() {
        let role = match attrs::role(field) {
            Ok(r) => r,
            Err(e) => {
                match &mut errors {
                    Some(all) => all.combine(e),
                    None => errors = Some(e),
                }
                continue;
            }
        };
        let (member, segment) = match &field.ident {
            Some(id) => {
                let s = id.to_string();
                let s = s.strip_prefix("r#").map(str::to_string).unwrap_or(s);
                (Member::Named(id.clone()), s)
            }
            None => (
                Member::Unnamed(Index {
                    index: i as u32,
                    span: field.ty.span(),
                }),
                i.to_string(),
            ),
        };
        infos.push(FieldInfo {
            member,
            segment,
            ty: field.ty.clone(),
            role,
        });
    }
    if let Some(e) = errors {
        return Err(e);
    }

    let name = &input.ident;
    let elem = Ident::new("__ForgeE", Span::call_site());
    let (plain_impl, ty_generics, where_clause) = input.generics.split_for_impl();

    let mut generics = input.generics.clone();
    let at = generics
        .params
        .iter()
        .take_while(|p| matches!(p, GenericParam::Lifetime(_)))
        .count();
    generics
        .params
        .insert(at, syn::parse_quote!(#elem: ::forge::Float));
    let (impl_generics, _, _) = generics.split_for_impl();

    let generic_names: Vec<String> = input
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(t.ident.to_string()),
            GenericParam::Const(c) => Some(c.ident.to_string()),
            GenericParam::Lifetime(_) => None,
        })
        .collect();

    let mut predicates: Vec<TokenStream> = where_clause
        .map(|w| w.predicates.iter().map(|p| p.to_token_stream()).collect())
        .unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    let mut checks = Vec::new();
    let mut visits = Vec::new();
    let mut visits_mut = Vec::new();
    for f in &infos {
        let ty = &f.ty;
        let member = &f.member;
        let seg = &f.segment;
        let span = ty.span();
        match f.role {
            Role::Skip => continue,
            Role::Training => {
                visits.push(quote_spanned!(span=> __v.visit_mode(#seg, self.#member);));
                visits_mut.push(quote_spanned!(span=> __v.visit_mode(#seg, &mut self.#member);));
                continue;
            }
            Role::Visit | Role::Frozen => {}
        }
        if seen.insert(ty.to_token_stream().to_string()) {
            predicates.push(quote_spanned!(span=> #ty: ::forge::nn::Visit<#elem>));
            if !mentions_generics(ty.to_token_stream(), &generic_names) {
                checks.push(quote_spanned!(span=>
                    const _: fn() = ::forge::nn::__private::assert_visitable::<#ty>;
                ));
            }
        }
        if f.role == Role::Frozen {
            visits.push(quote_spanned!(span=>
                <#ty as ::forge::nn::Visit<#elem>>::visit(
                    &self.#member, #seg, &mut ::forge::nn::AsFrozen::new(&mut *__v));
            ));
            visits_mut.push(quote_spanned!(span=>
                <#ty as ::forge::nn::Visit<#elem>>::visit_mut(
                    &mut self.#member, #seg, &mut ::forge::nn::AsFrozen::new(&mut *__v));
            ));
        } else {
            visits.push(quote_spanned!(span=>
                <#ty as ::forge::nn::Visit<#elem>>::visit(&self.#member, #seg, &mut *__v);
            ));
            visits_mut.push(quote_spanned!(span=>
                <#ty as ::forge::nn::Visit<#elem>>::visit_mut(&mut self.#member, #seg, &mut *__v);
            ));
        }
    }

    let where_all = if predicates.is_empty() {
        quote!()
    } else {
        quote!(where #(#predicates,)*)
    };
    let unused = format_ident!("__v");
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics ::forge::nn::Layer<#elem> for #name #ty_generics #where_all {
            #[allow(unused_variables)]
            fn visit_tensors(&self, #unused: &mut dyn ::forge::nn::TensorVisitor<#elem>) {
                #(#visits)*
            }
            #[allow(unused_variables)]
            fn visit_tensors_mut(&mut self, #unused: &mut dyn ::forge::nn::TensorVisitorMut<#elem>) {
                #(#visits_mut)*
            }
        }

        #[automatically_derived]
        impl #impl_generics ::forge::nn::Visit<#elem> for #name #ty_generics #where_all {
            fn visit(&self, name: &str, v: &mut dyn ::forge::nn::TensorVisitor<#elem>) {
                ::forge::nn::enter_layer::<#elem, Self>(self, name, v)
            }
            fn visit_mut(&mut self, name: &str, v: &mut dyn ::forge::nn::TensorVisitorMut<#elem>) {
                ::forge::nn::enter_layer_mut::<#elem, Self>(self, name, v)
            }
        }

        #[automatically_derived]
        #[diagnostic::do_not_recommend]
        impl #plain_impl ::forge::nn::Visitable for #name #ty_generics #where_clause {}

        #(#checks)*
    })
}

/// Whether `tokens` name one of the struct's type or const parameters,
/// `Self`, or a lifetime (then the type cannot be checked outside the impl).
fn mentions_generics(tokens: TokenStream, names: &[String]) -> bool {
    tokens.into_iter().any(|tt| match tt {
        TokenTree::Ident(i) => i == "Self" || names.iter().any(|n| i == n),
        TokenTree::Punct(p) => p.as_char() == '\'',
        TokenTree::Group(g) => mentions_generics(g.stream(), names),
        TokenTree::Literal(_) => false,
    })
}

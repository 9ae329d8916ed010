//! The builder setters the optimizers share, written once:
//! `rule_setters!` generates, inside an `impl Optimizer<Config, E>` block,
//! one setter per field of the update rule's configuration, each
//! documented and tested on the optimizer it belongs to.

/// Generates `pub fn $field(mut self, $field: $ty) -> Self` setters that
/// store the value in `self.rule.$field`. `$alias` and `$lr` build the
/// optimizer in each setter's doc example, which sets the field to
/// `$example` and reads it back.
macro_rules! rule_setters {
    ($alias:literal, $lr:literal; $($(#[doc = $doc:literal])* $field:ident: $ty:ty = $example:literal;)*) => {$(
        $(#[doc = $doc])*
        ///
        /// ```
        #[doc = concat!("let o = forge::optim::", $alias, "::<f32>::new(", $lr, ").", stringify!($field), "(", $example, ");")]
        #[doc = concat!("assert_eq!(o.rule().", stringify!($field), ", ", $example, ");")]
        /// ```
        pub fn $field(mut self, $field: $ty) -> Self {
            self.rule.$field = $field;
            self
        }
    )*};
}

pub(super) use rule_setters;

//! The builder setters the convolution and pooling layers share, written
//! once: `size_setters!` generates, inside an `impl` block, one setter per
//! size field (`stride`, `padding`, `dilation`, ...), each documented and
//! tested on the layer it belongs to.

/// Generates `pub fn $field(mut self, $field: $arg) -> Self` setters that
/// store `$into($field)`, for the listed fields of the layer built by the
/// `$make` expression (used in each setter's doc example, where `$two` is
/// what the field holds after `.field(2)`).
macro_rules! size_setters {
    ($arg:ty, $into:path, $make:literal, $two:literal; $($field:ident: $what:literal;)*) => {$(
        #[doc = concat!("Sets ", $what, ".")]
        ///
        /// ```
        #[doc = concat!("let layer = ", $make, ".", stringify!($field), "(2);")]
        #[doc = concat!("assert_eq!(layer.", stringify!($field), ", ", $two, ");")]
        /// ```
        pub fn $field(mut self, $field: $arg) -> Self {
            self.$field = $into($field);
            self
        }
    )*};
}

pub(super) use size_setters;

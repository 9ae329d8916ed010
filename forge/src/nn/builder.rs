//! The builder methods the convolution and pooling layers share, written
//! once: `size_setters!` generates, inside an `impl` block, one setter per
//! size field (`stride`, `padding`, `dilation`, ...), each documented and
//! tested on the layer it belongs to; `conv_channels!` the convolutions'
//! `groups`, `no_bias`, `in_channels` and `out_channels`.

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

/// Generates the channel methods the convolution layers share (`groups`,
/// `no_bias`, `in_channels`, `out_channels`), each with the documentation
/// given for it. The weight is `[C0, C1 / groups, kernel..]`: for a
/// convolution `C0` is the output channels and `C1` the input ones, for a
/// transposed convolution the other way round. `$in_dim` is the weight
/// dimension that holds the input channels (1 or 0), `$dim0` the name of
/// `C0` in messages.
macro_rules! conv_channels {
    (
        $layer:literal, $in_dim:literal, $dim0:literal;
        $(#[doc = $groups_doc:literal])* groups;
        $(#[doc = $no_bias_doc:literal])* no_bias;
        $(#[doc = $in_doc:literal])* in_channels;
        $(#[doc = $out_doc:literal])* out_channels;
    ) => {
        $(#[doc = $groups_doc])*
        pub fn groups(mut self, groups: usize) -> Self {
            let c0 = self.weight.shape()[0];
            (self.weight, self.bias) = grouped(
                $layer,
                self.groups,
                c0,
                $dim0,
                &self.weight,
                &self.bias,
                groups,
            );
            self.groups = groups;
            self
        }

        $(#[doc = $no_bias_doc])*
        pub fn no_bias(mut self) -> Self {
            self.bias = None;
            self
        }

        $(#[doc = $in_doc])*
        pub fn in_channels(&self) -> usize {
            self.channels($in_dim)
        }

        $(#[doc = $out_doc])*
        pub fn out_channels(&self) -> usize {
            self.channels(1 - $in_dim)
        }

        /// The channel count that weight dimension `dim` (0 or 1) stands
        /// for: dimension 1 holds a `1 / groups` share.
        fn channels(&self, dim: usize) -> usize {
            let n = self.weight.shape()[dim];
            if dim == 1 {
                n * self.groups
            } else {
                n
            }
        }
    };
}

pub(super) use conv_channels;

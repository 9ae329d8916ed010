//! Element types a tensor can hold.

use std::fmt::{Debug, Display};

/// The storage type of a tensor's elements, as named in safetensors headers.
///
/// ```
/// use forge::DType;
/// assert_eq!(DType::F32.size_in_bytes(), 4);
/// assert_eq!(DType::F32.name(), "F32");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DType {
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Unsigned byte.
    U8,
    /// Signed byte (int8 quantized weights).
    I8,
    /// Boolean (one byte, 0 or 1), the result of comparisons.
    Bool,
    /// 8-bit float `float8_e4m3fn` (storage only: see
    /// [`Fp8Format`](crate::quant::Fp8Format)).
    F8E4M3,
    /// 8-bit float `float8_e5m2` (storage only).
    F8E5M2,
}

impl DType {
    /// Bytes per element.
    ///
    /// ```
    /// assert_eq!(forge::DType::F64.size_in_bytes(), 8);
    /// ```
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::U8 | DType::I8 | DType::Bool | DType::F8E4M3 | DType::F8E5M2 => 1,
        }
    }

    /// The name safetensors uses for this type (`"F32"`, `"BF16"`, ...).
    ///
    /// ```
    /// assert_eq!(forge::DType::BF16.name(), "BF16");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::U8 => "U8",
            DType::I8 => "I8",
            DType::Bool => "BOOL",
            DType::F8E4M3 => "F8_E4M3",
            DType::F8E5M2 => "F8_E5M2",
        }
    }

    /// The name PyTorch prints (`float32`, `int64`, ...).
    ///
    /// ```
    /// assert_eq!(forge::DType::F32.torch_name(), "float32");
    /// ```
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::Bool => "bool",
            DType::F8E4M3 => "float8_e4m3fn",
            DType::F8E5M2 => "float8_e5m2",
        }
    }
}

impl Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.torch_name())
    }
}

/// A type a tensor can store: floats (differentiable), integers (indices and
/// labels) and half-precision storage types.
///
/// ```
/// use forge::Element;
/// assert_eq!(<f64 as Element>::from_f64(2.5), 2.5);
/// assert_eq!(3i64.to_f64(), 3.0);
/// ```
pub trait Element:
    Copy + Clone + Send + Sync + Debug + Display + PartialEq + PartialOrd + Default + 'static
{
    /// The storage type tag.
    const DTYPE: DType;
    /// Converts to f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// Converts from f64, rounding to nearest (saturating for integers).
    fn from_f64(v: f64) -> Self;
    /// Zero (`false` for `bool`).
    const ZERO: Self;
    /// One (`true` for `bool`).
    const ONE: Self;
}

macro_rules! element {
    ($t:ty, $d:expr, $zero:expr, $one:expr, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            const ZERO: Self = $zero;
            const ONE: Self = $one;
            #[inline]
            fn to_f64(self) -> f64 {
                let f: fn($t) -> f64 = $to;
                f(self)
            }
            #[inline]
            fn from_f64(v: f64) -> Self {
                let f: fn(f64) -> $t = $from;
                f(v)
            }
        }
    };
}

element!(f32, DType::F32, 0.0, 1.0, |x| x as f64, |v| v as f32);
element!(f64, DType::F64, 0.0, 1.0, |x| x, |v| v);
element!(i32, DType::I32, 0, 1, |x| x as f64, |v| v.round() as i32);
element!(i64, DType::I64, 0, 1, |x| x as f64, |v| v.round() as i64);
element!(u8, DType::U8, 0, 1, |x| x as f64, |v| v.round() as u8);
element!(i8, DType::I8, 0, 1, |x| x as f64, |v| v.round() as i8);
element!(bool, DType::Bool, false, true, |x| x as u8 as f64, |v| v
    != 0.0);
element!(
    half::f16,
    DType::F16,
    half::f16::ZERO,
    half::f16::ONE,
    |x| x.to_f64(),
    half::f16::from_f64
);
element!(
    half::bf16,
    DType::BF16,
    half::bf16::ZERO,
    half::bf16::ONE,
    |x| x.to_f64(),
    half::bf16::from_f64
);

/// A floating-point element that supports differentiation and arithmetic:
/// `f32` and `f64`.
///
/// ```
/// use forge::Float;
/// fn halve<E: Float>(x: E) -> E { x * E::from_f64(0.5) }
/// assert_eq!(halve(3.0f32), 1.5);
/// ```
pub trait Float:
    Element
    + num_traits::Float
    + num_traits::FloatConst
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + std::ops::DivAssign
    + std::iter::Sum
{
    /// `C = alpha * A B + beta * C` on strided row/column layouts (the
    /// crate's gemm kernels).
    ///
    /// # Safety
    /// The pointers and strides must describe valid matrices of the given
    /// sizes, as `matrixmultiply::sgemm` requires.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

impl Float for f32 {
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f32,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        beta: f32,
        c: *mut f32,
        rsc: isize,
        csc: isize,
    ) {
        // SAFETY: forwarded contract; the caller guarantees valid matrices.
        unsafe {
            matrixmultiply::sgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
        }
    }
}

impl Float for f64 {
    unsafe fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f64,
        a: *const f64,
        rsa: isize,
        csa: isize,
        b: *const f64,
        rsb: isize,
        csb: isize,
        beta: f64,
        c: *mut f64,
        rsc: isize,
        csc: isize,
    ) {
        // SAFETY: forwarded contract; the caller guarantees valid matrices.
        unsafe {
            matrixmultiply::dgemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
        }
    }
}

//! [`AnyTensor`]: a tensor of any storage type, and the little-endian
//! bytes it is stored as, borrowed from the tensor's storage where the
//! machine's byte order is the file's.

use crate::error::{ForgeError, Result};
use crate::quant::Fp8Format;
use crate::tensor::{DType, Element, Float, Tensor};
use std::any::Any;
use std::borrow::Cow;

/// A tensor of any storage type, as stored in a safetensors file.
///
/// ```
/// use forge::io::AnyTensor;
/// use forge::{DType, Tensor};
/// let a: AnyTensor = Tensor::<i64>::from_vec(vec![1, 2, 3], &[3]).into();
/// assert_eq!(a.dtype(), DType::I64);
/// assert_eq!(a.shape(), &[3]);
/// assert_eq!(a.to_float::<f32>().to_vec(), vec![1.0, 2.0, 3.0]);
/// ```
#[derive(Clone, Debug)]
pub enum AnyTensor {
    /// IEEE half precision.
    F16(Tensor<half::f16>),
    /// bfloat16.
    BF16(Tensor<half::bf16>),
    /// Single precision.
    F32(Tensor<f32>),
    /// Double precision.
    F64(Tensor<f64>),
    /// 32-bit integers.
    I32(Tensor<i32>),
    /// 64-bit integers.
    I64(Tensor<i64>),
    /// Bytes.
    U8(Tensor<u8>),
    /// Signed bytes (int8 quantized weights).
    I8(Tensor<i8>),
    /// Booleans (one byte each, 0 or 1).
    Bool(Tensor<bool>),
    /// 8-bit floats `float8_e4m3fn` (`F8_E4M3`), as their bytes; read
    /// their values with [`to_float`](Self::to_float).
    F8E4M3(Tensor<u8>),
    /// 8-bit floats `float8_e5m2` (`F8_E5M2`), as their bytes.
    F8E5M2(Tensor<u8>),
}

/// Runs `$body` with `$t` bound to the inner tensor, whatever its type.
macro_rules! with_tensor {
    ($self:expr, $t:ident => $body:expr) => {
        match $self {
            AnyTensor::F16($t) => $body,
            AnyTensor::BF16($t) => $body,
            AnyTensor::F32($t) => $body,
            AnyTensor::F64($t) => $body,
            AnyTensor::I32($t) => $body,
            AnyTensor::I64($t) => $body,
            AnyTensor::U8($t) => $body,
            AnyTensor::I8($t) => $body,
            AnyTensor::Bool($t) => $body,
            AnyTensor::F8E4M3($t) => $body,
            AnyTensor::F8E5M2($t) => $body,
        }
    };
}

impl AnyTensor {
    /// The storage type.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<f64>::zeros(&[2]));
    /// assert_eq!(a.dtype(), forge::DType::F64);
    /// ```
    pub fn dtype(&self) -> DType {
        match self {
            AnyTensor::F8E4M3(_) => DType::F8E4M3,
            AnyTensor::F8E5M2(_) => DType::F8E5M2,
            _ => with_tensor!(self, t => t.dtype()),
        }
    }

    /// The shape.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<u8>::zeros(&[2, 5]));
    /// assert_eq!(a.shape(), &[2, 5]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        with_tensor!(self, t => t.shape())
    }

    /// The number of elements.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<u8>::zeros(&[2, 5]));
    /// assert_eq!(a.numel(), 10);
    /// ```
    pub fn numel(&self) -> usize {
        with_tensor!(self, t => t.numel())
    }

    /// The values converted to a float type (`f32` or `f64`), whatever the
    /// stored type: half types widen exactly, `bool` gives 0 and 1, integers
    /// round to nearest, 8-bit floats decode exactly
    /// ([`Fp8Format::decode`]). The result is an untracked tensor.
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<half::bf16>::from_vec(
    ///     vec![half::bf16::from_f32(1.5)], &[1]));
    /// assert_eq!(a.to_float::<f64>().to_vec(), vec![1.5]);
    /// let f8 = forge::io::AnyTensor::F8E4M3(forge::Tensor::from_vec(vec![0x38, 0xfe], &[2]));
    /// assert_eq!(f8.to_float::<f32>().to_vec(), vec![1.0, -448.0]);
    /// ```
    pub fn to_float<E: Float>(&self) -> Tensor<E> {
        if let (AnyTensor::F16(t), DType::F32) = (self, E::DTYPE) {
            // f16 to f32 through the CPU's conversion instructions (F16C)
            let mut out = vec![0f32; t.numel()];
            crate::cpu::f16c::f16_to_f32(t.as_slice(), &mut out);
            let wide = Tensor::<f32>::from_vec(out, t.shape());
            if let Some(w) = (&wide as &dyn Any).downcast_ref::<Tensor<E>>() {
                return w.clone();
            }
        }
        let decode = |format: Fp8Format, t: &Tensor<u8>| {
            let v = t
                .to_vec()
                .iter()
                .map(|&b| E::from_f64(f64::from(format.decode(b))))
                .collect();
            Tensor::from_vec(v, t.shape())
        };
        match self {
            AnyTensor::F8E4M3(t) => decode(Fp8Format::E4M3, t),
            AnyTensor::F8E5M2(t) => decode(Fp8Format::E5M2, t),
            _ => with_tensor!(self, t => t.cast::<E>()),
        }
    }

    /// The inner tensor if it is stored as `E` exactly, `None` otherwise
    /// (8-bit floats are their bytes: `get::<u8>`).
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<i32>::from_vec(vec![7], &[1]));
    /// assert_eq!(a.get::<i32>().unwrap().to_vec(), vec![7]);
    /// assert!(a.get::<f32>().is_none());
    /// ```
    pub fn get<E: Element>(&self) -> Option<Tensor<E>> {
        let any: &dyn Any = with_tensor!(self, t => t);
        any.downcast_ref::<Tensor<E>>().cloned()
    }

    /// The raw little-endian bytes, as stored in a safetensors file (a
    /// copy; the writer borrows them from the storage instead).
    ///
    /// ```
    /// let a = forge::io::AnyTensor::from(forge::Tensor::<i32>::from_vec(vec![1, -1], &[2]));
    /// assert_eq!(a.to_le_bytes(), vec![1, 0, 0, 0, 255, 255, 255, 255]);
    /// ```
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.le_bytes().into_owned()
    }

    /// The stored bytes: borrowed from the tensor's storage on a
    /// little-endian machine, converted on a big-endian one.
    pub(super) fn le_bytes(&self) -> Cow<'_, [u8]> {
        with_tensor!(self, t => LeBytes::le_bytes(t.as_slice()))
    }

    /// Reads a tensor of `dtype` and `shape` (whose byte size the caller
    /// has checked): `fill` puts the stored bytes into the buffer it is
    /// given (the new tensor's own storage on a little-endian machine, so
    /// the bytes are copied once), then `check` sees them.
    pub(super) fn read(
        name: &str,
        dtype: DType,
        shape: &[usize],
        fill: &mut dyn FnMut(&mut [u8]) -> Result<()>,
        check: &dyn Fn(&[u8]) -> Result<()>,
    ) -> Result<AnyTensor> {
        fn rd<E: LeBytes>(
            name: &str,
            shape: &[usize],
            fill: &mut dyn FnMut(&mut [u8]) -> Result<()>,
            check: &dyn Fn(&[u8]) -> Result<()>,
        ) -> Result<Tensor<E>> {
            let n = shape.iter().product();
            let data = E::read_le(n, fill, check)?.ok_or_else(|| {
                ForgeError::format(
                    "safetensors",
                    format!("tensor '{name}': invalid {} value", E::DTYPE.name()),
                )
            })?;
            Ok(Tensor::from_vec(data, shape))
        }
        Ok(match dtype {
            DType::F16 => AnyTensor::F16(rd(name, shape, fill, check)?),
            DType::BF16 => AnyTensor::BF16(rd(name, shape, fill, check)?),
            DType::F32 => AnyTensor::F32(rd(name, shape, fill, check)?),
            DType::F64 => AnyTensor::F64(rd(name, shape, fill, check)?),
            DType::I32 => AnyTensor::I32(rd(name, shape, fill, check)?),
            DType::I64 => AnyTensor::I64(rd(name, shape, fill, check)?),
            DType::U8 => AnyTensor::U8(rd(name, shape, fill, check)?),
            DType::I8 => AnyTensor::I8(rd(name, shape, fill, check)?),
            DType::Bool => AnyTensor::Bool(rd(name, shape, fill, check)?),
            DType::F8E4M3 => AnyTensor::F8E4M3(rd(name, shape, fill, check)?),
            DType::F8E5M2 => AnyTensor::F8E5M2(rd(name, shape, fill, check)?),
        })
    }
}

/// Bit-exact equality: same type, same shape, same bytes (so two NaNs with
/// the same payload are equal, and `0.0 != -0.0`).
impl PartialEq for AnyTensor {
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype()
            && self.shape() == other.shape()
            && self.le_bytes() == other.le_bytes()
    }
}

macro_rules! from_tensor {
    ($($t:ty => $v:ident),*) => {$(
        impl From<Tensor<$t>> for AnyTensor {
            fn from(t: Tensor<$t>) -> Self {
                AnyTensor::$v(t)
            }
        }
    )*};
}
from_tensor!(half::f16 => F16, half::bf16 => BF16, f32 => F32, f64 => F64,
    i32 => I32, i64 => I64, u8 => U8, i8 => I8, bool => Bool);

/// The little-endian encoding of a slice of elements.
trait LeBytes: Element {
    /// The bytes of `values` as the file stores them.
    fn le_bytes(values: &[Self]) -> Cow<'_, [u8]>;
    /// Reads `n` values: `fill` writes their stored bytes, `check` sees
    /// them; `Ok(None)` for an invalid value.
    fn read_le(
        n: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<()>,
        check: &dyn Fn(&[u8]) -> Result<()>,
    ) -> Result<Option<Vec<Self>>>;
}

/// Types every bit pattern of which is a value: on a little-endian machine
/// the file's bytes are the memory's, viewed by `bytemuck` (whose traits
/// check at compile time that the views are sound).
macro_rules! plain_le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            fn le_bytes(values: &[Self]) -> Cow<'_, [u8]> {
                if cfg!(target_endian = "little") {
                    Cow::Borrowed(bytemuck::cast_slice(values))
                } else {
                    Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect())
                }
            }
            fn read_le(
                n: usize,
                fill: &mut dyn FnMut(&mut [u8]) -> Result<()>,
                check: &dyn Fn(&[u8]) -> Result<()>,
            ) -> Result<Option<Vec<Self>>> {
                const SIZE: usize = std::mem::size_of::<$t>();
                if cfg!(target_endian = "little") {
                    let mut v = bytemuck::zeroed_vec::<$t>(n);
                    fill(bytemuck::cast_slice_mut(&mut v))?;
                    check(bytemuck::cast_slice(&v))?;
                    Ok(Some(v))
                } else {
                    let mut b = vec![0u8; n * SIZE];
                    fill(&mut b)?;
                    check(&b)?;
                    Ok(Some(
                        b.chunks_exact(SIZE)
                            .map(|c| <$t>::from_le_bytes(c.try_into().expect("SIZE bytes")))
                            .collect(),
                    ))
                }
            }
        }
    )*};
}
plain_le_bytes!(half::f16, half::bf16, f32, f64, i32, i64, u8, i8);

/// A `bool` is one byte, 0 or 1: written as a view, read with a check.
impl LeBytes for bool {
    fn le_bytes(values: &[Self]) -> Cow<'_, [u8]> {
        Cow::Borrowed(bytemuck::cast_slice(values))
    }
    fn read_le(
        n: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<()>,
        check: &dyn Fn(&[u8]) -> Result<()>,
    ) -> Result<Option<Vec<Self>>> {
        let mut b = vec![0u8; n];
        fill(&mut b)?;
        check(&b)?;
        Ok(b.iter()
            .map(|&b| match b {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            })
            .collect())
    }
}

//! The safetensors JSON header: its limits, forge's strict reading of it
//! (with `serde_json`, in one pass) and its writing.
//!
//! The reading refuses what a reader into hash maps would let through: two
//! entries with the same name (or two fields with the same key), dtypes
//! forge does not store, shapes of more than [`MAX_RANK`] dimensions, with
//! a message that names the tensor and the field.

use crate::tensor::DType;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;

/// The largest JSON header accepted, in bytes (the reference implementation
/// uses the same 100 MB cap).
///
/// ```
/// assert_eq!(forge::io::MAX_HEADER_BYTES, 100_000_000);
/// ```
pub const MAX_HEADER_BYTES: usize = 100_000_000;

/// The most dimensions a tensor may have (PyTorch's limit too).
///
/// ```
/// assert_eq!(forge::io::MAX_RANK, 64);
/// ```
pub const MAX_RANK: usize = 64;

/// The reserved header key holding the string metadata.
pub(super) const METADATA_KEY: &str = "__metadata__";

/// One header entry, before it is checked against the data.
#[derive(Debug)]
pub(super) struct Entry {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub start: usize,
    pub end: usize,
}

/// A parsed header: the tensor entries by name and the `__metadata__` strings.
pub(super) struct Header {
    pub entries: BTreeMap<String, Entry>,
    pub metadata: BTreeMap<String, String>,
}

/// Parses the header text; the error is a message without the file name.
pub(super) fn parse_header(text: &str) -> Result<Header, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let header = de.deserialize_map(HeaderVisitor).map_err(|e| {
        if e.is_eof() {
            format!("the header JSON ends early: {e}")
        } else {
            e.to_string()
        }
    })?;
    de.end()
        .map_err(|e| format!("text after the header JSON object: {e}"))?;
    Ok(header)
}

/// The dtype a safetensors name stands for, if forge stores it.
fn dtype_from_name(name: &str) -> Option<DType> {
    Some(match name {
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "F32" => DType::F32,
        "F64" => DType::F64,
        "I32" => DType::I32,
        "I64" => DType::I64,
        "U8" => DType::U8,
        "I8" => DType::I8,
        "BOOL" => DType::Bool,
        "F8_E4M3" => DType::F8E4M3,
        "F8_E5M2" => DType::F8E5M2,
        _ => return None,
    })
}

struct HeaderVisitor;

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Header;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("'{' opening the header object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
        let mut entries = BTreeMap::new();
        let mut metadata = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == METADATA_KEY {
                if metadata.is_some() {
                    return Err(de::Error::custom("duplicate __metadata__"));
                }
                metadata = Some(map.next_value_seed(MetadataSeed)?);
            } else {
                if entries.contains_key(&key) {
                    return Err(de::Error::custom(format!("duplicate tensor name '{key}'")));
                }
                let entry = map.next_value_seed(EntrySeed { name: &key })?;
                entries.insert(key, entry);
            }
        }
        Ok(Header {
            entries,
            metadata: metadata.unwrap_or_default(),
        })
    }
}

/// The `__metadata__` object: string keys, string values, no duplicates.
struct MetadataSeed;

impl<'de> DeserializeSeed<'de> for MetadataSeed {
    type Value = BTreeMap<String, String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetadataSeed {
    type Value = BTreeMap<String, String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of strings for __metadata__")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut m = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            let serde_json::Value::String(v) = map.next_value()? else {
                return Err(de::Error::custom(format!("metadata '{k}' is not a string")));
            };
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("duplicate metadata key '{k}'")));
            }
            m.insert(k, v);
        }
        Ok(m)
    }
}

/// One tensor's `{"dtype", "shape", "data_offsets"}`; unknown fields are
/// skipped, a repeated field is an error.
struct EntrySeed<'a> {
    name: &'a str,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_> {
    type Value = Entry;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_> {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "'{{' opening the entry of tensor '{}'", self.name)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let name = self.name;
        let fail = |m: String| de::Error::custom(format!("tensor '{name}': {m}"));
        let mut dtype = None;
        let mut shape = None;
        let mut offsets = None;
        while let Some(key) = map.next_key::<String>()? {
            let repeated = match key.as_str() {
                "dtype" => {
                    let s: String = map.next_value()?;
                    let d = dtype_from_name(&s)
                        .ok_or_else(|| fail(format!("unsupported dtype '{s}'")))?;
                    dtype.replace(d).is_some()
                }
                "shape" => {
                    let dims = map.next_value_seed(Dims {
                        name,
                        max: MAX_RANK,
                    })?;
                    shape.replace(dims).is_some()
                }
                "data_offsets" => {
                    let v = map.next_value_seed(Dims { name, max: 2 })?;
                    let [a, b] = v[..] else {
                        return Err(fail("data_offsets needs 2 values".into()));
                    };
                    offsets.replace((a, b)).is_some()
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    false
                }
            };
            if repeated {
                return Err(fail(format!("duplicate field '{key}'")));
            }
        }
        let missing = |f: &str| fail(format!("missing field '{f}'"));
        let (start, end) = offsets.ok_or_else(|| missing("data_offsets"))?;
        Ok(Entry {
            dtype: dtype.ok_or_else(|| missing("dtype"))?,
            shape: shape.ok_or_else(|| missing("shape"))?,
            start,
            end,
        })
    }
}

/// An array of at most `max` non-negative integers (a shape, or the two
/// data offsets).
struct Dims<'a> {
    name: &'a str,
    max: usize,
}

impl<'de> DeserializeSeed<'de> for Dims<'_> {
    type Value = Vec<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<usize>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Dims<'_> {
    type Value = Vec<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of non-negative integers")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<usize>, A::Error> {
        let mut v = Vec::new();
        while let Some(Dim(d)) = seq.next_element()? {
            if v.len() == self.max {
                let what = if self.max == 2 {
                    "more than 2 data_offsets".to_string()
                } else {
                    format!("more than {} dimensions", self.max)
                };
                return Err(de::Error::custom(format!("tensor '{}': {what}", self.name)));
            }
            v.push(d);
        }
        Ok(v)
    }
}

/// A non-negative integer that fits a `usize`, with a message for each way a
/// JSON number can fail to be one.
struct Dim(usize);

impl<'de> de::Deserialize<'de> for Dim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dim, D::Error> {
        d.deserialize_u64(DimVisitor)
    }
}

struct DimVisitor;

impl Visitor<'_> for DimVisitor {
    type Value = Dim;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a non-negative integer")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dim, E> {
        usize::try_from(v)
            .map(Dim)
            .map_err(|_| E::custom(format!("integer {v} too large for this platform")))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dim, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(E::custom(format!(
                "negative integer {v} where a size or offset is expected"
            ))),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dim, E> {
        // serde_json reads integers beyond u64 as floats.
        if v.fract() == 0.0 && v >= 18_446_744_073_709_551_616.0 {
            Err(E::custom(format!("integer {v} is too large")))
        } else {
            Err(E::custom(format!(
                "{v} has a fraction or an exponent where an integer is expected"
            )))
        }
    }
}

/// The header text of a file holding `entries` (name, dtype, shape, data
/// offsets, in the order of the data) and `metadata`: `__metadata__`
/// first (omitted when empty), then the entries, as the reference crate
/// writes them; padded with spaces to a multiple of 8 bytes so that the
/// data that follows starts aligned.
pub(super) fn write_header<'a>(
    entries: impl Iterator<Item = (&'a str, DType, &'a [usize], usize, usize)>,
    metadata: &BTreeMap<String, String>,
) -> String {
    // A `String` is valid JSON text for serde_json, and serde_json never
    // fails on strings and integers written to a `Vec`.
    let json = |out: &mut Vec<u8>, s: &str| {
        serde_json::to_writer(out, s).expect("a string encodes as JSON");
    };
    let mut out = Vec::new();
    out.push(b'{');
    let mut first = true;
    if !metadata.is_empty() {
        json(&mut out, METADATA_KEY);
        out.extend_from_slice(b":{");
        for (i, (k, v)) in metadata.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json(&mut out, k);
            out.push(b':');
            json(&mut out, v);
        }
        out.push(b'}');
        first = false;
    }
    for (name, dtype, shape, start, end) in entries {
        if !first {
            out.push(b',');
        }
        first = false;
        json(&mut out, name);
        out.extend_from_slice(b":{\"dtype\":\"");
        out.extend_from_slice(dtype.name().as_bytes());
        out.extend_from_slice(b"\",\"shape\":[");
        for (i, d) in shape.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(d.to_string().as_bytes());
        }
        out.extend_from_slice(format!("],\"data_offsets\":[{start},{end}]}}").as_bytes());
    }
    out.push(b'}');
    while out.len() % 8 != 0 {
        out.push(b' ');
    }
    String::from_utf8(out).expect("JSON text is UTF-8")
}

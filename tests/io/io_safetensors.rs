//! The safetensors reader and writer: every PyTorch fixture read exactly as
//! the reference crate reads it, and malformed input (truncated, oversized
//! header, overlapping offsets, random bytes, bit flips) is an error or a
//! valid parse, never a panic.

use crate::common;

use common::fixture_path;
use forge::half;
use forge::io::{parse_safetensors, read_safetensors, serialize_safetensors, AnyTensor};
use forge::Tensor;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

fn all_fixtures(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            all_fixtures(&p, out);
        } else if p.extension().is_some_and(|x| x == "safetensors") {
            out.push(p);
        }
    }
}

#[test]
fn every_fixture_reads_like_the_reference_crate_and_round_trips() {
    let root = fixture_path("");
    let mut files = Vec::new();
    all_fixtures(&root, &mut files);
    files.sort();
    assert!(files.len() > 50, "only {} fixtures found", files.len());
    for path in files {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let ours = read_safetensors(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        // The reference crate's view of the same file, whatever the dtypes
        // (the fixtures hold F64/I64/U8, the layer-diff and hub files F32).
        let bytes = std::fs::read(&path).unwrap();
        let reference = safetensors::SafeTensors::deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{rel}: reference crate: {e}"));
        let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        let meta: BTreeMap<String, String> = header
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        assert_eq!(ours.metadata, meta, "{rel}: metadata");
        assert_eq!(ours.tensors.len(), reference.len(), "{rel}: tensor count");
        for (name, view) in reference.tensors() {
            let a = &ours.tensors[&name];
            assert_eq!(a.shape(), view.shape(), "{rel}: {name}: shape");
            assert_eq!(
                format!("{:?}", a.dtype()).to_uppercase(),
                format!("{:?}", view.dtype()).to_uppercase(),
                "{rel}: {name}: dtype"
            );
            assert_eq!(a.to_le_bytes(), view.data(), "{rel}: {name}: bytes");
        }
        let again = parse_safetensors(&serialize_safetensors(&ours.tensors, &ours.metadata))
            .unwrap_or_else(|e| panic!("{rel}: re-read: {e}"));
        assert_eq!(again, ours, "{rel}: round trip");
    }
}

/// A deterministic tensor of dtype number `d` (0..8) with values from `seed`.
fn make_tensor(d: u8, shape: &[usize], seed: u64) -> AnyTensor {
    let mut s = seed | 1;
    let mut next = move |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    match d % 8 {
        0 => Tensor::from_fn(shape, |i| half::f16::from_bits(next(i) as u16)).into(),
        1 => Tensor::from_fn(shape, |i| half::bf16::from_bits(next(i) as u16)).into(),
        2 => Tensor::from_fn(shape, |i| f32::from_bits(next(i) as u32)).into(),
        3 => Tensor::from_fn(shape, |i| f64::from_bits(next(i))).into(),
        4 => Tensor::from_fn(shape, |i| next(i) as i32).into(),
        5 => Tensor::from_fn(shape, |i| next(i) as i64).into(),
        6 => Tensor::from_fn(shape, |i| next(i) as u8).into(),
        _ => Tensor::from_fn(shape, |i| next(i) % 2 == 0).into(),
    }
}

fn valid_file() -> impl Strategy<Value = (BTreeMap<String, AnyTensor>, Vec<u8>)> {
    let tensor = (
        any::<u8>(),
        prop::collection::vec(0usize..5, 0..4),
        any::<u64>(),
    );
    let tensors = prop::collection::btree_map("[a-z.]{1,6}", tensor, 0..5);
    let meta = prop::collection::btree_map("[a-z_]{1,5}", "\\PC{0,8}", 0..3);
    (tensors, meta).prop_map(|(ts, meta)| {
        let ts: BTreeMap<String, AnyTensor> = ts
            .into_iter()
            .map(|(n, (d, shape, seed))| (n, make_tensor(d, &shape, seed)))
            .collect();
        let bytes = serialize_safetensors(&ts, &meta);
        (ts, bytes)
    })
}

/// If `bytes` parse, the result must be self-consistent: re-serializing it
/// and parsing again gives the same tensors and metadata.
fn err_or_valid(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(d) = parse_safetensors(bytes) {
        for t in d.tensors.values() {
            prop_assert_eq!(t.numel(), t.shape().iter().product::<usize>());
        }
        let again = parse_safetensors(&serialize_safetensors(&d.tensors, &d.metadata));
        prop_assert_eq!(again.ok(), Some(d));
    }
    Ok(())
}

/// JSON-like tokens, to reach deep into the header parser.
fn header_token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        " ",
        "\"t\"",
        "\"dtype\"",
        "\"shape\"",
        "\"data_offsets\"",
        "\"__metadata__\"",
        "\"F32\"",
        "\"U8\"",
        "\"BOOL\"",
        "\"F8\"",
        "0",
        "1",
        "4",
        "18446744073709551615",
        "99999999999999999999",
        "-1",
        "1.5",
        "1e3",
        "true",
        "null",
        "\"\\u0041\"",
        "\"\\ud800\"",
        "\"a\\\"b\"",
        "\u{e9}",
        "\"x",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn valid_files_round_trip((ts, bytes) in valid_file()) {
        let d = parse_safetensors(&bytes).unwrap();
        prop_assert_eq!(&d.tensors, &ts);
        prop_assert_eq!(serialize_safetensors(&d.tensors, &d.metadata), bytes);
    }

    #[test]
    fn truncated_files_are_errors((_, bytes) in valid_file(), cut in any::<prop::sample::Index>()) {
        let n = cut.index(bytes.len());
        prop_assert!(parse_safetensors(&bytes[..n]).is_err());
    }

    #[test]
    fn extended_files_are_errors((_, mut bytes) in valid_file(), extra in prop::collection::vec(any::<u8>(), 1..16)) {
        bytes.extend_from_slice(&extra);
        prop_assert!(parse_safetensors(&bytes).is_err());
    }

    #[test]
    fn oversized_header_lengths_are_errors((_, mut bytes) in valid_file(), more in 1u64..u64::MAX / 2) {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        let big = n.saturating_add(more);
        bytes[..8].copy_from_slice(&big.to_le_bytes());
        prop_assert!(parse_safetensors(&bytes).is_err());
    }

    #[test]
    fn overlapping_offsets_are_errors(len_a in 1usize..16, len_b in 1usize..16, shift in 0usize..16, gap in any::<bool>()) {
        // b starts inside a (overlap) or after a gap past a's end.
        let b_start = if gap { len_a + 1 + shift } else { shift % len_a };
        let header = format!(
            r#"{{"a":{{"dtype":"U8","shape":[{len_a}],"data_offsets":[0,{len_a}]}},"b":{{"dtype":"U8","shape":[{len_b}],"data_offsets":[{b_start},{}]}}}}"#,
            b_start + len_b
        );
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        let data_len = (len_a + len_b).max(b_start + len_b);
        bytes.resize(bytes.len() + data_len, 0);
        prop_assert!(parse_safetensors(&bytes).is_err());
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        err_or_valid(&bytes)?;
    }

    #[test]
    fn random_header_after_a_right_length_never_panics(
        header in prop::collection::vec(any::<u8>(), 0..128),
        data in prop::collection::vec(any::<u8>(), 0..32),
    ) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&data);
        err_or_valid(&bytes)?;
    }

    #[test]
    fn token_soup_headers_never_panic(
        tokens in prop::collection::vec(header_token(), 0..40),
        data in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let header = tokens.concat();
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&data);
        err_or_valid(&bytes)?;
    }

    #[test]
    fn bit_flips_are_errors_or_valid(
        (_, mut bytes) in valid_file(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        err_or_valid(&bytes)?;
    }
}

/// A writer that accepts `left` bytes, then fails.
struct FailAfter<'a> {
    inner: &'a mut dyn std::io::Write,
    left: usize,
}

impl std::io::Write for FailAfter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other("injected failure"));
        }
        let n = buf.len().min(self.left);
        self.left -= n;
        self.inner.write(&buf[..n])
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[test]
fn a_write_failing_part_way_leaves_the_previous_checkpoint_intact() {
    let dir = std::env::temp_dir().join(format!("forge-io-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.safetensors");
    let mut old = BTreeMap::new();
    old.insert("w".to_string(), make_tensor(2, &[3, 4], 1));
    old.insert("step".to_string(), make_tensor(5, &[], 2));
    let mut meta = BTreeMap::new();
    meta.insert("epoch".to_string(), "1".to_string());
    forge::io::write_safetensors(&path, &old, &meta).unwrap();
    let old_bytes = std::fs::read(&path).unwrap();

    let mut new = BTreeMap::new();
    new.insert("w".to_string(), make_tensor(2, &[300, 40], 3));
    let new_bytes = serialize_safetensors(&new, &BTreeMap::new());
    for fail_at in [0, 1, 8, 100, 8191, 8192, 20_000, new_bytes.len() - 1] {
        let r = forge::io::atomic_write_with(&path, |w| {
            FailAfter {
                inner: w,
                left: fail_at,
            }
            .write_all(&new_bytes)
        });
        assert!(r.is_err(), "failing after {fail_at} bytes must be an error");
        assert_eq!(std::fs::read(&path).unwrap(), old_bytes, "after {fail_at}");
        let back = read_safetensors(&path).unwrap();
        assert_eq!((back.tensors, back.metadata), (old.clone(), meta.clone()));
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("model.safetensors")],
            "temp file left"
        );
    }
    // Without the failure, the new file replaces the old one.
    forge::io::atomic_write(&path, &new_bytes).unwrap();
    assert_eq!(read_safetensors(&path).unwrap().tensors, new);
    std::fs::remove_dir_all(&dir).unwrap();
}

use super::header::METADATA_KEY;
use super::*;
use crate::error::ForgeError;
use crate::tensor::Tensor;
use std::collections::BTreeMap;

/// A file from a literal header and data.
fn file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

/// The message of the format error `bytes` give, checking that reading
/// them from a file (header first, then tensor by tensor) gives the same
/// one, with the file's path in front.
fn err(bytes: &[u8]) -> String {
    let m = match parse_safetensors(bytes) {
        Err(ForgeError::Format { origin, detail, .. }) if origin.is_empty() => detail,
        Err(ForgeError::Format { origin, detail, .. }) => format!("{origin}: {detail}"),
        other => panic!("expected a format error, got {other:?}"),
    };
    let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("forge-st-err-{}-{n}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let from_file = read_safetensors(&path);
    std::fs::remove_file(&path).unwrap();
    match from_file {
        Err(ForgeError::Format { origin, detail, .. }) => {
            let p = path.display().to_string();
            let m2 = match origin.strip_prefix(&p).expect("the path first") {
                "" => detail,
                inner => format!("{}: {detail}", inner.strip_prefix(": ").unwrap()),
            };
            assert_eq!(m2, m, "file and memory disagree");
        }
        other => panic!("expected a format error from the file, got {other:?}"),
    }
    m
}

/// Numbers the scratch files of [`err`].
static FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn all_dtypes() -> BTreeMap<String, AnyTensor> {
    use half::{bf16, f16};
    let mut t = BTreeMap::new();
    let mut put = |n: &str, a: AnyTensor| {
        t.insert(n.to_string(), a);
    };
    let f32s = vec![
        1.5f32,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::MIN_POSITIVE / 2.0,
        3.0,
    ];
    put(
        "f16",
        Tensor::from_vec(f32s.iter().map(|&x| f16::from_f32(x)).collect(), &[2, 3]).into(),
    );
    put(
        "bf16",
        Tensor::from_vec(f32s.iter().map(|&x| bf16::from_f32(x)).collect(), &[3, 2]).into(),
    );
    put("f32", Tensor::from_vec(f32s.clone(), &[6]).into());
    put(
        "f32_nan_payload",
        Tensor::from_vec(vec![f32::from_bits(0x7fc0_1234)], &[1]).into(),
    );
    put(
        "f64",
        Tensor::from_vec(vec![0.1, -1e300, f64::NEG_INFINITY, 5e-324], &[2, 1, 2]).into(),
    );
    put(
        "i32",
        Tensor::from_vec(vec![i32::MIN, -1, 0, i32::MAX], &[4]).into(),
    );
    put(
        "i64",
        Tensor::from_vec(vec![i64::MIN, 42, i64::MAX], &[3]).into(),
    );
    put("u8", Tensor::from_vec(vec![0u8, 255, 7], &[3]).into());
    put(
        "bool",
        Tensor::from_vec(vec![true, false, true], &[3, 1]).into(),
    );
    put("scalar", Tensor::<f32>::scalar(2.0).into());
    put("empty", Tensor::<f64>::zeros(&[0, 4]).into());
    put(
        "name with \"quotes\" and é",
        Tensor::<u8>::zeros(&[1]).into(),
    );
    t
}

#[test]
fn round_trip_is_bit_exact_for_every_dtype() {
    let t = all_dtypes();
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    meta.insert("note".to_string(), "line\nbreak \\ \u{1}".to_string());
    let bytes = serialize_safetensors(&t, &meta);
    let back = parse_safetensors(&bytes).unwrap();
    assert_eq!(back.metadata, meta);
    assert_eq!(back.tensors.len(), t.len());
    for (name, a) in &t {
        let b = &back.tensors[name];
        assert_eq!(a.dtype(), b.dtype(), "{name}");
        assert_eq!(a.shape(), b.shape(), "{name}");
        assert_eq!(a.to_le_bytes(), b.to_le_bytes(), "{name}");
    }
    assert_eq!(serialize_safetensors(&back.tensors, &back.metadata), bytes);
}

#[test]
fn layout_is_aligned_and_the_reference_crate_agrees() {
    let t = all_dtypes();
    let bytes = serialize_safetensors(&t, &BTreeMap::new());
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert_eq!(n % 8, 0);
    let st = ::safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.len(), t.len());
    for (name, view) in st.tensors() {
        let a = &t[&name];
        assert_eq!(view.shape(), a.shape(), "{name}");
        assert_eq!(view.data(), &a.to_le_bytes()[..], "{name}");
        let offset = view.data().as_ptr() as usize - bytes.as_ptr() as usize - 8 - n;
        assert_eq!(offset % a.dtype().size_in_bytes(), 0, "{name} misaligned");
    }
}

#[test]
fn to_float_and_get() {
    let t = all_dtypes();
    assert_eq!(
        t["i64"].to_float::<f64>().to_vec(),
        vec![i64::MIN as f64, 42.0, i64::MAX as f64]
    );
    assert_eq!(t["bool"].to_float::<f32>().to_vec(), vec![1.0, 0.0, 1.0]);
    assert_eq!(t["u8"].to_float::<f32>().to_vec(), vec![0.0, 255.0, 7.0]);
    assert_eq!(t["f16"].to_float::<f32>().as_slice()[0], 1.5);
    assert_eq!(t["bf16"].to_float::<f64>().shape(), &[3, 2]);
    assert!(t["f64"].get::<f64>().is_some());
    assert!(t["f64"].get::<f32>().is_none());
    assert_eq!(t["u8"].get::<u8>().unwrap().to_vec(), vec![0, 255, 7]);
}

#[test]
fn empty_file_and_metadata_only() {
    let d = parse_safetensors(&file("{}", &[])).unwrap();
    assert!(d.tensors.is_empty() && d.metadata.is_empty());
    let d = parse_safetensors(&file(r#" {"__metadata__":{"a":"b"}}  "#, &[])).unwrap();
    assert_eq!(d.metadata["a"], "b");
    assert_eq!(
        serialize_safetensors(&BTreeMap::new(), &BTreeMap::new()).len(),
        16
    );
}

#[test]
fn header_length_errors() {
    assert!(err(&[1, 2, 3]).contains("8-byte header length"));
    let mut b = u64::MAX.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    assert!(err(&b).contains("limit"));
    let mut b = 100u64.to_le_bytes().to_vec();
    b.extend_from_slice(b"{}");
    assert!(err(&b).contains("exceeds"));
    let mut b = 2u64.to_le_bytes().to_vec();
    b.extend_from_slice(&[0xff, 0xfe]);
    assert!(err(&b).contains("UTF-8"));
}

#[test]
fn header_content_errors() {
    let entry = |dtype: &str, shape: &str, offs: &str| {
        format!(r#"{{"t":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offs}}}}}"#)
    };
    let cases: Vec<(String, Vec<u8>, &str)> = vec![
        // complex64: in the format, not a forge dtype
        (entry("C64", "[1]", "[0,8]"), vec![0; 8], "unsupported dtype"),
        (entry("F32", "[1]", "[0,4]"), vec![0; 3], "cover"),
        (entry("F32", "[1]", "[0,4]"), vec![0; 5], "cover"),
        (entry("F32", "[2]", "[0,4]"), vec![0; 4], "do not hold"),
        (entry("F32", "[1]", "[4,0]"), vec![0; 4], "do not hold"),
        (entry("F32", "[-1]", "[0,4]"), vec![0; 4], "integer"),
        (entry("F32", "[1.0]", "[0,4]"), vec![0; 4], "fraction"),
        (entry("F32", "[1]", "[0]"), vec![0; 4], "2 values"),
        (entry("F32", "[1]", "[0,4,8]"), vec![0; 4], "more than 2"),
        (
            entry("U8", "[4294967296,4294967296,4294967296]", "[0,0]"),
            vec![],
            "overflows",
        ),
        (entry("F64", "[2305843009213693952]", "[0,0]"), vec![], "overflows"),
        (entry("U8", &format!("[{}1]", "1,".repeat(64)), "[0,1]"), vec![0], "more than 64"),
        (entry("U8", "[1]", "[0,99999999999999999999]"), vec![0], "too large"),
        (entry("BOOL", "[2]", "[0,2]"), vec![1, 2], "invalid BOOL"),
        (r#"{"t":{"dtype":"F32","shape":[1]}}"#.into(), vec![0; 4], "missing field 'data_offsets'"),
        (
            r#"{"t":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#.into(),
            vec![0],
            "duplicate field",
        ),
        (
            r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#.into(),
            vec![0],
            "duplicate tensor",
        ),
        (
            r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}"#.into(),
            vec![0; 3],
            "overlaps",
        ),
        (
            r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}"#.into(),
            vec![0; 3],
            "gap",
        ),
        (r#"{"__metadata__":{"a":1}}"#.into(), vec![], "not a string"),
        (r#"{"__metadata__":{},"__metadata__":{}}"#.into(), vec![], "duplicate __metadata__"),
        (r#"{"__metadata__":{"a":"b","a":"c"}}"#.into(), vec![], "duplicate metadata"),
        (r#"{} {}"#.into(), vec![], "after the header"),
        (r#"[]"#.into(), vec![], "expected '{'"),
        (r#"{"t":"#.into(), vec![], "ends early"),
        (r#"{"t":[]}"#.into(), vec![], "expected '{'"),
        (r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}"#.into(), vec![0], "ends early"),
        (r#"{"t":{"dtype":"U8" "shape":[1]}}"#.into(), vec![0], "expected `,`"),
    ];
    for (header, data, want) in cases {
        let m = err(&file(&header, &data));
        assert!(m.contains(want), "{header}: got {m:?}, wanted {want:?}");
    }
}

#[test]
fn unknown_fields_are_skipped() {
    let h = r#"{"t":{"dtype":"U8","extra":[{"x":null}],"shape":[2],"data_offsets":[0,2]}}"#;
    let d = parse_safetensors(&file(h, &[3, 4])).unwrap();
    assert_eq!(d.tensors["t"].get::<u8>().unwrap().to_vec(), vec![3, 4]);
}

#[test]
fn write_refuses_the_reserved_name() {
    let mut t = BTreeMap::new();
    t.insert(
        METADATA_KEY.to_string(),
        AnyTensor::from(Tensor::<u8>::zeros(&[1])),
    );
    let path = std::env::temp_dir().join("forge-never-written.safetensors");
    assert!(matches!(
        write_safetensors(&path, &t, &BTreeMap::new()),
        Err(ForgeError::Invalid { ref name, .. }) if name == "tensor name"
    ));
    assert!(!path.exists());
}

#[test]
#[should_panic(expected = "may not be named __metadata__")]
fn serialize_panics_on_the_reserved_name() {
    let mut t = BTreeMap::new();
    t.insert(
        METADATA_KEY.to_string(),
        AnyTensor::from(Tensor::<u8>::zeros(&[1])),
    );
    serialize_safetensors(&t, &BTreeMap::new());
}

#[test]
fn a_text_file_is_not_a_safetensors_file() {
    let path = std::env::temp_dir().join(format!("forge-not-st-{}.txt", std::process::id()));
    std::fs::write(&path, "hello, this is a text file\n").unwrap();
    let e = read_safetensors(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(e.contains("not a safetensors file"), "{e}");
    assert!(e.contains(&path.display().to_string()), "{e}");
    for bytes in [
        &b"short"[..],
        &file("[1, 2]", &[])[..],
        &file("\"x\"", &[])[..],
    ] {
        let m = err(bytes);
        assert!(m.starts_with("not a safetensors file: "), "{m}");
    }
}

#[test]
fn metadata_is_written_in_key_order_whatever_the_map() {
    let t = all_dtypes();
    let meta: BTreeMap<String, String> = (0..20)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    let first = serialize_safetensors(&t, &meta);
    for _ in 0..5 {
        let again: BTreeMap<String, String> = meta.clone().into_iter().rev().collect();
        assert_eq!(serialize_safetensors(&t, &again), first);
    }
    let back = parse_safetensors(&first).unwrap();
    assert_eq!((back.tensors, back.metadata), (t, meta));
}

#[test]
fn reading_a_file_equals_parsing_its_bytes() {
    let t = all_dtypes();
    let meta = BTreeMap::from([("k".to_string(), "v".to_string())]);
    let path = std::env::temp_dir().join(format!("forge-st-read-{}", std::process::id()));
    write_safetensors(&path, &t, &meta).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes, serialize_safetensors(&t, &meta));
    let a = read_safetensors(&path).unwrap();
    assert_eq!(a, parse_safetensors(&bytes).unwrap());
    assert_eq!((a.tensors, a.metadata), (t, meta));
    // A file cut short: the layout check finds it before any data is read.
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let e = read_safetensors(&path).unwrap_err().to_string();
    assert!(e.contains("cover"), "{e}");
    std::fs::remove_file(&path).unwrap();
}

/// The writer's layout is the reference crate's: same order of the data,
/// same header entries; only the metadata (the checksums) is added.
#[test]
fn the_layout_is_the_reference_crates() {
    let t = all_dtypes();
    let ours = serialize_safetensors(&t, &BTreeMap::new());
    let st = ::safetensors::SafeTensors::deserialize(&ours).unwrap();
    let views = st.tensors();
    let theirs = ::safetensors::serialize(views.iter().map(|(n, v)| (n, v.clone())), None).unwrap();
    let n = |b: &[u8]| 8 + u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    assert_eq!(&ours[n(&ours)..], &theirs[n(&theirs)..], "the data");
    let (_, a) = ::safetensors::SafeTensors::read_metadata(&ours).unwrap();
    let (_, b) = ::safetensors::SafeTensors::read_metadata(&theirs).unwrap();
    for (name, info) in a.tensors() {
        let other = b.info(&name).unwrap();
        assert_eq!(info.data_offsets, other.data_offsets, "{name}");
        assert_eq!(info.shape, other.shape, "{name}");
    }
}

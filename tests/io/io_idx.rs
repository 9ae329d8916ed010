//! The IDX reader on the bundled MNIST files, and on truncated, corrupt,
//! trailing-garbage, random and gzip-bomb input: errors (or a consistent
//! parse), never a panic or an unbounded allocation.

use flate2::write::GzEncoder;
use flate2::Compression;
use forge::io::{parse_idx, parse_idx_limited, read_idx, IdxArray};
use forge::ForgeError;
use proptest::prelude::*;
use std::io::{Read, Write};
use std::path::PathBuf;

fn mnist(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/mnist")
        .join(name)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn bundled_mnist_files_have_the_documented_counts() {
    for (split, n) in [("train", 8004), ("test", 1996)] {
        let images = read_idx(mnist(&format!("{split}-images-idx3-ubyte.gz"))).unwrap();
        let labels = read_idx(mnist(&format!("{split}-labels-idx1-ubyte.gz"))).unwrap();
        assert_eq!(images.dims, vec![n, 28, 28], "{split} images");
        assert_eq!(images.data.len(), n * 784);
        assert_eq!(labels.dims, vec![n], "{split} labels");
        assert!(labels.data.iter().all(|&l| l < 10), "{split}: label >= 10");
        let mut counts = [0usize; 10];
        labels.data.iter().for_each(|&l| counts[l as usize] += 1);
        assert!(
            counts.iter().all(|&c| c > n / 20),
            "{split}: digit counts {counts:?}"
        );
        // Real digits: mostly black background, some full-white ink, and
        // every image has ink.
        assert_eq!(images.data.iter().copied().max(), Some(255));
        let zeros = images.data.iter().filter(|&&p| p == 0).count();
        assert!(
            zeros * 10 > images.data.len() * 7,
            "{split}: {zeros} zero pixels"
        );
        assert!(images
            .data
            .chunks(784)
            .all(|img| img.iter().any(|&p| p > 128)));
        // The plain (decompressed) file parses to the same array.
        let raw = gunzip(&std::fs::read(mnist(&format!("{split}-images-idx3-ubyte.gz"))).unwrap());
        assert_eq!(parse_idx(&raw).unwrap(), images);
        assert_eq!(images.to_bytes(), raw);
    }
}

fn format_msg(bytes: &[u8]) -> String {
    match parse_idx(bytes) {
        Err(e @ ForgeError::Format { .. }) => e.to_string(),
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn refusals_name_the_problem() {
    let ok = IdxArray {
        dims: vec![2, 3],
        data: vec![1, 2, 3, 4, 5, 6],
    }
    .to_bytes();
    assert!(format_msg(&ok[..ok.len() - 1]).contains("truncated"));
    assert!(format_msg(&ok[..6]).contains("truncated header"));
    assert!(format_msg(&[]).contains("magic"));
    let mut long = ok.clone();
    long.push(0);
    assert!(format_msg(&long).contains("trailing garbage"));
    let mut bad = ok.clone();
    bad[1] = 3;
    assert!(format_msg(&bad).contains("wrong magic"));
    let mut float = ok.clone();
    float[2] = 0x0D;
    assert!(format_msg(&float).contains("0x0d (f32) is not supported"));
    // A count the file cannot hold: refused without reading further.
    let huge = [
        0, 0, 8, 3, 255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 2,
    ];
    let m = format_msg(&huge);
    assert!(m.contains("limit") || m.contains("overflows"), "{m}");
    // Gzip: corrupt, truncated, trailing garbage after the stream.
    let gz = gzip(&ok);
    assert_eq!(parse_idx(&gz).unwrap().data, vec![1, 2, 3, 4, 5, 6]);
    assert!(format_msg(&gz[..gz.len() - 4]).contains("gzip"));
    let mut crc = gz.clone();
    let n = crc.len();
    crc[n - 6] ^= 0xff; // the CRC-32 in the trailer
    assert!(format_msg(&crc).contains("corrupt gzip"));
    let mut tail = gz.clone();
    tail.extend_from_slice(b"garbage!");
    assert!(parse_idx(&tail).is_err());
    assert!(format_msg(&gzip(&long)).contains("trailing garbage"));
    // The path is named in read errors.
    let e = read_idx("/no/such/mnist.gz").unwrap_err();
    assert!(e.to_string().contains("/no/such/mnist.gz"));
}

#[test]
fn a_gzip_bomb_is_refused_without_decompressing_it() {
    // 64 MiB of zeros announced honestly, compressed to ~64 KiB.
    let n = 64usize << 20;
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(&[0, 0, 8, 1]).unwrap();
    e.write_all(&(n as u32).to_be_bytes()).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        e.write_all(&zeros).unwrap();
    }
    let bomb = e.finish().unwrap();
    assert!(bomb.len() < 1 << 20);
    let m = match parse_idx_limited(&bomb, 1 << 20) {
        Err(e @ ForgeError::Format { .. }) => e.to_string(),
        other => panic!("expected a format error, got {:?}", other.map(|a| a.dims)),
    };
    assert!(m.contains("limit"), "{m}");
    // A header announcing little, followed by the same 64 MiB: reading
    // stops one byte past the announced size.
    let mut e = GzEncoder::new(Vec::new(), Compression::best());
    e.write_all(&[0, 0, 8, 1, 0, 0, 0, 16]).unwrap();
    for _ in 0..64 {
        e.write_all(&zeros).unwrap();
    }
    assert!(format_msg(&e.finish().unwrap()).contains("trailing garbage"));
}

fn small_idx() -> impl Strategy<Value = (IdxArray, bool)> {
    (
        prop::collection::vec(0usize..6, 0..4),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(|(dims, seed, gz)| {
            let n: usize = dims.iter().product();
            let data = (0..n as u64)
                .map(|i| (seed.wrapping_mul(i + 7) >> 13) as u8)
                .collect();
            (IdxArray { dims, data }, gz)
        })
}

fn encode(a: &IdxArray, gz: bool) -> Vec<u8> {
    let plain = a.to_bytes();
    if gz {
        gzip(&plain)
    } else {
        plain
    }
}

/// If `bytes` parse, the array is consistent and re-encodes to a file that
/// parses to the same array.
fn err_or_valid(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(a) = parse_idx_limited(bytes, 1 << 16) {
        prop_assert_eq!(a.data.len(), a.dims.iter().product::<usize>());
        prop_assert_eq!(parse_idx(&a.to_bytes()).unwrap(), a);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn valid_files_round_trip((a, gz) in small_idx()) {
        prop_assert_eq!(parse_idx(&encode(&a, gz)).unwrap(), a);
    }

    #[test]
    fn truncated_files_are_errors((a, gz) in small_idx(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&a, gz);
        let n = cut.index(bytes.len());
        prop_assert!(parse_idx(&bytes[..n]).is_err());
    }

    #[test]
    fn trailing_garbage_is_an_error((a, gz) in small_idx(), extra in prop::collection::vec(any::<u8>(), 1..8)) {
        let mut plain = a.to_bytes();
        plain.extend_from_slice(&extra);
        let bytes = if gz { gzip(&plain) } else { plain };
        prop_assert!(parse_idx(&bytes).is_err());
    }

    #[test]
    fn corrupt_files_are_errors_or_valid(
        (a, gz) in small_idx(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4),
    ) {
        let mut bytes = encode(&a, gz);
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        err_or_valid(&bytes)?;
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        err_or_valid(&bytes)?;
    }

    #[test]
    fn random_headers_never_panic(rank in 0u8..6, rest in prop::collection::vec(any::<u8>(), 0..64), gz in any::<bool>()) {
        let mut plain = vec![0, 0, 8, rank];
        plain.extend_from_slice(&rest);
        let bytes = if gz { gzip(&plain) } else { plain };
        err_or_valid(&bytes)?;
    }

    #[test]
    fn random_bytes_behind_the_gzip_magic_never_panic(rest in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut bytes = vec![0x1f, 0x8b, 8, 0];
        bytes.extend_from_slice(&rest);
        err_or_valid(&bytes)?;
    }
}

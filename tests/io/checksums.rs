//! Issue 42: every tensor of a file forge writes carries a CRC-32C in the
//! metadata, and a flipped bit in any tensor's data is refused with an
//! error naming the file and the tensor; files without checksums (older
//! ones, other tools') still load.

use forge::checkpoint::{LayerIo, TrainingCheckpoint};
use forge::io::{read_safetensors, AnyTensor, CHECKSUM_PREFIX};
use forge::optim::{Adam, StepLr};
use forge::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

#[derive(Layer)]
struct Net {
    fc1: Linear,
    drop: Dropout,
    fc2: Linear,
    #[frozen]
    scale: Tensor,
}

impl Forward<Tensor> for Net {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        self.fc2
            .forward(self.drop.forward(self.fc1.forward(x).relu()))
            * &self.scale
    }
}

fn net(seed: u64) -> Net {
    let mut rng = Rng::new(seed);
    Net {
        fc1: Linear::new(3, 8, &mut rng),
        drop: Dropout::new(0.25, seed),
        fc2: Linear::new(8, 2, &mut rng),
        scale: Tensor::full(&[2], 0.5),
    }
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("forge-checksum-test-{}-{name}", std::process::id()))
}

/// A trained net with its optimizer and schedule.
fn trained() -> (Net, Adam, StepLr) {
    let mut m = net(1);
    let mut opt = Adam::new(0.01);
    let mut sched = StepLr::for_optimizer(&mut opt, 2, 0.5);
    for _ in 0..3 {
        let grads = m.forward(Tensor::ones(&[4, 3])).sum().backward();
        opt.step(&mut m, &grads).unwrap();
        sched.step(&mut opt);
    }
    (m, opt, sched)
}

/// Each tensor's name and data range in the file, as the reference crate
/// reads the header.
fn data_ranges(bytes: &[u8]) -> Vec<(String, std::ops::Range<usize>)> {
    let (n, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let mut v: Vec<_> = meta
        .tensors()
        .into_iter()
        .map(|(name, info)| {
            let (a, b) = info.data_offsets;
            (name, 8 + n + a..8 + n + b)
        })
        .collect();
    v.sort_by_key(|(_, r)| r.start);
    v
}

/// The bytes with one bit flipped in the middle of `range`.
fn flipped(bytes: &[u8], range: &std::ops::Range<usize>) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[range.start + (range.end - range.start) / 2] ^= 0x40;
    b
}

#[test]
fn a_flipped_bit_in_any_tensor_of_a_training_checkpoint_is_refused() {
    let (m, opt, sched) = trained();
    let path = tmp("train.ckpt");
    TrainingCheckpoint::save(&path, &m, &opt, Some(&sched), 3).unwrap();
    let good = std::fs::read(&path).unwrap();
    let ranges = data_ranges(&good);
    let names: Vec<&str> = ranges.iter().map(|(n, _)| n.as_str()).collect();
    for part in [
        "model.fc1.weight",
        "model.scale",
        "optimizer",
        "schedule",
        "rng",
    ] {
        assert!(names.contains(&part), "{part} missing from {names:?}");
    }
    for (name, range) in &ranges {
        assert!(!range.is_empty(), "{name}");
        std::fs::write(&path, flipped(&good, range)).unwrap();
        let (mut m2, mut opt2) = (net(9), Adam::new(0.01));
        let mut sched2 = StepLr::for_optimizer(&mut opt2, 2, 0.5);
        let before = m2.fc1.weight.to_vec();
        let e = TrainingCheckpoint::load_into(&path, &mut m2, &mut opt2, Some(&mut sched2))
            .expect_err(name);
        let msg = e.to_string();
        assert!(matches!(e, ForgeError::Format { .. }), "{name}: {msg}");
        assert!(msg.contains(&path.display().to_string()), "{name}: {msg}");
        assert!(msg.contains(&format!("tensor '{name}'")), "{name}: {msg}");
        assert!(msg.contains("checksum"), "{name}: {msg}");
        assert_eq!(m2.fc1.weight.to_vec(), before, "{name}: the model changed");
        let e = TrainingCheckpoint::load_model(&path, &mut m2).expect_err(name);
        assert!(e.to_string().contains(&format!("tensor '{name}'")), "{e}");
    }
    std::fs::write(&path, &good).unwrap();
    let (mut m2, mut opt2) = (net(9), Adam::new(0.01));
    let mut sched2 = StepLr::for_optimizer(&mut opt2, 2, 0.5);
    let step = TrainingCheckpoint::load_into(&path, &mut m2, &mut opt2, Some(&mut sched2)).unwrap();
    assert_eq!(step, 3);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_flipped_bit_in_any_tensor_of_a_weights_file_is_refused() {
    let (m, _, _) = trained();
    let path = tmp("weights.safetensors");
    for dtype in [DType::F32, DType::BF16] {
        m.save_as(&path, dtype).unwrap();
        let good = std::fs::read(&path).unwrap();
        let ranges = data_ranges(&good);
        assert_eq!(ranges.len(), 5);
        for (name, range) in &ranges {
            std::fs::write(&path, flipped(&good, range)).unwrap();
            let e = net(2).loaded(&path).err().expect(name).to_string();
            assert!(e.contains(&format!("tensor '{name}'")), "{e}");
            assert!(e.contains(&path.display().to_string()), "{e}");
        }
    }
    std::fs::remove_file(&path).unwrap();
}

/// The checksums are ordinary metadata to other readers, and forge leaves
/// them out of the metadata it returns.
#[test]
fn checksums_are_metadata_that_other_readers_ignore() {
    let (m, opt, sched) = trained();
    let bytes = TrainingCheckpoint::to_bytes(&m, &opt, Some(&sched), None, 3).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta = meta.metadata().clone().unwrap();
    for (name, view) in st.tensors() {
        let sum = &meta[&format!("{CHECKSUM_PREFIX}{name}")];
        assert_eq!(
            *sum,
            format!("{:08x}", crc32c::crc32c(view.data())),
            "{name}"
        );
    }
    let data = forge::io::parse_safetensors(&bytes).unwrap();
    assert!(data
        .metadata
        .keys()
        .all(|k| !k.starts_with(CHECKSUM_PREFIX)));
    assert_eq!(data.metadata["step"], "3");
}

/// The same tensors and metadata written by the reference crate, which
/// knows nothing of checksums.
fn without_checksums(bytes: &[u8]) -> Vec<u8> {
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let meta: HashMap<String, String> = meta
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !k.starts_with(CHECKSUM_PREFIX))
        .collect();
    let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
    safetensors::serialize(st.tensors(), Some(meta)).unwrap()
}

#[test]
fn files_without_checksums_still_load() {
    let (m, opt, sched) = trained();
    let bytes = TrainingCheckpoint::to_bytes(&m, &opt, Some(&sched), None, 3).unwrap();
    let plain = without_checksums(&bytes);
    assert!(!String::from_utf8_lossy(&plain).contains(CHECKSUM_PREFIX));
    let (mut m2, mut opt2) = (net(9), Adam::new(0.01));
    let mut sched2 = StepLr::for_optimizer(&mut opt2, 2, 0.5);
    let step =
        TrainingCheckpoint::load_bytes_into(&plain, &mut m2, &mut opt2, Some(&mut sched2)).unwrap();
    assert_eq!(step, 3);
    assert_eq!(m2.fc1.weight.to_vec(), m.fc1.weight.to_vec());
    assert_eq!(sched2, sched);
    // Unverified: a flipped bit goes unnoticed, as before checksums.
    let ranges = data_ranges(&plain);
    let (_, r) = ranges.iter().find(|(n, _)| n == "model.fc2.bias").unwrap();
    let (mut m3, mut opt3) = (net(9), Adam::new(0.01));
    TrainingCheckpoint::load_bytes_into(&flipped(&plain, r), &mut m3, &mut opt3, None).unwrap();
    assert_ne!(
        m3.fc2.bias.as_ref().unwrap().to_vec(),
        m.fc2.bias.as_ref().unwrap().to_vec()
    );
    // The checkpoint the fuzz corpus has kept since before checksums.
    let old = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus/training_checkpoint/seed-adam-steplr"),
    );
    if let Ok(old) = old {
        assert!(!String::from_utf8_lossy(&old).contains(CHECKSUM_PREFIX));
        let mut small = Linear::<f32>::new(3, 2, &mut Rng::new(0));
        let step =
            TrainingCheckpoint::load_bytes_into(&old, &mut small, &mut Adam::new(1e-3), None);
        assert_eq!(step.unwrap(), 2);
    }
}

/// A checksum that is not 8 hex digits, or that names a tensor the file
/// does not hold, is a format error; a caller's metadata under the prefix
/// is replaced by the writer's.
#[test]
fn malformed_checksums_are_format_errors_and_the_prefix_is_the_writers() {
    let mut t = BTreeMap::new();
    t.insert("w".to_string(), AnyTensor::from(Tensor::<f32>::ones(&[3])));
    let plain = without_checksums(&forge::io::serialize_safetensors(&t, &BTreeMap::new()));
    let with = |k: &str, v: &str| {
        let st = safetensors::SafeTensors::deserialize(&plain).unwrap();
        let meta = HashMap::from([(k.to_string(), v.to_string())]);
        safetensors::serialize(st.tensors(), Some(meta)).unwrap()
    };
    let key = format!("{CHECKSUM_PREFIX}w");
    for (k, v, want) in [
        (key.as_str(), "xyz", "not 8 hex digits"),
        (key.as_str(), "+1234567", "not 8 hex digits"),
        (key.as_str(), "00000000", "does not match"),
        (&format!("{CHECKSUM_PREFIX}v"), "00000000", "tensor 'v'"),
    ] {
        let e = forge::io::parse_safetensors(&with(k, v))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{k}={v}: {e}");
    }
    let meta = BTreeMap::from([(key.clone(), "00000000".to_string())]);
    let path = tmp("prefix.safetensors");
    forge::io::write_safetensors(&path, &t, &meta).unwrap();
    let back = read_safetensors(&path).unwrap();
    assert_eq!(back.tensors, t);
    assert!(back.metadata.is_empty());
    std::fs::remove_file(&path).unwrap();
}

//! What saving and loading a checkpoint costs, for files the size of
//! ResNet-18 (11.7M parameters) and GPT-2 small (124M), in f32: the median
//! of a few rounds of `write_safetensors` and `read_safetensors` (through
//! the page cache: this measures forge's encoding, decoding and checks,
//! not the disk), and of `crc32c` over the same bytes.
//!
//! ```sh
//! cargo run --release --example checkpoint_cost            # both models, 5 rounds
//! cargo run --release --example checkpoint_cost -- 3 gpt2  # 3 rounds, one model
//! ```

use forge::io::{read_safetensors, write_safetensors, AnyTensor};
use forge::Tensor;
use std::collections::BTreeMap;
use std::time::Instant;

/// ResNet-18's tensors (convolutions, batch norms with their running
/// statistics, the classifier): 11.7M values.
fn resnet18() -> Vec<(String, Vec<usize>)> {
    let mut v = vec![("conv1.weight".to_string(), vec![64, 3, 7, 7])];
    let bn = |v: &mut Vec<(String, Vec<usize>)>, p: &str, c: usize| {
        for s in ["weight", "bias", "running_mean", "running_var"] {
            v.push((format!("{p}.{s}"), vec![c]));
        }
    };
    bn(&mut v, "bn1", 64);
    let mut cin = 64;
    for (layer, cout) in [(1, 64), (2, 128), (3, 256), (4, 512)] {
        for block in 0..2 {
            let p = format!("layer{layer}.{block}");
            let c_in = if block == 0 { cin } else { cout };
            v.push((format!("{p}.conv1.weight"), vec![cout, c_in, 3, 3]));
            bn(&mut v, &format!("{p}.bn1"), cout);
            v.push((format!("{p}.conv2.weight"), vec![cout, cout, 3, 3]));
            bn(&mut v, &format!("{p}.bn2"), cout);
            if block == 0 && c_in != cout {
                v.push((format!("{p}.downsample.0.weight"), vec![cout, c_in, 1, 1]));
                bn(&mut v, &format!("{p}.downsample.1"), cout);
            }
        }
        cin = cout;
    }
    v.push(("fc.weight".into(), vec![1000, 512]));
    v.push(("fc.bias".into(), vec![1000]));
    v
}

/// GPT-2 small's tensors (tied embedding, 12 blocks): 124.4M values.
fn gpt2_small() -> Vec<(String, Vec<usize>)> {
    let d = 768;
    let mut v = vec![
        ("wte.weight".to_string(), vec![50257, d]),
        ("wpe.weight".to_string(), vec![1024, d]),
    ];
    for i in 0..12 {
        let p = format!("h.{i}");
        for (n, s) in [
            ("ln_1.weight", vec![d]),
            ("ln_1.bias", vec![d]),
            ("attn.c_attn.weight", vec![d, 3 * d]),
            ("attn.c_attn.bias", vec![3 * d]),
            ("attn.c_proj.weight", vec![d, d]),
            ("attn.c_proj.bias", vec![d]),
            ("ln_2.weight", vec![d]),
            ("ln_2.bias", vec![d]),
            ("mlp.c_fc.weight", vec![d, 4 * d]),
            ("mlp.c_fc.bias", vec![4 * d]),
            ("mlp.c_proj.weight", vec![4 * d, d]),
            ("mlp.c_proj.bias", vec![d]),
        ] {
            v.push((format!("{p}.{n}"), s));
        }
    }
    v.push(("ln_f.weight".into(), vec![d]));
    v.push(("ln_f.bias".into(), vec![d]));
    v
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(5);
    let only = args.get(1).cloned();
    let dir = std::env::temp_dir().join(format!("forge-ckpt-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, shapes) in [("resnet18", resnet18()), ("gpt2", gpt2_small())] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let mut k = 0u32;
        let tensors: BTreeMap<String, AnyTensor> = shapes
            .into_iter()
            .map(|(n, s)| {
                k += 1;
                let t = Tensor::<f32>::from_fn(&s, |i| ((i as u32 ^ k) % 977) as f32 * 1e-3);
                (n, AnyTensor::from(t))
            })
            .collect();
        let params: usize = tensors.values().map(|t| t.numel()).sum();
        let path = dir.join(format!("{name}.safetensors"));
        let (mut save, mut load) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t0 = Instant::now();
            write_safetensors(&path, &tensors, &BTreeMap::new()).unwrap();
            save.push(t0.elapsed().as_secs_f64());
            let t0 = Instant::now();
            let back = read_safetensors(&path).unwrap();
            load.push(t0.elapsed().as_secs_f64());
            assert_eq!(back.tensors.len(), tensors.len());
        }
        let bytes = std::fs::metadata(&path).unwrap().len();
        let mut crc = Vec::new();
        for _ in 0..rounds {
            let t0 = Instant::now();
            let mut x = 0u32;
            for t in tensors.values() {
                x ^= crc32c::crc32c(&t.to_le_bytes());
            }
            std::hint::black_box(x);
            crc.push(t0.elapsed().as_secs_f64());
        }
        println!(
            "{name}: {params} params, {:.1} MB file, {} tensors: save {:.0} ms, load {:.0} ms (median of {rounds})",
            bytes as f64 / 1e6,
            tensors.len(),
            median(save) * 1e3,
            median(load) * 1e3,
        );
        println!(
            "  crc32c over the same bytes (with a copy of each tensor): {:.0} ms",
            median(crc) * 1e3
        );
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

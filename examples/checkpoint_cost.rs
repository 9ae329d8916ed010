//! What saving and loading a checkpoint costs, for files the size of
//! ResNet-18 (11.7M parameters) and GPT-2 small (124M), in f32: the median
//! of a few rounds of `write_safetensors` and `read_safetensors`, in wall
//! time (the save includes its `fsync`) and in the process's CPU time
//! (user + system: steadier than wall time on a shared machine), and of
//! `crc32c` over the same bytes.
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

/// User + system CPU seconds of the whole process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given, which is a
    // properly sized, zero-initialised `rusage`.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut u), 0);
        u
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// Runs `f`, returning its (wall, CPU) seconds.
fn timed(f: impl FnOnce()) -> (f64, f64) {
    let (t0, c0) = (Instant::now(), cpu_seconds());
    f();
    (t0.elapsed().as_secs_f64(), cpu_seconds() - c0)
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
            save.push(timed(|| {
                write_safetensors(&path, &tensors, &BTreeMap::new()).unwrap()
            }));
            load.push(timed(|| {
                let back = read_safetensors(&path).unwrap();
                assert_eq!(back.tensors.len(), tensors.len());
            }));
        }
        let bytes = std::fs::metadata(&path).unwrap().len();
        let raw: Vec<Vec<u8>> = tensors.values().map(|t| t.to_le_bytes()).collect();
        let mut crc = Vec::new();
        for _ in 0..rounds {
            crc.push(timed(|| {
                let x = raw.iter().map(|b| crc32c::crc32c(b)).fold(0, |a, b| a ^ b);
                std::hint::black_box(x);
            }));
        }
        drop(raw);
        let ms = |v: &[(f64, f64)], cpu: bool| {
            median(v.iter().map(|&(w, c)| if cpu { c } else { w }).collect()) * 1e3
        };
        println!(
            "{name}: {params} params, {:.1} MB, {} tensors (median of {rounds}): \
             save {:.0} ms wall / {:.0} ms CPU, load {:.0} ms wall / {:.0} ms CPU",
            bytes as f64 / 1e6,
            tensors.len(),
            ms(&save, false),
            ms(&save, true),
            ms(&load, false),
            ms(&load, true),
        );
        println!(
            "  crc32c of every tensor's bytes: {:.0} ms wall / {:.0} ms CPU",
            ms(&crc, false),
            ms(&crc, true)
        );
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

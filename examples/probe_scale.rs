// TEMPORARY probe (not for landing).
use forge::cpu::set_num_threads;
use forge::cpu::threads::probe;
use forge::models::gpt::{Gpt, GptConfig};
use forge::models::resnet::resnet18;
use forge::nn::functional::cross_entropy_with;
use forge::nn::Forward;
use forge::optim::{AdamW, Sgd};
use forge::{Rng, Tensor};
use std::time::Instant;

thread_local! { static PH: std::cell::RefCell<std::collections::HashMap<String,(u64,u64,bool)>> = Default::default(); }
fn tag(ph: &str) {
    for (k, c, n, p) in probe::take() {
        PH.with(|m| {
            let mut m = m.borrow_mut();
            let e = m.entry(format!("{ph} {k}")).or_insert((0, 0, p));
            e.0 += c;
            e.1 += n;
        });
    }
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = args.get(1).cloned().unwrap_or("resnet18".into());
    let threads: usize = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(1);
    let steps: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(10);
    set_num_threads(threads);
    let mut rng = Rng::new(0);
    let mut step: Box<dyn FnMut() -> (f64, f64, f64)> = if model == "resnet18" {
        let mut m = resnet18::<f32>(10, &mut rng);
        let x = Tensor::<f32>::normal(&[16, 3, 32, 32], 0.0, 1.0, &mut rng);
        let y = Tensor::<i64>::from_vec((0..16).map(|_| rng.below(10) as i64).collect(), &[16]);
        let mut opt = Sgd::<f32>::new(0.01).momentum(0.9);
        Box::new(move || {
            let t0 = Instant::now();
            let l = cross_entropy_with(&m.forward(x.clone()), &y, Default::default());
            let t1 = Instant::now();
            tag("F");
            let g = l.backward();
            drop(l);
            let t2 = Instant::now();
            tag("B");
            opt.step(&mut m, &g).unwrap();
            let t3 = Instant::now();
            tag("O");
            (
                (t1 - t0).as_secs_f64() * 1e3,
                (t2 - t1).as_secs_f64() * 1e3,
                (t3 - t2).as_secs_f64() * 1e3,
            )
        })
    } else {
        let cfg = GptConfig {
            vocab_size: 256,
            block_size: 64,
            n_layer: 4,
            n_head: 4,
            n_embd: 128,
            bias: true,
        };
        let mut m = Gpt::<f32>::new(cfg, &mut rng);
        let x = Tensor::<i64>::from_fn(&[16, 64], |_| rng.below(256) as i64);
        let y = Tensor::<i64>::from_fn(&[16, 64], |_| rng.below(256) as i64);
        let mut opt = AdamW::<f32>::new(3e-4).weight_decay(0.1);
        Box::new(move || {
            let t0 = Instant::now();
            let l = m.loss(&x, &y);
            let t1 = Instant::now();
            tag("F");
            let g = l.backward();
            drop(l);
            let t2 = Instant::now();
            tag("B");
            opt.step(&mut m, &g).unwrap();
            let t3 = Instant::now();
            tag("O");
            (
                (t1 - t0).as_secs_f64() * 1e3,
                (t2 - t1).as_secs_f64() * 1e3,
                (t3 - t2).as_secs_f64() * 1e3,
            )
        })
    };
    for _ in 0..3 {
        step();
    }
    probe::take();
    PH.with(|m| m.borrow_mut().clear());
    for a in [
        &probe::WORKER_NS,
        &probe::WAKES,
        &probe::WAKE_NS,
        &probe::LATE,
        &probe::WCHUNKS,
        &probe::CCHUNKS,
        &probe::WAIT_NS,
    ] {
        a.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    let (mut f, mut b, mut o) = (0.0, 0.0, 0.0);
    let t = Instant::now();
    for _ in 0..steps {
        let r = step();
        f += r.0;
        b += r.1;
        o += r.2;
    }
    let total = t.elapsed().as_secs_f64() * 1e3 / steps as f64;
    let s = steps as f64;
    println!("{model} {threads}T: step {:.2} ms: fwd {:.2} bwd {:.2} opt {:.2}; worker busy {:.2} ms/step", total, f / s, b / s, o / s,
        probe::WORKER_NS.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e6 / s);
    {
        use std::sync::atomic::Ordering::Relaxed;
        let w = probe::WAKES.load(Relaxed) as f64;
        println!("  dispatches/step {:.0}: worker entered {:.0}/step, mean wake {:.1} us, late(no chunk left) {:.0}/step; chunks worker {:.0} caller {:.0} /step; caller waits {:.2} ms/step",
        w / s, w / s, probe::WAKE_NS.load(Relaxed) as f64 / w.max(1.0) / 1e3, probe::LATE.load(Relaxed) as f64 / s,
        probe::WCHUNKS.load(Relaxed) as f64 / s, probe::CCHUNKS.load(Relaxed) as f64 / s, probe::WAIT_NS.load(Relaxed) as f64 / 1e6 / s);
    }
    let mut par = 0.0;
    let mut small = 0.0;
    let mut v: Vec<(String, u64, u64, bool)> = PH.with(|m| {
        m.borrow_mut()
            .drain()
            .map(|(k, (c, n, p))| (k, c, n, p))
            .collect()
    });
    v.sort_by(|a, b| a.0[..1].cmp(&b.0[..1]).then(b.2.cmp(&a.2)));
    for (k, c, n, p) in v {
        let ms = n as f64 / 1e6 / s;
        if k.starts_with("par") && p {
            par += ms;
        }
        if k.starts_with("small") {
            small += ms;
        }
        if ms > 0.05 {
            println!(
                "  {:>8.3} ms {:>6.1} calls  {}{}",
                ms,
                c as f64 / s,
                k,
                if p { " [P]" } else { "" }
            );
        }
    }
    println!("  total in multi-chunk parallel_for: {par:.2} ms/step; in small (inline by cost) loops: {small:.2}");
}

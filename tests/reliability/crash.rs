//! Crash consistency: a training run in a child process, saving a training
//! checkpoint every few steps, is killed with SIGKILL at seeded random
//! instants (half of them while it saves, half between saves) and resumed
//! from its checkpoint each time; its final weights must be bit-identical
//! to an uninterrupted run's, and the checkpoint on disk must load after
//! every kill (never torn).
//!
//! The child is this test binary again, started on the `child` test below
//! with `FORGE_CRASH_DIR` set (the test does nothing without it). It
//! prints one line per event on stdout (`forge-crash: resumed N`,
//! `step N`, `saving N`, `saved N`, `done`), which is how the parent
//! picks its moment: after the event the seed chose, plus a random delay.

use forge::checkpoint::TrainingCheckpoint;
use forge::optim::{AdamW, CosineAnnealingLr};
use forge::prelude::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Steps of the whole run, and a checkpoint every `SAVE_EVERY`.
const STEPS: u64 = 400;
const SAVE_EVERY: u64 = 10;
/// Kills in one test: at least 20, half aimed at saves.
const KILLS: usize = 24;

#[derive(Layer)]
struct Net {
    fc1: Linear,
    drop: Dropout,
    fc2: Linear,
}

impl Forward<Tensor> for Net {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        self.fc2
            .forward(self.drop.forward(self.fc1.forward(x).relu()))
    }
}

/// The model, its optimizer and schedule, fresh: 64 -> 1024 -> 10 (about
/// 77 k parameters, so a checkpoint with AdamW's two moments is ~0.9 MB
/// and its write takes long enough to be hit by a kill).
fn fresh(seed: u64) -> (Net, AdamW, CosineAnnealingLr) {
    let mut rng = Rng::new(seed);
    let net = Net {
        fc1: Linear::new(64, 1024, &mut rng),
        drop: Dropout::from_rng(0.2, &mut rng),
        fc2: Linear::new(1024, 10, &mut rng),
    };
    let mut opt = AdamW::new(3e-3);
    let sched = CosineAnnealingLr::for_optimizer(&mut opt, STEPS, 1e-4);
    (net, opt, sched)
}

fn dataset() -> TensorDataset<(Tensor, Tensor<i64>)> {
    let mut rng = Rng::new(7);
    let x = Tensor::<f32>::normal(&[200, 64], 0.0, 1.0, &mut rng);
    let y = Tensor::<i64>::from_vec((0..200).map(|_| rng.below(10) as i64).collect(), &[200]);
    TensorDataset::new((x, y)).unwrap()
}

/// Every weight's bits, in state-dict order.
fn bits(net: &Net) -> Vec<(String, Vec<u32>)> {
    net.state_dict()
        .into_iter()
        .map(|(k, t)| (k, t.to_vec().iter().map(|v| v.to_bits()).collect()))
        .collect()
}

/// Trains to `STEPS`, resuming from `checkpoint` when it exists and saving
/// to it every `SAVE_EVERY` steps when given; `say` gets each event.
fn train(checkpoint: Option<&Path>, mut say: impl FnMut(&str)) -> Net {
    let data = dataset();
    let loader = DataLoader::new(&data, 16).shuffle(3);
    let (mut net, mut opt, mut sched) = fresh(1);
    let mut step = 0;
    if let Some(path) = checkpoint.filter(|p| p.exists()) {
        step = TrainingCheckpoint::load_into_with_loader(
            path,
            &mut net,
            &mut opt,
            Some(&mut sched),
            &loader,
        )
        .unwrap();
    }
    say(&format!("resumed {step}"));
    'run: while step < STEPS {
        for (x, y) in loader.iter() {
            let loss = cross_entropy(&net.forward(x), &y);
            opt.backward_step(&mut net, loss).unwrap();
            sched.step(&mut opt);
            step += 1;
            say(&format!("step {step}"));
            if let Some(path) = checkpoint.filter(|_| step % SAVE_EVERY == 0) {
                say(&format!("saving {step}"));
                TrainingCheckpoint::save_with_loader(path, &net, &opt, Some(&sched), &loader, step)
                    .unwrap();
                say(&format!("saved {step}"));
            }
            if step == STEPS {
                break 'run;
            }
        }
    }
    net
}

/// The child's side: trains from the checkpoint in `FORGE_CRASH_DIR`
/// until done or killed; at the end writes the final weights' bits.
#[test]
#[ignore = "the child process of sigkill_at_random_instants_then_resume_is_bit_identical"]
fn child() {
    let Some(dir) = std::env::var_os("FORGE_CRASH_DIR").map(PathBuf::from) else {
        return;
    };
    let mut out = std::io::stdout().lock();
    let net = train(Some(&dir.join("ck.safetensors")), |e| {
        writeln!(out, "forge-crash: {e}").unwrap();
        out.flush().unwrap();
    });
    let flat: Vec<u8> = bits(&net)
        .iter()
        .flat_map(|(_, v)| v.iter().flat_map(|b| b.to_le_bytes()))
        .collect();
    forge::io::atomic_write(dir.join("final.bin"), &flat).unwrap();
    println!("forge-crash: done");
}

/// A small seeded generator for the kill plan (splitmix64).
struct Plan(u64);

impl Plan {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one child run did before it ended.
struct Run {
    resumed: u64,
    finished: bool,
    /// Whether the kill came after a `saving` line and before its `saved`.
    killed_in_save: bool,
}

/// Starts the child; kills it (SIGKILL) `delay_us` after it prints `event`
/// (when given), else lets it finish.
fn run_child(dir: &Path, kill: Option<(&str, u64)>) -> Run {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "reliability::crash::child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FORGE_CRASH_DIR", dir)
        .env("FORGE_NUM_THREADS", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut run = Run {
        resumed: 0,
        finished: false,
        killed_in_save: false,
    };
    let mut in_save = false;
    let mut killed = false;
    for line in lines {
        let line = line.unwrap();
        // The first line follows libtest's "test ... " on the same line.
        let Some((_, event)) = line.split_once("forge-crash: ") else {
            continue;
        };
        if let Some(n) = event.strip_prefix("resumed ") {
            run.resumed = n.parse().unwrap();
        }
        in_save = event.starts_with("saving") || (in_save && !event.starts_with("saved"));
        if event == "done" {
            run.finished = true;
        }
        if let Some((at, delay_us)) = kill {
            if !killed && event == at {
                std::thread::sleep(Duration::from_micros(delay_us));
                // SIGKILL: no destructor, no flush, no chance to finish the
                // write in progress.
                child.kill().unwrap();
                killed = true;
                run.killed_in_save = in_save;
            }
        }
    }
    let status = child.wait().unwrap();
    assert!(
        killed || status.success(),
        "the child failed on its own: {status}"
    );
    run
}

/// The checkpoint after a kill is either absent (no save finished yet) or
/// whole: it loads, at a step that is a multiple of `SAVE_EVERY`.
fn check_not_torn(path: &Path) -> Option<u64> {
    if !path.exists() {
        return None;
    }
    let data = dataset();
    let loader = DataLoader::new(&data, 16).shuffle(3);
    let (mut net, mut opt, mut sched) = fresh(9);
    let step = TrainingCheckpoint::load_into_with_loader(
        path,
        &mut net,
        &mut opt,
        Some(&mut sched),
        &loader,
    )
    .unwrap_or_else(|e| panic!("a torn checkpoint after a kill: {e}"));
    assert_eq!(step % SAVE_EVERY, 0, "checkpoint at step {step}");
    Some(step)
}

#[test]
#[ignore = "kills and restarts a child process 24 times (about 30 s on 2 cores); run by .ci/run"]
fn sigkill_at_random_instants_then_resume_is_bit_identical() {
    let _heavy = super::heavy();
    let reference = bits(&train(None, |_| {}));
    let dir = std::env::temp_dir().join(format!("forge-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck = dir.join("ck.safetensors");

    let mut plan = Plan(0x5EED_C0DE);
    let (mut aimed_at_saves, mut landed_in_saves) = (0, 0);
    let mut resumes = Vec::new();
    for k in 0..KILLS {
        let from = check_not_torn(&ck).unwrap_or(0);
        // Aim at a step (or a save) still ahead of the checkpoint, so that
        // every child run makes progress; even kills hit saves.
        let save = k % 2 == 0;
        let (event, delay_us) = if save {
            let saves_left = (STEPS - from) / SAVE_EVERY;
            let at = from + SAVE_EVERY * (1 + plan.below(saves_left.min(2)));
            aimed_at_saves += 1;
            (format!("saving {at}"), plan.below(3000))
        } else {
            let at = from + 1 + plan.below((STEPS - from - 1).clamp(1, 2 * SAVE_EVERY));
            (format!("step {at}"), plan.below(500))
        };
        let run = run_child(&dir, Some((&event, delay_us)));
        assert_eq!(run.resumed, from, "the child resumed from the checkpoint");
        assert!(!run.finished, "kill {k} came after the end ({event})");
        landed_in_saves += usize::from(run.killed_in_save);
        resumes.push(from);
    }
    let from = check_not_torn(&ck).unwrap_or(0);
    let last = run_child(&dir, None);
    assert_eq!(last.resumed, from);
    assert!(last.finished);
    let flat = std::fs::read(dir.join("final.bin")).unwrap();
    let mut words = flat
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    for (name, want) in &reference {
        let got: Vec<u32> = words.by_ref().take(want.len()).collect();
        assert_eq!(&got, want, "{name} differs from the uninterrupted run");
    }
    assert!(words.next().is_none());
    eprintln!(
        "{KILLS} kills ({aimed_at_saves} aimed at saves, {landed_in_saves} seen mid-save), \
         resumed from steps {resumes:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

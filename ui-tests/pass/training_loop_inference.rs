//! A whole training loop written from the prelude with no type annotation:
//! the element type flows from the data into the model, the optimizer, the
//! schedule and the checkpoint.

use forge::prelude::*;

fn main() {
    let mut rng = Rng::new(0);
    let x = Tensor::<f32>::from_fn(&[32, 3], |i| (i as f32).sin());
    let y = Tensor::<i64>::from_fn(&[32], |i| (i % 2) as i64);
    let data = TensorDataset::new((x, y)).unwrap();
    let loader = DataLoader::new(&data, 8).shuffle(1);
    let mut model = sequential![Linear::new(3, 8, &mut rng), Relu, Dropout::new(0.1, 0), Linear::new(8, 2, &mut rng)];
    let mut opt = AdamW::new(1e-2);
    let mut sched = CosineAnnealingLr::for_optimizer(&mut opt, 8, 0.0);
    for (xb, yb) in loader.iter() {
        let logits = model.forward(xb);
        let mut grads = cross_entropy(&logits, &yb).backward();
        clip_grad_norm(&mut grads, 1.0);
        opt.step(&mut model, &grads).unwrap();
        sched.step(&mut opt);
        let _ = metrics::accuracy(&logits, &yb);
    }
    let path = std::env::temp_dir().join(format!("forge-ui-loop-{}.safetensors", std::process::id()));
    TrainingCheckpoint::save_with_loader(&path, &model, &opt, Some(&sched), &loader, 4).unwrap();
    let step = TrainingCheckpoint::load_into_with_loader(&path, &mut model, &mut opt, Some(&mut sched), &loader).unwrap();
    assert_eq!(step, 4);
    println!("{model}");
    std::fs::remove_file(&path).unwrap();
}

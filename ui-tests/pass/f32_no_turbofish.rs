//! A model that is only built, saved and loaded, and an optimizer that is
//! only built, need no element type: `forge::f32` fixes it.

use forge::f32::{Adam, Conv2d, Linear};
use forge::prelude::*;

fn main() {
    let mut rng = Rng::new(0);
    let path = std::env::temp_dir().join(format!("forge-ui-f32-{}.safetensors", std::process::id()));
    let model = sequential![Conv2d::new(1, 2, 3, &mut rng), Flatten, Linear::new(8, 2, &mut rng)];
    model.save(&path).unwrap();
    let mut other = sequential![Conv2d::new(1, 2, 3, &mut rng), Flatten, Linear::new(8, 2, &mut rng)];
    other.load_weights(&path).unwrap();
    let opt = Adam::new(1e-3);
    TrainingCheckpoint::save(&path, &other, &opt, None, 0).unwrap();
    std::fs::remove_file(&path).unwrap();
}

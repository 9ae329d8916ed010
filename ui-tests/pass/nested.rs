// Derived layers nest to any depth; paths join with dots.
use forge::prelude::*;

#[derive(Layer)]
struct Attn {
    wq: Linear,
    wk: Linear,
}

#[derive(Layer)]
struct Block {
    attn: Attn,
    mlp: Linear,
}

#[derive(Layer)]
struct Encoder {
    blocks: Vec<Block>,
}

fn main() {
    let mut rng = Rng::new(0);
    let mut blocks = Vec::new();
    for _ in 0..4 {
        blocks.push(Block {
            attn: Attn { wq: Linear::new(2, 2, &mut rng), wk: Linear::new(2, 2, &mut rng) },
            mlp: Linear::new(2, 2, &mut rng),
        });
    }
    let e = Encoder { blocks };
    assert_eq!(e.named_parameters()[18].0, "blocks.3.attn.wq.weight");
}

// A public layer whose fields have private types, under deny(warnings):
// the generated where-clauses must not trigger privacy lints.
#![deny(warnings)]
use forge::prelude::*;

mod model {
    use forge::prelude::*;

    #[derive(Layer)]
    struct Hidden {
        fc: Linear,
    }

    #[derive(Layer)]
    pub struct Public {
        hidden: Hidden,
        pub(crate) extra: Vec<Linear<f32>>,
    }

    pub fn build() -> Public {
        let mut r = Rng::new(0);
        Public { hidden: Hidden { fc: Linear::new(1, 1, &mut r) }, extra: vec![] }
    }
}

fn main() {
    let m = model::build();
    assert_eq!(m.named_parameters()[0].0, "hidden.fc.weight");
    assert_eq!(m.extra.len(), 0);
}

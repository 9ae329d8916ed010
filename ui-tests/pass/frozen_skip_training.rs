// #[frozen] tensors are saved but not trained; #[skip] fields are not
// visited; #[training] flags follow train()/eval().
use forge::nn::TensorKind;
use forge::prelude::*;

struct Config {
    width: usize,
}

#[derive(Layer)]
struct Norm {
    weight: Tensor,
    #[frozen]
    running_mean: Tensor,
    #[frozen]
    history: Vec<Tensor>,
    #[frozen]
    mask: Option<Box<[Tensor; 1]>>,
    #[skip]
    config: Config,
    #[skip]
    callback: fn(f32) -> f32,
    #[training]
    training: bool,
}

fn main() {
    let mut n = Norm {
        weight: Tensor::ones(&[2]).requires_grad(),
        running_mean: Tensor::zeros(&[2]),
        history: vec![Tensor::zeros(&[1])],
        mask: Some(Box::new([Tensor::ones(&[2])])),
        config: Config { width: 2 },
        callback: |x| x,
        training: true,
    };
    let kinds: Vec<(String, TensorKind)> =
        n.named_tensors().into_iter().map(|(p, _, k)| (p, k)).collect();
    assert_eq!(kinds[0], ("weight".to_string(), TensorKind::Weight));
    assert_eq!(kinds[1], ("running_mean".to_string(), TensorKind::Frozen));
    assert_eq!(kinds[3], ("mask.0".to_string(), TensorKind::Frozen));
    assert_eq!(n.parameters().len(), 1);
    n.eval();
    assert!(!n.training);
    assert_eq!((n.config.width, (n.callback)(1.0)), (2, 1.0));
}

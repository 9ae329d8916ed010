//! The PyTorch user's first hour (issue #14): datasets of any tensors,
//! schedules built from the optimizer, short loss forms, metrics, model
//! printing and summaries, and `Sequential` panics that name the layer.

use forge::data::Collate;
use forge::f32::{Conv2d, Linear, Sgd};
use forge::nn::{summary, Layer};
use forge::optim::{Phase, SequentialLr};
use forge::prelude::*;

#[test]
fn tensor_dataset_batches_tuples_of_any_element_types() {
    let x = Tensor::<f32>::from_fn(&[10, 2, 3], |i| i as f32);
    let y = Tensor::<f64>::from_fn(&[10, 1], |i| i as f64 * 0.5);
    let k = Tensor::<i64>::from_fn(&[10], |i| i as i64);
    let m = Tensor::<f32>::from_fn(&[10], |i| (i % 2) as f32);
    let ds = TensorDataset::new((x, y, k, m)).unwrap();
    assert_eq!(ds.len(), 10);
    let (x0, y0, k0, m0) = ds.get(3);
    assert_eq!(x0.shape(), &[2, 3]);
    assert_eq!(x0.to_vec(), (18..24).map(|v| v as f32).collect::<Vec<_>>());
    assert_eq!(
        (y0.to_vec(), k0.shape(), k0.to_vec(), m0.item()),
        (vec![1.5], &[][..], vec![3], 1.0)
    );
    let loader = DataLoader::new(&ds, 4);
    let sizes: Vec<(Vec<usize>, Vec<usize>, Vec<i64>)> = loader
        .iter()
        .map(|(x, y, k, _)| (x.shape().to_vec(), y.shape().to_vec(), k.to_vec()))
        .collect();
    assert_eq!(sizes[0], (vec![4, 2, 3], vec![4, 1], vec![0, 1, 2, 3]));
    assert_eq!(sizes[2], (vec![2, 2, 3], vec![2, 1], vec![8, 9]));
    // get_batch and the default collate of single items agree.
    let via_items =
        <(Tensor, Tensor<f64>, Tensor<i64>, Tensor)>::collate(vec![ds.get(7), ds.get(1)]);
    let batch = ds.get_batch(&[7, 1]);
    assert_eq!(via_items.0.to_vec(), batch.0.to_vec());
    assert_eq!(via_items.2.to_vec(), vec![7, 1]);
}

#[test]
fn tensor_dataset_length_mismatch_names_both_lengths() {
    let e = TensorDataset::new((Tensor::<f32>::zeros(&[10, 3]), Tensor::<i64>::zeros(&[9])))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("tensor 0 has 10 samples but tensor 1 has 9"),
        "{e}"
    );
    let e =
        TensorDataset::new((Tensor::<f32>::zeros(&[2]), Tensor::<f32>::scalar(1.0))).unwrap_err();
    assert!(e.to_string().contains("tensor 1 is a scalar"), "{e}");
}

#[test]
fn regression_trains_from_a_tensor_dataset() {
    let x = Tensor::<f32>::from_fn(&[64, 1], |i| i as f32 / 64.0);
    let y = x.mul_scalar(3.0).add_scalar(0.5);
    let ds = TensorDataset::new((x, y)).unwrap();
    let loader = DataLoader::new(&ds, 16).shuffle(3);
    let mut model = Linear::new(1, 1, &mut Rng::new(0));
    let mut opt = Adam::new(0.1);
    for _ in 0..100 {
        for (xb, yb) in loader.iter() {
            let grads = mse(&model.forward(xb), &yb).backward();
            opt.step(&mut model, &grads).unwrap();
        }
    }
    assert!(
        (model.weight.item() - 3.0).abs() < 0.05,
        "{}",
        model.weight.item()
    );
}

/// `X::for_optimizer(&mut opt, ..)` gives the rates `X::new(opt.lr(), ..)`
/// plus `apply` gives, from step 0, for every schedule.
#[test]
fn schedules_built_from_the_optimizer_match_the_explicit_form() {
    fn rates<S: LrScheduler>(mut s: S, mut opt: Sgd) -> Vec<f64> {
        (0..12)
            .map(|_| {
                let r = opt.lr();
                s.step(&mut opt);
                r
            })
            .collect()
    }
    fn check<S: LrScheduler>(make: impl Fn(&mut Sgd) -> S, explicit: S) {
        let mut a = Sgd::new(0.3).momentum(0.9);
        let sa = make(&mut a);
        let mut b = Sgd::new(0.3).momentum(0.9);
        explicit.apply(&mut b);
        assert_eq!(rates(sa, a), rates(explicit, b));
    }
    check(
        |o| StepLr::for_optimizer(o, 3, 0.5),
        StepLr::new(0.3, 3, 0.5),
    );
    check(
        |o| MultiStepLr::for_optimizer(o, &[2, 5], 0.1),
        MultiStepLr::new(0.3, &[2, 5], 0.1),
    );
    check(
        |o| ExponentialLr::for_optimizer(o, 0.9),
        ExponentialLr::new(0.3, 0.9),
    );
    check(
        |o| CosineAnnealingLr::for_optimizer(o, 10, 0.01),
        CosineAnnealingLr::new(0.3, 10, 0.01),
    );
    check(
        |o| LinearLr::for_optimizer(o, 0.1, 1.0, 4),
        LinearLr::new(0.3, 0.1, 1.0, 4),
    );
    check(
        |o| OneCycleLr::for_optimizer(o, 1.0, 12),
        OneCycleLr::new(1.0, 12),
    );
    check(
        |o| forge::optim::NoamLr::for_optimizer(o, 16, 4),
        forge::optim::NoamLr::new(0.3, 16, 4),
    );
    let phases = || -> Vec<Phase> {
        vec![
            LinearLr::new(0.3, 0.5, 1.0, 3).into(),
            ExponentialLr::new(0.3, 0.8).into(),
        ]
    };
    check(
        |o| SequentialLr::for_optimizer(o, phases(), &[3]),
        SequentialLr::new(phases(), &[3]),
    );
    // The step-0 rate is set on construction: no `apply` to forget.
    let mut opt = Sgd::new(0.3);
    let _ = LinearLr::for_optimizer(&mut opt, 0.1, 1.0, 4);
    assert!((opt.lr() - 0.03).abs() < 1e-15);
}

#[test]
fn short_loss_forms_equal_the_long_forms_with_defaults() {
    use forge::nn::functional::*;
    let logits = Tensor::<f64>::from_fn(&[4, 3], |i| (i as f64 * 0.7).sin());
    let y = Tensor::<i64>::from_vec(vec![0, 2, 1, 2], &[4]);
    let ce = cross_entropy_with(&logits, &y, CrossEntropyOptions::default());
    assert_eq!(cross_entropy(&logits, &y).item(), ce.item());
    let lp = logits.log_softmax(1);
    assert_eq!(
        nll(&lp, &y).item(),
        nll_loss(&lp, &y, NllLossOptions::default()).item()
    );
    let a = Tensor::<f64>::from_fn(&[5], |i| i as f64 / 5.0);
    let b = Tensor::<f64>::from_fn(&[5], |i| 1.0 - i as f64 / 7.0);
    assert_eq!(mse(&a, &b).item(), mse_loss(&a, &b, Reduction::Mean).item());
    assert_eq!(l1(&a, &b).item(), l1_loss(&a, &b, Reduction::Mean).item());
    assert_eq!(
        bce(&a, &b).item(),
        binary_cross_entropy(&a, &b, None, Reduction::Mean).item()
    );
    assert_eq!(
        bce_with_logits(&a, &b).item(),
        binary_cross_entropy_with_logits(&a, &b, None, None, Reduction::Mean).item()
    );
    let w = Tensor::<f64>::zeros(&[2]).requires_grad();
    let mut g1 = forge::Gradients::new();
    g1.insert(&w, Tensor::from_vec(vec![3.0, 4.0], &[2]));
    let mut g2 = forge::Gradients::new();
    g2.insert(&w, Tensor::from_vec(vec![3.0, 4.0], &[2]));
    assert_eq!(
        clip_grad_norm(&mut g1, 1.0),
        forge::optim::clip_grad_norm_with(&mut g2, 1.0, 2.0)
    );
    assert_eq!(g1.get(&w).unwrap().to_vec(), g2.get(&w).unwrap().to_vec());
}

#[test]
fn accuracy_counts_argmax_hits() {
    let s = Tensor::<f32>::from_vec(vec![0.1, 0.9, 0.8, 0.2, 0.5, 0.5], &[3, 2]);
    let y = Tensor::<i64>::from_vec(vec![1, 1, 0], &[3]);
    assert_eq!(metrics::correct(&s, &y), 2); // the tie goes to class 0
    assert!((metrics::accuracy(&s, &y) - 2.0 / 3.0).abs() < 1e-12);
}

#[test]
fn models_print_like_pytorch_without_weights() {
    let mut rng = Rng::new(0);
    let model = sequential![
        Conv2d::new(1, 6, 5, &mut rng).padding(2),
        Relu,
        MaxPool2d::new(2),
        Flatten,
        sequential![Linear::new(1176, 10, &mut rng), Dropout::new(0.5, 0)]
    ];
    let text = model.to_string();
    assert_eq!(
        text,
        "Sequential(
  (0): Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))
  (1): ReLU()
  (2): MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
  (3): Flatten()
  (4): Sequential(
    (0): Linear(in_features=1176, out_features=10, bias=true)
    (1): Dropout(p=0.5)
  )
)"
    );
    assert!(!text.contains("tensor("), "no weights");
}

#[derive(Layer)]
struct Net {
    body: forge::sequential_type![Linear, Relu],
    head: Linear,
    #[frozen]
    scale: Tensor,
}

impl Forward<Tensor> for Net {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        self.head.forward(self.body.forward(x)) * &self.scale
    }
}

#[test]
fn summary_lists_every_layer_with_counts_and_totals() {
    let mut rng = Rng::new(0);
    let mut net = Net {
        body: sequential![Linear::new(8, 16, &mut rng), Relu],
        head: Linear::new(16, 3, &mut rng),
        scale: Tensor::ones(&[3]),
    };
    net.freeze_prefix("head");
    let s = summary(&net, &[5, 8]);
    let rows: Vec<(&str, &str, usize, usize)> = s
        .rows
        .iter()
        .map(|r| (r.path.as_str(), r.type_name.as_str(), r.trainable, r.frozen))
        .collect();
    assert_eq!(
        rows,
        [
            ("", "Net", 144, 54),
            ("body", "Sequential", 144, 0),
            ("body.0", "Linear", 144, 0),
            ("body.1", "Relu", 0, 0),
            ("head", "Linear", 0, 51),
        ]
    );
    assert_eq!(s.output_shape, [5, 3]);
    assert_eq!((s.trainable, s.frozen, s.bytes), (144, 54, (144 + 54) * 4));
    let table = s.to_string();
    assert!(
        table.contains("body.0 (Linear)") && table.contains("Total params: 198"),
        "{table}"
    );
}

#[test]
#[should_panic(
    expected = "Sequential layer 2 (Linear): Linear(4 -> 2): expected input of shape [.., 4], got [8, 3]"
)]
fn a_sequential_names_the_layer_that_panicked() {
    let mut rng = Rng::new(0);
    let model = sequential![
        Linear::new(5, 3, &mut rng),
        Relu,
        Linear::new(4, 2, &mut rng)
    ];
    model.forward(Tensor::zeros(&[8, 5]));
}

#[test]
#[should_panic(
    expected = "Sequential layer 1 (Sequential): Sequential layer 0 (Linear): Linear(4 -> 2)"
)]
fn nested_sequentials_name_every_level() {
    let mut rng = Rng::new(0);
    let model = sequential![
        Linear::new(5, 3, &mut rng),
        sequential![Linear::new(4, 2, &mut rng)]
    ];
    model.forward(Tensor::zeros(&[8, 5]));
}

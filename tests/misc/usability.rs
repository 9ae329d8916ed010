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
            let grads = mse_loss(&model.forward(xb), &yb).backward();
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
        nll_loss(&lp, &y).item(),
        nll_loss_with(&lp, &y, NllLossOptions::default()).item()
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

/// The reference models print their module tree as PyTorch's
/// `print(model)` does (torchvision's ResNet, nanoGPT's GPT), weights left
/// out; runs of equal blocks fold into `(i-j): n x Block(`.
#[test]
fn reference_models_print_their_module_tree() {
    use forge::models::gpt::{Gpt, GptConfig};
    use forge::models::mnist::LeNet5;
    use forge::models::resnet::resnet18;
    let mut rng = Rng::new(0);
    let config = GptConfig {
        vocab_size: 11,
        block_size: 8,
        n_layer: 2,
        n_head: 2,
        n_embd: 8,
        bias: true,
    };
    let gpt = Gpt::<f32>::new(config, &mut rng).to_string();
    assert_eq!(
        gpt,
        "GPT(
  (transformer): ModuleDict(
    (wte): Embedding(11, 8)
    (wpe): Embedding(8, 8)
    (h): ModuleList(
      (0-1): 2 x Block(
        (ln_1): LayerNorm([8], eps=0.00001, elementwise_affine=true)
        (attn): CausalSelfAttention(
          n_head=2
          (c_attn): Linear(in_features=8, out_features=24, bias=true)
          (c_proj): Linear(in_features=8, out_features=8, bias=true)
        )
        (ln_2): LayerNorm([8], eps=0.00001, elementwise_affine=true)
        (mlp): MLP(
          (c_fc): Linear(in_features=8, out_features=32, bias=true)
          (gelu): GELU(approximate='tanh')
          (c_proj): Linear(in_features=32, out_features=8, bias=true)
        )
      )
    )
    (ln_f): LayerNorm([8], eps=0.00001, elementwise_affine=true)
  )
  (lm_head): Linear(in_features=8, out_features=11, bias=false, weight=transformer.wte.weight)
)"
    );

    let resnet = resnet18::<f32>(10, &mut rng).to_string();
    for part in [
        "ResNet(\n  (conv1): Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2)",
        "  (layer1): Sequential(\n    (0-1): 2 x BasicBlock(\n      (conv1): Conv2d(64, 64,",
        "  (layer2): Sequential(\n    (0): BasicBlock(",
        "      (downsample): Sequential(\n        (0): Conv2d(64, 128, kernel_size=(1, 1), stride=(2, 2)",
        "\n    (1): BasicBlock(",
        "  (fc): Linear(in_features=512, out_features=10, bias=true)\n)",
    ] {
        assert!(resnet.contains(part), "{part:?} not in\n{resnet}");
    }
    assert_eq!(
        resnet.matches("BasicBlock(").count(),
        7,
        "layer1 folds its 2 equal blocks"
    );
    assert!(
        !resnet.contains("tensor(") && !gpt.contains("tensor("),
        "no weights"
    );

    let lenet = LeNet5::new(&mut rng).to_string();
    assert!(
        lenet.starts_with("LeNet5(\n  (conv1): Conv2d(1, 6, kernel_size=(5, 5)"),
        "{lenet}"
    );
    assert!(lenet.ends_with("  (fc3): Linear(in_features=84, out_features=10, bias=true)\n)"));
}

#[test]
fn recurrent_attention_and_transformer_layers_print_like_pytorch() {
    use forge::nn::{
        AdaptiveAvgPool2d, AvgPool1d, ConvTranspose2d, Gru, MaxPool1d, MultiheadAttention,
        PositionalEncoding, Reshape, Rnn, RnnConfig, RnnNonlinearity, TransformerConfig,
        TransformerEncoder,
    };
    let mut rng = Rng::new(0);
    let lstm = Lstm::<f32>::new(
        RnnConfig::new(10, 20).num_layers(2).batch_first(true),
        &mut rng,
    );
    assert_eq!(
        lstm.to_string(),
        "LSTM(10, 20, num_layers=2, batch_first=true)"
    );
    let gru = Gru::<f32>::new(
        RnnConfig::new(3, 4).bias(false).bidirectional(true),
        &mut rng,
    );
    assert_eq!(gru.to_string(), "GRU(3, 4, bias=false, bidirectional=true)");
    let rnn = Rnn::<f32>::new(RnnConfig::new(3, 4), &mut rng);
    assert_eq!(rnn.to_string(), "RNN(3, 4)");
    let rnn = Rnn::<f32>::with_nonlinearity(RnnConfig::new(3, 4), RnnNonlinearity::Relu, &mut rng);
    assert_eq!(rnn.to_string(), "RNN(3, 4, nonlinearity='relu')");

    let mha = MultiheadAttention::<f32>::new(8, 2, 0.0, true, &mut rng);
    assert_eq!(
        mha.to_string(),
        "MultiheadAttention(
  embed_dim=8, num_heads=2, dropout=0, batch_first=true
  (out_proj): Linear(in_features=8, out_features=8, bias=true)
)"
    );
    let pe = PositionalEncoding::<f32>::new(8, 50, 0.1, false, &mut rng);
    assert_eq!(
        pe.to_string(),
        "PositionalEncoding(\n  d_model=8, max_len=50, batch_first=false\n  (dropout): Dropout(p=0.1)\n)"
    );

    let cfg = TransformerConfig {
        dim_feedforward: 16,
        ..TransformerConfig::new(8, 2)
    };
    let enc = TransformerEncoder::<f32>::new(cfg, 2, true, &mut rng);
    assert_eq!(
        enc.to_string(),
        "TransformerEncoder(
  (layers): ModuleList(
    (0-1): 2 x TransformerEncoderLayer(
      activation=relu, norm_first=false
      (self_attn): MultiheadAttention(
        embed_dim=8, num_heads=2, dropout=0.1, batch_first=false
        (out_proj): Linear(in_features=8, out_features=8, bias=true)
      )
      (linear1): Linear(in_features=8, out_features=16, bias=true)
      (dropout): Dropout(p=0.1)
      (linear2): Linear(in_features=16, out_features=8, bias=true)
      (norm1): LayerNorm([8], eps=0.00001, elementwise_affine=true)
      (norm2): LayerNorm([8], eps=0.00001, elementwise_affine=true)
      (dropout1): Dropout(p=0.1)
      (dropout2): Dropout(p=0.1)
    )
  )
  (norm): LayerNorm([8], eps=0.00001, elementwise_affine=true)
)"
    );

    let more = sequential![
        ConvTranspose2d::<f32>::new(4, 2, 3, &mut rng)
            .stride(2)
            .output_padding(1),
        AdaptiveAvgPool2d::new([3, 2]),
        Reshape(vec![2, -1]),
        MaxPool1d::new(2),
        AvgPool1d::new(2),
    ];
    assert_eq!(
        more.to_string(),
        "Sequential(
  (0): ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), padding=(0, 0), output_padding=(1, 1))
  (1): AdaptiveAvgPool2d(output_size=(3, 2))
  (2): Reshape(shape=[2, -1])
  (3): MaxPool1d(kernel_size=2, stride=2, padding=0)
  (4): AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))
)"
    );
    let activations = sequential![
        forge::nn::LeakyRelu::default(),
        forge::nn::Elu::default(),
        forge::nn::Softplus::default(),
        forge::nn::GeluTanh,
        forge::nn::Softmax { axis: -1 },
        forge::nn::LogSoftmax { axis: 1 },
    ];
    assert_eq!(
        activations.to_string(),
        "Sequential(
  (0): LeakyReLU(negative_slope=0.01)
  (1): ELU(alpha=1)
  (2): Softplus(beta=1, threshold=20)
  (3): GELU(approximate='tanh')
  (4): Softmax(dim=-1)
  (5): LogSoftmax(dim=1)
)"
    );
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
    // (path, type, output shape, trainable, frozen)
    type Row<'a> = (&'a str, &'a str, Option<Vec<usize>>, usize, usize);
    let rows: Vec<Row> = s
        .rows
        .iter()
        .map(|r| {
            let shape = r.output_shape.clone();
            (
                r.path.as_str(),
                r.type_name.as_str(),
                shape,
                r.trainable,
                r.frozen,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("", "Net", Some(vec![5, 3]), 144, 54),
            ("body", "Sequential", Some(vec![5, 16]), 144, 0),
            ("body.0", "Linear", Some(vec![5, 16]), 144, 0),
            ("body.1", "Relu", Some(vec![5, 16]), 0, 0),
            ("head", "Linear", Some(vec![5, 3]), 0, 51),
        ]
    );
    assert_eq!(s.output_shape, [5, 3]);
    assert_eq!((s.trainable, s.frozen, s.bytes), (144, 54, (144 + 54) * 4));
    assert_eq!(
        s.to_string(),
        "\
---------------------------------------------------------------------------
Layer                Output shape     Trainable        Frozen       Buffers
---------------------------------------------------------------------------
Net                  [5, 3]                 144            54             0
  body (Sequential)  [5, 16]                144             0             0
    body.0 (Linear)  [5, 16]                144             0             0
    body.1 (Relu)    [5, 16]                  0             0             0
  head (Linear)      [5, 3]                   0            51             0
---------------------------------------------------------------------------
Input shape: [5, 8]
Output shape: [5, 3]
Trainable params: 144
Frozen params: 54
Total params: 198
Buffers: 0
Params size: 0.79 KB"
    );
}

/// A derived sublayer that reports its output shape (one line) when
/// `report` is set.
#[derive(Layer)]
struct Block {
    fc: Linear,
    #[skip]
    report: bool,
}

impl Forward<Tensor> for Block {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        let y = self.fc.forward(x).reshape(&[-1]);
        if self.report {
            forge::nn::record_output(self, y)
        } else {
            y
        }
    }
}

#[derive(Layer)]
struct Outer {
    reported: Block,
    silent: Block,
}

impl Forward<Tensor> for Outer {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        let y = self.reported.forward(x.clone());
        y + self.silent.forward(x)
    }
}

#[test]
fn summary_shows_per_layer_output_shapes_for_convolutions_and_derived_layers() {
    let mut rng = Rng::new(0);
    // every layer changes the shape, the same activation type twice
    let cnn = sequential![
        Conv2d::new(1, 4, 3, &mut rng),
        Relu,
        MaxPool2d::new(2),
        sequential![Flatten, Linear::new(4 * 3 * 3, 5, &mut rng)],
        Relu,
    ];
    let s = summary(&cnn, &[2, 1, 8, 8]);
    let shapes: Vec<(&str, Option<Vec<usize>>)> = s
        .rows
        .iter()
        .map(|r| (r.path.as_str(), r.output_shape.clone()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("", Some(vec![2, 5])),
            ("0", Some(vec![2, 4, 6, 6])),
            ("1", Some(vec![2, 4, 6, 6])),
            ("2", Some(vec![2, 4, 3, 3])),
            ("3", Some(vec![2, 5])),
            ("3.0", Some(vec![2, 36])),
            ("3.1", Some(vec![2, 5])),
            ("4", Some(vec![2, 5])),
        ]
    );

    // A derived layer's own row has a shape only when its forward calls
    // record_output; its built-in sublayers always do. The model's row
    // comes from the forward pass itself.
    let outer = Outer {
        reported: Block {
            fc: Linear::new(3, 2, &mut rng),
            report: true,
        },
        silent: Block {
            fc: Linear::new(3, 2, &mut rng),
            report: false,
        },
    };
    let s = summary(&outer, &[4, 3]);
    let shapes: Vec<(&str, Option<Vec<usize>>)> = s
        .rows
        .iter()
        .map(|r| (r.path.as_str(), r.output_shape.clone()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("", Some(vec![8])),
            ("reported", Some(vec![8])),
            ("reported.fc", Some(vec![4, 2])),
            ("silent", None),
            ("silent.fc", Some(vec![4, 2])),
        ]
    );
    let table = s.to_string();
    let silent_line = table.lines().find(|l| l.starts_with("  silent ")).unwrap();
    assert_eq!(
        silent_line.split_whitespace().collect::<Vec<_>>(),
        ["silent", "(Block)", "-", "8", "0", "0"]
    );
    // a Sequential whose last element reports nothing reports nothing
    let seq = sequential![
        Linear::new(3, 3, &mut rng),
        Block {
            fc: Linear::new(3, 2, &mut rng),
            report: false,
        }
    ];
    let outer_seq = sequential![seq];
    let s = summary(&outer_seq, &[4, 3]);
    assert_eq!(s.rows[1].path, "0");
    assert_eq!(s.rows[1].output_shape, None);
    assert_eq!(s.rows[2].output_shape, Some(vec![4, 3]));
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

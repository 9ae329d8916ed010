//! The first-line papercuts of issue 34, each pinned by a test that failed
//! on the old behaviour: constructors that infer their device, one type for
//! shape and axes arguments, `cat`/`stack` for every element type, a
//! `summary` that leaves the model as it was (buffers counted as buffers),
//! checkpoint loaders that name the path and the right loader, and a
//! `Display` that names the op that made a tensor. (Inference without a
//! turbofish is also pinned by `ui-tests/pass/constructors_infer.rs`.)

use forge::checkpoint::LayerIo;
use forge::nn::summary;
use forge::optim::StepLr;
use forge::prelude::*;

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("forge-papercuts-{}-{name}", std::process::id()))
}

#[test]
fn constructors_infer_the_default_device() {
    // Was `cannot satisfy _: Device` without a turbofish.
    let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    assert_eq!(t.to_vec(), [1.0, 2.0]);
    let i = Tensor::from_vec(vec![3i64], &[1]);
    assert_eq!(i.item(), 3);
    let s = Tensor::scalar(2.5f64);
    assert_eq!(s.item(), 2.5);
}

#[test]
fn shape_and_axes_arguments_take_any_integer_list() {
    let x = Tensor::<f32>::zeros(&[2, 3]);
    let y = Tensor::<f32>::from_fn(&[3, 2], |i| i as f32);
    // `reshape` took `&[isize]`, `shape()` is `&[usize]`.
    assert_eq!(y.reshape(x.shape()).shape(), &[2, 3]);
    assert_eq!(y.reshape(&[-1, 3]).shape(), &[2, 3]);
    let dims: Vec<usize> = vec![1, 6];
    assert_eq!(y.view(&dims).shape(), &[1, 6]);
    assert_eq!(Tensor::<f32>::ones(dims.clone()).shape(), &[1, 6]);
    assert_eq!(y.sum_dim(vec![0usize], false).to_vec(), [6.0, 9.0]);
    assert_eq!(y.sum_dim(&[-1], true).shape(), &[3, 1]);
    assert_eq!(y.expand(y.shape()).shape(), &[3, 2]);
    assert_eq!(y.permute(vec![1i64, 0]).shape(), &[2, 3]);
}

#[test]
#[should_panic(expected = "view: negative size")]
fn a_negative_size_outside_reshape_names_the_op() {
    let _ = Tensor::<f32>::zeros(&[2]).view(&[-1]);
}

#[test]
fn cat_and_stack_take_every_element_type() {
    let i = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]);
    assert_eq!(Tensor::cat(&[&i, &i], 1).to_vec(), [1, 2, 1, 2, 3, 4, 3, 4]);
    let m = Tensor::from_vec(vec![true, false], &[2]);
    let s = Tensor::stack(&[&m, &m], 1);
    assert_eq!(s.shape(), &[2, 2]);
    assert_eq!(s.to_vec(), [true, true, false, false]);
    let b = Tensor::from_vec(vec![7u8], &[1]);
    assert_eq!(Tensor::cat(&[&b, &b, &b], 0).to_vec(), [7, 7, 7]);
    let h = Tensor::from_vec(vec![5i32], &[1]);
    assert_eq!(Tensor::stack(&[&h, &h], 0).to_vec(), [5, 5]);
    // Floats are still recorded: the gradient flows back through `cat`.
    let a = Tensor::<f64>::ones(&[2]).requires_grad();
    let g = Tensor::stack(&[&a, &a], 0).sum().backward();
    assert_eq!(g.get(&a).unwrap().to_vec(), [2.0, 2.0]);
}

#[derive(Layer)]
struct BnNet {
    fc: Linear,
    bn: BatchNorm1d,
    drop: Dropout,
}

impl Forward<Tensor> for BnNet {
    type Output = Tensor;
    fn forward(&self, x: Tensor) -> Tensor {
        self.drop.forward(self.bn.forward(self.fc.forward(x)))
    }
}

#[test]
fn summary_leaves_the_model_as_it_was_and_counts_buffers_apart() {
    let mut rng = Rng::new(0);
    let net = BnNet {
        fc: Linear::new(3, 4, &mut rng),
        bn: BatchNorm1d::new(4),
        drop: Dropout::new(0.5, 7),
    };
    assert!(Layer::<f32>::is_training(&net));
    let before = net.state_dict();
    let rngs = Layer::<f32>::rng_states(&net);
    // A non-zero input would move the running mean; zeros move the
    // variance (1.0 -> 0.9 with momentum 0.1), as they did before.
    let s = summary(&net, &[5, 3]);
    let after = net.state_dict();
    for (k, v) in &before {
        assert_eq!(v.to_vec(), after[k].to_vec(), "summary changed {k}");
    }
    assert_eq!(
        rngs,
        Layer::<f32>::rng_states(&net),
        "summary moved dropout's generator"
    );
    // fc: 3*4+4 trainable; bn: 4+4 trainable, running mean/var (4+4) and
    // num_batches_tracked (1) are buffers, not frozen parameters.
    assert_eq!((s.trainable, s.frozen, s.buffers), (16 + 8, 0, 9));
    let bn = s.rows.iter().find(|r| r.path == "bn").unwrap();
    assert_eq!((bn.trainable, bn.frozen, bn.buffers), (8, 0, 9));
    assert!(s.to_string().contains("Buffers: 9"), "{s}");
}

#[test]
fn a_checkpoint_with_a_schedule_loaded_without_one_names_the_path_and_the_loaders() {
    let path = tmp("sched.ckpt");
    let model = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    let mut opt = Sgd::new(0.1);
    let sched = StepLr::for_optimizer(&mut opt, 2, 0.5);
    TrainingCheckpoint::save(&path, &model, &opt, Some(&sched), 1).unwrap();
    let mut m2 = Linear::<f32>::new(2, 1, &mut Rng::new(1));
    let before = m2.weight.to_vec();
    let e = TrainingCheckpoint::load_into(&path, &mut m2, &mut Sgd::new(0.1), None).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ForgeError::State { .. }), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(
        msg.contains("StepLr") && msg.contains("load_model"),
        "{msg}"
    );
    assert_eq!(m2.weight.to_vec(), before, "nothing loaded");
    // With the schedule it loads.
    let mut opt2 = Sgd::new(0.1);
    let mut sched2 = StepLr::for_optimizer(&mut opt2, 2, 0.5);
    assert_eq!(
        TrainingCheckpoint::load_into(&path, &mut m2, &mut opt2, Some(&mut sched2)).unwrap(),
        1
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_file_of_the_other_kind_names_the_path_and_the_right_loader() {
    let weights = tmp("weights.safetensors");
    let ckpt = tmp("train.ckpt");
    let mut model = Linear::<f32>::new(2, 1, &mut Rng::new(0));
    model.save(&weights).unwrap();
    TrainingCheckpoint::save(&ckpt, &model, &Sgd::new(0.1), None, 0).unwrap();

    let e =
        TrainingCheckpoint::load_into(&weights, &mut model, &mut Sgd::new(0.1), None).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ForgeError::Format { .. }), "{msg}");
    assert!(
        msg.contains(&weights.display().to_string()) && msg.contains("load_weights"),
        "{msg}"
    );

    let e = model.load_weights(&ckpt).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ForgeError::Format { .. }), "{msg}");
    assert!(
        msg.contains(&ckpt.display().to_string()) && msg.contains("TrainingCheckpoint::load_into"),
        "{msg}"
    );
    // The loader that reads it.
    TrainingCheckpoint::load_model(&ckpt, &mut model).unwrap();
    std::fs::remove_file(&weights).unwrap();
    std::fs::remove_file(&ckpt).unwrap();
}

#[test]
fn display_names_the_op_that_made_a_tracked_tensor() {
    let w = Tensor::<f32>::ones(&[2]).requires_grad();
    assert!(w.to_string().ends_with(", requires_grad=True)"), "{w}");
    let y = (&w * &w).sum();
    assert!(y.to_string().ends_with(", grad_fn=<sum>)"), "{y}");
    let z = w.relu();
    assert!(z.to_string().contains("grad_fn=<relu>"), "{z}");
    assert!(!w.detach().to_string().contains("grad"), "{}", w.detach());
}

//! The port of issue 34: a 12-line PyTorch model (convolution, batch norm,
//! `nn.Upsample`, `torch.cat`, `softmax`, `topk`) that needed two
//! hand-written workarounds (no `interpolate`/`Upsample`, no `topk`), here
//! written line for line with forge's own ops, trained one step, and also
//! through the ops that came last (`Conv3d`, `MaxPool3d`, `ctc_loss`). The
//! PyTorch original:
//!
//! ```text
//! class Net(nn.Module):
//!     def __init__(self):
//!         super().__init__()
//!         self.conv = nn.Conv2d(3, 8, 3, padding=1)
//!         self.bn = nn.BatchNorm2d(8)
//!         self.up = nn.Upsample(scale_factor=2, mode="bilinear")
//!         self.head = nn.Conv2d(11, 4, 1)
//!     def forward(self, x):
//!         y = F.relu(self.bn(self.conv(x)))
//!         z = torch.cat([self.up(y), self.up(x)], dim=1)
//!         p = self.head(z).flatten(2).mean(2).softmax(1)
//!         return p.topk(2, dim=1)
//! ```

use forge::nn::functional::{ctc_loss, mse_loss};
use forge::nn::{BatchNorm2d, Conv2d, Conv3d, MaxPool3d, Upsample};
use forge::ops::InterpolateMode;
use forge::prelude::*;

#[derive(Layer)]
struct Net {
    conv: Conv2d,
    bn: BatchNorm2d,
    #[skip]
    up: Upsample,
    head: Conv2d,
}

impl Net {
    fn new(rng: &mut Rng) -> Self {
        Net {
            conv: Conv2d::new(3, 8, 3, rng).padding(1),
            bn: BatchNorm2d::new(8),
            up: Upsample::scale_factor(2.0).mode(InterpolateMode::Bilinear),
            head: Conv2d::new(11, 4, 1, rng),
        }
    }

    fn forward(&self, x: &Tensor) -> (Tensor, Tensor<i64>) {
        let y = self.bn.forward(self.conv.forward(x.clone())).relu();
        let z = Tensor::cat(&[&self.up.forward(y), &self.up.forward(x.clone())], 1);
        let p = self
            .head
            .forward(z)
            .flatten(2, -1)
            .mean_dim(&[2], false)
            .softmax(1);
        p.topk(2, 1, true, true)
    }
}

#[test]
fn the_ported_model_runs_and_trains_with_no_workaround() {
    let mut rng = Rng::new(34);
    let net = Net::new(&mut rng);
    let x = Tensor::normal(&[2, 3, 5, 6], 0.0, 1.0, &mut rng);
    let (top, idx) = net.forward(&x);
    assert_eq!(top.shape(), &[2, 2]);
    assert_eq!(idx.shape(), &[2, 2]);
    let t = top.to_vec();
    assert!(t[0] >= t[1] && t[2] >= t[3], "topk is sorted: {t:?}");
    assert!(idx.to_vec().iter().all(|&i| (0..4).contains(&i)));
    let loss = mse_loss(&top, &Tensor::ones(&[2, 2]));
    let g = loss.backward();
    for p in net.parameters() {
        let gp = g.get(&p).expect("every parameter gets a gradient");
        assert!(gp.to_vec().iter().all(|v| v.is_finite()));
    }
}

#[test]
fn the_last_ops_of_the_list_compose_in_a_model() {
    let mut rng = Rng::new(35);
    let conv = Conv3d::new(2, 4, 3, &mut rng).padding(1);
    let pool = MaxPool3d::new([1, 2, 2]);
    let x = Tensor::normal(&[2, 2, 5, 4, 4], 0.0, 1.0, &mut rng);
    // [N, 4, 5, 2, 2] -> frames T = 5, classes C = 16: [T, N, C].
    let y: Tensor = pool.forward(conv.forward(x));
    let lp = y
        .permute(&[2, 0, 1, 3, 4])
        .reshape(&[5, 2, 16])
        .log_softmax(2);
    let targets = Tensor::<i64>::from_vec(vec![3, 7, 1, 1, 0, 0], &[2, 3]);
    let loss = ctc_loss(&lp, &targets, &[5, 4], &[2, 2]);
    assert!(loss.item().is_finite());
    let g = loss.backward();
    assert_eq!(g.get(&conv.weight).unwrap().shape(), &[4, 2, 3, 3, 3]);
}

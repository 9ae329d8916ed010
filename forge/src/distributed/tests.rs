//! Transport-level tests; the data-parallel checks are in
//! `tests/misc/distributed.rs` (threads) and `examples/distributed_check` (MPI).

use super::*;
use crate::nn::{Forward, Layer, Linear};
use crate::Rng;

#[test]
fn local_communicator_is_a_world_of_one() {
    let c = LocalCommunicator;
    let mut v = [1.5f64, -2.0];
    c.all_reduce_sum(&mut v).unwrap();
    c.all_reduce_mean(&mut v).unwrap();
    c.broadcast_slice(&mut v, 0).unwrap();
    assert_eq!(v, [1.5, -2.0]);
    assert!(c.broadcast(BufMut::U8(&mut []), 1).is_err());
    assert!(c.send(Buf::U8(&[]), 0).is_err());
    c.check_same("x", "anything").unwrap();
    c.run_on_root(|| Ok(())).unwrap();
}

#[test]
fn a_gone_peer_is_an_error_not_a_hang() {
    let out = ThreadCommunicator::run(2, |c| {
        if c.rank() == 1 {
            return String::new(); // leaves without taking part
        }
        let mut v = [0.0f32; 3];
        c.all_reduce_sum(&mut v).unwrap_err().to_string()
    });
    assert!(out[0].contains("rank 1 is gone"), "{}", out[0]);
}

#[test]
fn a_message_of_the_wrong_length_is_an_error() {
    let out = ThreadCommunicator::run(2, |c| {
        let mut v = vec![0.0f64; 2 + c.rank()];
        c.broadcast(BufMut::F64(&mut v), 0)
            .err()
            .map(|e| e.to_string())
    });
    assert_eq!(out[0], None);
    let msg = out[1].as_deref().unwrap();
    assert!(
        msg.contains("expected 3 f64 from rank 0, got 2 f64"),
        "{msg}"
    );
}

#[test]
fn tensor_collectives_check_shapes_on_every_rank() {
    let out = ThreadCommunicator::run(3, |c| {
        let t = crate::Tensor::<f32>::ones(&[2, 1 + c.rank() / 2]);
        c.all_reduce_sum_tensor(&t).unwrap_err().to_string()
    });
    assert!(out.iter().all(|m| m == &out[0]));
    assert!(
        out[0].contains("rank 2: `[2, 2]` where rank 0 has `[2, 1]`"),
        "{}",
        out[0]
    );
}

#[test]
fn gradients_reduce_in_buckets_of_any_size() {
    // One element per bucket and the default: the same bytes.
    let run = |bucket| {
        ThreadCommunicator::run(3, move |c| {
            let r = c.rank() as f64;
            let m = Linear::<f64>::new(3, 2, &mut Rng::new(0));
            let mut ddp = DistributedDataParallel::new(m, c)
                .unwrap()
                .with_bucket_bytes(bucket);
            let x = crate::Tensor::<f64>::from_fn(&[2, 3], |i| (i as f64 + r).sin());
            let g = ddp.backward(&ddp.forward(x).square().sum()).unwrap();
            let w = &ddp.module().weight;
            (
                g.get(w).unwrap().to_vec(),
                ddp.comm_time() > std::time::Duration::ZERO,
            )
        })
    };
    let (a, b) = (run(1), run(DEFAULT_BUCKET_BYTES));
    assert_eq!(a, b);
    assert!(a.iter().all(|x| x == &a[0] && x.1));
}

#[test]
fn a_weight_without_gradient_on_some_ranks_counts_as_zero() {
    let out = ThreadCommunicator::run(2, |c| {
        let r = c.rank();
        let mut ddp =
            DistributedDataParallel::new(Linear::<f64>::new(1, 1, &mut Rng::new(0)), c).unwrap();
        let w = ddp.module().weight.clone();
        let mut grads = crate::Gradients::new();
        if r == 1 {
            grads.insert(&w, crate::Tensor::full(&[1, 1], 4.0));
        }
        let avg = ddp.reduce_gradients(&grads).unwrap();
        let bias = ddp.module().bias.clone().unwrap();
        (avg.get(&w).map(|t| t.item()), avg.get(&bias).is_none())
    });
    assert_eq!(out, vec![(Some(2.0), true); 2]);
}

#[test]
fn freezing_differently_after_construction_fails_on_every_rank() {
    let out = ThreadCommunicator::run(2, |c| {
        let r = c.rank();
        let m = crate::sequential![
            Linear::<f64>::new(2, 2, &mut Rng::new(0)),
            Linear::<f64>::new(2, 1, &mut Rng::new(1))
        ];
        let mut ddp = DistributedDataParallel::new(m, c).unwrap();
        if r == 1 {
            ddp.module_mut().freeze_prefix("0");
        }
        let loss = ddp.forward(crate::Tensor::ones(&[1, 2])).sum();
        ddp.backward(&loss).err().unwrap().to_string()
    });
    assert_eq!(out[0], out[1]);
    assert!(
        out[0].contains("the model's layout differs between ranks"),
        "{}",
        out[0]
    );
    assert!(
        out[0].contains("rank 1: `0.weight: frozen weight"),
        "{}",
        out[0]
    );
}

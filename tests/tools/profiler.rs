//! The profiler counts exactly the ops that ran (forward, including
//! untracked ones) and the backward rules that ran, not the ops a rule
//! calls inside, nor ops of other threads; its Chrome trace parses.

use forge::tools::{profile, Graph, Phase};
use forge::Tensor;
use std::collections::BTreeMap;

#[test]
fn op_counts_equal_the_ops_run() {
    let w1 = Tensor::<f32>::full(&[8, 16], 0.01).requires_grad();
    let w2 = Tensor::<f32>::full(&[16, 4], 0.02).requires_grad();
    let x = Tensor::<f32>::ones(&[5, 8]);
    let mut forward = BTreeMap::<&str, u64>::new();
    let ((loss, grads), prof) = profile(|| {
        let mut h = x.matmul(&w1);
        *forward.entry("matmul").or_default() += 1;
        for _ in 0..3 {
            h = h.tanh();
            h = &h * 1.5;
            *forward.entry("tanh").or_default() += 1;
            *forward.entry("mul_scalar").or_default() += 1;
        }
        let y = h.matmul(&w2).relu();
        *forward.entry("matmul").or_default() += 1;
        *forward.entry("relu").or_default() += 1;
        let loss = y.square().sum();
        *forward.entry("square").or_default() += 1;
        *forward.entry("sum").or_default() += 1;
        // Untracked ops are ops too.
        let _plain = x.exp();
        *forward.entry("exp").or_default() += 1;
        let grads = loss.backward();
        (loss, grads)
    });
    assert_eq!(grads.len(), 2);
    let seen: BTreeMap<&str, u64> = prof
        .rows()
        .iter()
        .filter(|r| r.forward_calls > 0)
        .map(|r| (r.op, r.forward_calls))
        .collect();
    assert_eq!(seen, forward);
    // One backward rule per recorded op (every one lies on the loss's
    // path); the ops the rules call inside are not counted as forward ops.
    let graph = Graph::of(&loss);
    let mut recorded = BTreeMap::<String, u64>::new();
    for n in graph
        .nodes
        .iter()
        .filter(|n| n.kind == forge::tools::NodeKind::Op)
    {
        *recorded.entry(n.label.clone()).or_default() += 1;
    }
    let backward: BTreeMap<String, u64> = prof
        .rows()
        .iter()
        .filter(|r| r.backward_calls > 0)
        .map(|r| (r.op.to_string(), r.backward_calls))
        .collect();
    assert_eq!(backward, recorded);
    assert_eq!(prof.calls("exp", Phase::Backward), 0);
    // The matmuls know their FLOPs: 2 m n k each, forward.
    let fwd_matmul: u64 = prof
        .events()
        .iter()
        .filter(|e| e.op == "matmul" && e.phase == Phase::Forward)
        .map(|e| e.flops.unwrap())
        .sum();
    assert_eq!(fwd_matmul, 2 * 5 * 16 * 8 + 2 * 5 * 4 * 16);
    // Every event knows its call site in this file.
    assert!(prof
        .events()
        .iter()
        .filter(|e| e.phase == Phase::Forward)
        .all(|e| e.site.unwrap().file() == file!()));
    // The table lists every op once.
    let table = prof.table();
    for op in forward.keys() {
        assert_eq!(
            table
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(op))
                .count(),
            1,
            "{table}"
        );
    }
}

#[test]
fn other_threads_and_later_ops_are_not_recorded() {
    let x = Tensor::<f64>::ones(&[4]).requires_grad();
    let (_, prof) = profile(|| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let _ = x.sin().cos();
            });
        });
        x.exp()
    });
    let _ = x.log();
    let ops: Vec<&str> = prof.events().iter().map(|e| e.op).collect();
    assert_eq!(ops, ["exp"]);
}

#[test]
fn the_chrome_trace_parses_with_one_track_per_thread() {
    let w = Tensor::<f32>::ones(&[3, 3]).requires_grad();
    let (_, prof) = profile(|| w.matmul(&w).sum().backward());
    let trace: serde_json::Value = serde_json::from_str(&prof.chrome_trace()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let complete: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), prof.events().len());
    assert_eq!(complete.len(), 4); // matmul, sum; their two rules
    for e in &complete {
        assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0);
        assert!(["forward", "backward"].contains(&e["cat"].as_str().unwrap()));
    }
    let tracks: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "M").collect();
    assert_eq!(tracks.len(), 1);
    assert_eq!(tracks[0]["tid"], complete[0]["tid"]);
    // Written to a file, it reads back the same.
    let path = std::env::temp_dir().join(format!("forge-trace-{}.json", std::process::id()));
    prof.write_chrome_trace(&path).unwrap();
    let back: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(back, trace);
    std::fs::remove_file(path).unwrap();
}

/// Every event of a `Sequential` model's step carries its layer's index,
/// backward rules included (their forward op's layer); `layers()` sums
/// them: each path's self time is its own events', the totals add up.
#[test]
fn events_are_grouped_by_layer_path_with_self_and_total_time() {
    use forge::prelude::{sequential, Linear, Relu};
    use forge::tools::layer_scope;
    let mut rng = forge::Rng::new(0);
    let model = sequential![
        Linear::<f32>::new(6, 8, &mut rng),
        Relu,
        sequential![Linear::<f32>::new(8, 4, &mut rng), Relu]
    ];
    let x = Tensor::<f32>::ones(&[3, 6]);
    let (_, prof) = profile(|| {
        layer_scope("model", || model.forward(x.clone()))
            .sum()
            .backward()
    });
    // relu is the only op of layer 1, forward and backward.
    let relu: Vec<_> = prof.events().iter().filter(|e| e.op == "relu").collect();
    assert_eq!(relu.len(), 4, "{relu:?}"); // two relus, each forward and backward
    let layers: Vec<Option<&str>> = relu.iter().map(|e| e.layer.as_deref()).collect();
    assert_eq!(
        layers.iter().filter(|l| **l == Some("model.1")).count(),
        2,
        "{layers:?}"
    );
    assert_eq!(
        layers.iter().filter(|l| **l == Some("model.2.1")).count(),
        2,
        "{layers:?}"
    );
    // The sum and its rule ran outside every layer.
    assert!(prof
        .events()
        .iter()
        .filter(|e| e.op == "sum")
        .all(|e| e.layer.is_none()));
    let rows = prof.layers();
    let row = |p: &str| rows.iter().find(|r| r.path == p).unwrap().clone();
    // Every event is outside every layer or inside `model`, once.
    let n = prof.events().len() as u64;
    assert_eq!(row("").total_calls + row("model").total_calls, n);
    assert_eq!(
        row("").total_ns + row("model").total_ns,
        prof.events().iter().map(|e| e.dur_ns).sum::<u64>()
    );
    let (m, m2) = (row("model"), row("model.2"));
    assert_eq!(
        m.self_calls, 0,
        "every op of the model is in one of its layers"
    );
    assert_eq!(
        m.total_calls,
        row("model.0").total_calls + row("model.1").total_calls + m2.total_calls
    );
    assert_eq!(
        m2.total_ns,
        m2.self_ns + row("model.2.0").total_ns + row("model.2.1").total_ns
    );
    assert!(prof.layer_table().contains("model.2.1"));
}

/// Buffers taken from the pool and parallel loops are counted per event:
/// an op making a new output takes at least one buffer; a large matmul
/// hands chunks to a worker with 2 threads and none with 1.
#[test]
fn events_count_pool_buffers_and_parallel_dispatches() {
    let _lock = crate::common::lock_thread_count();
    let before = forge::runtime::num_threads();
    let a = Tensor::<f32>::ones(&[256, 256]);
    let mut dispatched = Vec::new();
    for threads in [1, 2] {
        forge::runtime::set_num_threads(threads);
        let (_, prof) = profile(|| a.matmul(&a).exp());
        let exp = prof.events().iter().find(|e| e.op == "exp").unwrap();
        assert!(exp.pool_takes >= 1, "{exp:?}");
        assert!(exp.pool_fresh <= exp.pool_takes);
        let mm = prof.events().iter().find(|e| e.op == "matmul").unwrap();
        assert_eq!(mm.threads, threads);
        dispatched.push(mm.dispatches);
        assert_eq!(
            prof.rows().iter().map(|r| r.pool_takes).sum::<u64>(),
            prof.events().iter().map(|e| e.pool_takes).sum::<u64>()
        );
    }
    forge::runtime::set_num_threads(before);
    assert_eq!(dispatched[0], 0);
    assert!(dispatched[1] >= 1, "{dispatched:?}");
}

/// Inference takes fast paths that record nothing (the direct
/// convolution, a convolution with its activation in its output pass or
/// with its batch norm folded in, max pooling without the positions); the
/// profiler still counts each as the op it is, instead of crediting its
/// time to the next op recorded.
#[test]
fn inference_fast_paths_are_ops_too() {
    use forge::nn::{Activation, Conv2d, Forward, Layer};
    let mut rng = forge::Rng::new(5);
    let conv = Conv2d::<f32>::new(16, 32, 3, &mut rng).padding(1);
    let x = Tensor::<f32>::normal(&[1, 16, 8, 8], 0.0, 1.0, &mut rng);
    let (_, prof) = profile(|| {
        forge::no_grad(|| {
            let y = conv.forward(x.clone());
            let z = conv.forward_activated(x.clone(), Activation::Relu);
            (y.max_pool2d([2, 2], [2, 2], [0, 0]), z)
        })
    });
    let calls = |p: &forge::tools::Profile, op: &str| {
        p.rows()
            .iter()
            .find(|r| r.op == op)
            .map_or(0, |r| r.forward_calls)
    };
    assert_eq!(calls(&prof, "conv2d"), 2, "{}", prof.table());
    assert_eq!(calls(&prof, "max_pool"), 1, "{}", prof.table());

    // ResNet-18 in eval mode: its 20 convolutions (batch norm folded in,
    // the residual and ReLU in the output pass) and its stem's max pooling
    let mut m = forge::models::resnet::resnet18::<f32>(10, &mut rng);
    m.eval();
    let img = Tensor::<f32>::normal(&[1, 3, 32, 32], 0.0, 1.0, &mut rng);
    let (_, prof) = profile(|| forge::no_grad(|| m.forward(img.clone())));
    assert_eq!(calls(&prof, "conv2d"), 20, "{}", prof.table());
    assert_eq!(calls(&prof, "max_pool"), 1, "{}", prof.table());
}

#[test]
fn recurrent_and_bert_inference_paths_are_ops_too() {
    use forge::hub::{Bert, BertConfig};
    use forge::nn::{Forward, Gru, Lstm, RnnConfig};
    let calls = |p: &forge::tools::Profile, op: &str| {
        p.rows()
            .iter()
            .find(|r| r.op == op)
            .map_or(0, |r| r.forward_calls)
    };
    let mut rng = forge::Rng::new(6);
    let x = Tensor::<f32>::normal(&[4, 5, 16], 0.0, 1.0, &mut rng);
    // a two-layer LSTM under no_grad: each layer's time loop (the input
    // projection inside it) is one sequence op, batch-first or not
    for batch_first in [true, false] {
        let cfg = RnnConfig::new(16, 32)
            .num_layers(2)
            .batch_first(batch_first);
        let lstm = Lstm::<f32>::new(cfg, &mut rng);
        let (_, prof) = profile(|| forge::no_grad(|| lstm.forward(x.clone())));
        assert_eq!(calls(&prof, "lstm_sequence"), 2, "{}", prof.table());
    }
    let gru = Gru::<f32>::new(RnnConfig::new(16, 32), &mut rng);
    let (_, prof) = profile(|| forge::no_grad(|| gru.forward(x.clone())));
    assert_eq!(calls(&prof, "gru_sequence"), 1, "{}", prof.table());

    // BERT's fused encoder: per layer the attention heads and the two
    // residual adds with their layer norms, besides the embeddings' norm
    let mut c = BertConfig::bert_base();
    (
        c.vocab_size,
        c.hidden_size,
        c.num_hidden_layers,
        c.intermediate_size,
    ) = (50, 32, 3, 64);
    c.num_attention_heads = 2;
    let bert = Bert::<f32>::new(c, false, &mut rng);
    let ids = Tensor::<i64>::from_vec(vec![1, 2, 3, 4, 5, 6], &[1, 6]);
    let (_, prof) = profile(|| forge::no_grad(|| bert.forward(ids.clone())));
    assert_eq!(
        calls(&prof, "scaled_dot_product_attention"),
        3,
        "{}",
        prof.table()
    );
    assert_eq!(calls(&prof, "layer_norm"), 7, "{}", prof.table());
    // under bf16 autocast the layers run as one chain of bf16 products
    let (_, prof) = profile(|| {
        forge::no_grad(|| forge::autocast(forge::DType::BF16, || bert.forward(ids.clone())))
    });
    assert_eq!(calls(&prof, "encoder_layers_bf16"), 1, "{}", prof.table());
}

/// A tool switched on changes nothing computed: the fused paths outside
/// autograd (the encoder's self-attention, whose sums run in another order
/// than the composed attention's; a `Linear` with its activation in the
/// product's epilogue) run under the profiler too, and show as their ops.
#[test]
fn the_profiler_leaves_the_fused_paths_and_their_bits_alone() {
    use forge::nn::{Activation, Forward, Layer, TransformerConfig, TransformerEncoderLayer};
    let mut rng = forge::Rng::new(7);
    let mut cfg = TransformerConfig::new(64, 4);
    (cfg.dim_feedforward, cfg.batch_first) = (96, true);
    let mut enc = TransformerEncoderLayer::<f32>::new(cfg, &mut rng);
    enc.eval();
    let x = Tensor::<f32>::normal(&[2, 9, 64], 0.0, 1.0, &mut rng);
    let plain = forge::no_grad(|| enc.forward(x.clone()));
    let (profiled, prof) = profile(|| forge::no_grad(|| enc.forward(x.clone())));
    let bits = |t: &Tensor<f32>| t.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&profiled), bits(&plain));
    let calls = |op: &str| {
        prof.rows()
            .iter()
            .find(|r| r.op == op)
            .map_or(0, |r| r.forward_calls)
    };
    // the fused kernel, not the composed heads' softmax
    assert_eq!(calls("qkv_attention"), 1, "{}", prof.table());
    assert_eq!(calls("softmax"), 0, "{}", prof.table());

    // a Linear with its GELU in the epilogue, and under bf16 autocast a
    // product that is autocast's, recorded by nobody: one `linear` row each,
    // and the bits of the run without the profiler
    let lin = forge::f32::Linear::new(64, 48, &mut rng);
    let fused = || forge::no_grad(|| lin.forward_activated(x.clone(), Activation::Gelu));
    let bf16 = || forge::no_grad(|| forge::autocast(forge::DType::BF16, || lin.forward(x.clone())));
    for run in [&fused as &dyn Fn() -> Tensor<f32>, &bf16] {
        let plain = run();
        let (profiled, prof) = profile(run);
        assert_eq!(bits(&profiled), bits(&plain));
        let rows: Vec<_> = prof
            .rows()
            .iter()
            .map(|r| (r.op, r.forward_calls))
            .collect();
        assert_eq!(rows, vec![("linear", 1)], "{}", prof.table());
    }
}

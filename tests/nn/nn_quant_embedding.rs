//! The int8 `Embedding` (`forge::quant::quantize_embeddings`): one
//! symmetric scale per row, lookups that return exactly the rows of the
//! dequantized table, the table as a tied output head (`attend`) running
//! the int8 product on the same bytes, its checkpoint and
//! its refusal to train.

use forge::checkpoint::LayerIo;
use forge::io::read_safetensors;
use forge::nn::Embedding;
use forge::prelude::*;
use forge::quant::{quantize_dynamic, quantize_embeddings, resident_bytes, Granularity};
use forge::DType;

fn bits(t: &Tensor<f32>) -> Vec<u32> {
    t.to_vec().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn lookups_return_the_rows_of_the_dequantized_table() {
    let mut rng = Rng::new(5);
    // odd sizes: rows not a multiple of the 16-row panels, a width not a
    // multiple of the 4-byte quads
    for (n, d) in [(37, 13), (100, 64), (3, 1)] {
        let mut emb = Embedding::<f32>::new(n, d, None, &mut rng);
        let w = emb.weight.to_vec();
        assert_eq!(quantize_dynamic(&mut emb, Granularity::PerChannel), 0);
        assert_eq!(quantize_embeddings(&mut emb), 1);
        assert_eq!(quantize_embeddings(&mut emb), 0);
        assert_eq!(emb.weight.shape(), &[0, d]);
        let q = emb.int8().unwrap();
        assert_eq!(q.scales().len(), n);
        // the scale of each row is its own largest magnitude / 127.5
        for (r, &s) in q.scales().iter().enumerate() {
            let m = w[r * d..(r + 1) * d]
                .iter()
                .fold(0f32, |a, v| a.max(v.abs()));
            assert_eq!(s, (m / 127.5).max(f32::EPSILON), "row {r}");
        }
        let table = q.dequantize();
        let ids: Vec<i64> = (0..2 * n as i64).map(|i| (i * 7 + 3) % n as i64).collect();
        let idx = Tensor::<i64>::from_vec(ids.clone(), &[2, n]);
        let y = emb.forward(idx);
        assert_eq!(y.shape(), &[2, n, d]);
        let want: Vec<u32> = ids
            .iter()
            .flat_map(|&i| table[i as usize * d..(i as usize + 1) * d].to_vec())
            .map(f32::to_bits)
            .collect();
        assert_eq!(bits(&y), want, "{n} x {d}");
        // each value within half a step of its row's scale of the f32 one
        for (k, &i) in ids.iter().enumerate() {
            let s = q.scales()[i as usize];
            for p in 0..d {
                let err = (y.as_slice()[k * d + p] - w[i as usize * d + p]).abs();
                assert!(err <= 0.5 * s * 1.0001, "{err} > half of {s}");
            }
        }
    }
}

#[test]
fn the_table_as_an_output_head_is_the_int8_product_on_its_bytes() {
    let mut rng = Rng::new(6);
    let mut emb = Embedding::<f32>::new(53, 24, None, &mut rng);
    let x = Tensor::<f32>::normal(&[2, 5, 24], 0.0, 1.0, &mut rng);
    let exact = emb.attend(&x);
    assert_eq!(bits(&exact), bits(&x.matmul_t(&emb.weight)));
    quantize_embeddings(&mut emb);
    let y = emb.attend(&x);
    assert_eq!(y.shape(), &[2, 5, 53]);
    // the same bits as the int8 weight's own dynamic product
    let q = emb.int8().unwrap();
    let want = q.linear(x.as_slice(), None);
    assert_eq!(
        bits(&y),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    // near the f32 head: inputs in about [-4, 4] quantized with a step of
    // about 8 / 127 (error up to half of it each), weights to half a step
    // of their row (max|row| / 255): 24 products stay well within 0.5
    let err = exact.sub(&y).abs().max().item();
    assert!(err < 0.5, "{err}");

    // training through it panics naming the layer, under no_grad nothing
    // is recorded
    let xt = x.clone().requires_grad();
    let out = emb.attend(&xt);
    let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| out.sum().backward()))
    else {
        panic!("backward through the int8 head must panic");
    };
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("Embedding(53, 24) with an int8 table, as an output head, is inference only"),
        "{msg}"
    );
    assert_eq!(bits(&no_grad(|| emb.attend(&xt))), bits(&y));
}

#[test]
fn int8_tables_save_as_int8() {
    let mut rng = Rng::new(7);
    let mut emb = Embedding::<f32>::new(40, 12, Some(0), &mut rng);
    let f32_bytes = resident_bytes(&emb);
    quantize_embeddings(&mut emb);
    // 48 padded rows of 12 bytes, an i32 sum and an f32 scale per row
    assert_eq!(resident_bytes(&emb), 48 * 12 + 40 * 4 + 40 * 4);
    // narrow rows: the i32 sum and f32 scale of each weigh on the total
    assert!(resident_bytes(&emb) * 2 < f32_bytes);
    assert_eq!(emb.to_string(), "Embedding(40, 12, padding_idx=0)");

    let path = std::env::temp_dir().join(format!(
        "forge-quant-embedding-{}.safetensors",
        std::process::id()
    ));
    emb.save(&path).unwrap();
    let file = read_safetensors(&path).unwrap();
    assert_eq!(file.tensors["weight"].dtype(), DType::I8);
    assert_eq!(file.tensors["weight"].shape(), &[40, 12]);
    assert_eq!(file.tensors["weight_scale"].shape(), &[40]);
    let mut other = Embedding::<f32>::new(40, 12, Some(0), &mut rng);
    quantize_embeddings(&mut other);
    other.load_weights(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let q = (emb.int8().unwrap(), other.int8().unwrap());
    assert_eq!(q.0.values(), q.1.values());
    assert_eq!(q.0.scales(), q.1.scales());
    let idx = Tensor::<i64>::from_vec(vec![0, 39, 17], &[3]);
    assert_eq!(bits(&other.forward(idx.clone())), bits(&emb.forward(idx)));
}

#[test]
#[should_panic(expected = "Embedding(9, 2): index 9 is out of range")]
fn an_int8_table_checks_its_indices() {
    let mut emb = Embedding::<f32>::new(9, 2, None, &mut Rng::new(0));
    quantize_embeddings(&mut emb);
    emb.forward(Tensor::<i64>::from_vec(vec![9], &[1]));
}

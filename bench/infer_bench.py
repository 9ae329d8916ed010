"""(A copy of the project's reference script ../shared/bench/infer_bench.py, with a `--modes`
filter added; keep the two in step.)

PyTorch CPU inference benchmarks for the hub models and reduced precision (float32 unless the
mode says otherwise, eager, no torch.compile). Same JSON-line schema as torch_bench.py, so the
same comparison scripts read both.

Rows (model, mode, batch):
  gpt2s     generate       1   GPT-2-small shape (12 layers, 12 heads, 768 wide, vocab 50257,
                               random weights): a 32-token prompt, then 64 new tokens, greedy,
                               with the KV cache (transformers' generate); ms per whole call
  gpt2s     generate_int8  1   the same after torch.ao.quantization.quantize_dynamic(nn.Linear, qint8)
  bert_base infer          8   BERT-base shape (12 layers, 768 wide, random weights), 8 x 128 tokens,
                               last hidden state; ms per call
  bert_base infer_int8     8   the same, dynamically quantized Linear layers (qint8)
  bert_base infer_bf16     8   the same under torch.autocast("cpu", dtype=torch.bfloat16)
  mlp       infer_int8   128   torch_bench's MLP 784-512-256-10, dynamically quantized
  lstm      infer_int8    64   torch_bench's LSTM model (LSTM and Linear dynamically quantized)
  resnet18  infer_bf16    32   torchvision resnet18 3x32x32 under bf16 autocast
Inputs are random ids / values from a fixed seed; timing does not depend on them.

Usage: python infer_bench.py [--models gpt2s,bert_base,mlp,lstm,resnet18] [--threads 1,2]
       [--rounds 3] [--block 2] [--round N] [--modes generate,infer]
Needs torch, transformers (and torchvision for resnet18).
"""
import argparse
import json
import time
import warnings

import torch
import torch.nn as nn

warnings.simplefilter("ignore")


def quantized(m):
    from torch.ao.quantization import quantize_dynamic
    return quantize_dynamic(m, {nn.Linear, nn.LSTM}, dtype=torch.qint8)


def make(name, mode):
    import transformers as tf
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if name == "gpt2s":
        m = tf.GPT2LMHeadModel(tf.GPT2Config()).eval()
        if mode == "generate_int8":
            m = quantized(m)
        ids = torch.randint(0, 50257, (1, 32), generator=g)
        mask = torch.ones_like(ids)
        return lambda: m.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=64,
                                  min_new_tokens=64, pad_token_id=0), 64, "tok/s"
    if name == "bert_base":
        m = tf.BertModel(tf.BertConfig(), add_pooling_layer=False).eval()
        if mode == "infer_int8":
            m = quantized(m)
        ids = torch.randint(0, 30522, (8, 128), generator=g)
        if mode == "infer_bf16":
            def f():
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return m(input_ids=ids).last_hidden_state
            return f, 8, "seq/s"
        return lambda: m(input_ids=ids).last_hidden_state, 8, "seq/s"
    if name in ("mlp", "lstm"):
        import os, sys
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import torch_bench as tb
        if name == "mlp":
            m, x = tb.MLP().eval(), torch.randn(128, 784, generator=g)
        else:
            m, x = tb.LstmHead().eval(), torch.randn(64, 32, 128, generator=g)
        q = quantized(m)
        return lambda: q(x), x.shape[0], "img/s" if name == "mlp" else "seq/s"
    if name == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=10).eval()
        x = torch.randn(32, 3, 32, 32, generator=g)

        def f():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return m(x)
        return f, 32, "img/s"
    raise ValueError(name)


PLAN = {
    "gpt2s": [("generate", 1), ("generate_int8", 1)],
    "bert_base": [("infer", 8), ("infer_int8", 8), ("infer_bf16", 8)],
    "mlp": [("infer_int8", 128)],
    "lstm": [("infer_int8", 64)],
    "resnet18": [("infer_bf16", 32)],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2s,bert_base,mlp,lstm,resnet18")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--block", type=int, default=2)
    ap.add_argument("--round", type=int, default=0)
    ap.add_argument("--modes", default="", help="only these modes, comma-separated (default all)")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    threads = [int(t) for t in a.threads.split(",")]
    for name in a.models.split(","):
        for mode, batch in PLAN[name]:
            if modes and mode not in modes:
                continue
            step, items, unit = make(name, mode)
            small = name in ("mlp", "lstm")
            block = a.block * (10 if small else 1)
            times = {t: [] for t in threads}
            with torch.inference_mode():
                for t in threads:
                    torch.set_num_threads(t)
                    for _ in range(3 if small else 1):
                        step()
                for _ in range(a.rounds):
                    for t in threads:
                        torch.set_num_threads(t)
                        step()
                        for _ in range(block):
                            t0 = time.perf_counter()
                            step()
                            times[t].append((time.perf_counter() - t0) * 1e3)
            for t in threads:
                print(json.dumps(dict(bench="infer", framework="torch", model=name, mode=mode, batch=batch,
                                      threads=t, items=items, unit=unit, round=a.round,
                                      ms=[round(v, 4) for v in times[t]])), flush=True)


if __name__ == "__main__":
    main()

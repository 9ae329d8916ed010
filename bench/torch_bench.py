# Copied from ../shared/bench/torch_bench.py (the project's PyTorch reference benchmark) so
# that bench/compare.sh runs from a clone alone; keep the two in step.
"""PyTorch eager CPU training-step and inference benchmarks (float32, no torch.compile).

Models (synthetic, fixed input batch; timing does not depend on the values):
  mlp      784-512-256-10 ReLU, batch 128, cross-entropy, Adam(lr 1e-3)
  lenet    conv(1->6,k5,p2)-relu-maxpool2-conv(6->16,k5)-relu-maxpool2-fc 400-120-84-10,
           batch 128 of 1x28x28, cross-entropy, Adam(lr 1e-3)
  gpt      nanoGPT-style: 4 layers, 4 heads, n_embd 128, block 64, vocab 256, GELU, pre-LN,
           bias, dropout 0, tied head, causal F.scaled_dot_product_attention; batch 16; AdamW
           (lr 3e-4, wd 0.1)
  gpt_naive  the same GPT with attention written out (q@k^T, mask, softmax, @v) as a
           framework without a fused attention kernel must run it
  resnet18 torchvision resnet18(num_classes=10), 3x32x32, batch 16, SGD(momentum 0.9)
  tiny     Linear(16,16), batch 1, MSE, SGD: a step of ~10 tiny ops = framework overhead
  lstm     one-layer LSTM 128->128 (batch_first) over 32 steps, batch 64, Linear(128,10) head on
           the last hidden state, cross-entropy, Adam(lr 1e-3)
A train step = forward, loss, backward, optimizer.step(), optimizer.zero_grad().
Breakdown modes for mlp and gpt: fwd = forward + loss (autograd recording), fwdbwd = that +
backward + zero_grad (no optimizer step). Inference = model.eval() under torch.inference_mode().

Each (model, mode) is run at every thread count in --threads; the thread counts are
interleaved in blocks of --block steps, --rounds times (so >= 50 timed steps each by default),
after --warmup steps at each count. Output: one JSON line per (model, mode, batch, threads)
with every timed step in ms; quote the median.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5, padding=2)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(400, 120)
        self.f2 = nn.Linear(120, 84)
        self.f3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = x.flatten(1)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


class LstmHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(128, 128, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.head(h[-1])


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block, naive):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.naive = n_head, naive
        self.register_buffer("mask", torch.tril(torch.ones(block, block, dtype=torch.bool)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.naive:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block, naive):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block, naive)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=256, block=64, n_layer=4, n_head=4, n_embd=128, naive=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, block, naive) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.register_buffer("pos", torch.arange(block))

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(self.pos[:T])
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def make(name, batch):
    g = torch.Generator().manual_seed(0)
    if name == "mlp":
        m = MLP()
        x, y = torch.randn(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        loss_fn = lambda out: F.cross_entropy(out, y)
        items = batch
    elif name == "lenet":
        m = LeNet()
        x, y = torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        loss_fn = lambda out: F.cross_entropy(out, y)
        items = batch
    elif name in ("gpt", "gpt_naive"):
        m = GPT(naive=(name == "gpt_naive"))
        x = torch.randint(0, 256, (batch, 64), generator=g)
        y = torch.randint(0, 256, (batch, 64), generator=g)
        opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
        loss_fn = lambda out: F.cross_entropy(out.view(-1, out.size(-1)), y.view(-1))
        items = batch * 64  # tokens
    elif name == "resnet18":
        from torchvision.models import resnet18
        m = resnet18(num_classes=10)
        x, y = torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        loss_fn = lambda out: F.cross_entropy(out, y)
        items = batch
    elif name == "lstm":
        m = LstmHead()
        x, y = torch.randn(batch, 32, 128, generator=g), torch.randint(0, 10, (batch,), generator=g)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        loss_fn = lambda out: F.cross_entropy(out, y)
        items = batch
    elif name == "tiny":
        m = nn.Linear(16, 16)
        x, y = torch.randn(batch, 16, generator=g), torch.randn(batch, 16, generator=g)
        opt = torch.optim.SGD(m.parameters(), lr=1e-3)
        loss_fn = lambda out: F.mse_loss(out, y)
        items = batch
    else:
        raise ValueError(name)
    return m, x, opt, loss_fn, items


def run(name, mode, batch, threads, warmup, rounds, block, rnd):
    torch.manual_seed(0)
    m, x, opt, loss_fn, items = make(name, batch)
    if mode == "train":
        m.train()

        def step():
            loss = loss_fn(m(x))
            loss.backward()
            opt.step()
            opt.zero_grad()
    elif mode == "fwdbwd":  # breakdown: no optimizer step
        m.train()

        def step():
            loss = loss_fn(m(x))
            loss.backward()
            opt.zero_grad()
    elif mode == "fwd":  # breakdown: forward + loss with autograd recording, no backward
        m.train()

        def step():
            loss_fn(m(x))
    else:
        m.eval()

        def step():
            with torch.inference_mode():
                m(x)
    times = {t: [] for t in threads}
    for t in threads:
        torch.set_num_threads(t)
        for _ in range(warmup):
            step()
    for _ in range(rounds):
        for t in threads:
            torch.set_num_threads(t)
            step()  # one untimed step after switching the pool size
            for _ in range(block):
                t0 = time.perf_counter()
                step()
                times[t].append((time.perf_counter() - t0) * 1e3)
    unit = "tok/s" if name.startswith("gpt") and mode != "infer" else ("seq/s" if name.startswith("gpt") else "img/s")
    if name == "tiny":
        unit = "step/s"
    for t in threads:
        print(json.dumps(dict(bench="train", framework="torch", model=name, mode=mode, batch=batch, threads=t,
                              items=batch if mode == "infer" else items, unit=unit, round=rnd,
                              ms=[round(v, 4) for v in times[t]])), flush=True)


def op_overhead(threads, rnd):
    """Median time of single tiny eager ops (dispatch overhead), in microseconds."""
    a, b = torch.randn(16), torch.randn(16)
    w, xx = torch.randn(16, 16), torch.randn(1, 16)
    ops = {"add_16": lambda: torch.add(a, b), "relu_16": lambda: torch.relu(a),
           "linear_1x16x16": lambda: F.linear(xx, w), "sum_16": lambda: a.sum()}
    for t in threads:
        torch.set_num_threads(t)
        for name, f in ops.items():
            for _ in range(1000):
                f()
            ts = []
            for _ in range(50):
                t0 = time.perf_counter()
                for _ in range(200):
                    f()
                ts.append((time.perf_counter() - t0) / 200 * 1e6)
            print(json.dumps(dict(bench="op", framework="torch", op=name, threads=t, round=rnd,
                                  us=[round(v, 4) for v in ts])), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiny,mlp,lenet,gpt,gpt_naive,resnet18")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--round", type=int, default=0)
    ap.add_argument("--no-infer", action="store_true")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    # (model, mode, batch) list: training steps plus the inference latencies asked for
    plan = {
        "tiny": [("train", 1), ("infer", 1)],
        "mlp": [("train", 128), ("fwdbwd", 128), ("fwd", 128), ("infer", 1)],
        "lenet": [("train", 128)],
        "gpt": [("train", 16), ("fwdbwd", 16), ("fwd", 16), ("infer", 1)],
        "gpt_naive": [("train", 16)],
        "resnet18": [("train", 16), ("infer", 1), ("infer", 32)],
        "lstm": [("train", 64), ("infer", 64)],
    }
    for name in a.models.split(","):
        if name == "ops":
            op_overhead(threads, a.round)
            continue
        for mode, batch in plan[name]:
            if mode == "infer" and a.no_infer:
                continue
            # tiny / batch-1 inference are sub-ms: take more steps so the median is stable
            blk = a.block * (10 if (name == "tiny" or mode == "infer" and batch == 1) else 1)
            run(name, mode, batch, threads, a.warmup * (10 if blk > a.block else 1), a.rounds, blk, a.round)


if __name__ == "__main__":
    main()

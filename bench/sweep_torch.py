#!/usr/bin/env python3
"""PyTorch twin of forge's shape sweep (examples/sweep.rs): the same model
specs, optimizers, losses and schedule, one JSON line per (spec, mode,
threads) in torch_bench.py's schema (model = the spec without B, batch = B),
so bench/compare_table.py tabulates the two.

    python3 bench/sweep_torch.py 'gpt:L=8,d=256,h=8,T=128,B=8' \
        'mlp:sizes=784-1000-333-10,B=100' --threads 1,2 --modes train,infer

Kinds and keys: see examples/sweep.rs. Eager float32, no torch.compile;
train = forward, loss, backward, optimizer.step(), zero_grad(); infer =
eval() under torch.inference_mode() (the encoder then takes PyTorch's own
fast path, as any user's would).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bench import GPT, LeNet  # noqa: E402


def parse(spec):
    kind, _, rest = spec.partition(":")
    keys, named = {}, []
    for kv in filter(None, rest.split(",")):
        k, v = kv.split("=", 1)
        keys[k] = v
        if k != "B":
            named.append(kv)
    name = kind + (":" + ",".join(named) if named else "")
    return kind, keys, name


class Cnn(nn.Module):
    def __init__(self, ch, k, s, cin, c):
        super().__init__()
        layers, hw = [], s
        for item in ch:
            if item == "M":
                layers.append(nn.MaxPool2d(2))
                hw //= 2
            else:
                layers += [nn.Conv2d(cin, int(item), k, padding=k // 2), nn.ReLU()]
                cin = int(item)
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin * hw * hw, c)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class Mlp(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class Encoder(nn.Module):
    def __init__(self, n_layer, d, h, ff, c):
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True) for _ in range(n_layer)])
        self.head = nn.Linear(d, c)

    def forward(self, x):
        for l in self.layers:
            x = l(x)
        return self.head(x.reshape(-1, x.shape[-1]))


class LstmHead(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.lstm = nn.LSTM(i, h, batch_first=True)
        self.head = nn.Linear(h, 10)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.head(h[-1])


def make(kind, keys, b):
    g = torch.Generator().manual_seed(0)
    num = lambda k, d: int(keys.get(k, d))  # noqa: E731
    if kind == "gpt":
        t, v = num("T", 64), num("V", 256)
        m = GPT(vocab=v, block=t, n_layer=num("L", 4), n_head=num("h", 4), n_embd=num("d", 128))
        x = torch.randint(0, v, (b, t), generator=g)
        y = torch.randint(0, v, (b, t), generator=g)
        opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
        return m, x, opt, lambda out: F.cross_entropy(out.view(-1, out.size(-1)), y.view(-1))
    if kind == "mlp":
        sizes = [int(s) for s in keys.get("sizes", "784-512-256-10").split("-")]
        m = Mlp(sizes)
        x, y = torch.randn(b, sizes[0], generator=g), torch.randint(0, sizes[-1], (b,), generator=g)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    elif kind == "cnn":
        k, s, cin, c = num("k", 3), num("S", 32), num("in", 3), num("C", 10)
        m = Cnn(keys.get("ch", "64-64-M-128-M").split("-"), k, s, cin, c)
        x, y = torch.randn(b, cin, s, s, generator=g), torch.randint(0, c, (b,), generator=g)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    elif kind == "enc":
        d, t, c = num("d", 256), num("T", 128), num("C", 10)
        m = Encoder(num("L", 4), d, num("h", 4), num("ff", 4 * d), c)
        x, y = torch.randn(b, t, d, generator=g), torch.randint(0, c, (b * t,), generator=g)
        opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
    elif kind == "lstm":
        i, h, t = num("I", 128), num("H", 128), num("T", 32)
        m = LstmHead(i, h)
        x, y = torch.randn(b, t, i, generator=g), torch.randint(0, 10, (b,), generator=g)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    elif kind == "resnet18":
        from torchvision.models import resnet18
        s = num("S", 32)
        m = resnet18(num_classes=10)
        x, y = torch.randn(b, 3, s, s, generator=g), torch.randint(0, 10, (b,), generator=g)
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    elif kind == "lenet":
        m = LeNet()
        x, y = torch.randn(b, 1, 28, 28, generator=g), torch.randint(0, 10, (b,), generator=g)
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    else:
        raise ValueError(kind)
    return m, x, opt, lambda out: F.cross_entropy(out, y)


def run(spec, mode, threads, a):
    kind, keys, name = parse(spec)
    b = int(keys.get("B", 16))
    torch.manual_seed(0)
    m, x, opt, loss_fn = make(kind, keys, b)
    if mode == "train":
        m.train()

        def step():
            loss_fn(m(x)).backward()
            opt.step()
            opt.zero_grad()
    else:
        m.eval()

        def step():
            with torch.inference_mode():
                m(x)
    times = {t: [] for t in threads}
    for t in threads:
        torch.set_num_threads(t)
        for _ in range(a.warmup):
            step()
    for _ in range(a.rounds):
        for t in threads:
            torch.set_num_threads(t)
            step()  # one untimed step after switching the pool size
            for _ in range(a.block):
                t0 = time.perf_counter()
                step()
                times[t].append((time.perf_counter() - t0) * 1e3)
    for t in threads:
        print(json.dumps(dict(bench="train", framework="torch", model=name, mode=mode, batch=b, threads=t,
                              items=b, unit="step", round=a.round, ms=[round(v, 4) for v in times[t]])),
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--round", type=int, default=0)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    for spec in a.specs:
        for mode in a.modes.split(","):
            run(spec, mode, threads, a)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The PyTorch half of forge's layer-by-layer diff (`forge::tools::diff`,
docs/src/tools.md "Checking a port against PyTorch").

`record(model, inputs, loss_fn, path)` runs a PyTorch `nn.Module` on given
inputs with a forward hook on every named module and writes to a
safetensors file: the weights it started from (`state.<name>`), the inputs
(`input.<name>`), each module's output (`out:<module path>`, `out:` for the
model itself; a module's second call is `<path>#1`), the loss (`loss`),
every parameter's gradient (`grad.<name>`) and, when an optimizer is
given, every parameter after one step (`step.<name>`). forge's side loads
the same weights, runs its model on the same inputs and prints, per layer
path, the max absolute and relative error of the outputs and gradients.

From the command line, for forge's reference models:

    python3 scripts/torch_layer_diff.py lenet out.safetensors [--step sgd]
        [--perturb conv2] [--weights state.safetensors] [--seed 0]

`--perturb PATH` scales that module's output by 1.01 (a stand-in for a
port bug: forge's diff must point at PATH); `--weights` loads a state dict
instead of the seeded initialisation. Models: mlp (forge's `MnistMlp`),
lenet (`LeNet5`), gpt (a 2-layer nanoGPT, float64). Needs torch and
safetensors; CI never runs it (its files are committed under
tests/fixtures/diff/).
"""

import argparse
import json
import math

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

FORMAT = "forge-layer-diff-1"


def record(model, inputs, loss_fn, path, optimizer=None, perturb=None, meta=None):
    """Runs `loss_fn(model, **inputs)` once and writes the reference file.

    `inputs` maps names to tensors (call order kept), `optimizer` is a
    function of the parameters returning a torch optimizer (one step is
    taken and recorded), `perturb` a module path whose output is scaled by
    1.01, `meta` extra metadata strings."""
    names = {m: n for n, m in model.named_modules()}
    tensors = {f"state.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    tensors.update({f"input.{k}": v.detach().clone() for k, v in inputs.items()})
    outputs, calls, hooks = [], {}, []

    def hook(module, args, out):
        name = names[module]
        if name == perturb:
            out = out * 1.01
        first = out[0] if isinstance(out, tuple) else out
        n = calls.get(name, 0)
        calls[name] = n + 1
        key = name if n == 0 else f"{name}#{n}"
        outputs.append(key)
        tensors[f"out:{key}"] = first.detach().clone()
        return out

    for module in names:
        hooks.append(module.register_forward_hook(hook))
    try:
        loss = loss_fn(model, **inputs)
    finally:
        for h in hooks:
            h.remove()
    model.zero_grad(set_to_none=True)
    loss.backward()
    tensors["loss"] = loss.detach().clone()
    params = list(model.named_parameters())
    for k, p in params:
        if p.grad is not None:
            tensors[f"grad.{k}"] = p.grad.detach().clone()
    metadata = {
        "format": FORMAT,
        "outputs": json.dumps(outputs),
        "inputs": ",".join(inputs),
        "torch_version": torch.__version__.split("+")[0],
        "generator": "scripts/torch_layer_diff.py",
    }
    if perturb is not None:
        if perturb not in calls:
            raise SystemExit(f"--perturb {perturb}: no module of that name ran")
        metadata["perturbed"] = f"{perturb} (output scaled by 1.01)"
    if optimizer is not None:
        opt = optimizer([p for _, p in params])
        opt.step()
        for k, p in params:
            tensors[f"step.{k}"] = p.detach().clone()
    metadata.update(meta or {})
    # safetensors refuses tensors sharing memory (a tied head).
    save_file({k: v.contiguous().clone() for k, v in tensors.items()}, path, metadata)


class MnistMlp(nn.Module):
    """forge::models::mnist::MnistMlp: 784-512-256-10 with ReLU."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 256), nn.Linear(256, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNet5(nn.Module):
    """forge::models::mnist::LeNet5."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class CausalSelfAttention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.c_attn, self.c_proj, self.n_head = nn.Linear(c, 3 * c), nn.Linear(c, c), heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.n_head)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(c), CausalSelfAttention(c, heads)
        self.ln_2, self.mlp = nn.LayerNorm(c), Mlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """nanoGPT's GPT (no dropout), the head tied to the token embedding:
    forge::models::gpt::Gpt's names."""

    def __init__(self, vocab, block, layers, heads, c):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, c),
                wpe=nn.Embedding(block, c),
                h=nn.ModuleList(Block(c, heads) for _ in range(layers)),
                ln_f=nn.LayerNorm(c),
            )
        )
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight
        for n, p in self.named_parameters():
            if n.endswith("bias"):
                nn.init.normal_(p, 0.0, 0.02)  # non-zero biases: their gradients mean something

    def forward(self, idx):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


GPT_CONFIG = dict(vocab=32, block=8, layers=2, heads=2, c=16)


def reference_model(name, g):
    """The model, its inputs, its loss function and its metadata."""
    if name in ("mlp", "lenet"):
        model = MnistMlp() if name == "mlp" else LeNet5()
        x = torch.rand(4, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (4,), generator=g)
        meta = {"model": name, "loss": "cross_entropy(model(x), y), mean", "dtype": "float32"}
        return model, {"x": x, "y": y}, lambda m, x, y: F.cross_entropy(m(x), y), meta
    if name == "gpt":
        torch.set_default_dtype(torch.float64)
        cfg = GPT_CONFIG
        model = Gpt(cfg["vocab"], cfg["block"], cfg["layers"], cfg["heads"], cfg["c"])
        idx = torch.randint(0, cfg["vocab"], (2, cfg["block"]), generator=g)
        targets = torch.randint(0, cfg["vocab"], (2, cfg["block"]), generator=g)
        meta = {
            "model": "gpt",
            "loss": "cross_entropy(logits.view(-1, vocab), targets.view(-1)), mean",
            "dtype": "float64",
        }
        meta.update({k: str(v) for k, v in cfg.items()})

        def loss(m, idx, targets):
            logits = m(idx)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

        return model, {"idx": idx, "targets": targets}, loss, meta
    raise SystemExit(f"unknown model {name} (mlp, lenet, gpt)")


OPTIMIZERS = {
    "sgd": ("SGD lr 0.05", lambda ps: torch.optim.SGD(ps, lr=0.05)),
    "adamw": (
        "AdamW lr 1e-3 betas (0.9, 0.95) eps 1e-8 weight_decay 0.1",
        lambda ps: torch.optim.AdamW(ps, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1),
    ),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="mlp, lenet or gpt")
    ap.add_argument("out", help="the reference file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--weights", help="a safetensors state dict to load instead of the seeded init")
    ap.add_argument("--perturb", help="a module path whose output is scaled by 1.01")
    ap.add_argument("--step", choices=sorted(OPTIMIZERS), help="record one optimizer step")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    g = torch.Generator().manual_seed(a.seed)
    model, inputs, loss_fn, meta = reference_model(a.model, g)
    if a.weights:
        model.load_state_dict(load_file(a.weights))
    meta["seed"] = str(a.seed)
    optimizer = None
    if a.step:
        meta["optimizer"], optimizer = OPTIMIZERS[a.step]
    record(model, inputs, loss_fn, a.out, optimizer=optimizer, perturb=a.perturb, meta=meta)


if __name__ == "__main__":
    main()

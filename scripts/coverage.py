#!/usr/bin/env python3
"""Writes forge's PyTorch coverage table.

    python3 scripts/coverage.py            # list the names from the installed PyTorch
    python3 scripts/coverage.py --offline  # reuse the names of the committed list (no torch)
    python3 scripts/coverage.py --check    # fail if the committed files differ from a fresh run

Outputs (both generated, both committed):

* docs/coverage.tsv: the machine-readable list, one PyTorch name a line:
  `section<TAB>pytorch name<TAB>present|missing<TAB>forge paths (space separated)`.
  tests/misc/coverage.rs (CI, no torch) checks that every path of a
  `present` row is in forge/public-api.txt.
* docs/src/coverage.md: the same list as a chapter of the user guide.

Which PyTorch names are listed (the rule, applied to the installed PyTorch):

* `torch`: the operator functions (`torch._C._VariableFunctions`, the ATen
  operators bound at `torch.*`) and the Python-level operators of
  `torch.functional.__all__`. Left out: private names (`_` prefix), in-place
  forms (`_` suffix), names also listed under `torch.nn.functional` (listed
  there once), and the families of SKIP_TORCH_PREFIXES / SKIP_TORCH_SUFFIXES /
  SKIP_TORCH below (backend kernels, quantization, sparse layouts, complex
  numbers, dtype/device/utility queries, functionalization `_copy` variants
  (but `index_copy`, an operator of its own),
  the kernels behind a module, and names PyTorch documents as deprecated).
* `torch.nn`: the `nn.Module` subclasses exported by `torch.nn`, without the
  base classes, the `Lazy*` modules (a lazily shaped variant of a listed
  module) and SKIP_NN (deprecated, multi-device wrappers).
* `torch.nn.functional`: its public functions, without in-place forms,
  PyTorch's dispatch helpers and SKIP_F (deprecated, CUDA-only low-precision
  kernels, internals of a module).

How a PyTorch name finds its forge name: scripts/coverage_aliases.txt when
it lists the name (the names that differ), else the same name at the usual
place: `torch.x` as the method `Tensor::x` (or `nn::functional::x`),
`F.x` as `nn::functional::x` (or the method `Tensor::x`), `nn.X` as `nn::X`.
A name is present when one of its forge paths is in forge/public-api.txt;
the table lists the paths that are.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TSV = os.path.join(ROOT, "docs", "coverage.tsv")
MD = os.path.join(ROOT, "docs", "src", "coverage.md")
ALIASES = os.path.join(ROOT, "scripts", "coverage_aliases.txt")
PUBLIC_API = os.path.join(ROOT, "forge", "public-api.txt")

SECTIONS = ("torch", "torch.nn", "torch.nn.functional")

# torch.* families that are not operators a model port calls.
SKIP_TORCH_PREFIXES = (
    # backend- and library-specific kernels
    "cudnn_", "miopen_", "mkldnn_", "fbgemm_", "native_", "is_vulkan",
    # quantization
    "quantize", "quantized_", "q_", "fake_quantize", "choose_qparams", "fused_moving_avg",
    "dequantize", "int_repr", "empty_quantized",
    # sparse layouts
    "sparse_", "to_sparse",
    # symbolic shapes (torch.compile)
    "sym_",
    # dtype, device and tensor-property queries
    "is_", "can_cast", "promote_types", "result_type", "get_device",
    # the pieces of SyncBatchNorm's kernel
    "batch_norm_",
    # unchecked variants of listed ops
    "unsafe_",
)
SKIP_TORCH_SUFFIXES = (
    "_copy",  # view-op copies of the functionalization pass
)
# Names with a skipped suffix that are operators of their own.
KEEP_TORCH = {"index_copy"}
SKIP_TORCH = {
    # sparse matrix products
    "dsmm", "hsmm", "hspmm", "smm", "spmm", "sspaddmm", "saddmm",
    # complex numbers (forge has no complex dtype)
    "angle", "complex", "conj", "conj_physical", "imag", "real", "polar", "resolve_conj",
    "resolve_neg", "view_as_complex", "view_as_real", "isreal", "adjoint", "vdot",
    # construction from foreign memory, uninitialised memory, utilities
    "from_file", "from_numpy", "frombuffer", "asarray", "as_tensor", "scalar_tensor",
    "empty", "empty_like", "empty_permuted", "empty_strided", "as_strided",
    "as_strided_scatter", "broadcast_shapes", "hash_tensor", "unravel_index",
    "pca_lowrank", "svd_lowrank", "lu",
    # the kernels behind a module or a functional (listed under nn / F)
    "lstm", "gru", "rnn_relu", "rnn_tanh", "lstm_cell", "gru_cell", "rnn_relu_cell",
    "rnn_tanh_cell", "convolution", "conv_tbc", "constant_pad_nd", "norm_except_dim",
    "affine_grid_generator", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d",
    "max_pool1d_with_indices", "segment_reduce", "slice_inverse", "feature_dropout",
    "feature_alpha_dropout", "embedding_bag", "rrelu",
    # documented as deprecated
    "chain_matmul", "ger", "range", "frobenius_norm", "nuclear_norm", "trapz", "row_stack",
}

SKIP_NN = {
    "Module", "Container", "RNNBase", "RNNCellBase",  # base classes
    "NLLLoss2d",  # deprecated (NLLLoss takes any rank)
    "UpsamplingNearest2d", "UpsamplingBilinear2d",  # deprecated for Upsample
    "DataParallel",  # multi-device wrapper
}

SKIP_F = {
    "handle_torch_function", "has_torch_function", "has_torch_function_unary",
    "has_torch_function_variadic", "boolean_dispatch", "assert_int_or_pair",  # dispatch helpers
    "sigmoid", "tanh", "upsample", "upsample_nearest", "upsample_bilinear",  # deprecated
    "scaled_mm", "scaled_addmm", "scaled_grouped_mm", "grouped_mm",  # CUDA low-precision kernels
    "multi_head_attention_forward", "native_channel_shuffle",  # a module's internals
}


def torch_names():
    """`{section: sorted names}` from the installed PyTorch."""
    import inspect
    import types

    import torch
    import torch.functional
    import torch.nn as nn
    import torch.nn.functional as F

    f_names = set()
    for n in dir(F):
        obj = getattr(F, n)
        if n.startswith("_") or n.endswith("_") or n in SKIP_F:
            continue
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
            f_names.add(n)

    t_names = set()
    for n in set(dir(torch._C._VariableFunctions)) | set(torch.functional.__all__):
        if not hasattr(torch, n) or n.startswith("_") or n.endswith("_"):
            continue
        if n in f_names or n in SKIP_TORCH:
            continue
        if n not in KEEP_TORCH and (n.startswith(SKIP_TORCH_PREFIXES) or n.endswith(SKIP_TORCH_SUFFIXES)):
            continue
        t_names.add(n)

    nn_names = set()
    for n in dir(nn):
        obj = getattr(nn, n)
        if not (inspect.isclass(obj) and issubclass(obj, nn.Module)):
            continue
        if n.startswith(("_", "Lazy")) or n in SKIP_NN:
            continue
        nn_names.add(n)

    return {
        "torch": sorted(t_names),
        "torch.nn": sorted(nn_names),
        "torch.nn.functional": sorted(f_names),
        "version": torch.__version__.split("+")[0],
    }


def committed_names():
    """The names of the committed list (for --offline)."""
    names = {s: [] for s in SECTIONS}
    version = None
    with open(TSV) as f:
        for line in f:
            if line.startswith("#"):
                if "PyTorch " in line:
                    version = line.split("PyTorch ")[1].split()[0].rstrip(":")
                continue
            section, name = line.rstrip("\n").split("\t")[:2]
            names[section].append(name)
    names["version"] = version
    return names


def read_aliases():
    """`{qualified pytorch name: (forge paths, note)}`."""
    aliases = {}
    with open(ALIASES) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
            if not line:
                continue
            spec, _, note = line.partition("|")
            words = spec.split()
            if len(words) < 2:
                raise SystemExit(f"{ALIASES}:{lineno}: expected `torch.name forge::path ...`")
            if words[0] in aliases:
                raise SystemExit(f"{ALIASES}:{lineno}: {words[0]} listed twice")
            aliases[words[0]] = (words[1:], note.strip())
    return aliases


def public_paths():
    """The paths of forge/public-api.txt, without the `forge::` prefix,
    with `Tensor::x` for the methods of `tensor::Tensor` (also those a
    macro call of forge/src/ops writes: each identifier of the call)."""
    paths = set()
    with open(PUBLIC_API) as f:
        for line in f:
            if line.startswith("crate::ops::"):
                # methods a macro writes into `impl Tensor` are listed by the
                # call: `crate::ops::compare: comparisons!{eq, eq_scalar, ...}`
                args = line.split("!", 1)[1]
                for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", args):
                    paths.add(f"Tensor::{word}")
                continue
            if not line.startswith("forge::"):
                continue
            path = line[len("forge::"):].split(": ", 1)[0]
            paths.add(path)
            if path.startswith("tensor::Tensor::"):
                paths.add(path[len("tensor::"):])
    return paths


def qualified(section, name):
    return f"{section}.{name}"


def candidates(section, name):
    if section == "torch":
        return [f"Tensor::{name}", f"nn::functional::{name}"]
    if section == "torch.nn.functional":
        return [f"nn::functional::{name}", f"Tensor::{name}"]
    return [f"nn::{name}"]


def resolve(names):
    aliases = read_aliases()
    known = public_paths()
    listed = {qualified(s, n) for s in SECTIONS for n in names[s]}
    stale = sorted(set(aliases) - listed)
    if stale:
        raise SystemExit(f"{ALIASES}: not in the list of PyTorch names: {', '.join(stale)}")
    rows = []
    for section in SECTIONS:
        for name in names[section]:
            paths, note = aliases.get(qualified(section, name), (candidates(section, name), ""))
            found = [p for p in paths if p in known]
            rows.append((section, name, "present" if found else "missing", found, note))
    return rows


def write_tsv(rows, version):
    out = [
        f"# forge's coverage of PyTorch {version}: written by scripts/coverage.py, do not edit\n",
        "# section\tpytorch name\tstatus\tforge paths\n",
    ]
    for section, name, status, found, _ in rows:
        out.append(f"{section}\t{name}\t{status}\t{' '.join(found)}\n")
    return "".join(out)


SHORT = {"torch": "torch", "torch.nn": "nn", "torch.nn.functional": "F"}
TITLES = {
    "torch": "`torch`",
    "torch.nn": "`torch.nn` modules",
    "torch.nn.functional": "`torch.nn.functional`",
}


def forge_cell(found, note):
    cell = ", ".join(f"`{p}`" for p in found) if found else "missing"
    if note:
        cell += f" ({note})"
    return cell


def write_md(rows, version):
    total = len(rows)
    present = sum(r[2] == "present" for r in rows)
    lines = [
        "# PyTorch coverage",
        "",
        "<!-- Generated by scripts/coverage.py from PyTorch's names and forge/public-api.txt: do not edit. -->",
        "",
        f"The operators of `torch`, the modules of `torch.nn` and the functions of `torch.nn.functional`",
        f"(PyTorch {version}) that a model port meets, each with forge's name or \"missing\":",
        f"**{present} of {total}** are present.",
        "",
        "The list is generated: `python3 scripts/coverage.py` reads the names from the installed PyTorch,",
        "leaves out private names, in-place forms, backend and quantization kernels, sparse and complex",
        "operators, dtype/device/utility queries and deprecated names (the rule is written at the top of the",
        "script, with the lists it skips), and looks each name up in `forge/public-api.txt`: under the same",
        "name (`torch.x` as the method `Tensor::x`, `F.x` as `nn::functional::x`, `nn.X` as `nn::X`) or",
        "under the name `scripts/coverage_aliases.txt` gives it. `--offline` reruns the lookup without",
        "PyTorch, on the names of the committed list. The same table, machine-readable, is",
        "`docs/coverage.tsv`; a test (`tests/misc/coverage.rs`) fails when a name it lists as present is",
        "not in forge's public API.",
        "",
        "| Section | Present | Missing |",
        "|---|---|---|",
    ]
    for section in SECTIONS:
        sec = [r for r in rows if r[0] == section]
        p = sum(r[2] == "present" for r in sec)
        lines.append(f"| {TITLES[section]} | {p} | {len(sec) - p} |")
    lines.append("")
    for section in SECTIONS:
        lines += [f"## {TITLES[section]}", "", "| PyTorch | forge |", "|---|---|"]
        for sec, name, _, found, note in rows:
            if sec == section:
                lines.append(f"| `{SHORT[section]}.{name}` | {forge_cell(found, note)} |")
        lines.append("")
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    names = committed_names() if "--offline" in args else torch_names()
    rows = resolve(names)
    outputs = {TSV: write_tsv(rows, names["version"]), MD: write_md(rows, names["version"])}
    if "--check" in args:
        stale = []
        for path, text in outputs.items():
            with open(path) as f:
                if f.read() != text:
                    stale.append(os.path.relpath(path, ROOT))
        if stale:
            raise SystemExit(f"differ from a fresh run: {', '.join(stale)}")
        print("coverage files up to date")
        return
    for path, text in outputs.items():
        with open(path, "w") as f:
            f.write(text)
    present = sum(r[2] == "present" for r in rows)
    print(f"{present} of {len(rows)} PyTorch names present; wrote docs/coverage.tsv, docs/src/coverage.md")


if __name__ == "__main__":
    main()

"""``bnfuzz effectiveness``: a pass on whole imported networks (or single layers)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from fuzz.cli import tables
from fuzz.cli.common import (
    EXIT_CLEAN,
    comma_names,
    positive,
    resolve,
)
from fuzz.errors import UsageError

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: Any) -> None:
    """This module's commands, added to the ``bnfuzz`` parser's subcommands."""
    effect = sub.add_parser(
        "effectiveness",
        help="fold whole ONNX networks (ResNet, MobileNetV2, EfficientNet, ResNeXt) as TVM users import "
        "them: batch_norms left, error vs float64, per-fold verdicts, runtime vs upstream",
        description="Build the model zoo offline (ONNX, seeded values), import each model with TVM's ONNX "
        "frontend in each variant (nchw: float32; nhwc: float32 after ConvertLayout to NHWC/HWIO; "
        "float16), fold it with upstream's pass, the measured one and the bounded fold (fixed with "
        "assume_bounded_activations=True), and report per model and variant the batch_norms left, the "
        "error against a float64 reference of the unfolded and each folded network, how many of its "
        "conv+batch_norm layers the fuzzer's oracle flags for each pass, and the compiled runtimes timed "
        "side by side (zero_pipeline under PassContext(opt_level=3), llvm). Progress goes to stderr.",
        epilog="Exit codes: 0 done, 2 usage error.",
    )
    effect.add_argument(
        "--pass",
        dest="pass_name",
        default="fixed",
        metavar="P",
        help="the pass to measure against upstream (default fixed; same names as for run)",
    )
    effect.add_argument(
        "--models",
        metavar="M,M",
        help="comma-separated zoo models (default all: resnet18, resnet50, mobilenet_v2, efficientnet_b0, "
        "resnext50_32x4d)",
    )
    effect.add_argument(
        "--variants",
        metavar="V,V",
        help="comma-separated variants (default all: nchw, nhwc, float16)",
    )
    effect.add_argument(
        "--size",
        type=positive(int),
        metavar="N",
        help="input resolution N x N, at least 32 (default 64; 224 is the published one)",
    )
    effect.add_argument("--seed", type=int, help="seed of the models' values and the inputs (default 0)")
    effect.add_argument(
        "--rounds", type=positive(int), default=7, help="turns each program takes at being timed (default 7)"
    )
    effect.add_argument(
        "--number",
        type=positive(int),
        default=5,
        help="calls per turn; a turn's time is their median (default 5)",
    )
    effect.add_argument(
        "--layers",
        action="store_true",
        help="instead, the single-layer benchmark: ResNet-50 and MobileNetV2 conv+batch_norm layers built "
        "by the fuzzer itself, NCHW and NHWC, float32 and float16, the pass against upstream",
    )
    effect.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (settings, wall time, rows) on stdout; with --layers, an array of rows",
    )


def _effectiveness(args: argparse.Namespace) -> int:
    make_pass = resolve(args.pass_name)
    upstream = resolve("upstream")

    def log(message: str) -> None:
        print(f"effectiveness: {message}", file=sys.stderr, flush=True)

    zoo_options = {
        "--models": args.models,
        "--variants": args.variants,
        "--size": args.size,
        "--seed": args.seed,
    }
    if args.layers:
        given = [option for option, value in zoo_options.items() if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: only for the model zoo, not with --layers")
        return _layer_effectiveness(args, make_pass, upstream, log)
    from fuzz.evaluation.effectiveness import DEFAULT_SIZE, VARIANTS, run_effectiveness
    from fuzz.evaluation.zoo import MIN_SIZE, MODELS

    models = comma_names(args.models, "--models", "model", list(MODELS))
    variants = comma_names(args.variants, "--variants", "variant", list(VARIANTS))
    size = DEFAULT_SIZE if args.size is None else args.size
    if size < MIN_SIZE:
        raise UsageError(
            f"--size {size}: too small; every model needs at least {MIN_SIZE} (five stride-2 stages)"
        )
    seed = 0 if args.seed is None else args.seed
    start = time.perf_counter()
    rows = run_effectiveness(
        make_pass,
        upstream,
        models=models,
        variants=variants,
        size=size,
        seed=seed,
        rounds=args.rounds,
        number=args.number,
        log=log,
    )
    from fuzz.backends.tvm.compat import tvm_version

    summary = {
        "pass": args.pass_name,
        "size": size,
        "seed": seed,
        "rounds": args.rounds,
        "number": args.number,
        "tvm": tvm_version(),
        "seconds": round(time.perf_counter() - start, 1),
        "rows": rows,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(tables.zoo_table(summary))
    return EXIT_CLEAN


def _layer_effectiveness(args: argparse.Namespace, make_pass: Any, upstream: Any, log: Any) -> int:
    from fuzz.evaluation.layers import run_layers

    rows = run_layers(make_pass, upstream, rounds=args.rounds, number=args.number, log=log)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_CLEAN
    print(tables.layer_table(rows))
    return EXIT_CLEAN


#: Command name -> the function that runs it.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"effectiveness": _effectiveness}

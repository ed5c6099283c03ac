"""What an Inductor campaign can reuse across value sets without hiding the fold.

Measures, on one conv + batch norm module of the overflow class (weight 1e30, gamma 1e10,
x = 0: the folded weight overflows float32, the unfolded output is finite):

1. the first compile in a fresh process (``torch.compile`` with freezing, at its first call);
2. a fresh compile per value set (``torch._dynamo.reset()``, a new module), as the
   ``torch:inductor`` backend does: seconds each, median of ``--rounds``;
3. reuse: one compiled module, its parameters changed in place between calls. Freezing
   bakes the parameters into the compiled graph as constants, so the second value set runs
   with the first one's values: the overflow does not show (printed as ``hidden``).

Run: ``.venv/bin/python tools/probe_inductor_reuse.py`` (needs torch).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch._inductor.config
from torch import nn

torch.set_num_threads(1)
torch._inductor.config.freezing = True
X = torch.zeros(1, 1, 1, 1)


def module(weight: float) -> nn.Module:
    m = nn.Sequential(nn.Conv2d(1, 1, 1, bias=False), nn.BatchNorm2d(1)).eval()
    with torch.no_grad():
        m[0].weight.fill_(weight)
        m[1].weight.fill_(1e10)
        m[1].running_mean.fill_(1.0)
        m[1].running_var.fill_(1.0)
    return m


def compiled_output(m: nn.Module) -> float:
    with torch.no_grad():
        return float(torch.compile(m)(X))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    start = time.perf_counter()
    first = compiled_output(module(1e20))
    print(f"first compile in this process: {time.perf_counter() - start:.2f} s (output {first})")
    seconds, outputs = [], []
    for k in range(rounds):
        torch._dynamo.reset()
        start = time.perf_counter()
        outputs.append(compiled_output(module(1e30 if k % 2 else 1e20)))
        seconds.append(time.perf_counter() - start)
    shown = all((out != out) == bool(k % 2) for k, out in enumerate(outputs))  # NaN on overflow rounds
    print(
        f"fresh compile per value set: median {statistics.median(seconds):.3f} s over {rounds} "
        f"(min {min(seconds):.3f}, max {max(seconds):.3f}); overflow {'shown' if shown else 'NOT shown'}"
    )
    torch._dynamo.reset()
    m = module(1e20)
    c = torch.compile(m)
    with torch.no_grad():
        before = float(c(X))
        m[0].weight.fill_(1e30)  # the next value set, in place
        start = time.perf_counter()
        after = float(c(X))
        reused = time.perf_counter() - start
        eager = float(m(X))
    verdict = "shown" if after != after else "hidden"
    print(
        f"reused compiled module, weight changed in place: {reused:.4f} s per call; output {before} then "
        f"{after} (eager {eager}): overflow {verdict}"
    )


if __name__ == "__main__":
    main()

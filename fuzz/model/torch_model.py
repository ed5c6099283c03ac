"""The PyTorch form of a case as plain data and Python source: the ``nn.Module`` a user
writes, and the calls with which each PyTorch fold is applied to it (framework-free).

Key idea: the module and the fold calls are Python *source*, which the backend
(:mod:`fuzz.backends.torch`) executes and a reproducer script prints, so the script runs
exactly what the fuzzer ran. A case's values are loaded into the module afterwards, by
parameter or buffer name (:attr:`TorchModel.state`).

How each part of a case is said: a block is a ``ConvNd`` (or ``ConvTransposeNd``, the kernel
flipped: :mod:`fuzz.model.spelling`) and a ``BatchNormNd``; asymmetric padding, which a PyTorch
convolution cannot take, is a ``ZeroPadNd`` before it; a training-mode batch norm is one with
``track_running_stats=False`` (it normalises with the batch's statistics in an eval module);
scale and center are its ``affine``; the chain's ReLU and a ReLU epilogue are ``nn.ReLU``
modules (``fuse_modules`` fuses conv, batch norm and a ReLU that follows), a clip ``nn.ReLU6``,
an add the forward's ``+``.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzz.model.case import Case, Epilogue, Topology, conv_output_shape
from fuzz.model.form import Importer
from fuzz.model.spelling import at_rank, transposed_weight
from fuzz.model.tensor import Tensor

__all__ = ["FOLDS", "TorchModel", "fold_source", "torch_model"]


@dataclass(frozen=True)
class TorchModel:
    """A case as a PyTorch module: ``source`` defines ``class Model(nn.Module)``; ``state``
    holds the values of its parameters and buffers by name (exact, in the case's dtype);
    ``inputs`` the forward's arguments, at the module's rank."""

    source: str
    state: tuple[tuple[str, Tensor], ...]
    inputs: tuple[tuple[str, Tensor], ...]
    dtype: str
    rank: int
    channels_last: bool
    #: per block: the names of its conv and batch norm modules
    pairs: tuple[tuple[str, str], ...]
    #: the module lists ``fuse_modules`` is given: each block's conv and batch norm, and the
    #: ReLU module right after them where there is one
    fuse_lists: tuple[tuple[str, ...], ...]
    transpose: bool
    #: the outputs' shapes as the case has them (the module's are at its rank)
    case_shapes: tuple[tuple[int, ...], ...]


def torch_model(case: Case) -> TorchModel:
    """The module of ``case`` (whose form must be the PyTorch importer's)."""
    if case.form.importer is not Importer.TORCH:
        raise ValueError("only a case of the PyTorch form is written as a module")
    form = case.form.torch
    rank, dims = form.rank, f"{form.rank}d"
    init: list[str] = []
    body: list[str] = []
    state: list[tuple[str, Tensor]] = []
    pairs: list[tuple[str, str]] = []
    fuse_lists: list[tuple[str, ...]] = []
    shape = case.data.shape
    conv_shape = shape
    value = "x"
    for i, block in enumerate(case.blocks):
        conv, weight = block.conv, block.weight
        assert conv is not None and weight is not None  # Case checks the PyTorch form
        c_in, c_out = shape[1], weight.shape[0]
        kh, kw = weight.shape[2], weight.shape[3]
        top, left, bottom, right = conv.padding
        pad: tuple[int, ...] = ()  # a ZeroPadNd's (left, right, top, bottom[, front, back])
        if form.transpose:  # every padding in a pad module; the ConvTranspose pads k - 1
            if any(conv.padding):
                pad = (left, right) if rank == 1 else (left, right, top, bottom)
            padding = _at(rank, kh - 1, kw - 1, 0)
        elif (top, left) == (bottom, right):
            padding = _at(rank, top, left, 0)
        else:
            pad = (left, right) if rank == 1 else (left, right, top, bottom)
            padding = _at(rank, 0, 0, 0)
        if pad:
            pad = pad + ((0, 0) if rank == 3 else ())
            init.append(f"self.pad{i} = nn.ZeroPad{dims}({pad})")
            value = f"self.pad{i}({value})"
        kernel = _at(rank, kh, kw, 1)
        op = f"ConvTranspose{dims}" if form.transpose else f"Conv{dims}"
        geometry = ""
        if not form.transpose:
            geometry = f", stride={_at(rank, *conv.strides, 1)}, dilation={_at(rank, *conv.dilation, 1)}"
        init.append(
            f"self.conv{i} = nn.{op}({c_in}, {c_out}, kernel_size={kernel}, padding={padding}{geometry}, "
            f"groups={conv.groups}, bias={block.bias is not None})"
        )
        written = transposed_weight(weight, conv.groups) if form.transpose else weight
        state.append((f"conv{i}.weight", Tensor(written.dtype, at_rank(written.shape, rank), written.values)))
        if block.bias is not None:
            state.append((f"conv{i}.bias", block.bias))
        bn = block.bn
        init.append(
            f"self.bn{i} = nn.BatchNorm{dims}({c_out}, eps={bn.epsilon!r}, affine={bn.scale}, "
            f"track_running_stats={not bn.training})"
        )
        if bn.scale:
            state += [(f"bn{i}.weight", block.gamma), (f"bn{i}.bias", block.beta)]
        if not bn.training:
            state += [(f"bn{i}.running_mean", block.mean), (f"bn{i}.running_var", block.var)]
        pairs.append((f"conv{i}", f"bn{i}"))
        shape = conv_output_shape(conv, shape, weight.shape)
        if case.topology is Topology.CONV_SHARED:
            body.append(f"c = self.conv{i}({value})")
            value = f"self.bn{i}(c)"
        else:
            value = f"self.bn{i}(self.conv{i}({value}))"
        if i == 0:
            conv_shape = shape
        relu = None
        if case.topology is Topology.CHAIN and i == 0:
            relu = "relu0"
        elif i == len(case.blocks) - 1 and case.epilogue is Epilogue.RELU:
            relu = "act"
        fuse_lists.append((f"conv{i}", f"bn{i}", *([relu] if relu else [])))
        if relu:
            init.append(f"self.{relu} = nn.ReLU()")
            value = f"self.{relu}({value})"
        if len(case.blocks) > 1 and i == 0:
            body.append(f"y = {value}")
            value = "y"
    arguments = ["x"]
    inputs = [("x", Tensor(case.dtype, at_rank(case.data.shape, rank), case.data.values))]
    if case.epilogue is Epilogue.CLIP:
        init.append("self.act = nn.ReLU6()")
        value = f"self.act({value})"
    elif case.epilogue is Epilogue.ADD:
        assert case.residual is not None
        arguments.append("skip")
        inputs.append(("skip", Tensor(case.dtype, at_rank(case.residual.shape, rank), case.residual.values)))
        value = f"{value} + skip"
    case_shapes = [shape]
    if case.topology is Topology.CONV_SHARED:
        body.append(f"return {value}, c")
        case_shapes.append(conv_shape)
    else:
        body.append(f"return {value}")
    source = "\n".join(
        [
            "class Model(nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
            *(f"        {line}" for line in init),
            "",
            f"    def forward(self, {', '.join(arguments)}):",
            *(f"        {line}" for line in body),
            "",
        ]
    )
    return TorchModel(
        source,
        tuple(state),
        tuple(inputs),
        case.dtype,
        rank,
        form.channels_last,
        tuple(pairs),
        tuple(fuse_lists),
        form.transpose,
        tuple(case_shapes),
    )


def _at(rank: int, h: int, w: int, depth: int) -> tuple[int, ...]:
    """A 2-D (height, width) attribute at ``rank``: ``(w,)``, ``(h, w)`` or ``(depth, h, w)``."""
    if rank == 1:
        return (w,)
    if rank == 3:
        return (depth, h, w)
    return (h, w)


#: PyTorch fold name (``--pass torch:NAME``) -> what its users call, as Markdown.
FOLDS: dict[str, str] = {
    "fuse_conv_bn_eval": "`torch.nn.utils.fusion.fuse_conv_bn_eval`",
    "fuse_modules": "`torch.ao.quantization.fuse_modules`",
    "fx": "`torch.fx.experimental.optimization.fuse`",
    "inductor": "`torch.compile` with `torch._inductor.config.freezing = True`",
}


def fold_source(name: str, model: TorchModel) -> str:
    """The Python source that folds ``model`` (an eval ``nn.Module`` bound to ``model``)
    as the fold named ``name`` is called by its users, binding ``folded``."""
    if name == "fuse_conv_bn_eval":
        lines = ["from torch.nn.utils.fusion import fuse_conv_bn_eval", "", "folded = copy.deepcopy(model)"]
        for conv, bn in model.pairs:
            args = f"folded.{conv}, folded.{bn}" + (", transpose=True" if model.transpose else "")
            lines += [f"folded.{conv} = fuse_conv_bn_eval({args})", f"folded.{bn} = nn.Identity()"]
        return "\n".join(lines) + "\n"
    if name == "fuse_modules":
        lists = [list(names) for names in model.fuse_lists]
        return f"from torch.ao.quantization import fuse_modules\n\nfolded = fuse_modules(model, {lists})\n"
    if name == "fx":
        return "from torch.fx.experimental.optimization import fuse\n\nfolded = fuse(model)\n"
    if name == "inductor":  # compiled (and folded) at its first call, under torch.no_grad()
        return (
            "import torch._inductor.config\n\n"
            "torch._inductor.config.freezing = True\n"
            "folded = torch.compile(model)\n"
        )
    raise ValueError(f"unknown PyTorch fold {name!r}; expected one of {sorted(FOLDS)}")

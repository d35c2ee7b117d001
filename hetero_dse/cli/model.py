"""``hetero_dse model``: a PyTorch network as the tool's operators — its distinct layers, their epilogues, and
what no built-in operator covers, with its share of torch's time."""

from __future__ import annotations

import json

import click
from rich.table import Table

from hetero_dse.cli.app import cli, console
from hetero_dse.errors import HeteroDSEError


def parse_shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        shape = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        shape = ()
    if not shape or any(d <= 0 for d in shape):
        raise HeteroDSEError(f"--input-shape expects positive integers such as 1,3,224,224, got {text!r}")
    return shape


def capture_model(name: str, input_shape: str | None):
    """The network ``name`` (``--input-shape`` as given) captured as layers, with a spinner meanwhile."""
    from hetero_dse.model.capture import capture
    from hetero_dse.model.zoo import MODELS, build, calibrated

    module, example = build(name, parse_shape(input_shape))
    kinds = {str(t.dtype).removeprefix("torch.") for t in (example, *module.parameters()) if t.is_floating_point()}
    if kinds - {"float32"}:
        # the layers are the tool's operators, which compute in float32 here: say so rather than time another type
        click.echo(f"hetero_dse: note: {name} computes in {', '.join(sorted(kinds))}; its layers are explored as "
                   "float32 operators, and every time and speedup is for float32", err=True)
    with console.status(f"capturing {name} with torch.export"):
        graph = capture(module, example, name)
    if name in MODELS or name.startswith("torchvision:"):  # random weights: batch norms from the example (in
        calibrated(module, example)  # place), so that an int8 design's scales are a trained network's, not 1e-7
    return graph


@cli.command("model")
@click.argument("name")
@click.option("--input-shape", metavar="N,C,H,W", help="The example input's shape (default: the model's own).")
@click.option("--json", "as_json", is_flag=True, help="Print the layers as JSON instead of tables.")
def model_command(name: str, input_shape: str | None, as_json: bool) -> None:
    """The layers of a network: NAME is a built-in (yolo_v1, resnet18, mobilenet_v2, vgg16), torchvision:ARCH, or a
    model.py defining model() and example_input().

    \b
    Examples:
      hetero_dse model resnet18
      hetero_dse model mobilenet_v2 --input-shape 1,3,160,160
      hetero_dse model my_model.py --json
    """
    from hetero_dse.units import si

    graph = capture_model(name, input_shape)
    total = graph.mapped_flops
    if as_json:
        click.echo(json.dumps({
            "model": name, "input_shape": list(graph.input_shape), "mapped_flops": total,
            "layers": [{"op": l.op, "params": l.params, "count": l.count, "flops": l.flops,
                        "folded_batch_norm": l.folded_batch_norm, "epilogue": list(l.epilogue), "nodes": l.nodes}
                       for l in graph.layers],
            "unmapped": [{"op": u.op, "count": u.count, "share_of_torch_time": u.share_of_torch_time, "why": u.why}
                         for u in graph.unmapped]}, indent=2))
        return
    table = Table(title=f"{name} {'x'.join(map(str, graph.input_shape))}: {len(graph.layers)} distinct layers, "
                        f"{sum(l.count for l in graph.layers)} in all, {si(total)}FLOP mapped", title_justify="left")
    for col in ("#", "operator", "parameters", "count", "FLOPs", "share", "batch norm", "epilogue"):
        table.add_column(col, justify="right" if col in ("#", "count", "FLOPs", "share") else "left", overflow="fold")
    for i, layer in enumerate(graph.layers, start=1):
        params = " ".join(f"{k}={v}" for k, v in layer.params.items() if k not in ("dtype",))
        flops = layer.flops * layer.count
        table.add_row(str(i), layer.op, params, str(layer.count), si(flops), f"{100 * flops / total:.1f} %",
                      "folded" if layer.folded_batch_norm else "", " + ".join(layer.epilogue))
    console.print(table)
    if graph.unmapped:
        rest = Table(title="not mapped to a built-in operator (run as torch runs them)", title_justify="left")
        for col in ("op", "count", "share of torch's time", "why"):
            rest.add_column(col)
        for u in graph.unmapped:
            share = "—" if u.share_of_torch_time is None else f"{100 * u.share_of_torch_time:.1f} %"
            rest.add_row(u.op, str(u.count), share, u.why)
        console.print(rest)

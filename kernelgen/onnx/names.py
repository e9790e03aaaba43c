"""Config names for imported groups: short, unique, readable, the same for the same model and grouping, and never
cut mid-word (a config name is a C identifier and a file stem: ^[a-z][a-z0-9_]*$, at most 64 characters).

Each conv (pool, classifier) of the model gets a label, a path of parts taken from the model's own structure:
- the module path the dynamo exporter records (node metadata pkg.torch.onnx.name_scopes): features.3.conv.0.1
  -> features, 3, conv, 0, 1;
- a scoped node name as the TorchScript exporter writes it: /features/features.3/conv/conv.0/conv.0.0/Conv ->
  features, 3, conv, 0, 0, conv (a part that repeats its parent's, features.3 under features, is cut to what
  it adds);
- a plain node name as it is (stem, block1_conv1);
- else (no name, or an exporter's counter such as node_Conv_809 or Conv_12) conv_NNN, its place among the model's
  convs in graph order.
A group is named after the module it covers whole (features_3: every conv under features.3 and no other), else
after the smallest modules its first and last convs lie in that it covers whole, the parts those share said once
(features_3_conv_1_to_4_conv_0); when that is impossible or too long, after its first and last convs' places
(conv_012_to_conv_019).
"""
from __future__ import annotations

import ast
import re

from .graph import Graph
from ..config.reserved import MAX_NAME_LENGTH, RESERVED

# The nodes a group's op can start at, and the word their places are counted under (conv_000, pool_000, fc_000)
PLACES = {"Conv": "conv", "QLinearConv": "conv", "MaxPool": "pool", "AveragePool": "pool",
          "GlobalAveragePool": "pool", "ReduceMean": "pool", "Flatten": "fc", "Gemm": "fc", "Mul": "mul",
          "BatchNormalization": "bn"}
Label = tuple[str, ...]


class Namer:
    """Names for the groups of one model, unique among themselves and never reserved words."""

    def __init__(self, graph: Graph) -> None:
        self.place: dict[int, str] = {}
        for word in dict.fromkeys(PLACES.values()):
            nodes = [i for i, node in enumerate(graph.nodes) if PLACES.get(node.op_type) == word]
            width = max(3, len(str(len(nodes) - 1)))
            self.place |= {index: f"{word}_{k:0{width}d}" for k, index in enumerate(nodes)}
        self.labels = {index: _label(graph.nodes[index]) or (self.place[index],) for index in self.place}
        self.taken: set[str] = set()

    def name(self, convs: list[int]) -> str:
        """The name of the group of these ops (the node each starts at: node indices, graph order)."""
        fallback = self.place[convs[0]] if len(convs) == 1 else f"{self.place[convs[0]]}_to_{self.place[convs[-1]]}"
        name = self._from_labels(convs)
        if name is None or len(name) > MAX_NAME_LENGTH:
            name = fallback
        candidate, k = name, 1
        while candidate in self.taken or candidate in RESERVED:
            k += 1
            candidate = f"{name}_{k}" if len(name) + len(f"_{k}") <= MAX_NAME_LENGTH else f"{fallback}_{k}"
        self.taken.add(candidate)
        return candidate

    def _from_labels(self, convs: list[int]) -> str | None:
        members = set(convs)

        def whole(prefix: Label) -> bool:  # every conv under this module is in the group
            return all(i in members for i, label in self.labels.items() if label[:len(prefix)] == prefix)

        labels = [self.labels[i] for i in convs]
        common = 0
        while all(len(label) > common and label[common] == labels[0][common] for label in labels):
            common += 1
        covering = next((n for n in range(1, common + 1) if whole(labels[0][:n])), None)
        if covering is not None:
            return _joined(labels[0][:covering])
        ends = [next((label[:n] for n in range(common + 1, len(label) + 1) if whole(label[:n])), None)
                for label in (labels[0], labels[-1])]
        if ends[0] is None or ends[1] is None:
            return None
        return f"{_joined(ends[0])}_to_{'_'.join(ends[1][common:])}"


def _joined(parts: Label) -> str:
    text = "_".join(parts)
    return text if text[0].isalpha() else f"conv_{text}"


def _word(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]", "_", text.lower())).strip("_")


def _label(node) -> Label:
    """The conv's place in the model's own structure, or () when its name says nothing (see the module doc)."""
    scopes = _name_scopes(node)
    if scopes:
        return tuple(p for p in (_word(part) for part in scopes[-1].split(".")) if p)
    text = node.name or node.output[0]
    if "/" in text:
        if not node.name:
            text = re.sub(r"_output_\d+$", "", text)
        parts: list[str] = []
        previous = ""
        for part in (p for p in text.split("/") if p):
            added = part[len(previous) + 1:] if previous and part.startswith(previous + ".") else part
            previous = part
            parts += [w for w in (_word(piece) for piece in added.split(".")) if w]
        return tuple(parts)
    if not node.name or re.fullmatch(rf"(node_)?{re.escape(node.op_type)}(_\d+)?", node.name):
        return ()
    word = _word(node.name)
    return (word,) if word else ()


def _name_scopes(node) -> list[str]:
    """The dynamo exporter's module path of the node (outermost first, each a full dotted path), without the
    trailing operator name; [] when the node has none."""
    text = next((p.value for p in node.metadata_props if p.key == "pkg.torch.onnx.name_scopes"), "")
    try:
        scopes = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError):
        return []
    path: list[str] = []
    for scope in scopes if isinstance(scopes, list) else []:
        if not isinstance(scope, str) or not scope:
            continue
        if path and not scope.startswith(path[-1] + "."):
            break
        path.append(scope)
    return path

"""Node and tensor names too long for the files kernelgen writes about them, shortened as a model is read.

ONNX puts no bound on a name; kernelgen's files spell them out: configs list their nodes (source.nodes, at most
4096 characters each), a network manifest lists its tensors and host nodes, and a tensor's name is a YAML mapping
key there, which YAML allows only up to 1024 characters. So a name whose quoted form (json.dumps, as the files
write it: escapes count) is longer than MAX_QUOTED becomes its first characters, `~` and 12 hex digits of its
SHA-256. Every reader of a model goes through read_graph (the importer, the oracle, the host steps), so all of them
see the same short names, in the model proto itself (nodes, graph inputs and outputs, initializers, value infos,
subgraphs): onnxruntime runs the renamed model.
"""
from __future__ import annotations

import hashlib
import json

MAX_QUOTED = 200  # characters of json.dumps(name): far below YAML's 1024 for a key and the schema's 4096
KEPT = 48  # characters kept from the start of a long name (at most 6 each when quoted: \uXXXX)


def shorten_long_names(model) -> None:
    """Rename, in place, every node and tensor of the model whose name is too long to write."""
    graph = model.graph
    names = _tensor_names(graph)
    renamed = {name: _short(name, names) for name in sorted(names) if _too_long(name)}
    _rename(graph, renamed)


def _too_long(name: str) -> bool:
    return len(json.dumps(name)) > MAX_QUOTED


def _short(name: str, taken: set[str]) -> str:
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    short = f"{name[:KEPT]}~{digest[:12]}"
    k = 12
    while short in taken:  # another name already is this one: take more of the digest
        k += 4
        short = f"{name[:KEPT]}~{digest[:k]}"
    taken.add(short)
    return short


def _tensor_names(graph) -> set[str]:
    names = {t.name for t in (*graph.input, *graph.output, *graph.value_info, *graph.initializer)}
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
        for attribute in node.attribute:
            for sub in (attribute.g, *attribute.graphs):
                names |= _tensor_names(sub)
    names.discard("")
    return names


def _rename(graph, renamed: dict[str, str]) -> None:
    for info in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        info.name = renamed.get(info.name, info.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = renamed.get(sparse.values.name, sparse.values.name)
    taken = {node.name for node in graph.node}
    for node in graph.node:
        node.input[:] = [renamed.get(i, i) for i in node.input]
        node.output[:] = [renamed.get(o, o) for o in node.output]
        if _too_long(node.name):
            node.name = _short(node.name, taken)
        for attribute in node.attribute:
            for sub in (attribute.g, *attribute.graphs):
                _rename(sub, renamed)

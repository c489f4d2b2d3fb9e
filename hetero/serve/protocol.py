"""The KServe v2 inference protocol (the one Triton Inference Server speaks) as pure functions:
a request body becomes NumPy feeds, NumPy results become a response body. JSON tensors and the
binary tensor extension (``Inference-Header-Content-Length``: the first N bytes of the body are the
JSON, raw little-endian tensor bytes follow in input order) are both read and written.

Anything malformed raises :class:`ProtocolError`, which the server answers with HTTP 400 and
``{"error": message}``.

An output that is not a numeric tensor (a sequence of maps from skl2onnx's ``ZipMap``, a map, a
string tensor) goes out as the protocol's BYTES datatype: one element per row (a map, or a string),
each a JSON text (``{"0": 0.93, "1": 0.04}``: JSON object keys are strings), in JSON as a list of
strings, in binary as each element's 4-byte little-endian length and bytes, as Triton sends BYTES.
BYTES inputs are still refused.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hetero.core.errors import HeteroError
from hetero.onnx.spec import TensorSpec
from hetero.onnx.values import json_elements

#: KServe v2 datatype names -> the NumPy dtype of their wire form (little-endian).
DATATYPES: dict[str, np.dtype] = {name: np.dtype(code) for name, code in (
    ("BOOL", "|b1"), ("UINT8", "|u1"), ("UINT16", "<u2"), ("UINT32", "<u4"), ("UINT64", "<u8"),
    ("INT8", "|i1"), ("INT16", "<i2"), ("INT32", "<i4"), ("INT64", "<i8"),
    ("FP16", "<f2"), ("FP32", "<f4"), ("FP64", "<f8"))}
#: Datatypes of the protocol that hetero serve refuses, with the reason.
UNSUPPORTED = {"BYTES": "string tensors are not supported by hetero serve; send numeric tensors",
               "BF16": "bfloat16 tensors are not supported by hetero serve; send FP16 or FP32"}
_BY_KIND = {(dt.kind, dt.itemsize): name for name, dt in DATATYPES.items()}
# Parameters of the shared-memory and classification extensions, which hetero serve does not implement.
_REFUSED_PARAMETERS = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset", "classification")


class ProtocolError(HeteroError, ValueError):
    """A request that does not follow the KServe v2 protocol, or does not fit the model (HTTP 400)."""


def datatype_of(dtype: np.dtype) -> str:
    """The KServe v2 datatype name of a NumPy dtype (``float32`` -> ``FP32``)."""
    name = _BY_KIND.get((dtype.kind, dtype.itemsize))
    if name is None:
        raise TypeError(f"NumPy dtype {dtype} has no KServe v2 datatype that hetero serve sends "
                        f"(supported: {', '.join(DATATYPES)})")
    return name


@dataclasses.dataclass(frozen=True)
class RequestedOutput:
    """One entry of a request's ``outputs``: a name and whether it should come back as raw bytes."""

    name: str
    binary: bool


@dataclasses.dataclass(frozen=True)
class InferRequest:
    """A decoded inference request. ``outputs`` None: the request named none (send every output, as
    binary when ``binary_output``)."""

    inputs: dict[str, np.ndarray]
    outputs: tuple[RequestedOutput, ...] | None
    binary_output: bool = False
    id: str | None = None
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)


def _get(obj: Mapping[str, Any], key: str, kind: type, where: str, required: bool = True) -> Any:
    """``obj[key]`` checked to be a ``kind`` (str, list or dict); None when absent and not required."""
    if key not in obj:
        if required:
            raise ProtocolError(f"{where} has no {key!r} field")
        return None
    value = obj[key]
    if not isinstance(value, kind):
        raise ProtocolError(f"{where}: {key!r} must be {_JSON_NAMES[kind]}, got {json.dumps(value)[:80]}")
    return value


_JSON_NAMES: dict[type, str] = {str: "a string", list: "a list", dict: "an object"}


def _parameters(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    parameters: dict[str, Any] = _get(obj, "parameters", dict, where, required=False) or {}
    for key in _REFUSED_PARAMETERS:
        if key in parameters:
            raise ProtocolError(f"{where}: parameter {key!r} is not supported by hetero serve "
                                "(it implements the binary tensor extension, not shared memory or classification)")
    return parameters


def _dtype(datatype: str, where: str) -> np.dtype:
    if datatype in UNSUPPORTED:
        raise ProtocolError(f"{where}: datatype {datatype} is not supported: {UNSUPPORTED[datatype]}")
    dtype = DATATYPES.get(datatype)
    if dtype is None:
        raise ProtocolError(f"{where}: unknown datatype {datatype!r} (KServe v2 datatypes hetero serve takes: "
                            f"{', '.join(DATATYPES)})")
    return dtype


def _shape(value: list[Any], where: str) -> tuple[int, ...]:
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value):
        raise ProtocolError(f"{where}: 'shape' must be a list of non-negative integers, got {json.dumps(value)[:80]}")
    return tuple(value)


def _check_size(shape: tuple[int, ...], dtype: np.dtype, datatype: str, where: str, limit: int | None) -> int:
    """The bytes a tensor of ``shape`` takes, refused over ``limit`` before anything is made. A zero
    dimension makes the tensor empty, but NumPy still multiplies out the others (``[0, 2**62]``
    raises), so they are held to the limit on their own."""
    nbytes = math.prod(shape) * dtype.itemsize
    others = math.prod(d for d in shape if d) * dtype.itemsize
    if limit is not None and max(nbytes, others) > limit:
        what = (f"needs {nbytes} bytes" if nbytes else
                f"is empty, but its other dimensions alone need {others} bytes")
        raise ProtocolError(f"{where}: {datatype} {list(shape)} {what}, over the limit of {limit} bytes a request's tensors "
                            "may take (hetero serve --max-body-mb)")
    return nbytes


def _sample(values: np.ndarray, fits: Any) -> str:
    """A value of ``values`` that ``fits`` refuses (else the first), as JSON, for an error message."""
    flat = values.ravel()
    value = next((v for v in flat if not fits(v)), flat[0])
    value = value.item() if isinstance(value, np.generic) else value
    return json.dumps(value, default=repr)[:40]


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


_WHAT = {"b": "true or false", "i": "integers", "u": "integers", "f": "numbers"}


def _from_json(data: Any, shape: tuple[int, ...], datatype: str, dtype: np.dtype, where: str) -> np.ndarray:
    """The array of a JSON ``data`` field, flat or nested (row-major), checked against datatype and shape."""
    if not isinstance(data, list):
        raise ProtocolError(f"{where}: 'data' must be a list of {_WHAT[dtype.kind]} (flat or nested), got "
                            f"{json.dumps(data)[:40]}")
    try:
        array = np.asarray(data)
    except (ValueError, TypeError, RecursionError) as exc:  # ragged nesting
        raise ProtocolError(f"{where}: 'data' must be a list of numbers, flat or evenly nested ({exc})") from exc
    if dtype.kind in "iu" and array.dtype.kind in "fO":
        # NumPy makes float64 of [0, 2**64 - 1] and objects of ints past 64 bits: look at the values themselves.
        values = np.asarray(data, dtype=object).ravel()
        if all(_is_integer(v) for v in values):
            array = values
    want = math.prod(shape)
    if array.size != want:
        raise ProtocolError(f"{where}: shape {list(shape)} needs {want} elements, 'data' has {array.size}")
    if array.size == 0:
        return np.empty(shape, dtype=dtype.newbyteorder("="))
    kinds = {"b": "b", "i": "iu", "u": "iu", "f": "iuf"}[dtype.kind]
    if array.dtype.kind == "O" and dtype.kind in "iu" and all(_is_integer(v) for v in array.ravel()):
        pass  # integers past 64 bits: the range check below names them
    elif array.dtype.kind not in kinds:
        fits = {"b": lambda v: isinstance(v, (bool, np.bool_)), "i": _is_integer, "u": _is_integer,
                "f": lambda v: isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))}
        raise ProtocolError(f"{where}: 'data' must hold {_WHAT[dtype.kind]} for datatype {datatype}, got values such as "
                            f"{_sample(array, fits[dtype.kind])}")
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = array.min(), array.max()
        if low < info.min or high > info.max:
            raise ProtocolError(f"{where}: 'data' holds {low if low < info.min else high}, outside the range of {datatype} "
                                f"[{info.min}, {info.max}]")
        if array.dtype.kind == "O":
            array = np.array(array.tolist(), dtype=dtype.newbyteorder("="))
    return array.astype(dtype.newbyteorder("=")).reshape(shape)


def decode_request(body: bytes, header_length: str | int | None = None, max_tensor_bytes: int | None = None) -> InferRequest:
    """Decode an inference request body; ``header_length`` is the ``Inference-Header-Content-Length``
    header (None: the whole body is JSON); ``max_tensor_bytes``: the most the request's input
    tensors may take together, checked from each shape and datatype before the tensor is made."""
    binary = b""
    if header_length is not None:
        try:
            length = int(header_length)
        except ValueError:
            length = -1
        if length < 0:
            raise ProtocolError(f"Inference-Header-Content-Length must be a non-negative integer, got {header_length!r}")
        if length > len(body):
            raise ProtocolError(f"Inference-Header-Content-Length is {length}, but the request body has only {len(body)} bytes")
        body, binary = body[:length], body[length:]
    try:
        request = json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ProtocolError(f"request body is not valid JSON: {exc}") from exc
    if not isinstance(request, dict):
        raise ProtocolError(f"request body must be a JSON object with 'inputs', got {type(request).__name__}")
    parameters = _parameters(request, "request")
    binary_output = parameters.get("binary_data_output", False)
    if not isinstance(binary_output, bool):
        raise ProtocolError(f"request: parameter 'binary_data_output' must be true or false, got {json.dumps(binary_output)[:80]}")
    request_id = _get(request, "id", str, "request", required=False)
    inputs = _get(request, "inputs", list, "request")
    if not inputs:
        raise ProtocolError("request: 'inputs' is empty; send one entry per model input")
    feeds: dict[str, np.ndarray] = {}
    offset = 0
    budget = max_tensor_bytes
    for i, entry in enumerate(inputs):
        array, used = _decode_input(entry, i, binary, offset, header_length is not None, budget)
        if budget is not None:
            budget -= array.nbytes
        name = entry["name"]
        if name in feeds:
            raise ProtocolError(f"request: input {name!r} appears twice in 'inputs'")
        feeds[name] = array
        offset += used
    if offset != len(binary):
        raise ProtocolError(f"request: {len(binary) - offset} bytes of binary data follow the last input's "
                            "(the inputs' parameters.binary_data_size add up to less than the body holds)")
    return InferRequest(feeds, _decode_outputs(request, binary_output), binary_output, request_id, parameters)


def _decode_input(entry: Any, index: int, binary: bytes, offset: int, has_header: bool,
                  limit: int | None) -> tuple[np.ndarray, int]:
    """One ``inputs`` entry as an array, and how many bytes of ``binary`` (from ``offset``) it took;
    ``limit``: the bytes it may take."""
    if not isinstance(entry, dict):
        raise ProtocolError(f"request: inputs[{index}] must be an object with name, shape, datatype and data")
    where = f"inputs[{index}]"
    name = _get(entry, "name", str, where)
    where = f"input {name!r}"
    shape = _shape(_get(entry, "shape", list, where), where)
    datatype = _get(entry, "datatype", str, where)
    dtype = _dtype(datatype, where)
    _check_size(shape, dtype, datatype, where, limit)
    parameters = _parameters(entry, where)
    size = parameters.get("binary_data_size")
    if size is None:
        if "data" not in entry:
            raise ProtocolError(f"{where} has neither 'data' nor parameters.binary_data_size")
        return _from_json(entry["data"], shape, datatype, dtype, where), 0
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ProtocolError(f"{where}: parameters.binary_data_size must be a non-negative integer, got {json.dumps(size)[:80]}")
    if "data" in entry:
        raise ProtocolError(f"{where} has both 'data' and parameters.binary_data_size; send one")
    if not has_header:
        raise ProtocolError(f"{where} has parameters.binary_data_size, but the request has no "
                            "Inference-Header-Content-Length header saying where the JSON ends")
    want = math.prod(shape) * dtype.itemsize
    if size != want:
        raise ProtocolError(f"{where}: parameters.binary_data_size is {size} bytes, but {datatype} {list(shape)} "
                            f"takes {want}")
    if offset + size > len(binary):
        raise ProtocolError(f"{where}: parameters.binary_data_size is {size} bytes, but only {len(binary) - offset} bytes "
                            "of binary data are left in the body")
    if size == 0:
        return np.empty(shape, dtype=dtype.newbyteorder("=")), 0
    # A read-only view of the body, no copy: the model must not write into its feeds.
    return np.frombuffer(binary, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape), size


def _decode_outputs(request: dict[str, Any], default: bool) -> tuple[RequestedOutput, ...] | None:
    """The request's ``outputs`` (None: it named none); ``default``: binary_data_output."""
    entries = _get(request, "outputs", list, "request", required=False)
    if entries is None:
        return None
    outputs = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ProtocolError(f"request: outputs[{i}] must be an object with a name")
        name = _get(entry, "name", str, f"outputs[{i}]")
        binary = _parameters(entry, f"output {name!r}").get("binary_data", default)
        if not isinstance(binary, bool):
            raise ProtocolError(f"output {name!r}: parameter 'binary_data' must be true or false, got {json.dumps(binary)[:80]}")
        outputs.append(RequestedOutput(name, binary))
    return tuple(outputs)


def _is_numeric(value: Any) -> bool:
    """An array that goes as numbers (a complex one too, which :func:`datatype_of` refuses by name)."""
    return isinstance(value, np.ndarray) and value.dtype.kind not in "OSU"


def encode_response(model: str, results: Sequence[tuple[str, Any, bool]], request_id: str | None = None,
                    version: str = "1") -> tuple[bytes, int | None]:
    """The body of an inference response for ``(name, value, binary)`` results, and the length of its
    JSON part when raw tensor bytes follow (the ``Inference-Header-Content-Length``), else None. A
    value that is not a numeric array goes as BYTES (:func:`hetero.onnx.values.json_elements`)."""
    outputs: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for name, value, binary in results:
        if _is_numeric(value):
            datatype, shape = datatype_of(value.dtype), list(value.shape)
        else:
            elements, shape = json_elements(value)
            datatype = "BYTES"
        entry: dict[str, Any] = {"name": name, "datatype": datatype, "shape": shape}
        if binary:
            if datatype == "BYTES":
                raw = b"".join(len(e).to_bytes(4, "little") + e for e in elements)
            else:
                raw = np.ascontiguousarray(value, dtype=DATATYPES[datatype]).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = ([e.decode("utf-8", "backslashreplace") for e in elements] if datatype == "BYTES"
                             else value.ravel().tolist())
        outputs.append(entry)
    response: dict[str, Any] = {"model_name": model, "model_version": version, "outputs": outputs}
    if request_id is not None:
        response["id"] = request_id
    header = json.dumps(response, separators=(",", ":")).encode()
    if not chunks:
        return header, None
    return b"".join([header, *chunks]), len(header)


def encode_error(message: str) -> bytes:
    """The body of an error response: ``{"error": message}``."""
    return json.dumps({"error": message}).encode()


def tensor_metadata(spec: TensorSpec) -> dict[str, Any]:
    """A model metadata tensor entry; free dimensions are -1. An output that is not a numeric tensor
    is BYTES of unknown length (``[-1]``)."""
    if not spec.is_tensor:
        return {"name": spec.name, "datatype": "BYTES", "shape": [-1]}
    return {"name": spec.name, "datatype": datatype_of(spec.dtype), "shape": [-1 if d is None else d for d in spec.shape]}


def _listing(specs: Sequence[TensorSpec]) -> str:
    return ", ".join(spec.describe() for spec in specs) or "none"


def check_inputs(model: str, feeds: Mapping[str, np.ndarray], specs: Sequence[TensorSpec], max_batch: int | None) -> None:
    """Raise :class:`ProtocolError` unless ``feeds`` names every input of ``specs`` once, each with its
    dtype and shape, and no free first (batch) dimension over ``max_batch``."""
    known = {spec.name: spec for spec in specs}
    for name in feeds:
        if name not in known:
            raise ProtocolError(f"model {model!r} has no input {name!r} (its inputs: {_listing(specs)})")
    for spec in specs:
        if spec.name not in feeds:
            raise ProtocolError(f"input {spec.name!r} is missing (model {model!r} takes {_listing(specs)})")
        array = feeds[spec.name]
        if (array.dtype.kind, array.dtype.itemsize) != (spec.dtype.kind, spec.dtype.itemsize):
            raise ProtocolError(f"input {spec.name!r} must be {datatype_of(spec.dtype)} ({spec.describe()}), "
                                f"got {datatype_of(array.dtype)}")
        if not spec.accepts(array.shape):
            raise ProtocolError(f"input {spec.name!r} has shape {list(array.shape)}, but model {model!r} takes "
                                f"{spec.describe()} (? is any size)")
        if max_batch is not None and spec.shape and spec.shape[0] is None and array.shape[0] > max_batch:
            raise ProtocolError(f"input {spec.name!r} has a batch of {array.shape[0]} (its first dimension), over the "
                                f"limit of {max_batch} (hetero serve --max-batch); split the request")


def select_outputs(model: str, request: InferRequest, specs: Sequence[TensorSpec]) -> tuple[RequestedOutput, ...]:
    """The outputs to send: those the request named (each checked against ``specs``), else every one."""
    if request.outputs is None:
        return tuple(RequestedOutput(spec.name, request.binary_output) for spec in specs)
    known = {spec.name for spec in specs}
    seen: set[str] = set()
    for output in request.outputs:
        if output.name not in known:
            raise ProtocolError(f"model {model!r} has no output {output.name!r} (its outputs: {_listing(specs)})")
        if output.name in seen:
            raise ProtocolError(f"request: output {output.name!r} appears twice in 'outputs'")
        seen.add(output.name)
    return request.outputs


__all__ = ["DATATYPES", "InferRequest", "ProtocolError", "RequestedOutput", "check_inputs", "datatype_of",
           "decode_request", "encode_error", "encode_response", "select_outputs", "tensor_metadata"]

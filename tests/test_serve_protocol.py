"""The KServe v2 protocol of ``hetero serve`` without a server: requests built by the official
``tritonclient.http`` code decode bit-exactly, responses decode in tritonclient, JSON and binary
tensors of every datatype, and each malformed request is refused with a message that says what."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from tritonclient.http import InferInput, InferRequestedOutput, InferResult
from tritonclient.http._utils import _get_inference_request

from hetero.onnx.spec import TensorSpec
from hetero.serve.protocol import (
    DATATYPES, ProtocolError, check_inputs, datatype_of, decode_request, encode_error, encode_response, select_outputs,
    tensor_metadata,
)


def sample(datatype: str) -> np.ndarray:
    """A 2x3 array of ``datatype`` holding its extremes."""
    dtype = DATATYPES[datatype].newbyteorder("=")
    if dtype.kind == "b":
        return np.array([[True, False, True], [False, False, True]])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.array([[info.min, info.max, 0], [1, int(info.max) - 1, int(info.min) + 1]], dtype=dtype)
    finfo = np.finfo(dtype)
    return np.array([[-1.5, 0.0, finfo.max], [finfo.tiny, 3.25, -0.0]], dtype=dtype)


def client_request(arrays: dict[str, np.ndarray], binary: bool,
                   outputs: list[InferRequestedOutput] | None = None, request_id: str = "") -> tuple[bytes, int | None]:
    """The body and Inference-Header-Content-Length tritonclient's ``infer`` would send."""
    inputs = []
    for name, array in arrays.items():
        entry = InferInput(name, list(array.shape), datatype_of(array.dtype))
        entry.set_data_from_numpy(array, binary_data=binary)
        inputs.append(entry)
    body, json_size = _get_inference_request(inputs=inputs, request_id=request_id, outputs=outputs, sequence_id=0,
                                             sequence_start=False, sequence_end=False, priority=0, timeout=None,
                                             custom_parameters=None)
    return (body.encode() if isinstance(body, str) else body), json_size


def body_of(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode()


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("datatype", list(DATATYPES))
def test_tritonclient_requests_decode_bit_exactly(datatype: str, binary: bool) -> None:
    array = sample(datatype)
    body, length = client_request({"t": array}, binary, request_id="r1")
    assert (length is not None) == binary
    request = decode_request(body, None if length is None else str(length))
    got = request.inputs["t"]
    assert got.dtype == array.dtype and got.shape == array.shape
    assert got.tobytes() == array.tobytes()
    assert request.id == "r1"
    assert request.outputs is None and request.binary_output  # tritonclient asks for binary outputs by default


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("datatype", list(DATATYPES))
def test_responses_decode_bit_exactly_in_tritonclient(datatype: str, binary: bool) -> None:
    array = sample(datatype)
    body, length = encode_response("m", [("t", array, binary)], request_id="id7")
    result = InferResult.from_response_body(body, header_length=length)
    got = result.as_numpy("t")
    assert got.dtype == array.dtype and got.shape == array.shape
    assert got.tobytes() == array.tobytes()
    response = result.get_response()
    assert response["id"] == "id7" and response["model_name"] == "m" and response["model_version"] == "1"
    output = response["outputs"][0]
    assert output["datatype"] == datatype and output["shape"] == [2, 3]
    if binary:
        assert length is not None and output["parameters"]["binary_data_size"] == array.nbytes
        assert len(body) == length + array.nbytes
    else:
        assert length is None and len(output["data"]) == 6


def test_binary_and_json_outputs_mix_in_one_response() -> None:
    a, b, c = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], dtype=np.int64), np.array([True])
    body, length = encode_response("m", [("a", a, True), ("b", b, False), ("c", c, True)])
    result = InferResult.from_response_body(body, header_length=length)
    for name, array in (("a", a), ("b", b), ("c", c)):
        np.testing.assert_array_equal(result.as_numpy(name), array)
    assert length is not None and len(body) == length + a.nbytes + c.nbytes


def test_several_binary_inputs_are_read_in_order() -> None:
    arrays: dict[str, np.ndarray] = {"a": np.arange(8, dtype=np.float64).reshape(2, 4), "b": np.array([[7, -8]], dtype=np.int16),
              "c": np.arange(3, dtype=np.uint8)}
    body, length = client_request(arrays, binary=True)
    request = decode_request(body, length)
    assert list(request.inputs) == ["a", "b", "c"]
    for name, array in arrays.items():
        assert request.inputs[name].tobytes() == array.tobytes() and request.inputs[name].dtype == array.dtype


def test_requested_outputs_carry_their_binary_choice() -> None:
    outputs = [InferRequestedOutput("y", binary_data=False), InferRequestedOutput("z", binary_data=True)]
    body, length = client_request({"x": np.zeros((1, 4), np.float32)}, binary=True, outputs=outputs)
    request = decode_request(body, length)
    assert request.outputs is not None
    assert [(o.name, o.binary) for o in request.outputs] == [("y", False), ("z", True)]
    assert not request.binary_output


def test_json_data_may_be_flat_or_nested_row_major() -> None:
    flat = {"name": "x", "shape": [2, 2], "datatype": "INT32", "data": [1, 2, 3, 4]}
    nested = {**flat, "data": [[1, 2], [3, 4]]}
    for entry in (flat, nested):
        got = decode_request(body_of({"inputs": [entry]})).inputs["x"]
        np.testing.assert_array_equal(got, np.array([[1, 2], [3, 4]], dtype=np.int32))
        assert got.dtype == np.int32


def test_large_unsigned_and_integral_floats_decode_exactly() -> None:
    entry = {"name": "x", "shape": [2], "datatype": "UINT64", "data": [0, 2**64 - 1]}
    assert decode_request(body_of({"inputs": [entry]})).inputs["x"].tolist() == [0, 2**64 - 1]
    entry = {"name": "x", "shape": [2], "datatype": "FP16", "data": [1, 0.5]}
    assert decode_request(body_of({"inputs": [entry]})).inputs["x"].tolist() == [1.0, 0.5]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_empty_tensors_round_trip(binary: bool) -> None:
    array = np.zeros((0, 4), dtype=np.float32)
    body, length = client_request({"x": array}, binary)
    assert decode_request(body, length).inputs["x"].shape == (0, 4)
    body, length = encode_response("m", [("y", array, binary)])
    assert InferResult.from_response_body(body, header_length=length).as_numpy("y").shape == (0, 4)


X = {"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}
BIN = {"name": "x", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": 16}}


def with_binary(request: dict[str, Any], raw: bytes) -> tuple[bytes, str]:
    head = body_of(request)
    return head + raw, str(len(head))


MALFORMED: list[tuple[str, bytes, str | None, str]] = [
    ("bad-json", b'{"inputs": [', None, "request body is not valid JSON"),
    ("not-utf8", b"\xff\xfe{}", None, "request body is not valid JSON"),
    ("not-object", b"[1, 2]", None, "must be a JSON object with 'inputs', got list"),
    ("no-inputs", b"{}", None, "request has no 'inputs' field"),
    ("empty-inputs", body_of({"inputs": []}), None, "'inputs' is empty"),
    ("inputs-not-list", body_of({"inputs": {"x": 1}}), None, "'inputs' must be a list"),
    ("input-not-object", body_of({"inputs": [3]}), None, "inputs[0] must be an object"),
    ("no-name", body_of({"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]}), None, "inputs[0] has no 'name'"),
    ("name-not-string", body_of({"inputs": [{**X, "name": 5}]}), None, "inputs[0]: 'name' must be a string, got 5"),
    ("no-shape", body_of({"inputs": [{"name": "x", "datatype": "FP32", "data": [1]}]}), None, "input 'x' has no 'shape'"),
    ("negative-shape", body_of({"inputs": [{**X, "shape": [-1, 4]}]}), None, "non-negative integers, got [-1, 4]"),
    ("bool-shape", body_of({"inputs": [{**X, "shape": [True, 4]}]}), None, "non-negative integers"),
    ("no-datatype", body_of({"inputs": [{"name": "x", "shape": [1], "data": [1]}]}), None, "input 'x' has no 'datatype'"),
    ("unknown-datatype", body_of({"inputs": [{**X, "datatype": "FP8"}]}), None, "unknown datatype 'FP8'"),
    ("bytes", body_of({"inputs": [{**X, "datatype": "BYTES", "data": ["a", "b", "c", "d"]}]}), None,
     "datatype BYTES is not supported"),
    ("count-mismatch", body_of({"inputs": [{**X, "data": [1, 2, 3]}]}), None, "shape [1, 4] needs 4 elements, 'data' has 3"),
    ("ragged", body_of({"inputs": [{**X, "shape": [2, 2], "data": [[1, 2], [3]]}]}), None, "flat or evenly nested"),
    ("strings-for-floats", body_of({"inputs": [{**X, "data": ["a", "b", "c", "d"]}]}), None, "must hold numbers"),
    ("float-for-int", body_of({"inputs": [{**X, "datatype": "INT32", "data": [1, 2.5, 3, 4]}]}), None, "must hold integers"),
    ("out-of-range", body_of({"inputs": [{**X, "datatype": "INT8", "data": [1, 300, 3, 4]}]}), None,
     "holds 300, outside the range of INT8"),
    ("ints-for-bool", body_of({"inputs": [{**X, "datatype": "BOOL", "data": [1, 0, 1, 0]}]}), None, "must hold true or false"),
    ("no-data", body_of({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}), None,
     "neither 'data' nor parameters.binary_data_size"),
    ("duplicate-input", body_of({"inputs": [X, X]}), None, "input 'x' appears twice"),
    ("parameters-not-object", body_of({"inputs": [X], "parameters": [1]}), None, "'parameters' must be an object"),
    ("binary-output-not-bool", body_of({"inputs": [X], "parameters": {"binary_data_output": "yes"}}), None,
     "'binary_data_output' must be true or false"),
    ("id-not-string", body_of({"inputs": [X], "id": 3}), None, "'id' must be a string"),
    ("outputs-not-list", body_of({"inputs": [X], "outputs": "y"}), None, "'outputs' must be a list"),
    ("output-no-name", body_of({"inputs": [X], "outputs": [{}]}), None, "outputs[0] has no 'name'"),
    ("output-binary-not-bool", body_of({"inputs": [X], "outputs": [{"name": "y", "parameters": {"binary_data": 1}}]}),
     None, "output 'y': parameter 'binary_data' must be true or false"),
    ("shared-memory", body_of({"inputs": [{**X, "parameters": {"shared_memory_region": "r"}}]}), None,
     "parameter 'shared_memory_region' is not supported"),
    ("classification", body_of({"inputs": [X], "outputs": [{"name": "y", "parameters": {"classification": 2}}]}), None,
     "parameter 'classification' is not supported"),
    ("binary-without-header", body_of({"inputs": [BIN]}), None, "has no Inference-Header-Content-Length header"),
    ("binary-size-mismatch", *with_binary({"inputs": [{**BIN, "parameters": {"binary_data_size": 12}}]}, b"\0" * 12),
     "binary_data_size is 12 bytes, but FP32 [1, 4] takes 16"),
    ("binary-size-not-int", *with_binary({"inputs": [{**BIN, "parameters": {"binary_data_size": "16"}}]}, b"\0" * 16),
     "binary_data_size must be a non-negative integer"),
    ("binary-short", *with_binary({"inputs": [BIN]}, b"\0" * 8), "only 8 bytes of binary data are left"),
    ("binary-trailing", *with_binary({"inputs": [BIN]}, b"\0" * 20), "4 bytes of binary data follow the last input"),
    ("binary-and-data", *with_binary({"inputs": [{**BIN, "data": [1, 2, 3, 4]}]}, b"\0" * 16), "has both 'data'"),
    ("header-too-long", body_of({"inputs": [X]}), "100000", "Inference-Header-Content-Length is 100000, but the request body"),
    ("header-not-int", body_of({"inputs": [X]}), "abc", "must be a non-negative integer, got 'abc'"),
    ("header-negative", body_of({"inputs": [X]}), "-3", "must be a non-negative integer"),
]


@pytest.mark.parametrize(("body", "header", "message"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
def test_malformed_requests_raise_protocol_errors_that_say_what(body: bytes, header: str | None, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_request(body, header)
    assert message in str(caught.value)


SPECS = (TensorSpec("x", np.dtype(np.float32), (None, 4)),)
OUT_SPECS = (TensorSpec("y", np.dtype(np.float32), (None, 3)), TensorSpec("z", np.dtype(np.int64), (None,)))


@pytest.mark.parametrize(("feeds", "message"), [
    ({"x": np.zeros((2, 4), np.float32), "w": np.zeros(1, np.float32)}, "model 'm' has no input 'w' (its inputs: x: float32[?, 4])"),
    ({}, "input 'x' is missing (model 'm' takes x: float32[?, 4])"),
    ({"x": np.zeros((2, 4), np.float64)}, "input 'x' must be FP32 (x: float32[?, 4]), got FP64"),
    ({"x": np.zeros((2, 5), np.float32)}, "input 'x' has shape [2, 5], but model 'm' takes x: float32[?, 4]"),
    ({"x": np.zeros((4,), np.float32)}, "input 'x' has shape [4]"),
    ({"x": np.zeros((9, 4), np.float32)}, "batch of 9 (its first dimension), over the limit of 8 (hetero serve --max-batch)"),
])
def test_feeds_are_checked_against_the_model(feeds: dict[str, np.ndarray], message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        check_inputs("m", feeds, SPECS, max_batch=8)
    assert message in str(caught.value)


def test_feeds_that_fit_pass() -> None:
    check_inputs("m", {"x": np.zeros((8, 4), np.float32)}, SPECS, max_batch=8)
    check_inputs("m", {"x": np.zeros((1000, 4), np.float32)}, SPECS, max_batch=None)


def test_outputs_are_selected_and_checked() -> None:
    every = decode_request(body_of({"inputs": [X], "parameters": {"binary_data_output": True}}))
    assert [(o.name, o.binary) for o in select_outputs("m", every, OUT_SPECS)] == [("y", True), ("z", True)]
    some = decode_request(body_of({"inputs": [X], "outputs": [{"name": "z"}]}))
    assert [(o.name, o.binary) for o in select_outputs("m", some, OUT_SPECS)] == [("z", False)]
    unknown = decode_request(body_of({"inputs": [X], "outputs": [{"name": "q"}]}))
    with pytest.raises(ProtocolError, match=r"model 'm' has no output 'q' \(its outputs: y: float32\[\?, 3\], z: int64\[\?\]\)"):
        select_outputs("m", unknown, OUT_SPECS)
    twice = decode_request(body_of({"inputs": [X], "outputs": [{"name": "y"}, {"name": "y"}]}))
    with pytest.raises(ProtocolError, match="output 'y' appears twice"):
        select_outputs("m", twice, OUT_SPECS)


def test_metadata_shapes_mark_free_dimensions_with_minus_one() -> None:
    assert tensor_metadata(SPECS[0]) == {"name": "x", "datatype": "FP32", "shape": [-1, 4]}
    assert tensor_metadata(TensorSpec("b", np.dtype(bool), ())) == {"name": "b", "datatype": "BOOL", "shape": []}


def test_unsendable_output_dtypes_and_error_bodies() -> None:
    with pytest.raises(TypeError, match="NumPy dtype complex64 has no KServe v2 datatype"):
        encode_response("m", [("c", np.zeros(2, np.complex64), False)])
    # string tensors and sequences of maps (skl2onnx's ZipMap) go as BYTES: JSON strings, or length-prefixed
    body, length = encode_response("m", [("s", np.array(["a", "bc"], dtype=object), False),
                                         ("p", [{0: 0.5, 1: 0.5}], False)])
    assert length is None and json.loads(body)["outputs"] == [
        {"name": "s", "datatype": "BYTES", "shape": [2], "data": ["a", "bc"]},
        {"name": "p", "datatype": "BYTES", "shape": [1], "data": ['{"0": 0.5, "1": 0.5}']}]
    body, length = encode_response("m", [("s", np.array(["a", "bc"], dtype=object), True)])
    assert json.loads(body[:length])["outputs"][0]["parameters"] == {"binary_data_size": 11}
    assert body[length:] == b"\x01\x00\x00\x00a\x02\x00\x00\x00bc"
    assert json.loads(encode_error('bad "x"')) == {"error": 'bad "x"'}

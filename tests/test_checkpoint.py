"""hetero.checkpoint.store: every value type round-trips, saves are atomic and pruned, corrupt
checkpoints are skipped with a warning, and arrays resume on any device."""

from __future__ import annotations

import collections
import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import hetero
from hetero.checkpoint import store as checkpoint
from hetero.checkpoint.store import CheckpointError, CheckpointWarning


def _load(directory: Path, **kwargs: Any) -> tuple[dict, int]:
    loaded = checkpoint.load(directory, **kwargs)
    assert loaded is not None
    return loaded


def _steps(directory: Path) -> list[int]:
    return [step for step, _ in checkpoint.checkpoints(directory)]


def _visible(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- round trips -------------------------------------------------------------------------
@pytest.mark.parametrize("value", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.arange(10, dtype=np.int64)[::2],          # not contiguous
    np.zeros((0, 5), np.float64),                # empty
    np.array(7, np.int16),                       # 0-d
    np.array([True, False]),
    np.arange(6, dtype=">i4"),                   # big-endian
    np.array([(1, 2.5), (3, -1.0)], dtype=[("id", "<i4"), ("w", "<f8")]),  # structured
    np.array(["ab", "c"]),
    np.array(["2026-01-01T00:00:00", "2026-11-29T20:00:00"], dtype="datetime64[s]"),
], ids=["f32", "strided", "empty", "0d", "bool", "big-endian", "structured", "unicode", "datetime"])
def test_numpy_arrays_round_trip(tmp_path: Path, value: np.ndarray) -> None:
    checkpoint.save({"x": value}, 1, tmp_path)
    state, step = _load(tmp_path)
    assert step == 1
    assert isinstance(state["x"], np.ndarray)
    assert state["x"].dtype == value.dtype and state["x"].shape == value.shape
    np.testing.assert_array_equal(state["x"], value)
    state["x"].flags.writeable or pytest.fail("restored arrays must be writable")


def test_numpy_scalars_stay_scalars(tmp_path: Path) -> None:
    checkpoint.save({"lr": np.float32(0.5), "n": np.int64(3)}, 0, tmp_path)
    state, _ = _load(tmp_path)
    assert state["lr"] == np.float32(0.5) and type(state["lr"]) is np.float32
    assert type(state["n"]) is np.int64


@pytest.mark.parametrize("tensor", [
    torch.randn(4, 3),
    torch.randn(3, dtype=torch.float64).to(torch.bfloat16),
    torch.arange(10)[1::3],
    torch.tensor(2.5),
    torch.empty(0, 3),
    torch.tensor([True, False, True]),
    torch.randn(2, 2, dtype=torch.complex64),
], ids=["f32", "bf16", "strided-int", "0d", "empty", "bool", "complex"])
def test_torch_tensors_round_trip(tmp_path: Path, tensor: torch.Tensor) -> None:
    checkpoint.save({"t": tensor}, 2, tmp_path)
    state, _ = _load(tmp_path)
    restored = state["t"]
    assert isinstance(restored, torch.Tensor) and restored.device.type == "cpu"
    assert restored.dtype == tensor.dtype and restored.shape == tensor.shape
    assert torch.equal(restored, tensor)


def test_torch_parameters_and_map_location(tmp_path: Path) -> None:
    checkpoint.save({"p": torch.nn.Parameter(torch.ones(3)), "g": torch.zeros(2, requires_grad=True)}, 0, tmp_path)
    state, _ = _load(tmp_path, map_location="cpu")
    assert isinstance(state["p"], torch.nn.Parameter) and state["p"].requires_grad
    assert state["g"].requires_grad and not isinstance(state["g"], torch.nn.Parameter)


def test_module_and_optimizer_state_dicts_resume_training_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    data = torch.randn(16, 4)

    def step(m: torch.nn.Module, o: torch.optim.Optimizer) -> None:
        o.zero_grad()
        m(data).pow(2).mean().backward()
        o.step()

    for _ in range(3):
        step(model, opt)
    checkpoint.save({"model": model.state_dict(), "opt": opt.state_dict()}, 3, tmp_path)
    state, _ = _load(tmp_path)
    assert isinstance(state["model"], collections.OrderedDict)
    assert set(state["opt"]["state"]) == {0, 1, 2, 3}  # int keys survive
    clone = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    clone_opt = torch.optim.Adam(clone.parameters(), lr=0.01)
    clone.load_state_dict(state["model"])
    clone_opt.load_state_dict(state["opt"])
    step(model, opt)
    step(clone, clone_opt)
    for a, b in zip(model.parameters(), clone.parameters()):
        assert torch.equal(a, b)


def test_plain_values_bytes_and_pickled_objects(tmp_path: Path) -> None:
    value = {
        "epoch": 3, "lr": 1e-3, "name": "run", "done": False, "none": None, "nan": float("nan"),
        "nested": {"list": [1, [2, 3]], "tuple": (1, "a"), 5: "int key", None: 0.5},
        "blob": b"\x00\xff", "tags": {"a", "b"}, "order": collections.OrderedDict(b=1, a=2),
        "rng": np.random.default_rng(3).bit_generator.state,
    }
    checkpoint.save(value, 9, tmp_path)
    state, _ = _load(tmp_path, allow_pickle=True)  # the set is pickled
    assert np.isnan(state.pop("nan"))
    value.pop("nan")
    assert state == value
    assert isinstance(state["nested"]["tuple"], tuple) and list(state["order"]) == ["b", "a"]
    assert isinstance(state["order"], collections.OrderedDict) and type(state["nested"]) is dict


def test_hetero_array_records_its_source_device(tmp_path: Path, device: hetero.Device) -> None:
    path = checkpoint.save({"w": hetero.arange(8, dtype=hetero.float32, device=device)}, 1, tmp_path)
    node = json.loads((path / "manifest.json").read_text())["state"]["values"][0]
    assert (node["device"], node["backend"], node["kind"]) == (device.name, device.backend, str(device.kind))


def test_hetero_arrays_resume_on_another_device(tmp_path: Path, device_pair: tuple[hetero.Device, hetero.Device]) -> None:
    source, target = device_pair
    data = np.random.default_rng(1).standard_normal((33, 7)).astype(np.float32)
    checkpoint.save({"w": hetero.asarray(data, device=source), "i": hetero.arange(5, device=source)}, 4, tmp_path)
    state, step = _load(tmp_path, device=target)
    assert step == 4
    assert state["w"].device is target and state["i"].device is target
    np.testing.assert_array_equal(state["w"].numpy(), data)
    np.testing.assert_array_equal(state["i"].numpy(), np.arange(5))


def test_arrays_go_to_the_current_device_by_default(tmp_path: Path) -> None:
    checkpoint.save({"w": hetero.zeros(4, device="cpu")}, 0, tmp_path)
    target = hetero.devices()[-1]
    with hetero.use_device(target):
        state, _ = _load(tmp_path)
    assert state["w"].device is target


def test_a_device_that_refuses_is_an_error_not_a_corrupt_checkpoint(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    checkpoint.save({"w": hetero.zeros(4, device="cpu")}, 1, tmp_path)
    with pytest.raises(hetero.DeviceNotFoundError):
        checkpoint.load(tmp_path, device="cpu:9")
    assert not [w for w in recwarn if issubclass(w.category, CheckpointWarning)]


# -- directories, pruning, atomicity -----------------------------------------------------
def test_default_directory_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_CHECKPOINT_DIR", str(tmp_path / "ck"))
    path = checkpoint.save({"a": 1}, 12, keep=None)
    assert path == tmp_path / "ck" / "step-00000012.hckpt"
    assert checkpoint.latest_step() == 12 and _load(tmp_path / "ck")[0] == {"a": 1}
    monkeypatch.delenv("HETERO_CHECKPOINT_DIR")
    monkeypatch.chdir(tmp_path)
    assert checkpoint.save({"a": 2}, 1).parent == Path("checkpoints")


def test_keep_last_k(tmp_path: Path) -> None:
    for step in range(0, 60, 10):
        checkpoint.save({"step": step}, step, tmp_path, keep=2)
    assert _steps(tmp_path) == [50, 40]
    assert _load(tmp_path) == ({"step": 50}, 50)
    assert _visible(tmp_path) == ["step-00000040.hckpt", "step-00000050.hckpt"]  # no temp leftovers


def test_keep_none_keeps_all_and_saving_an_older_step_keeps_it(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        checkpoint.save({"s": step}, step, tmp_path, keep=None)
    assert _steps(tmp_path) == [3, 2, 1]
    checkpoint.save({"s": "again"}, 2, tmp_path, keep=1)  # resumed from an earlier step
    assert _steps(tmp_path) == [3, 2]
    assert checkpoint.load(tmp_path) == ({"s": 3}, 3)
    assert _visible(tmp_path) == ["step-00000002.hckpt", "step-00000003.hckpt"]


def test_saving_the_same_step_replaces_it(tmp_path: Path) -> None:
    checkpoint.save({"v": 1}, 5, tmp_path)
    checkpoint.save({"v": 2}, 5, tmp_path)
    assert _load(tmp_path) == ({"v": 2}, 5)
    assert _visible(tmp_path) == ["step-00000005.hckpt"]


def test_a_crash_during_the_final_rename_leaves_nothing_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.save({"w": np.ones(1000)}, 1, tmp_path)

    def crash(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(CheckpointError, match="previous checkpoints are intact"):
        checkpoint.save({"w": np.zeros(1000)}, 2, tmp_path)
    monkeypatch.undo()
    assert _visible(tmp_path) == ["step-00000001.hckpt"]
    state, step = _load(tmp_path)
    assert step == 1 and state["w"].sum() == 1000


def test_a_payload_write_failing_in_a_worker_thread_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.checkpoint import files as checkpoint_files

    checkpoint.save({"v": 1}, 1, tmp_path)
    real = checkpoint_files.write_payload

    def disk_full_on_the_third(file: Path, data: object) -> dict[str, Any]:
        if file.name == checkpoint_files.payload_name(2):
            raise OSError(28, "No space left on device")
        return real(file, data)

    monkeypatch.setattr(checkpoint_files, "write_payload", disk_full_on_the_third)
    with pytest.raises(CheckpointError, match="No space left on device"):
        checkpoint.save({f"t{i}": np.full(1000, i) for i in range(20)}, 2, tmp_path)
    monkeypatch.undo()
    assert _visible(tmp_path) == ["step-00000001.hckpt"]
    assert _load(tmp_path) == ({"v": 1}, 1)


def test_many_payloads_round_trip_in_order(tmp_path: Path) -> None:
    state = {f"layer{i}": np.full(100 + i, i, np.float32) for i in range(40)}
    checkpoint.save(state, 1, tmp_path)
    loaded, _ = _load(tmp_path)
    assert list(loaded) == list(state)
    for key, value in state.items():
        np.testing.assert_array_equal(loaded[key], value)


def test_a_crash_while_replacing_a_step_keeps_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint.save({"v": "old"}, 3, tmp_path)
    real = os.replace
    calls = []

    def second_call_fails(src: str, dst: str) -> None:
        calls.append(src)
        if len(calls) == 2:  # the old step moved aside; installing the new one fails
            raise OSError(5, "I/O error")
        real(src, dst)

    monkeypatch.setattr(os, "replace", second_call_fails)
    with pytest.raises(CheckpointError):
        checkpoint.save({"v": "new"}, 3, tmp_path)
    monkeypatch.undo()
    assert _load(tmp_path) == ({"v": "old"}, 3)
    assert _visible(tmp_path) == ["step-00000003.hckpt"]


def test_a_stale_temporary_directory_is_ignored_and_cleaned(tmp_path: Path) -> None:
    checkpoint.save({"v": 1}, 1, tmp_path)
    stale = tmp_path / ".step-00000002.hckpt.tmp-999999999-abcd"  # no such pid
    stale.mkdir()
    (stale / "000000.bin").write_bytes(b"partial")
    assert checkpoint.latest_step(tmp_path) == 1
    checkpoint.save({"v": 3}, 3, tmp_path)
    assert not stale.exists()


# -- corruption ----------------------------------------------------------------------------
def _flip_byte(file: Path, offset: int = 0) -> None:
    data = bytearray(file.read_bytes())
    data[offset] ^= 0xFF
    file.write_bytes(bytes(data))


def test_corrupt_newest_payload_falls_back_with_a_warning_naming_the_file(tmp_path: Path) -> None:
    checkpoint.save({"w": np.full(100, 1.0)}, 1, tmp_path)
    newest = checkpoint.save({"w": np.full(100, 2.0)}, 2, tmp_path)
    payload = newest / "000000.bin"
    _flip_byte(payload, 17)
    with pytest.warns(CheckpointWarning, match=str(payload)):
        state, step = _load(tmp_path)
    assert step == 1 and (state["w"] == 1.0).all()
    with pytest.warns(CheckpointWarning, match="sha256"):
        assert checkpoint.latest_step(tmp_path) == 1


@pytest.mark.parametrize("damage", ["manifest-digit", "manifest-garbage", "truncated", "missing-manifest", "extra-bytes"])
def test_every_kind_of_damage_is_detected(tmp_path: Path, damage: str) -> None:
    checkpoint.save({"w": np.arange(50.0)}, 1, tmp_path)
    newest = checkpoint.save({"w": np.arange(50.0) * 2}, 2, tmp_path)
    manifest, payload = newest / "manifest.json", newest / "000000.bin"
    if damage == "manifest-digit":  # still valid JSON: only the manifest's own checksum sees it
        text = manifest.read_text()
        assert '"shape": [50]' in text
        manifest.write_text(text.replace('"shape": [50]', '"shape": [5, 10]'))
    elif damage == "manifest-garbage":
        manifest.write_bytes(manifest.read_bytes()[:40])
    elif damage == "truncated":
        payload.write_bytes(payload.read_bytes()[:-8])
    elif damage == "missing-manifest":
        manifest.unlink()
    else:
        payload.write_bytes(payload.read_bytes() + b"\0")
    with pytest.warns(CheckpointWarning, match="step-00000002"):
        state, step = _load(tmp_path)
    assert step == 1 and state["w"][-1] == 49.0


def test_loading_a_given_step(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        checkpoint.save({"s": step, "w": np.full(10, step)}, step, tmp_path)
    state, step = checkpoint.load(tmp_path, step=2) or ({}, -1)
    assert step == 2 and state["s"] == 2
    with pytest.raises(CheckpointError, match=r"no checkpoint of step 7 in .*\(steps there: 3, 2, 1\)"):
        checkpoint.load(tmp_path, step=7)
    _flip_byte(tmp_path / "step-00000002.hckpt" / "000000.bin")
    with pytest.raises(CheckpointError, match="step-00000002.hckpt/000000.bin does not match its sha256"):
        checkpoint.load(tmp_path, step=2)  # asked for that one: no quiet fallback


def test_big_payloads_are_hashed_in_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.checkpoint import files as checkpoint_files

    monkeypatch.setattr(checkpoint_files, "PART", 1 << 16)  # 64 KiB parts: a 1 MiB array has 16
    data = np.random.default_rng(5).standard_normal(1 << 17)  # 1 MiB of float64
    checkpoint.save({"w": data, "small": np.arange(10)}, 1, tmp_path)
    newest = checkpoint.save({"w": data * 2, "small": np.arange(10)}, 2, tmp_path)
    monkeypatch.undo()  # reading follows the manifest's part size, not the module's
    entry = json.loads((newest / "manifest.json").read_text())["files"]["000000.bin"]
    assert entry["part_bytes"] == 1 << 16 and len(entry["sha256"]) == 16
    assert checkpoint.latest_step(tmp_path) == 2
    state, _ = _load(tmp_path)
    np.testing.assert_array_equal(state["w"], data * 2)
    _flip_byte(newest / "000000.bin", 5 * (1 << 16) + 10)
    with pytest.warns(CheckpointWarning, match="part 6 of 16, from byte 327680"):
        state, step = _load(tmp_path)
    assert step == 1
    np.testing.assert_array_equal(state["w"], data)
    payload = tmp_path / "step-00000001.hckpt" / "000000.bin"
    payload.write_bytes(payload.read_bytes()[:-1])
    with pytest.raises(CheckpointError, match=f"has {(1 << 20) - 1} bytes, the manifest says {1 << 20}"):
        checkpoint.verify(payload.parent)


def test_no_valid_checkpoint_gives_none(tmp_path: Path) -> None:
    assert checkpoint.load(tmp_path / "absent") is None
    assert checkpoint.latest_step(tmp_path / "absent") is None
    only = checkpoint.save({"w": np.ones(3)}, 1, tmp_path)
    _flip_byte(only / "000000.bin")
    with pytest.warns(CheckpointWarning):
        assert checkpoint.load(tmp_path) is None


# -- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize(("state", "match"), [
    ({"opt": {"inner": [1, threading.Lock()]}}, r"state\['opt'\]\['inner'\]\[1\] is a lock"),
    ({"model": torch.nn.Linear(2, 2)}, r"state\['model'\] is a Linear; save its state_dict\(\)"),
    ({"x": np.array([object()])}, r"state\['x'\] is a NumPy array of Python objects"),
    ({"x": {(1, 2): 3}}, r"state\['x'\] has key \(1, 2\)"),
    ({1: "a"}, "top-level key 1"),
    ([1, 2], "state must be a mapping"),
], ids=["lock", "module", "object-array", "tuple-key", "int-top-key", "not-a-mapping"])
def test_unsupported_values_name_the_key_and_write_nothing(tmp_path: Path, state: object, match: str) -> None:
    checkpoint.save({"ok": 1}, 1, tmp_path)
    with pytest.raises(CheckpointError, match=match):
        checkpoint.save(state, 2, tmp_path)  # type: ignore[arg-type]
    assert _visible(tmp_path) == ["step-00000001.hckpt"]


@pytest.mark.parametrize(("step", "keep"), [(-1, 3), (1.5, 3), (True, 3), (1, 0)])
def test_bad_step_or_keep(tmp_path: Path, step: object, keep: object) -> None:
    with pytest.raises(CheckpointError, match="step must be|keep must be"):
        checkpoint.save({"a": 1}, step, tmp_path, keep=keep)  # type: ignore[arg-type]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_directory_names_it_and_the_remedy(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(CheckpointError, match=f"cannot write checkpoints to {locked}.*HETERO_CHECKPOINT_DIR"):
            checkpoint.save({"a": 1}, 1, locked)
    finally:
        locked.chmod(0o700)
    assert list(locked.iterdir()) == []


def test_directory_that_cannot_be_made_names_it_and_the_remedy(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(CheckpointError, match=f"cannot write checkpoints to {blocker / 'ck'}: .*pass directory="):
        checkpoint.save({"a": 1}, 1, blocker / "ck")
    assert blocker.read_text() == "not a directory"


def test_resume_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HETERO_RESUME_STEP", raising=False)
    assert checkpoint.resume_step() is None
    monkeypatch.setenv("HETERO_RESUME_STEP", "120")
    assert checkpoint.resume_step() == 120
    monkeypatch.setenv("HETERO_RESUME_STEP", "soon")
    with pytest.raises(CheckpointError, match="HETERO_RESUME_STEP='soon'"):
        checkpoint.resume_step()


def test_public_name() -> None:
    assert hetero.checkpoint.store is checkpoint

"""Numba's ``numba.cuda.random`` for ``hetero.compat.cuda``: xoroshiro128+ generators, one per
work-item, created on the host and drawn from inside kernels on any hetero device.

    from hetero.compat.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

    @hetero.kernel                       # or @cuda.jit
    def draw(states, out):
        i = hetero.global_id(0)
        if i < out.shape[0]:
            out[i] = xoroshiro128p_uniform_float32(states, i)

    states = create_xoroshiro128p_states(n, seed=1)
    draw[n](states.array, out)           # a cuda.jit kernel takes ``states`` itself

**The generator** is the one Numba uses: Blackman and Vigna's xoroshiro128+ in its first
(2016) form, with shift/rotate constants a=55, b=14, c=36, its jump polynomial
``0xbeac0467eba5facb, 0xd86b048b86aa9922`` (2**64 steps), and seeding by one splitmix64
output ``z`` of the 64-bit seed, taken for both words (``s0 = s1 = z``). The 2018 revision of
xoroshiro128+ (a=24, b=16, c=37, jump ``0xdf900294d8f554a5, 0x170865df4b3201fc``) is a
different generator: Numba's streams need the 2016 constants, and a jump polynomial only
jumps the generator it was computed for.

**The states** of ``n`` generators are a :class:`~hetero.compat.cuda.arrays.DeviceNDArray`
of shape ``(n, 2)`` and dtype ``uint64``: column 0 is ``s0`` and column 1 is ``s1``. Numba
uses a 1-D array of the record dtype ``[('s0', uint64), ('s1', uint64)]``; the memory is the
same 16 bytes per generator, so ``host.view(numba_dtype).reshape(n)`` of a C-contiguous
``(n, 2)`` host copy gives Numba's array, and ``records.view(np.uint64).reshape(n, 2)`` goes
back. Generator ``k`` starts ``k + subsequence_start`` jumps (of 2**64 steps each) after the
seeded state, as in Numba, so no two generators' sequences overlap before 2**64 draws each.

**Bit for bit** (tested against Numba's own host implementation, ``numba.cuda.random``'s
``init_xoroshiro128p_states_cpu`` and its ``@jit`` functions run on the CPU):

* the states :func:`create_xoroshiro128p_states` gives, for any seed and
  ``subsequence_start``, are Numba's;
* :func:`xoroshiro128p_next`, :func:`xoroshiro128p_jump`, :func:`xoroshiro128p_uniform_float64`
  and :func:`xoroshiro128p_uniform_float32` give Numba's values on every device. The float32
  draw is Numba's: the top 53 bits times 2**-53, rounded to the nearest float32 (computed here
  as ``f32(x >> 11) * 2**-53``, the same number with no fp64 arithmetic). Like Numba's, it
  can round up to exactly 1.0 (about once in 2**25 draws); truncating to the top 24 bits
  instead would keep it below 1 but differ from Numba in the last bit half the time, and make
  a zero, hence an infinite normal draw, 2**29 times likelier;
* :func:`xoroshiro128p_normal_float32` and :func:`xoroshiro128p_normal_float64` follow Numba's
  formula exactly (Box-Muller's cosine branch of two float32 uniforms, ``log`` in float32,
  the rest in the result's precision); their last bits are those of each device's ``sqrt``,
  ``log`` and ``cos``.

Creating states runs on the host in NumPy alone (no JIT compiler, nothing to compile): the
jump is linear over GF(2), so it is kept as a 128x128 bit matrix in byte-lookup tables, and
the states are filled by doubling (states ``m .. 2m-1`` are ``J**m`` of states ``0 .. m-1``).
Two million states take about 0.2 s (Numba's own host loop: 0.33 s after its compilation); a
``subsequence_start`` of k costs about log2(k) matrix products, not k jumps.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import hetero
from hetero.array.ndarray import Array
from hetero.compat.cuda.arrays import DeviceNDArray, to_device
from hetero.core.device import Device

__all__ = [
    "create_xoroshiro128p_states",
    "host_states",
    "init_xoroshiro128p_states",
    "rotl",
    "uint64_to_unit_float32",
    "uint64_to_unit_float64",
    "xoroshiro128p_jump",
    "xoroshiro128p_next",
    "xoroshiro128p_normal_float32",
    "xoroshiro128p_normal_float64",
    "xoroshiro128p_uniform_float32",
    "xoroshiro128p_uniform_float64",
]

_MASK64 = (1 << 64) - 1
_U64 = np.uint64
#: xoroshiro128+ (2016): s0' = rotl(s0, A) ^ t ^ (t << B), s1' = rotl(t, C) with t = s0 ^ s1.
_A, _B, _C = 55, 14, 36
#: The jump polynomial of that generator, low word first: advances it by 2**64 steps.
_JUMP = (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922)
#: splitmix64's constants.
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB

# Typed constants for the device functions (a NumPy scalar keeps its type in a kernel).
_JUMP_LO = np.uint64(_JUMP[0])
_JUMP_HI = np.uint64(_JUMP[1])
_TWO_POW_M53 = 1.0 / float(1 << 53)  # exact in float32 and float64
TWO_PI_FLOAT32 = np.float32(2 * math.pi)
TWO_PI_FLOAT64 = np.float64(2 * math.pi)


# -- host: seeding and jumping ---------------------------------------------------------------
def _splitmix64(seed: int) -> int:
    """One output of splitmix64 started at ``seed`` (its first increment included)."""
    z = (seed + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def _seeded_state(seed: Any) -> tuple[int, int]:
    """The 128-bit start state of ``seed`` (taken modulo 2**64, as Numba's ``uint64(seed)``)."""
    z = _splitmix64(int(seed) & _MASK64)
    return z, z


def _step(s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One xoroshiro128+ step of many generators at once (uint64 arrays)."""
    t = s1 ^ s0
    n0 = ((s0 << _U64(_A)) | (s0 >> _U64(64 - _A))) ^ t ^ (t << _U64(_B))
    n1 = (t << _U64(_C)) | (t >> _U64(64 - _C))
    return n0, n1


def _jump_by_steps(s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vigna's jump (2**64 steps) of many generators at once: 128 steps, XOR-ing the states
    the polynomial's set bits select."""
    r0 = np.zeros_like(s0)
    r1 = np.zeros_like(s1)
    for word in _JUMP:
        for bit in range(64):
            if (word >> bit) & 1:
                r0 ^= s0
                r1 ^= s1
            s0, s1 = _step(s0, s1)
    return r0, r1


def _basis() -> tuple[np.ndarray, np.ndarray]:
    """The 128 unit states: bit j of s0 for j < 64, bit j - 64 of s1 after."""
    j = np.arange(128, dtype=_U64)
    one = _U64(1) << (j % _U64(64))
    return np.where(j < 64, one, _U64(0)), np.where(j >= 64, one, _U64(0))


#: The bits of each byte value: _BYTE_BITS[i, v] is bit i of v.
_BYTE_BITS = ((np.arange(256)[None, :] >> np.arange(8)[:, None]) & 1).astype(bool)

Columns = tuple[np.ndarray, np.ndarray]
Tables = tuple[np.ndarray, np.ndarray]


def _tables(columns: Columns) -> Tables:
    """Byte-lookup tables of a GF(2)-linear map of states given by its images of the unit states:
    ``T[t, v]`` is the image of byte ``t`` (of s0's 8 then s1's 8) holding ``v``, for s0 and s1."""
    t0 = np.zeros((16, 256), dtype=_U64)
    t1 = np.zeros((16, 256), dtype=_U64)
    c0 = columns[0].reshape(16, 8)
    c1 = columns[1].reshape(16, 8)
    for i in range(8):
        t0[:, _BYTE_BITS[i]] ^= c0[:, i:i + 1]
        t1[:, _BYTE_BITS[i]] ^= c1[:, i:i + 1]
    return t0, t1


def _apply(tables: Tables, s0: np.ndarray, s1: np.ndarray,
           out0: np.ndarray | None = None, out1: np.ndarray | None = None) -> Columns:
    """The linear map of ``tables`` applied to the states (``s0``, ``s1``), into ``out0``/``out1``
    when given (uint64 arrays of the same length, not overlapping the inputs)."""
    t0, t1 = tables
    r0 = np.zeros_like(s0) if out0 is None else out0
    r1 = np.zeros_like(s1) if out1 is None else out1
    r0[...] = 0
    r1[...] = 0
    # each state's 8 bytes, least significant first (on any host byte order)
    b0 = np.ascontiguousarray(s0, dtype="<u8").view(np.uint8)
    b1 = np.ascontiguousarray(s1, dtype="<u8").view(np.uint8)
    for t in range(16):
        index = (b0 if t < 8 else b1)[t % 8::8]
        r0 ^= t0[t].take(index)
        r1 ^= t1[t].take(index)
    return r0, r1


_JUMP_COLUMNS: Columns | None = None


def _jump_columns() -> Columns:
    """The jump's images of the 128 unit states (computed once, in about a millisecond)."""
    global _JUMP_COLUMNS
    if _JUMP_COLUMNS is None:
        _JUMP_COLUMNS = _jump_by_steps(*_basis())
    return _JUMP_COLUMNS


def _jump_power(k: int) -> Columns:
    """The images of the unit states under ``k`` jumps (square and multiply over GF(2))."""
    result = _basis()
    base = _jump_columns()
    while k:
        tables = _tables(base)
        if k & 1:
            result = _apply(tables, *result)
        k >>= 1
        if k:
            base = _apply(tables, *base)
    return result


def host_states(n: int, seed: Any, subsequence_start: int = 0) -> np.ndarray:
    """The states of ``n`` generators as a host ``(n, 2)`` uint64 array (s0, s1 columns): what
    :func:`create_xoroshiro128p_states` puts on the device, and Numba's states bit for bit."""
    n = int(n)
    subsequence_start = int(subsequence_start)
    if n < 0:
        raise ValueError(f"the number of generators must not be negative, got {n}")
    if subsequence_start < 0:
        raise ValueError(f"subsequence_start must not be negative, got {subsequence_start}")
    s0 = np.empty(n, dtype=_U64)
    s1 = np.empty(n, dtype=_U64)
    if n:
        start = tuple(np.array([v], dtype=_U64) for v in _seeded_state(seed))
        if subsequence_start:
            start = _apply(_tables(_jump_power(subsequence_start)), *start)
        s0[0], s1[0] = start[0][0], start[1][0]
        power = _jump_columns()  # J**m while states 0 .. m-1 are filled
        m = 1
        while m < n:
            tables = _tables(power)
            count = min(m, n - m)
            _apply(tables, s0[:count], s1[:count], s0[m:m + count], s1[m:m + count])
            m *= 2
            if m < n:
                power = _apply(tables, *power)
    return np.stack([s0, s1], axis=1)


def init_xoroshiro128p_states(states: DeviceNDArray | Array, seed: Any, subsequence_start: int = 0,
                              stream: Any = 0) -> None:
    """Fill ``states`` (an ``(n, 2)`` uint64 device array) with ``n`` generators seeded by ``seed``,
    generator ``k`` jumped ``k + subsequence_start`` times by 2**64 steps. Computed on the host,
    then copied to the device (as Numba does). ``stream`` is accepted and not needed."""
    shape = tuple(states.shape)
    dtype = np.dtype(states.dtype)
    if len(shape) != 2 or shape[1] != 2 or dtype != np.uint64:
        raise ValueError(f"init_xoroshiro128p_states: states must be an (n, 2) uint64 array (columns s0, s1), "
                         f"got {dtype}{list(shape)}; create one with create_xoroshiro128p_states(n, seed) or "
                         "device_array((n, 2), np.uint64) (Numba's record dtype is not used here)")
    host = host_states(shape[0], seed, subsequence_start)
    if isinstance(states, DeviceNDArray):
        states.copy_to_device(host, stream=stream)
    else:
        hetero.copyto(states, host)


def create_xoroshiro128p_states(n: int, seed: Any, subsequence_start: int = 0, stream: Any = 0, *,
                                device: str | Device | None = None) -> DeviceNDArray:
    """A new device array of ``n`` generator states (``(n, 2)`` uint64), on ``device`` or else
    ``hetero.device()``; see :func:`init_xoroshiro128p_states`."""
    return to_device(host_states(n, seed, subsequence_start), device=device)


# -- device functions ------------------------------------------------------------------------
@hetero.func
def rotl(x, k):  # type: ignore[no-untyped-def]
    """``x`` (uint64) rotated left by ``k`` bits (0 < k < 64)."""
    return (x << k) | (x >> (64 - k))


@hetero.func
def xoroshiro128p_next(states, index):  # type: ignore[no-untyped-def]
    """The next uint64 of generator ``states[index]``, which advances one step."""
    s0 = states[index, 0]
    s1 = states[index, 1]
    result = s0 + s1
    s1 = s1 ^ s0
    states[index, 0] = rotl(s0, 55) ^ s1 ^ (s1 << 14)
    states[index, 1] = rotl(s1, 36)
    return result


@hetero.func
def xoroshiro128p_jump(states, index):  # type: ignore[no-untyped-def]
    """Advance generator ``states[index]`` by 2**64 steps."""
    s0 = hetero.u64(0)
    s1 = hetero.u64(0)
    for w in range(2):
        word = _JUMP_LO if w == 0 else _JUMP_HI
        for b in range(64):
            if (word >> b) & hetero.u64(1):
                s0 ^= states[index, 0]
                s1 ^= states[index, 1]
            xoroshiro128p_next(states, index)
    states[index, 0] = s0
    states[index, 1] = s1


@hetero.func
def uint64_to_unit_float64(x):  # type: ignore[no-untyped-def]
    """A uint64 as a float64 in [0, 1): its top 53 bits times 2**-53."""
    return hetero.f64(hetero.u64(x) >> 11) * _TWO_POW_M53


@hetero.func
def uint64_to_unit_float32(x):  # type: ignore[no-untyped-def]
    """A uint64 as a float32, as Numba converts: its top 53 bits times 2**-53, rounded to float32
    (the cast rounds; scaling by a power of two is exact, so no fp64 is needed)."""
    return hetero.f32(hetero.u64(x) >> 11) * hetero.f32(_TWO_POW_M53)


@hetero.func
def xoroshiro128p_uniform_float32(states, index):  # type: ignore[no-untyped-def]
    """A float32 uniform in [0, 1) from generator ``states[index]`` (one step); see the module
    notes on rounding up to 1.0."""
    return uint64_to_unit_float32(xoroshiro128p_next(states, index))


@hetero.func
def xoroshiro128p_uniform_float64(states, index):  # type: ignore[no-untyped-def]
    """A float64 uniform in [0, 1) from generator ``states[index]`` (one step)."""
    return uint64_to_unit_float64(xoroshiro128p_next(states, index))


@hetero.func
def xoroshiro128p_normal_float32(states, index):  # type: ignore[no-untyped-def]
    """A float32 normal draw (mean 0, standard deviation 1) by Box-Muller's cosine branch: two steps."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return hetero.math.sqrt(hetero.f32(-2.0) * hetero.math.log(u1)) * hetero.math.cos(TWO_PI_FLOAT32 * u2)


@hetero.func
def xoroshiro128p_normal_float64(states, index):  # type: ignore[no-untyped-def]
    """A float64 normal draw (mean 0, standard deviation 1), from two float32 uniforms as Numba's: two steps."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return hetero.math.sqrt(hetero.f64(-2.0) * hetero.f64(hetero.math.log(u1))) * \
        hetero.math.cos(TWO_PI_FLOAT64 * hetero.f64(u2))

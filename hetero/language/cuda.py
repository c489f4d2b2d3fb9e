"""The names of Numba's CUDA kernel API, as hetero's compiler knows them.

``hetero.compat.cuda`` re-exports these, so that a kernel written with ``from numba import
cuda`` compiles unchanged once that import names ``hetero.compat.cuda``. Each maps onto the
kernel language every device runs (a CUDA block is a work-group, exactly, in 3-D):

========================  =========================================
Numba                     hetero
========================  =========================================
``cuda.threadIdx.x``      ``local_id(0)`` (i32, as Numba types it)
``cuda.blockIdx.y``       ``group_id(1)``
``cuda.blockDim.z``       ``local_size(2)``
``cuda.gridDim.x``        ``num_groups(0)``
``cuda.grid(n)``          ``global_id(0)``, or an n-tuple (i64)
``cuda.gridsize(n)``      ``global_size(0)``, or an n-tuple (i64)
``cuda.syncthreads()``    ``barrier()``
``cuda.shared.array``     ``local_array`` (work-group memory)
``cuda.atomic.add`` …     ``atomic_add`` …
``this_grid().sync()``    a grid sync (:mod:`hetero.compiler.ir.grid_sync`)
========================  =========================================

Vocabulary: imports nothing of the project but :mod:`hetero.language`.
"""

from __future__ import annotations

from hetero import language
from hetero.language import Intrinsic


class IndexValue:
    """One component of a CUDA index built-in (``cuda.threadIdx.x``): a value, not a call."""

    def __init__(self, dim3: str, builtin: str, axis: int) -> None:
        self.builtin = builtin
        self.axis = axis
        self.name = f"cuda.{dim3}.{'xyz'[axis]}"

    def __repr__(self) -> str:
        return f"<hetero kernel intrinsic {self.name}>"


class Dim3:
    """``cuda.threadIdx`` and its kin: ``.x``, ``.y`` and ``.z`` inside kernels."""

    def __init__(self, name: str, builtin: str) -> None:
        self.x = IndexValue(name, builtin, 0)
        self.y = IndexValue(name, builtin, 1)
        self.z = IndexValue(name, builtin, 2)
        self._name = name

    def __repr__(self) -> str:
        return f"<hetero kernel intrinsic cuda.{self._name}>"


#: The Numba type of every :class:`IndexValue` (``types.int32`` in numba-cuda).
INDEX_VALUE_TYPE = "i32"

threadIdx = Dim3("threadIdx", "local_id")
blockIdx = Dim3("blockIdx", "group_id")
blockDim = Dim3("blockDim", "local_size")
gridDim = Dim3("gridDim", "num_groups")

grid = Intrinsic("cuda.grid", "cuda.grid(ndim): this thread's absolute index, an int or an ndim-tuple (i64)", ("ndim",))
gridsize = Intrinsic("cuda.gridsize", "cuda.gridsize(ndim): the threads in the grid, an int or an ndim-tuple (i64)",
                     ("ndim",))
syncthreads = language.barrier
syncthreads_count = Intrinsic("cuda.syncthreads_count", "n = cuda.syncthreads_count(p): a barrier; the threads of the "
                              "block whose p holds (i32)")
syncthreads_and = Intrinsic("cuda.syncthreads_and", "x = cuda.syncthreads_and(p): a barrier; 1 if p holds for every "
                            "thread of the block, else 0")
syncthreads_or = Intrinsic("cuda.syncthreads_or", "x = cuda.syncthreads_or(p): a barrier; 1 if p holds for any "
                           "thread of the block, else 0")


class WarpValue:
    """``cuda.laneid`` and ``cuda.warpsize`` inside kernels: values, not calls (i32)."""

    def __init__(self, name: str) -> None:
        self.name = f"cuda.{name}"

    def __repr__(self) -> str:
        return f"<hetero kernel intrinsic {self.name}>"


#: A warp has 32 lanes on every device (CUDA's view, also on 64-wide AMD wavefronts).
WARP_SIZE = 32
laneid = WarpValue("laneid")
warpsize = WarpValue("warpsize")


def _warp(name: str, doc: str, params: tuple[str, ...]) -> Intrinsic:
    return Intrinsic(f"cuda.{name}", doc, params)


shfl_sync = _warp("shfl_sync", "cuda.shfl_sync(mask, value, src_lane): value from lane src_lane of the warp",
                  ("mask", "value", "src_lane"))
shfl_up_sync = _warp("shfl_up_sync", "cuda.shfl_up_sync(mask, value, delta): value from lane laneid - delta "
                     "(one's own below lane delta)", ("mask", "value", "delta"))
shfl_down_sync = _warp("shfl_down_sync", "cuda.shfl_down_sync(mask, value, delta): value from lane laneid + delta "
                       "(one's own past the warp's end)", ("mask", "value", "delta"))
shfl_xor_sync = _warp("shfl_xor_sync", "cuda.shfl_xor_sync(mask, value, lane_mask): value from lane laneid ^ lane_mask",
                      ("mask", "value", "lane_mask"))
all_sync = _warp("all_sync", "cuda.all_sync(mask, predicate): whether predicate holds in every active lane of mask",
                 ("mask", "predicate"))
any_sync = _warp("any_sync", "cuda.any_sync(mask, predicate): whether predicate holds in any active lane of mask",
                 ("mask", "predicate"))
eq_sync = _warp("eq_sync", "cuda.eq_sync(mask, predicate): whether predicate is the same in every active lane of mask",
                ("mask", "predicate"))
ballot_sync = _warp("ballot_sync", "cuda.ballot_sync(mask, predicate): the lanes of mask whose predicate holds, "
                    "a bit each (u32)", ("mask", "predicate"))
activemask = _warp("activemask", "cuda.activemask(): the warp's lanes running this code, a bit each (u32)", ())
lanemask_lt = _warp("lanemask_lt", "cuda.lanemask_lt(): a bit for each lane below this one (u32)", ())
syncwarp = _warp("syncwarp", "cuda.syncwarp(mask=0xffffffff): the lanes of mask wait for each other", ("mask",))
threadfence = _warp("threadfence", "cuda.threadfence(): order this thread's memory accesses for the whole device", ())
threadfence_block = _warp("threadfence_block", "cuda.threadfence_block(): order this thread's memory accesses for "
                          "its block", ())
threadfence_system = _warp("threadfence_system", "cuda.threadfence_system(): order this thread's memory accesses "
                           "for the device and the host", ())
popc = Intrinsic("cuda.popc", "cuda.popc(x): the number of bits set in x (of x's integer type)")
clz = Intrinsic("cuda.clz", "cuda.clz(x): the number of leading zero bits of x, in its width (of x's type)")
ffs = Intrinsic("cuda.ffs", "cuda.ffs(x): the position of x's least significant set bit, from 1; 0 for 0 (u32)")
brev = Intrinsic("cuda.brev", "cuda.brev(x): x's bits reversed (u32 for up to 32 bits, u64 for 64)")
match_any_sync = _warp("match_any_sync", "cuda.match_any_sync(mask, value): the lanes of mask whose value equals "
                        "this lane's, a bit each (u32; integer values)", ("mask", "value"))
match_all_sync = _warp("match_all_sync", "m, pred = cuda.match_all_sync(mask, value): (mask, True) when every lane of "
                       "mask has this lane's value, else (0, False); integer values", ("mask", "value"))
fma = Intrinsic("cuda.fma", "cuda.fma(a, b, c): a * b + c rounded once (f32 or f64)")
cbrt = Intrinsic("cuda.cbrt", "cuda.cbrt(x): the cube root of x (f32 or f64)")
selp = Intrinsic("cuda.selp", "cuda.selp(predicate, a, b): a where predicate holds, else b (a select, no branch)")
#: The bit intrinsics (device functions of :mod:`hetero.language.bits`).
BIT_CALLS = ("cuda.popc", "cuda.clz", "cuda.ffs", "cuda.brev")
#: The warp intrinsics and the operation of :class:`hetero.compiler.ir.nodes.Warp` each is.
WARP_CALLS = {"cuda.shfl_sync": "shfl", "cuda.shfl_up_sync": "shfl_up", "cuda.shfl_down_sync": "shfl_down",
              "cuda.shfl_xor_sync": "shfl_xor", "cuda.all_sync": "all", "cuda.any_sync": "any",
              "cuda.ballot_sync": "ballot", "cuda.activemask": "activemask", "cuda.syncwarp": "sync"}
FENCES = {"cuda.threadfence": "device", "cuda.threadfence_block": "block", "cuda.threadfence_system": "system"}


class _Namespace:
    def __init__(self, name: str, **members: Intrinsic) -> None:
        self._name = name
        for key, value in members.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"<hetero kernel namespace cuda.{self._name}>"


shared = _Namespace("shared", array=Intrinsic(
    "cuda.shared.array", "cuda.shared.array(shape, dtype): block-shared memory of constant shape", ("shape", "dtype")))
local = _Namespace("local", array=Intrinsic(
    "cuda.local.array", "cuda.local.array(shape, dtype): per-thread memory of constant shape", ("shape", "dtype")))
const = _Namespace("const", array_like=Intrinsic(
    "cuda.const.array_like", "cuda.const.array_like(ary): a global NumPy array as constant memory"))
cg = _Namespace("cg", this_grid=Intrinsic(
    "cuda.cg.this_grid", "cuda.cg.this_grid(): the whole launch as a group; its .sync() waits for every thread"))
atomic = _Namespace(
    "atomic", add=language.atomic_add, sub=language.atomic_sub, min=language.atomic_min, max=language.atomic_max,
    cas=language.atomic_cas, exch=language.atomic_exch, and_=language.atomic_and, or_=language.atomic_or,
    xor=language.atomic_xor, inc=language.atomic_inc, dec=language.atomic_dec, nanmin=language.atomic_nanmin,
    nanmax=language.atomic_nanmax,
    compare_and_swap=Intrinsic("cuda.atomic.compare_and_swap", "compare_and_swap(ary, old, val): cas on ary[0]",
                               ("ary", "old", "val")),
)

#: ``cuda.fp16``'s intrinsics: name -> what it is (each takes and gives float16, rounded to float16 once).
FP16 = {
    "hadd": "a + b", "hsub": "a - b", "hmul": "a * b", "hdiv": "a / b", "hfma": "a * b + c, rounded once",
    "hneg": "-a", "habs": "|a|", "hmax": "the larger (a NaN loses)", "hmin": "the smaller (a NaN loses)",
    "heq": "a == b", "hne": "a != b", "hgt": "a > b", "hge": "a >= b", "hlt": "a < b", "hle": "a <= b",
    "hsin": "sin", "hcos": "cos", "hlog": "log", "hlog2": "log2", "hlog10": "log10", "hexp": "exp",
    "hexp2": "2**a", "hexp10": "10**a", "hsqrt": "sqrt", "hrsqrt": "1/sqrt", "hrcp": "1/a", "hceil": "ceil",
    "hfloor": "floor", "htrunc": "trunc", "hrint": "round half to even",
}
fp16 = _Namespace("fp16", **{name: Intrinsic(f"cuda.fp16.{name}", f"cuda.fp16.{name}: {what} (float16)")
                             for name, what in FP16.items()})

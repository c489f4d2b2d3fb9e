"""Walking libclang's cursors without losing any: the CUDA C front end's ``children`` and ``walk``,
and the depth check that gives its recursive lowering room on Python's stack.

libclang hands a cursor's children to a Python callback. The bindings' own ``get_children``
lets an exception raised in that callback (a RecursionError deep in a kernel) be printed as
"Exception ignored" and dropped, and with it the children: part of the kernel vanished, and
what remained was reported as "not supported", or lowered without it. :func:`children` catches
whatever the callback raises and raises it again once libclang returns, and refuses to start a
walk with too little of Python's stack left for its callback to run at all. :func:`walk` is
iterative, so it never recurses however deep the tree.

:func:`check_depth` measures a function's tree (after macros, which the text scan of
:mod:`.cuda_c_limits` cannot see) against :data:`~.cuda_c_limits.MAX_TREE_DEPTH`;
:func:`recursion_room` then raises Python's recursion limit, for the lowering's duration, to
what that depth needs.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from hetero.compiler.frontend import cuda_c_limits
from hetero.core.errors import CompileError

#: Python frames the lowering takes per level of the tree, at most (measured: 3 in an
#: expression, 2.5 in nested statements; the rest is margin).
FRAMES_PER_LEVEL = 6
#: Frames a walk needs left below the recursion limit: its callback, and an error's formatting.
_MARGIN = 60
_CONTINUE, _BREAK = 1, 0


class TreeTooDeep(RecursionError):
    """Python's stack ran out under :func:`children`: where, for the CompileError it becomes."""

    def __init__(self, cursor: Any) -> None:
        super().__init__("no room left on Python's stack to walk libclang's tree")
        self.cursor = cursor


def children(cursor: Any) -> list[Any]:
    """``cursor``'s children, all of them, or the exception that stopped libclang's walk."""
    from clang import cindex  # optional: only the CUDA C front end needs it

    _require_room(cursor)
    found: list[Any] = []
    failed: list[BaseException] = []
    tu = cursor._tu

    def visit(child: Any, _parent: Any, _data: Any) -> int:
        try:
            child._tu = tu  # keeps the translation unit alive while the cursor is
            found.append(child)
        except BaseException as exc:  # noqa: BLE001 (raised again below, outside libclang)
            failed.append(exc)
            return _BREAK
        return _CONTINUE

    cindex.conf.lib.clang_visitChildren(cursor, cindex.callbacks["cursor_visit"](visit), None)
    if failed:
        raise failed[0]
    return found


def walk(cursor: Any) -> Iterator[Any]:
    """``cursor`` and its descendants, depth first, parents before children (as the bindings'
    ``walk_preorder``, without recursing)."""
    stack = [cursor]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


_SCOPES = frozenset({"TRANSLATION_UNIT", "NAMESPACE", "LINKAGE_SPEC", "UNEXPOSED_DECL"})


def declarations(unit: Any) -> Iterator[Any]:
    """The declarations at namespace scope of translation unit ``unit`` (inside namespaces and
    ``extern "C"`` blocks too), in order, without entering functions or initializers: where
    kernels and device functions are declared, found without walking a large host code's body."""
    stack = [unit.cursor]
    while stack:
        node = stack.pop()
        if node.kind.name in _SCOPES:
            stack.extend(reversed(children(node)))
        if node is not unit.cursor:
            yield node


def tree_depth(cursor: Any) -> tuple[int, Any]:
    """How many cursors deep the tree under ``cursor`` goes, and its deepest cursor."""
    deepest, deepest_at = 0, cursor
    stack = [(cursor, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest, deepest_at = depth, node
        stack.extend((child, depth + 1) for child in children(node))
    return deepest, deepest_at


def check_depth(decl: Any, where: Callable[[Any], tuple[str, int, int]]) -> int:
    """The depth of function ``decl``'s tree, or a CompileError at its deepest cursor (``where``
    gives a cursor's file, line and column) when it passes :data:`~.cuda_c_limits.MAX_TREE_DEPTH`."""
    depth, deepest = tree_depth(decl)
    limit = cuda_c_limits.MAX_TREE_DEPTH
    if depth > limit:
        raise CompileError(f"{decl.spelling} nests {depth} levels deep here (its expressions and statements, after "
                           f"macros): hetero's CUDA C front end stops at {limit} (its limit "
                           "hetero.compiler.frontend.cuda_c_limits.MAX_TREE_DEPTH); split the expression or "
                           "flatten the statements", *where(deepest))
    return depth


_room_lock = threading.Lock()
_room_holders = 0
_limit_before = 0


@contextlib.contextmanager
def recursion_room(levels: int) -> Iterator[None]:
    """Room on Python's stack for ``levels`` levels of the lowering's recursion above the current
    frame: the recursion limit is raised for the block when it is lower (never lowered), and
    restored when the last block that raised it in any thread ends."""
    global _room_holders, _limit_before
    needed = _frames_in_use() + levels * FRAMES_PER_LEVEL + _MARGIN
    with _room_lock:
        if _room_holders == 0:
            _limit_before = sys.getrecursionlimit()
        _room_holders += 1
        if needed > sys.getrecursionlimit():
            sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        with _room_lock:
            _room_holders -= 1
            if _room_holders == 0:
                sys.setrecursionlimit(_limit_before)


def _frames_in_use() -> int:
    frame, count = sys._getframe(), 0
    while frame is not None:
        frame, count = frame.f_back, count + 1
    return count


def _require_room(cursor: Any) -> None:
    """A :class:`TreeTooDeep` while the stack can still raise it, rather than a callback that
    fails on entry (which the bindings cannot see)."""
    try:
        sys._getframe(sys.getrecursionlimit() - _MARGIN)
    except ValueError:
        return  # fewer frames than that on the stack: room enough
    raise TreeTooDeep(cursor)

"""A CompileError left uncaught must show its message where Python prints it.

CompileError is a SyntaxError (so editors jump to the line), and Python formats SyntaxErrors
from their ``msg``/``filename``/``lineno`` fields: left unset, a traceback (and pytest) printed
"<no detail available>" in place of what is wrong.
"""

from __future__ import annotations

import traceback

from hetero.core.errors import CompileError


def test_a_traceback_shows_the_message_the_file_and_the_line() -> None:
    error = CompileError("calling foo is not supported in kernels", "kernel.py", 12, 4, "    x = foo(1)")
    shown = "".join(traceback.format_exception_only(type(error), error))
    assert "calling foo is not supported in kernels" in shown
    assert "kernel.py" in shown and "12" in shown
    assert "no detail available" not in shown


def test_without_a_position_the_message_is_still_shown() -> None:
    error = CompileError("the types do not settle")
    shown = "".join(traceback.format_exception_only(type(error), error))
    assert "the types do not settle" in shown
    assert str(error) == "the types do not settle"

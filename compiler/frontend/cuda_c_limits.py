"""How large and how deep CUDA C source may be for hetero's CUDA C front end, and the cheap scan
that checks the depth before libclang parses it. The size limits are checked where the files are
read (:mod:`.cuda_c_files`) and where libclang parses (:mod:`.cuda_c_bounds`).

libclang and the front end both recurse on the syntax tree: an expression of ~15,000 terms
overflows libclang's stack (SIGSEGV, the process dies), a few hundred exhaust Python's recursion
limit. :func:`check_nesting` reads the token stream first and refuses, with the file, the line
and the limit, source nested deeper than :data:`MAX_NESTING` (brackets, braces and statements
inside one another) or with an expression of more than :data:`MAX_OPERATORS` operators. Depth
that macros make is measured on the parsed tree (:func:`hetero.compiler.frontend.cuda_c_cursors.check_depth`).

The limits are module constants: set them (``cuda_c_limits.MAX_OPERATORS = 512``) before
building a kernel to change them. Each sits well above what real code needs (measured with
this scan: cuda-samples reach a nesting of 11 and 14 operators in one expression; CUDA 13's own
headers with CCCL, 1,826 files, 48 and 68) and far below where libclang fails.
"""

from __future__ import annotations

import re

from hetero.core.errors import CompileError

#: Brackets ``( [ {`` and statements (``if``, loops, the branches of an ``else if`` chain) nested in
#: one another; a statement counts two, as ``if (c) {`` does. clang's own limit for brackets is 256.
MAX_NESTING = 128
#: Operators in one expression (its binary, unary, ternary and comma operators; a call's
#: arguments each count on their own). libclang crashes at ~10,000.
MAX_OPERATORS = 256
#: Cursors nested in one another in the parsed tree of a function (after macros): what the
#: front end recurses through. Each level of source nesting is one or two cursors.
MAX_TREE_DEPTH = 640
#: Bytes of source read for one translation unit: the file and every header it includes.
MAX_SOURCE_BYTES = 32 << 20
#: Tokens of a translation unit once preprocessed (macros expanded, headers included), as clang
#: counts them: tens of MiB of text.
MAX_PREPROCESSED_TOKENS = 4_000_000
#: Seconds libclang may take to preprocess and parse one translation unit.
MAX_PARSE_SECONDS = 60.0
#: Bytes of memory libclang may hold while it preprocesses and parses one translation unit.
MAX_PARSE_MEMORY = 2 << 30

_LEXEMES = re.compile(r"""
    (?P<skip>//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<directive>^[ \t]*\#(?:\\\n|[^\n])*)
  | (?P<word>[A-Za-z_]\w*|\.?\d(?:[eEpP][-+]|[\w.])*)
  | (?P<op>->\*?|\+\+|--|<<=?|>>=?|<=|>=|==|!=|&&|\|\||::|\.\*|[-+*/%&|^!~<>=?:.,]=?)
  | (?P<bracket>[()\[\]{};])
    """, re.MULTILINE | re.DOTALL | re.VERBOSE)
_CONTROL = frozenset({"if", "for", "while", "switch", "do"})
_NOT_OPERATORS = frozenset({"::", "."})  # a qualified name's or a member's spelling: no depth of their own
_LIST_AFTER = frozenset({"=", "(", ",", "[", "return", "?"})  # a `{` after these opens a list, not a block
_PREFIXES = frozenset({"sizeof", "alignof", "new", "delete", "throw"})  # operators spelled as words
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


class _Bracket:
    """An open bracket: what closes it, whether it is a block, whether its commas separate (a
    call's arguments, a list's items), and the operators counted before it."""

    __slots__ = ("base", "best", "block", "closer", "separates")

    def __init__(self, closer: str, block: bool, separates: bool, base: int) -> None:
        self.closer, self.block, self.separates, self.base, self.best = closer, block, separates, base, 0


class _Scan:
    """The state of :func:`check_nesting` along the token stream."""

    def __init__(self) -> None:
        self.brackets: list[_Bracket] = []
        self.operators = 0  # in the expression being read
        self.control = 0  # unbraced control statements open at this block's level: `if (a) if (b) x;`
        self.chain = 0  # `else` branches of this level's open if/else-if chain
        self.levels: list[tuple[int, int]] = []  # (control, chain) of each enclosing block's level
        self.outer = 0  # their sum
        self.after_statement = False  # a statement just ended: an `else` may continue its chain

    def depth(self) -> int:
        return len(self.brackets) + self.outer + self.control + self.chain

    def open(self, text: str, previous: str) -> None:
        inside_list = bool(self.brackets) and not self.brackets[-1].block
        block = text == "{" and previous not in _LIST_AFTER and not (previous == "{" and inside_list)
        call = previous[:1].isalnum() or previous[:1] == "_" or previous in (")", "]", ">")
        separates = text != "(" or call
        self.brackets.append(_Bracket(_CLOSERS[text], block, separates, 0 if block else self.operators))
        if block:
            self.levels.append((self.control, self.chain))
            self.outer += self.control + self.chain
            self.operators = self.control = self.chain = 0

    def close(self) -> None:
        bracket = self.brackets.pop()
        if bracket.block:
            control, self.chain = self.levels.pop()
            self.outer -= control + self.chain
            self.operators = self.control = 0  # the braced body ends the statements it belonged to
            self.after_statement = True
        elif bracket.separates:
            self.operators = bracket.base + max(bracket.best, self.operators - bracket.base)

    def restart(self) -> None:
        self.operators = self.brackets[-1].base if self.brackets and not self.brackets[-1].block else 0

    def separate(self) -> None:
        bracket = self.brackets[-1]
        bracket.best = max(bracket.best, self.operators - bracket.base)
        self.operators = bracket.base


def check_nesting(code: str, path: str) -> None:
    """A :class:`CompileError` naming ``path``, the line and the limit where ``code`` nests deeper
    than :data:`MAX_NESTING` or an expression has more than :data:`MAX_OPERATORS` operators.
    Comments, literals and preprocessor lines are skipped."""
    scan = _Scan()
    previous, line, counted = "", 1, 0
    for match in _LEXEMES.finditer(code):
        kind, text = match.lastgroup, match.group()
        if kind in ("skip", "directive"):
            continue
        line += code.count("\n", counted, match.start())
        counted = match.start()
        if scan.after_statement:
            scan.after_statement = False
            if text != "else":
                scan.chain = 0
        if kind == "word":
            if (previous[:1].isalpha() or previous[:1] == "_") and previous not in _PREFIXES:
                scan.restart()  # two words in a row (`T x`, `int f() M void g()`): a declaration, not operands
            if text in _CONTROL:
                scan.control += 2  # the statement and its body, as `if (c) {` counts the brace
            elif text == "else":
                scan.chain += 2
        elif text == "," and scan.brackets and scan.brackets[-1].separates:
            scan.separate()
        elif kind == "op" and text not in _NOT_OPERATORS:
            scan.operators += 1
            if scan.operators > MAX_OPERATORS:
                raise _too_deep(path, line, f"an expression with more than {MAX_OPERATORS} operators",
                                "MAX_OPERATORS", "split it into statements")
        elif text in _CLOSERS:
            scan.open(text, previous)
        elif scan.brackets and text == scan.brackets[-1].closer:
            scan.close()
        elif text == ";" and not (scan.brackets and not scan.brackets[-1].block):
            scan.operators = scan.control = 0
            scan.after_statement = True
        if scan.depth() > MAX_NESTING:
            raise _too_deep(path, line, f"brackets and statements nested more than {MAX_NESTING} deep",
                            "MAX_NESTING", "flatten it")
        previous = text


def _too_deep(path: str, line: int, what: str, limit: str, remedy: str) -> CompileError:
    return CompileError(f"{what}: hetero's CUDA C front end stops here (its limit "
                        f"hetero.compiler.frontend.cuda_c_limits.{limit}, which keeps libclang and the front end "
                        f"within their stacks); {remedy}", path, line)

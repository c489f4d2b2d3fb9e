"""Where hetero meets torch inside a process (the public API floor): memory quotas as torch's
per-process memory fraction (:mod:`.memory`), fault rules at torch's op boundary
(:mod:`.injection`), and torch models on hetero devices (:mod:`.backend`: ``compile``,
``explain``; ``torch.compile(model, backend="hetero")``). torch is imported only when the
program has imported it, or asks for ``compile``/``explain``.

May import: every floor below.
"""


def __getattr__(name: str) -> object:
    """``compile``, ``explain`` and ``CompiledModel`` import torch: loaded on first use."""
    if name in ("compile", "explain", "CompiledModel"):
        from hetero.torch.backend import compile as _compile

        return getattr(_compile, name)
    raise AttributeError(f"module 'hetero.torch' has no attribute {name!r}")

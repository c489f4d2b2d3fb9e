"""hetero.core.hooks: a lower floor's question, answered by the module above that registers into it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hetero.core.hooks import Hook, HookError


def test_a_registered_answer_is_called() -> None:
    hook: Hook[Callable[[int], int]] = Hook("double", "doubles a number")
    assert not hook.loaded
    hook.register(lambda n: 2 * n)
    assert hook.loaded and hook.call(21) == 42


def test_the_provider_is_imported_on_the_first_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hook: Hook[Callable[[], str]] = Hook("answer", "the answer")
    (tmp_path / "hetero_test_provider.py").write_text(
        "import test_hooks_target\ntest_hooks_target.HOOK.register(lambda: 'from the provider')\n")
    (tmp_path / "test_hooks_target.py").write_text("HOOK = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import test_hooks_target

    test_hooks_target.HOOK = hook
    hook.provided_by("hetero_test_provider")
    assert not hook.loaded
    assert hook.call() == "from the provider" and hook.loaded
    monkeypatch.delitem(sys.modules, "hetero_test_provider")
    monkeypatch.delitem(sys.modules, "test_hooks_target")


def test_an_unanswered_hook_names_itself_and_the_remedy() -> None:
    hook: Hook[Callable[[], None]] = Hook("nobody", "a question nobody answers")
    with pytest.raises(HookError, match="'nobody' .*a question nobody answers.*no provider is named.*import hetero"):
        hook.call()
    hook.provided_by("json")  # imports, but registers nothing
    with pytest.raises(HookError, match="importing json did not register it"):
        hook.call()


def test_import_hetero_answers_every_hook_of_the_floors_below_without_loading_them() -> None:
    code = ("import sys, hetero\n"
            "from hetero.core.registry import APPLY_QUOTA, AUTO_DEVICE, CHECK_REQUEST, RUNTIMES_OPENED\n"
            "from hetero.scheduler.inputs import QUARANTINED_IDS, QUOTAS_CHANGED, SUBSCRIBE\n"
            "from hetero.kernels.hooks import SPLIT_KERNEL\n"
            "from hetero.core.device import FIND_DEVICE\n"
            "hooks = [APPLY_QUOTA, AUTO_DEVICE, CHECK_REQUEST, RUNTIMES_OPENED, QUARANTINED_IDS, QUOTAS_CHANGED, SUBSCRIBE, SPLIT_KERNEL]\n"
            "assert all(h._provider for h in hooks), [h for h in hooks if not h._provider]\n"
            "assert FIND_DEVICE.loaded\n"
            "loaded = [m for m in ('hetero.scheduler.placement', 'hetero.fault.quarantine', 'hetero.kernels.split.launch',"
            " 'hetero.fault.injection', 'hetero.compiler') if m in sys.modules]\n"
            "assert not loaded, loaded\n"
            "assert hetero.device('auto') is hetero.device('auto')\n"
            "assert QUARANTINED_IDS.loaded and AUTO_DEVICE.loaded\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr

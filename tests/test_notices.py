"""hetero's warnings and log records as an application meets them: each shown once, before and after
the application configures logging, and performance notices catchable as warnings."""

from __future__ import annotations

import warnings

import pytest
from conftest import run_python

import hetero
from hetero.arraylib import host_fallback

# A hetero log record and a host fallback (linalg.inv on an OpenCL device has no LAPACK), before and
# after the application configures logging.
_SCRIPT = """
import logging, sys
import numpy as np
import hetero
log = logging.getLogger("hetero.probe")
hetero.devices()  # hetero in use before the application configures logging
log.warning("probe-before")
if {configure}:
    logging.basicConfig(format="app %(levelname)s %(name)s: %(message)s")
log.warning("probe-after")
names = [d.name for d in hetero.devices() if d.backend in ("oneapi", "opencl")]
if names:
    a = hetero.asarray(np.eye(3, dtype=np.float32) * 2, device=names[0])
    hetero.xp.linalg.inv(a)
"""


@pytest.mark.parametrize("configure", [False, True], ids=["unconfigured", "after-basicConfig"])
def test_each_hetero_message_is_printed_once(configure: bool) -> None:
    err = run_python(_SCRIPT.format(configure=configure)).stderr
    assert err.count("probe-before") == 1, err
    assert err.count("probe-after") == 1, err
    if configure:  # after basicConfig the application's format, and not hetero's as well
        assert "app WARNING hetero.probe: probe-after" in err
    if any(d.backend in ("oneapi", "opencl") for d in hetero.devices()):
        assert err.count("linalg.inv runs on the host") == 1, err
        assert "PerformanceWarning" in err


def test_a_library_handler_is_a_null_handler_and_the_level_follows_hetero_log() -> None:
    code = ("import logging, hetero; hetero.devices(); lg = logging.getLogger('hetero');"
            "print(lg.level, sorted(type(h).__name__ for h in lg.handlers))")
    out = run_python(code, env={"HETERO_LOG": "INFO"}).stdout.split()
    assert out[0] == str(20)
    assert "NullHandler" in " ".join(out)


def test_a_host_fallback_is_a_performance_warning_that_filters_catch(opencl_device_fixture: hetero.Device) -> None:
    host_fallback.reset()
    a = hetero.asarray([[2.0, 0.0], [0.0, 4.0]], dtype=hetero.float32, device=opencl_device_fixture)
    with pytest.warns(hetero.PerformanceWarning, match=f"linalg.inv runs on the host for arrays on {opencl_device_fixture.name}"):
        hetero.xp.linalg.inv(a)
    host_fallback.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", hetero.HeteroWarning)
        with pytest.raises(hetero.PerformanceWarning):
            hetero.xp.linalg.inv(a)
    host_fallback.reset()


def test_w_error_turns_a_host_fallback_into_an_exception() -> None:
    names = [d.name for d in hetero.devices() if d.backend in ("oneapi", "opencl")]
    if not names:
        pytest.skip("no OpenCL device here: no host fallback to provoke")
    import subprocess
    import sys

    code = ("import numpy as np, hetero; a = hetero.asarray(np.eye(2, dtype=np.float32), device=%r);"
            "hetero.xp.linalg.inv(a)" % names[0])
    import subprocess
    import sys
    # (``-W error::hetero.PerformanceWarning`` cannot work: Python resolves the category before hetero imports)
    done = subprocess.run([sys.executable, "-W", "error", "-c", code],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "hetero.core.notices.PerformanceWarning: hetero.linalg.inv" in done.stderr

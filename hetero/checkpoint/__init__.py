"""Checkpoints and resuming (the public API floor): ``hetero.checkpoint.save`` / ``load``
(:mod:`.store`), the state tree's encoding (:mod:`.codec`), payload files (:mod:`.files`), the
manifest's shape (:mod:`.manifest`), and ``hetero.resumable`` for torch loops restarted by
``hetero-run`` (:mod:`.resume`, :mod:`.resume_data`).

May import: every floor below. ``hetero.checkpoint.save(...)`` keeps working: the names of
:mod:`.store`, the module this room grew from, are found here too.
"""

from __future__ import annotations

from hetero.core.facade import room_attributes

__getattr__ = room_attributes(__name__, "hetero.checkpoint.store")

"""Whole files written atomically: a temporary file beside the target, fsync, rename.

The queue's requests, the worker's state file and the aws provider's small
state files are all written this way, so a reader sees the old file or the
whole new one, never half of it.
"""

from __future__ import annotations

import os
import tempfile

from . import names


def write_atomically(path: str, text: str, mode: int, tmp_prefix: str = names.TMP_PREFIX) -> None:
    """Write ``text`` to ``path`` with ``mode``; on any failure the temporary file goes and the error is raised.

    The temporary file is in the target's directory (a rename is atomic
    within one file system only) and its name starts with ``tmp_prefix``
    (the worker skips such names in the queue). It is created 0600 and
    gets ``mode`` only once complete.
    """
    fd, tmp = tempfile.mkstemp(prefix=tmp_prefix, dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

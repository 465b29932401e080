"""Exit statuses of ``dpgnn-audit``, and the one rule that maps an exception to one: a usage error (our
message about the input, exit 2) or an internal error (a bug, here or in the target's code, exit 70)."""
from __future__ import annotations

import enum
import os
import sys
import sysconfig
import traceback
from pathlib import Path


class ExitCode(enum.IntEnum):
    """Every exit status of ``dpgnn-audit``."""

    OK = 0
    VIOLATION = 1  # --fail-on-violation, a regress mismatch or error, a sensitivity violation
    USAGE = 2  # a mistake in the command line or its inputs (one line, no traceback)
    NOT_PROBED = 3  # sensitivity: the target declares nothing to probe
    INTERNAL = 70  # a bug: in dpgnn-audit or in the target's code (sysexits' EX_SOFTWARE)
    INTERRUPTED = 130


#: where a ValueError raised in a library (torch, numpy, ...) or the standard library comes from: there it
#: is not a message for the user but a bug in the code that called it
_LIBRARY_PATHS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})
#: this project's packages, wherever they are installed (site-packages included)
_OUR_PATHS = tuple(str(Path(__file__).resolve().parents[2] / pkg) + os.sep
                   for pkg in ("graphs", "targets", "canaries", "attacks", "audit"))


def _in_library(filename: str) -> bool:
    return filename.startswith(_LIBRARY_PATHS) and not str(Path(filename).resolve()).startswith(_OUR_PATHS)


def is_usage_error(err: BaseException, usage: tuple[type[BaseException], ...] = ()) -> bool:
    """A usage error is one raised on purpose about an input: one of the `usage` types (the CLI's own, a
    missing dataset or file), or a ValueError raised by project (or the user's target) code itself. A
    ValueError raised inside a library, and every other exception, is an internal error."""
    if isinstance(err, usage):
        return True
    if not isinstance(err, ValueError):
        return False
    frames = traceback.extract_tb(err.__traceback__)
    return bool(frames) and not _in_library(frames[-1].filename)


def report_internal(command: str, err: BaseException, debug: bool) -> None:
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if not _in_library(f.filename)]
    where = ""
    if frames:
        last = frames[-1]
        where = f"\n  raised at {last.filename}:{last.lineno} in {last.name}"
        if ours and ours[-1] is not last:
            where += f", called from {ours[-1].filename}:{ours[-1].lineno} in {ours[-1].name}"
    if debug:
        traceback.print_exception(err, file=sys.stderr)
    print(f"dpgnn-audit {command}: internal error: {type(err).__name__}: {err}{where}\n"
          "  This is a bug in dpgnn-audit or in the target's code, not in your command line. "
          + ("" if debug else "Rerun with --debug for the traceback, and ")
          + ("report" if not debug else "Report") + " it to the maintainers with the command and that output.",
          file=sys.stderr)

"""The files attn-cost writes: whole or not at all, and never over a file that is not its own.

Every file attn-cost writes (an export, a report, a calibration, a device profile, a campaign's
outputs) goes through `write_atomic`: a temporary file beside the target, flushed to disk, then
renamed over it, so a reader or a kill sees the old file or the new one and never half of one.
Before writing over an existing file, `claim` asks a recogniser whether the file is one attn-cost
wrote (an empty file loses nothing and is taken too); anything else is refused with one line, so a
mistyped path never destroys a user's file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from attn_cost.costmodel.errors import UserError

HEAD_BYTES = 4096
"""How much of a file the recognisers read: enough for every marker they look for."""


def head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of a file (b"" when it cannot be read)."""
    try:
        with path.open("rb") as f:
            return f.read(size)
    except OSError:
        return b""


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, through links and relative paths (an absent file by its path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def claim(path: Path, recognise: Callable[[Path], bool], what: str, reading: tuple[Path, ...] = ()) -> None:
    """Refuse (UserError) to write `path` unless it is absent, empty, or recognised as attn-cost's `what`,
    and never when it is one of the files being read."""
    path = Path(path)
    for source in reading:
        if same_file(path, source):
            raise UserError(f"{path} is the file being read ({source}): write to another path")
    if path.is_dir():
        raise UserError(f"{path} is a directory: give a file path")
    if not path.exists():
        if not path.parent.is_dir():
            raise UserError(f"cannot write {path}: the folder {path.parent} does not exist")
        return
    if not path.is_file():
        raise UserError(f"{path} is not a regular file: attn-cost writes only to files of its own")
    if path.stat().st_size == 0 or recognise(path):
        return
    raise UserError(
        f"{path} exists and is not {what} written by attn-cost: attn-cost does not write over files it did not "
        "create; remove it or choose another path"
    )


def write_atomic(path: Path, text: str | bytes) -> None:
    """Replace `path` with `text` so that a reader (or a kill) sees the old file or the new one."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise UserError(f"cannot write {path}: {e.strerror or e}") from None
        raise


def json_kind(path: Path) -> str | None:
    """The `kind` field of a JSON file attn-cost wrote (None if the file is not such JSON)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data.get("kind") if isinstance(data, dict) and isinstance(data.get("kind"), str) else None


def is_json_of(*kinds: str) -> Callable[[Path], bool]:
    """A recogniser for attn-cost JSON files of the given kinds."""
    return lambda path: json_kind(path) in kinds


def is_html_report(path: Path) -> bool:
    """Whether a file is an HTML report attn-cost wrote (it names its generator in its head)."""
    return b"<title>attn-cost report</title>" in head(path)

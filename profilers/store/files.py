"""The user's files and attn-cost's own: what attn-cost reads, what it writes, and how.

Writing. Every file attn-cost writes (an export, a report, a calibration, a device profile, a campaign's
outputs) goes through `write_atomic`: a temporary file beside the target, flushed to disk, then
renamed over it, so a reader or a kill sees the old file or the new one and never half of one.
Before writing over an existing file, `claim` asks a recogniser whether the file is one attn-cost
wrote (an empty file loses nothing and is taken too); anything else is refused with one line, so a
mistyped path never destroys a user's file. A symbolic link at an output path is followed, as `cp` and a
shell redirection follow it: the file it points to is checked and replaced, and the link stays a link.

Reading. Every file a user names (an import, a profile, a calibration, a config, a variant file) and every
file attn-cost finds in a folder it scans is read through `read_input`: a regular file of at most
`MAX_INPUT_BYTES`, checked before it is opened, so that a FIFO or a device is never opened, never blocks and never
streams forever. Scans (`regular_files`) pass over anything that is not a regular file: FIFOs, sockets, devices,
dangling links and link loops.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.paths import kind_of, not_regular, os_reason, real

HEAD_BYTES = 4096
"""How much of a file the recognisers read: enough for every marker they look for."""
MAX_INPUT_BYTES = 1 << 30
"""The largest file attn-cost reads (1 GiB: two million records); larger is refused, not read."""
STDOUT = "-"
"""An output path that means standard output (`results export -o -`, `report --html -`)."""


def is_regular(path: Path) -> bool:
    """Whether `path` is a regular file, through symbolic links (False for a loop, a dangling link, a FIFO)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def regular_files(folder: Path, pattern: str) -> list[Path]:
    """The regular files of a folder attn-cost scans that match `pattern`, sorted; anything else is passed over."""
    try:
        return sorted(p for p in Path(folder).glob(pattern) if is_regular(p))
    except OSError:
        return []


def _open_regular(path: Path, what: str) -> int:
    """A descriptor of a regular file, else one line. Anything else is refused before it is opened (opening a FIFO
    would release a writer waiting on it; opening a device can act on it); the open itself does not block and is
    checked again, for a file swapped for a FIFO in between."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode, what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {os_reason(e)}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise not_regular(path, mode, what)
    return fd


def read_input(path: Path, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a file attn-cost reads, or one line (UserError) saying why it cannot be read as `what`:
    it is missing, a directory, a FIFO, a device or a socket (refused unread), a link loop, unreadable, or larger
    than `limit`."""
    with os.fdopen(_open_regular(Path(path), what), "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise UserError(f"cannot read {what} {path}: {os_reason(e)}") from None
    if len(data) > limit:
        raise UserError(f"{path} is over {limit / 2**20:,.0f} MiB: too large for {what}")
    return data


def head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of a regular file (b"" when it is not one or cannot be read; a FIFO never blocks)."""
    try:
        fd = _open_regular(Path(path), "a file")
    except UserError:
        return b""
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read(size)
        except OSError:
            return b""


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, through links and relative paths (an absent file by its path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return real(a) == real(b)


def claim(path: Path, recognise: Callable[[Path], bool], what: str, reading: tuple[Path, ...] = ()) -> None:
    """Refuse (UserError) to write `path` unless it is absent, empty, or recognised as attn-cost's `what`,
    and never when it is one of the files being read. A symbolic link is followed: the file it points to
    (absent where the link dangles) is the one checked, and the one `write_atomic` replaces."""
    path = Path(path)
    for source in reading:
        if same_file(path, source):
            raise UserError(f"{path} is the file being read ({source}): write to another path")
    try:
        found = os.stat(path)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise UserError(f"cannot write {path}: {os_reason(e)}") from None
        found = None
    if found is None:
        folder = real(path).parent
        if not folder.is_dir():
            raise UserError(f"cannot write {path}: the folder {folder} does not exist")
        return
    if stat.S_ISDIR(found.st_mode):
        raise UserError(f"{path} is a directory: give a file path")
    if not stat.S_ISREG(found.st_mode):
        raise UserError(f"{path} is {kind_of(found.st_mode)}: attn-cost writes only to regular files of its own")
    if found.st_size == 0 or recognise(path):
        return
    raise UserError(
        f"{path} exists and is not {what} written by attn-cost: attn-cost does not write over files it did not "
        "create; remove it or choose another path"
    )


def new_file_mode() -> int:
    """The mode a file the user creates gets (0o666 less the umask): mkstemp's files are private."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, text: str | bytes) -> None:
    """Replace `path` with `text` so that a reader (or a kill) sees the old file or the new one. Through a
    symbolic link, the file it points to is replaced (keeping its permissions) and the link stays."""
    write_all_atomic({Path(path): text})


def write_all_atomic(files: Mapping[Path, str | bytes]) -> None:
    """Replace several files at once: each new text is written in full to a temporary file beside its target
    before any target is replaced, so a full disk, a file-size limit or a kill while writing leaves every target
    as it was (`write_atomic` for one)."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files.items():
            staged.append((_staged(Path(path), text), Path(path)))
        for tmp, path in staged:
            try:
                os.replace(tmp, real(path))
            except OSError as e:
                raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)


def _staged(path: Path, text: str | bytes) -> str:
    """A temporary file beside `path`'s target holding `text`, flushed to disk, with the target's permissions."""
    target = real(path)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise UserError(f"cannot write {path}: {e.strerror or e}") from None
        raise
    return tmp


def not_stdout(path: Path, flag: str) -> Path:
    """A folder option's path; `-` (standard output elsewhere) cannot hold files and is refused."""
    if str(path) == STDOUT:
        raise UserError(f"{flag} takes a folder, not {STDOUT!r} (standard output cannot hold several files)")
    return path


def make_folder(path: Path, what: str) -> Path:
    """A folder attn-cost writes into, made where missing; `what` names it in the one line a file in its place, or
    a folder that cannot be made, ends in."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{what} is not a directory{': it is a file' if path.is_file() else ''}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {what} ({e.strerror or e})") from None
    return path


class DuplicateKeyError(ValueError):
    """A JSON object that gives one key twice: JSON leaves which value is meant to the reader (Python's json takes
    the last, silently), so attn-cost takes neither and says so."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} is given twice in one object")
        self.key = key


def _once(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def parse_json(text: str | bytes) -> Any:
    """`json.loads`, refusing an object that gives a key twice (`DuplicateKeyError`, naming the key): the one
    parser of every JSON file and line attn-cost reads (user GPU rows, profiles, calibrations, configs, records)."""
    return json.loads(text, object_pairs_hook=_once)


BOMS = {b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}
"""Byte-order marks of encodings attn-cost does not read, to say which one a file is in."""


def text_of(data: bytes, path: Path, what: str) -> str:
    """The text of a file attn-cost reads: UTF-8, with or without the byte-order mark some editors write first (a
    Windows editor's "UTF-8 with BOM"); any other encoding is one line (UserError) naming the file, what it was read
    as and where it stops being UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        encoding = next((f": it is {name} (save it as UTF-8)" for bom, name in BOMS.items() if data.startswith(bom)),
                        f" (byte {e.start + 1:,} is not UTF-8)")  # fmt: skip
        raise UserError(f"{path} is not {what}: it is not UTF-8 text{encoding}") from None


def read_json(path: Path, what: str) -> object:
    """The parsed JSON of a file a user names or attn-cost scans (`read_input`), or one line (UserError) saying why
    it is not readable as `what`: not UTF-8, not JSON, a key given twice in one object, nested too deep, or a
    number too long to read (Python refuses integers of more than 4,300 digits)."""
    text = text_of(read_input(path, what), path, what)
    try:
        return parse_json(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not {what}: not JSON ({e.msg}, line {e.lineno})") from None
    except DuplicateKeyError as e:
        raise UserError(f"{path} is not {what}: {e}") from None
    except (ValueError, RecursionError) as e:  # an integer of more digits than Python converts; nesting too deep
        why = "it holds a number too long to read" if isinstance(e, ValueError) else "it is nested too deep"
        raise UserError(f"{path} is not {what}: {why}") from None


def json_data(path: Path) -> object:
    """The parsed JSON of a file attn-cost recognises or scans (None where it is not a readable JSON file)."""
    try:
        return parse_json(text_of(read_input(path, "a JSON file"), path, "a JSON file"))
    except (UserError, ValueError, RecursionError):
        return None


def json_kind(path: Path) -> str | None:
    """The `kind` field of a JSON file attn-cost wrote (None if the file is not such JSON)."""
    data = json_data(path)
    return data.get("kind") if isinstance(data, dict) and isinstance(data.get("kind"), str) else None


def is_json_of(*kinds: str) -> Callable[[Path], bool]:
    """A recogniser for attn-cost JSON files of the given kinds."""
    return lambda path: json_kind(path) in kinds


def is_html_report(path: Path) -> bool:
    """Whether a file is an HTML report attn-cost wrote (it names its generator in its head)."""
    return b"<title>attn-cost report</title>" in head(path)

"""Where a run's files go: local paths and storage URIs (``s3://``, ``gs://``, ``file://``).

Everything that takes a path in rlflow (``rlflow train --out`` and ``--restore``, checkpoints,
``output=`` / ``input=``, ``rlflow export``, ``rlflow evaluate`` / ``plot``, `rlflow.load_policy`)
takes a storage URI too. A local path, or a ``file://`` URI, is used as it always was (the
standard library, atomic renames); ``s3://bucket/prefix`` and ``gs://bucket/prefix`` go through
`pyarrow.fs` (``pip install "rl-flow[storage]"``). Any other scheme is a `ConfigError` listing
:data:`SCHEMES`.

S3 credentials come from the usual places (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE``, ``~/.aws/credentials``, a web identity or container role); a machine that
gets them from its instance role says so with ``RLFLOW_S3_CREDENTIALS=instance``. Without any,
an ``s3://`` URI is a `ConfigError` before anything starts. An S3-compatible server (MinIO,
Ceph, moto) is reached through ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``), e.g.
``http://127.0.0.1:9000``; the region is ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else (AWS
itself) the bucket's own.

Object storage has no rename, so what must appear whole is written whole: a file is one
upload (an object appears complete or not at all); a checkpoint publishes its marker file last
(`rlflow.checkpoint`). Files that a library writes on its own (TensorBoard's event files, the
progress files) are written in a local staging folder and copied up (`StagedDir`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rlflow.errors import ConfigError

__all__ = [
    "CREDENTIALS_ENV",
    "REMOTE_SCHEMES",
    "SCHEMES",
    "StagedDir",
    "check_location",
    "delete",
    "download_dir",
    "download_file",
    "exists",
    "is_dir",
    "is_file",
    "is_remote",
    "join",
    "list_files",
    "local_path",
    "name_of",
    "open_input_file",
    "parent_of",
    "probe",
    "read_bytes",
    "read_text",
    "upload_dir",
    "upload_file",
    "write_bytes",
    "write_text",
]

REMOTE_SCHEMES = ("s3", "gs")
"""URI schemes stored through `pyarrow.fs` (object storage)."""
SCHEMES = ("file", *REMOTE_SCHEMES)
"""Every URI scheme rlflow accepts where a path goes (a plain path is local)."""
CREDENTIALS_ENV = "RLFLOW_S3_CREDENTIALS"
"""Set to ``instance`` where the AWS SDK finds S3 credentials by itself (an EC2 or EKS role)."""

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://(.*)$")
_CHUNK = 8 << 20


def _scheme(location: str | os.PathLike[str], what: str = "") -> str | None:
    """The URI scheme of ``location`` (lower case), None for a plain path; `ConfigError` (naming
    ``what``) for one rlflow does not know."""
    match = _URI.match(os.fspath(location))
    if match is None:
        return None
    scheme = match.group(1).lower()
    if scheme == "gcs":
        scheme = "gs"
    if scheme not in SCHEMES:
        where = f"{what} " if what else ""
        known = ", ".join(s + "://" for s in SCHEMES)
        raise ConfigError(
            f"{where}{os.fspath(location)!r}: unknown storage scheme {scheme + '://'!r}; rlflow "
            f"accepts a local path or {known}"
        )
    return scheme


def is_remote(location: str | os.PathLike[str]) -> bool:
    """True if ``location`` is an object-storage URI (``s3://``, ``gs://``); False for a local
    path or ``file://`` URI. `ConfigError` for an unknown scheme."""
    return _scheme(location) in REMOTE_SCHEMES


def local_path(location: str | os.PathLike[str]) -> Path:
    """The local path of a plain path or ``file://`` URI (`ConfigError` for a remote one)."""
    text = os.fspath(location)
    scheme = _scheme(text)
    if scheme is None:
        return Path(text)
    if scheme == "file":
        parts = urlsplit(text)
        host = "" if parts.netloc in ("", "localhost") else parts.netloc
        return Path(host + parts.path)
    raise ConfigError(f"{text!r}: an object-storage URI, not a local path")


def join(base: str | os.PathLike[str], *names: str) -> str:
    """``base`` with ``names`` appended (``/``-separated for a URI), as a string."""
    text = os.fspath(base)
    if not is_remote(text):
        return str(Path(local_path(text), *names))
    return "/".join([text.rstrip("/"), *(n.strip("/") for n in names)])


def parent_of(location: str | os.PathLike[str]) -> str:
    """The folder holding ``location`` (``s3://b/run/checkpoint_1`` -> ``s3://b/run``)."""
    text = os.fspath(location)
    if not is_remote(text):
        return str(local_path(text).resolve().parent)
    head, _, _ = text.rstrip("/").rpartition("/")
    return head


def name_of(location: str | os.PathLike[str]) -> str:
    """The last component of ``location``."""
    text = os.fspath(location)
    if not is_remote(text):
        return local_path(text).name
    return text.rstrip("/").rpartition("/")[2]


# ----------------------------------------------------------------------------- filesystems
def _s3_credentials_found() -> bool:
    env = os.environ
    if env.get(CREDENTIALS_ENV, "").lower() == "instance":
        return True
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return True
    if any(
        env.get(k)
        for k in (
            "AWS_PROFILE",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        )
    ):
        return True
    files = [env.get("AWS_SHARED_CREDENTIALS_FILE"), env.get("AWS_CONFIG_FILE")]
    home = Path(env.get("HOME", "~")).expanduser()
    files += [str(home / ".aws" / "credentials"), str(home / ".aws" / "config")]
    return any(f and Path(f).is_file() for f in files)


def check_location(location: str | os.PathLike[str], what: str = "path") -> str:
    """Check ``location`` without touching the network; return it as a string.

    A plain path or ``file://`` URI is always fine. For ``s3://`` / ``gs://``: pyarrow must be
    installed with that filesystem, and for S3 credentials must be findable (module doc).
    Each failure is a `ConfigError` naming ``what``, the URI and what to do.
    """
    text = os.fspath(location)
    scheme = _scheme(text, what)
    if scheme not in REMOTE_SCHEMES:
        return text
    parts = urlsplit(text)
    if not parts.netloc:
        raise ConfigError(f"{what} {text!r}: no bucket; write {scheme}://BUCKET/PREFIX")
    _filesystem_class(scheme, f"{what} {text!r}")
    if scheme == "s3" and not _s3_credentials_found():
        raise ConfigError(
            f"{what} {text!r}: no S3 credentials found; set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials; on a machine with an "
            f"instance role {CREDENTIALS_ENV}=instance), and AWS_ENDPOINT_URL for an "
            "S3-compatible server"
        )
    return text


def _filesystem_class(scheme: str, where: str) -> Any:
    name = {"s3": "S3FileSystem", "gs": "GcsFileSystem"}[scheme]
    try:
        import pyarrow.fs as pafs

        return getattr(pafs, name)
    except (ImportError, AttributeError):
        raise ConfigError(
            f"{where}: {scheme}:// needs pyarrow with {name} support: "
            'pip install "rl-flow[storage]" (the pyarrow wheels from PyPI have it), or use a '
            "local path"
        ) from None


_FILESYSTEMS: dict[tuple[Any, ...], Any] = {}


def _filesystem(location: str) -> tuple[Any, str]:
    """The `pyarrow.fs` filesystem of a remote URI and the path in it (``bucket/key``)."""
    scheme = _scheme(location)
    if scheme not in REMOTE_SCHEMES:
        raise ConfigError(f"{location!r}: not an object-storage URI")
    check_location(location, "storage")
    parts = urlsplit(location)
    path = (parts.netloc + parts.path).rstrip("/")
    env = os.environ
    if scheme == "s3":
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or ""
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
        if not endpoint and not region:  # AWS itself: the bucket's region
            region = _bucket_region(parts.netloc)
        key: tuple[Any, ...] = ("s3", endpoint, region, env.get("AWS_ACCESS_KEY_ID"))
    else:
        key = ("gs",)
    fs = _FILESYSTEMS.get(key)
    if fs is None:
        cls = _filesystem_class(scheme, repr(location))
        options: dict[str, Any] = {}
        if scheme == "s3":
            if endpoint:
                ep = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
                options.update(endpoint_override=ep.netloc, scheme=ep.scheme or "https")
            if region:
                options["region"] = region
        fs = _FILESYSTEMS[key] = cls(**options)
    return fs, path


_REGIONS: dict[str, str] = {}


def _bucket_region(bucket: str) -> str:
    """The AWS region of ``bucket`` (asked once per process; "" when it cannot be found: the
    SDK's default then)."""
    if bucket not in _REGIONS:
        try:
            import pyarrow.fs as pafs

            _REGIONS[bucket] = pafs.resolve_s3_region(bucket)
        except (OSError, ValueError):
            _REGIONS[bucket] = ""
    return _REGIONS[bucket]


def _storage_error(location: str, what: str, err: BaseException) -> ConfigError:
    return ConfigError(f"{location!r}: cannot {what} ({type(err).__name__}: {err})")


def probe(location: str | os.PathLike[str], what: str = "path") -> str:
    """`check_location`, then (for object storage) one request to see that the bucket answers:
    a `ConfigError` naming ``what`` and the URI when it does not (no such bucket, wrong
    endpoint, credentials refused)."""
    text = check_location(location, what)
    if not is_remote(text):
        return text
    fs, path = _filesystem(text)
    bucket = path.split("/", 1)[0]
    try:
        import pyarrow.fs as pafs

        info = fs.get_file_info(bucket)
        if info.type == pafs.FileType.NotFound:
            raise ConfigError(
                f"{what} {text!r}: the bucket {bucket!r} does not exist (create it first)"
            )
    except OSError as err:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        where = f" at {endpoint}" if endpoint else ""
        raise ConfigError(
            f"{what} {text!r}: the storage{where} does not answer ({err}); check the URI, "
            "the credentials and AWS_ENDPOINT_URL"
        ) from None
    return text


# ----------------------------------------------------------------------------- file operations
def _info(location: str) -> Any:
    fs, path = _filesystem(location)
    try:
        return fs.get_file_info(path)
    except OSError as err:
        raise _storage_error(location, "look it up", err) from None


def exists(location: str | os.PathLike[str]) -> bool:
    """True if a file or folder (a prefix holding objects) is at ``location``."""
    text = os.fspath(location)
    if not is_remote(text):
        return local_path(text).exists()
    import pyarrow.fs as pafs

    return bool(_info(text).type != pafs.FileType.NotFound)


def is_file(location: str | os.PathLike[str]) -> bool:
    """True if a file (an object) is at ``location``."""
    text = os.fspath(location)
    if not is_remote(text):
        return local_path(text).is_file()
    import pyarrow.fs as pafs

    return bool(_info(text).type == pafs.FileType.File)


def is_dir(location: str | os.PathLike[str]) -> bool:
    """True if ``location`` is a folder (on object storage: a prefix holding objects)."""
    text = os.fspath(location)
    if not is_remote(text):
        return local_path(text).is_dir()
    import pyarrow.fs as pafs

    return bool(_info(text).type == pafs.FileType.Directory)


def list_files(location: str | os.PathLike[str], *, recursive: bool = True) -> list[str]:
    """The files under the folder ``location``, as paths relative to it (``/``-separated),
    sorted; ``[]`` if there is no such folder. Without ``recursive``: its direct entries,
    folders too."""
    text = os.fspath(location)
    if not is_remote(text):
        root = local_path(text)
        if not root.is_dir():
            return []
        found = root.rglob("*") if recursive else root.iterdir()
        return sorted(p.relative_to(root).as_posix() for p in found if not recursive or p.is_file())
    import pyarrow.fs as pafs

    fs, path = _filesystem(text)
    selector = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
    try:
        infos = fs.get_file_info(selector)
    except OSError as err:
        raise _storage_error(text, "list it", err) from None
    prefix = path + "/"
    return sorted(
        i.path[len(prefix) :]
        for i in infos
        if i.path.startswith(prefix) and (not recursive or i.type == pafs.FileType.File)
    )


def read_bytes(location: str | os.PathLike[str]) -> bytes:
    """The bytes of the file ``location``."""
    text = os.fspath(location)
    if not is_remote(text):
        return local_path(text).read_bytes()
    fs, path = _filesystem(text)
    try:
        with fs.open_input_stream(path) as fh:
            return bytes(fh.read())
    except FileNotFoundError:
        raise
    except OSError as err:
        raise _storage_error(text, "read it", err) from None


def read_text(location: str | os.PathLike[str]) -> str:
    """The text (UTF-8) of the file ``location``."""
    return read_bytes(location).decode()


def write_bytes(location: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` as the file ``location`` (folders made as needed). On object storage one
    upload: the object appears complete or not at all."""
    text = os.fspath(location)
    if not is_remote(text):
        path = local_path(text)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return
    fs, path_in = _filesystem(text)
    try:
        with fs.open_output_stream(path_in) as fh:
            fh.write(data)
    except OSError as err:
        raise _storage_error(text, "write it", err) from None


def write_text(location: str | os.PathLike[str], data: str) -> None:
    """Write ``data`` (UTF-8) as the file ``location`` (`write_bytes`)."""
    write_bytes(location, data.encode())


def open_input_file(location: str | os.PathLike[str]) -> Any:
    """A random-access file (`pyarrow.NativeFile`) on the remote file ``location`` (what
    ``pyarrow.parquet.ParquetFile`` reads); a local path is returned as a string."""
    text = os.fspath(location)
    if not is_remote(text):
        return str(local_path(text))
    fs, path = _filesystem(text)
    try:
        return fs.open_input_file(path)
    except OSError as err:
        raise _storage_error(text, "open it", err) from None


def upload_file(local: str | os.PathLike[str], location: str | os.PathLike[str]) -> None:
    """Copy the local file ``local`` to ``location`` (one upload on object storage)."""
    text = os.fspath(location)
    if not is_remote(text):
        target = local_path(text)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, target)
        return
    fs, path = _filesystem(text)
    try:
        with open(local, "rb") as src, fs.open_output_stream(path) as dst:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
    except OSError as err:
        raise _storage_error(text, "upload to it", err) from None


def download_file(location: str | os.PathLike[str], local: str | os.PathLike[str]) -> None:
    """Copy the file ``location`` to the local file ``local`` (its folder made as needed)."""
    text = os.fspath(location)
    Path(local).parent.mkdir(parents=True, exist_ok=True)
    if not is_remote(text):
        shutil.copyfile(local_path(text), local)
        return
    fs, path = _filesystem(text)
    try:
        with fs.open_input_stream(path) as src, open(local, "wb") as dst:
            while chunk := src.read(_CHUNK):
                dst.write(chunk)
    except OSError as err:
        raise _storage_error(text, "download it", err) from None


def upload_dir(
    local: str | os.PathLike[str], location: str | os.PathLike[str], *, last: Iterable[str] = ()
) -> None:
    """Copy every file under the local folder ``local`` to the folder ``location``; the files
    named in ``last`` (relative paths) go after all others, in that order (a marker that says
    the rest is complete)."""
    root = Path(local)
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    final = [n for n in last if n in names]
    for name in [n for n in names if n not in final] + final:
        upload_file(root / name, join(location, name))


def download_dir(
    location: str | os.PathLike[str],
    local: str | os.PathLike[str],
    *,
    skip: Callable[[str], bool] | None = None,
) -> list[str]:
    """Copy every file under the folder ``location`` into the local folder ``local`` (but
    those whose relative path ``skip`` is true for); return the relative paths copied."""
    copied = []
    for name in list_files(location):
        if skip is not None and skip(name):
            continue
        download_file(join(location, name), Path(local, *name.split("/")))
        copied.append(name)
    return copied


def delete(location: str | os.PathLike[str]) -> None:
    """Delete the file or folder ``location`` (nothing if absent)."""
    text = os.fspath(location)
    if not is_remote(text):
        path = local_path(text)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
        return
    import pyarrow.fs as pafs

    fs, path_in = _filesystem(text)
    try:
        info = fs.get_file_info(path_in)
        if info.type == pafs.FileType.Directory:
            fs.delete_dir(path_in)
        elif info.type == pafs.FileType.File:
            fs.delete_file(path_in)
    except OSError as err:
        raise _storage_error(text, "delete it", err) from None


# ----------------------------------------------------------------------------- staging
class StagedDir:
    """A local folder mirrored to a remote folder, for writers that need a local directory.

    Made on ``location`` (an ``s3://`` / ``gs://`` folder), it downloads the files already
    there (but those whose top-level name matches a pattern of ``exclude``, e.g.
    ``checkpoint_*``) into a fresh local folder, :attr:`path`, so writers that append (the
    progress files) follow on. :meth:`sync` uploads each file created or changed since the
    last sync (size or modification time); :meth:`close` syncs a last time and removes the
    local folder. What was written after the last sync is lost with the machine.
    """

    def __init__(self, location: str, *, exclude: Iterable[str] = ()) -> None:
        """Stage ``location`` in a new local folder (its files but ``exclude``'s copied in)."""
        self.location = check_location(location, "run dir")
        self.exclude = tuple(exclude)
        self.path = Path(tempfile.mkdtemp(prefix="rlflow-staged-"))
        """The local folder the writers write in."""
        self._seen: dict[str, tuple[int, int]] = {}
        self.uploads = 0
        """Files uploaded so far."""
        try:
            for name in download_dir(location, self.path, skip=self._excluded):
                self._seen[name] = self._stamp(self.path / name)
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def _excluded(self, name: str) -> bool:
        top = name.split("/", 1)[0]
        return top.startswith(".") or any(fnmatch.fnmatch(top, p) for p in self.exclude)

    @staticmethod
    def _stamp(path: Path) -> tuple[int, int]:
        st = path.stat()
        return st.st_size, st.st_mtime_ns

    def sync(self) -> int:
        """Upload every file created or changed since the last sync; return how many."""
        count = 0
        if not self.path.is_dir():
            return 0
        for file in sorted(p for p in self.path.rglob("*") if p.is_file()):
            name = file.relative_to(self.path).as_posix()
            if self._excluded(name):
                continue
            try:
                stamp = self._stamp(file)
            except FileNotFoundError:  # a writer's temporary file, gone meanwhile
                continue
            if self._seen.get(name) == stamp:
                continue
            upload_file(file, join(self.location, name))
            self._seen[name] = stamp
            count += 1
        self.uploads += count
        return count

    def close(self) -> None:
        """Sync a last time, then remove the local folder (even if the sync fails)."""
        try:
            self.sync()
        finally:
            shutil.rmtree(self.path, ignore_errors=True)

    def __repr__(self) -> str:
        return f"StagedDir({self.location!r} at {str(self.path)!r})"

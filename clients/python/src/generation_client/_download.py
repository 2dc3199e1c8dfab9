"""Files: every output of a generation streamed to a folder, never whole in memory, never overwritten."""

from __future__ import annotations

import os
import posixpath
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlparse

import anyio
import httpx

from .errors import DownloadError
from .types import Generation

_EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "video/mp4": ".mp4"}
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class SavedFile:
    #: Where it was written.
    path: Path
    #: Bytes written.
    size: int
    width: int
    height: int
    url: str


@dataclass(frozen=True)
class _Output:
    url: str
    width: int
    height: int


def _outputs(generation: Generation) -> list[_Output]:
    if generation.content_expired:
        raise DownloadError(f"Generation {generation.id}: its content has expired.")
    if generation.expires_at and generation.expires_at < datetime.now(timezone.utc):
        warnings.warn(f"This result expired at {generation.expires_at}; it may be gone.", stacklevel=3)
    output = generation.output
    files = [*(output.images or []), *(output.videos or [])] if output else []
    return [_Output(f.url, f.width, f.height) for f in files]


def _target(directory: Path, url: str, content_type: str | None) -> Path:
    name = posixpath.basename(urlparse(url).path) or "output"
    if not posixpath.splitext(name)[1]:
        name += _EXTENSIONS.get((content_type or "").split(";")[0].strip(), "")
    return directory / name


def _failed(url: str, response: httpx.Response) -> DownloadError:
    return DownloadError(f"GET {url}: {response.status_code} {response.reason_phrase}")


def _already_there(folder: Path, output: _Output) -> SavedFile | None:
    """A file a resumed download keeps: the URL names it (with its extension) and it is there."""
    target = _target(folder, output.url, None)
    if not target.suffix or not target.is_file():
        return None
    return SavedFile(target, target.stat().st_size, output.width, output.height, output.url)


def download_sync(
    client: httpx.Client,
    generation: Generation,
    directory: str | os.PathLike[str],
    skip_existing: bool = False,
) -> list[SavedFile]:
    """Every image and video of a generation into ``directory``, one file at a time, streamed.
    ``skip_existing``: a file already there is kept and returned (a resumed download)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    saved: list[SavedFile] = []
    for output in _outputs(generation):
        kept = _already_there(folder, output) if skip_existing else None
        if kept:
            saved.append(kept)
            continue
        with client.stream("GET", output.url) as response:
            if not response.is_success:
                raise _failed(output.url, response)
            target = _target(folder, output.url, response.headers.get("content-type"))
            size = 0
            try:
                # "x": created exclusively, so an existing file is never overwritten.
                with target.open("xb") as file:
                    for chunk in response.iter_bytes(_CHUNK):
                        file.write(chunk)
                        size += len(chunk)
            except FileExistsError as error:
                raise DownloadError(f"{target} exists; not overwritten.") from error
            except BaseException:
                target.unlink(missing_ok=True)
                raise
        saved.append(SavedFile(target, size, output.width, output.height, output.url))
    return saved


async def download_async(
    client: httpx.AsyncClient,
    generation: Generation,
    directory: str | os.PathLike[str],
    skip_existing: bool = False,
) -> list[SavedFile]:
    folder = Path(directory)
    await anyio.Path(folder).mkdir(parents=True, exist_ok=True)
    saved: list[SavedFile] = []
    for output in _outputs(generation):
        kept = _already_there(folder, output) if skip_existing else None
        if kept:
            saved.append(kept)
            continue
        async with client.stream("GET", output.url) as response:
            if not response.is_success:
                raise _failed(output.url, response)
            target = _target(folder, output.url, response.headers.get("content-type"))
            size = 0
            try:
                async with await anyio.open_file(target, "xb") as file:
                    async for chunk in response.aiter_bytes(_CHUNK):
                        await file.write(chunk)
                        size += len(chunk)
            except FileExistsError as error:
                raise DownloadError(f"{target} exists; not overwritten.") from error
            except BaseException:
                await anyio.Path(target).unlink(missing_ok=True)
                raise
        saved.append(SavedFile(target, size, output.width, output.height, output.url))
    return saved

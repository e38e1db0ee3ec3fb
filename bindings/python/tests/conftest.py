"""A real vsyncd on its timer source for the tests: $VSYNCD_BIN, else this checkout's Swift build
(.build/debug or release, the newer). The library: $VSYNC_LIB, else the same build's libvsync.so."""
import os
import pathlib
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def _built(name):
    found = [p for p in (REPO / ".build" / c / name for c in ("debug", "release")) if p.exists()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


if not os.environ.get("VSYNC_LIB") and _built("libvsync.so"):
    os.environ["VSYNC_LIB"] = str(_built("libvsync.so"))

import vsync  # noqa: E402  (after VSYNC_LIB is settled)


@pytest.fixture
def daemon(tmp_path):
    yield from _daemon(tmp_path, [])


@pytest.fixture
def sparse_daemon(tmp_path):
    """vsyncd sampling vblanks sparsely: model-timed frames between bursts."""
    yield from _daemon(tmp_path, ["--vblank-sampling", "sparse"])


def _daemon(tmp_path, extra):
    binary = os.environ.get("VSYNCD_BIN") or _built("vsyncd")
    assert binary, "no vsyncd: build it with 'swift build' or set VSYNCD_BIN"
    socket = tmp_path / "vsyncd.sock"
    process = subprocess.Popen([str(binary), "--source", "timer:60", "--socket", str(socket), "--log-level", "warning"]
                               + extra)
    try:
        # Up once a client finishes the handshake.
        deadline = time.monotonic() + 20
        while True:
            try:
                vsync.Client(socket).close()
                break
            except vsync.VsyncError:
                assert time.monotonic() < deadline, f"vsyncd did not listen on {socket} within 20 s"
                time.sleep(0.02)
        yield socket
    finally:
        process.kill()
        process.wait()

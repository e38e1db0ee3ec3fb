"""Client.display_timing and Link.set_page_only against page-check's stand-in daemon: a real
sealed memfd timing page at 60 Hz (Tests/libvsync/page-server.h), built here with cc against the
library under test, until vsyncd's own page is on this branch."""
import ctypes
import os
import shutil
import subprocess

import pytest

import vsync
from vsync import _lib

from conftest import REPO


@pytest.fixture
def page_daemon(tmp_path):
    if not shutil.which("cc"):
        pytest.skip("no C compiler for the stand-in daemon")
    library = os.environ["VSYNC_LIB"]
    binary = tmp_path / "page-check"
    subprocess.run(["cc", "-std=gnu11", "-I", str(REPO / "include"), str(REPO / "Tests/libvsync/page-check.c"),
                    library, "-pthread", "-o", str(binary)], check=True)
    socket = tmp_path / "p.sock"
    # The program finds the library by its SONAME, as an installed one is found.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libvsync.so.1").symlink_to(library)
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path / "lib"))
    process = subprocess.Popen([str(binary), "serve", str(socket), "5"], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert process.stdout.readline().startswith("serving"), "the stand-in daemon did not start"
        yield socket
    finally:
        process.kill()
        process.wait()


def test_display_timing_reads_the_page_and_predicts_the_next_vblank(page_daemon):
    with vsync.Client(page_daemon) as client:
        link = client.link(lambda frame: None, "display:1")
        link.set_page_only(True)
        # The stand-in writes display 1's record on its first vblank, within a frame.
        deadline = vsync.now_ns() + 2_000_000_000
        while True:
            try:
                timing = client.display_timing(1)
                break
            except vsync.NotOnTimingPageError:
                assert vsync.now_ns() < deadline
                client.dispatch(5)
        assert timing.display_id == 1 and timing.on and timing.current
        assert timing.refresh_mhz == 60000
        assert abs(timing.period_ns - 16666666.667) < 0.001
        # After the last vblank the next is the one after it; after_ns picks any time.
        at = client.display_timing(1, after_ns=timing.last_timestamp_ns)
        assert at.next_sequence > at.last_sequence
        assert at.next_ns - at.last_timestamp_ns == round((at.next_sequence - at.last_sequence) * at.period_ns)
        with pytest.raises(vsync.NotOnTimingPageError) as missing:
            client.display_timing(2)
        assert missing.value.errno == _lib.ENOTONPAGE and "timing page" in str(missing.value)
        link.close()


def test_the_struct_has_the_c_layout():
    assert ctypes.sizeof(_lib.RawDisplayTiming) == 120
    assert _lib.RawDisplayTiming.period.offset == 64 and _lib.RawDisplayTiming.next_ns.offset == 112


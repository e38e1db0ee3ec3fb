"""libvsync's C API through ctypes: the structs of vsync/vsync.h and the functions' signatures.

The library is $VSYNC_LIB if set (a path), else libvsync.so.1 from the loader's path.
"""
import ctypes
import os

c_int, c_uint32, c_uint64, c_char, c_void_p, c_char_p = (
    ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_char, ctypes.c_void_p, ctypes.c_char_p)

# Linux errno values, returned negated (vsync.h's VSYNC_E*).
ENODAEMON, EACCES, ECONNECT, ECONNLOST, EREFUSED = 111, 13, 5, 104, 103
ENODISPLAY, EDISPLAYGONE, EREQUEST, EPROTO, EINVAL = 19, 6, 121, 71, 22
ENOMEM, ETIMEDOUT, ENOTCONN, EBUSY = 12, 110, 107, 16
ENOPAGE, ENOTONPAGE, EAGAIN = 61, 2, 11  # the timing page (protocol 5): ENODATA, ENOENT, EAGAIN

FRAME_HARDWARE, FRAME_PREDICTED, FRAME_SYNTHETIC, FRAME_VARIABLE, FRAME_MODEL_TIMED = 1, 2, 4, 8, 16
DISPLAY_MODE_CHANGED, DISPLAY_OFF, DISPLAY_ON, DISPLAY_WAITING = 1, 2, 3, 256
DISPLAY_VARIABLE_REFRESH_CHANGED = 6
DISPLAY_STATE_OFF, DISPLAY_STATE_ON = 0, 1
DISPLAY_FLAG_HARDWARE_CLOCK, DISPLAY_FLAG_SYNTHETIC, DISPLAY_FLAG_PRIMARY = 1, 2, 4
DISPLAY_FLAG_INTERRUPT_TIMESTAMPS = 8
DISPLAY_FLAG_VARIABLE, DISPLAY_FLAG_VARIABLE_CAPABLE = 16, 32
MAX_DISPLAYS = 42
TIMING_ON, TIMING_CURRENT = 0x10000, 0x20000


class Timeline(ctypes.Structure):
    _fields_ = [("sequence", c_uint64), ("presentation_ns", c_uint64)]


class RawFrame(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32), ("display_id", c_uint32), ("sequence", c_uint64), ("timestamp_ns", c_uint64),
        ("target_timestamp_ns", c_uint64), ("duration_ns", c_uint64), ("skipped", c_uint32), ("flags", c_uint32),
        ("interval_ns", c_uint64), ("received_ns", c_uint64), ("divisor", c_uint32), ("reserved", c_uint32),
        ("target_sequence", c_uint64), ("timeline_count", c_uint32), ("reserved2", c_uint32),
        ("timelines", Timeline * 4),
        ("generation", c_uint32), ("reserved3", c_uint32),
    ]


class RawDisplayEvent(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("kind", c_uint32), ("display_id", c_uint32), ("reserved", c_uint32),
                ("refresh_mhz", c_uint64), ("period_ns", c_uint64), ("generation", c_uint32), ("reserved2", c_uint32),
                ("flags", c_uint32), ("reserved3", c_uint32), ("min_interval_ns", c_uint64), ("max_interval_ns", c_uint64),
                ("monotonic_ns", c_uint64), ("realtime_ns", c_uint64)]


class RawDisplay(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32), ("display_id", c_uint32), ("crtc_id", c_uint32), ("connector_id", c_uint32),
        ("state", c_uint32), ("flags", c_uint32), ("refresh_mhz", c_uint64), ("period_ns", c_uint64),
        ("width", c_uint32), ("height", c_uint32), ("name", c_char * 40), ("device_path", c_char * 64),
        ("bus_path", c_char * 128), ("edid_make", c_char * 16), ("edid_model", c_char * 32),
        ("edid_serial", c_char * 32), ("generation", c_uint32), ("residual_rms_ns", c_uint32),
        ("residual_p99_ns", c_uint32), ("residual_samples", c_uint32),
        ("min_interval_ns", c_uint64), ("max_interval_ns", c_uint64),
    ]


class RawDisplayTiming(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32), ("display_id", c_uint32), ("generation", c_uint32), ("flags", c_uint32),
        ("last_sequence", c_uint64), ("last_timestamp_ns", c_uint64), ("anchor_sequence", c_uint64),
        ("anchor_ns", c_uint64), ("period_ns", c_uint64), ("period_frac", c_uint32), ("reserved", c_uint32),
        ("period", ctypes.c_double), ("refresh_mhz", c_uint64), ("min_interval_ns", c_uint64),
        ("max_interval_ns", c_uint64), ("updated_ns", c_uint64), ("next_sequence", c_uint64), ("next_ns", c_uint64),
    ]


class RawFrameCounts(ctypes.Structure):
    _fields_ = [("struct_size", c_uint32), ("reason_count", c_uint32), ("frames", c_uint64), ("late", c_uint64),
                ("by_reason", c_uint64 * 16)]


FRAME_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(RawFrame), c_void_p)
DISPLAY_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(RawDisplayEvent), c_void_p)
ERROR_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_void_p)

_SIGNATURES = {
    "vsync_version": (c_uint32, []),
    "vsync_client_connect": (c_int, [c_char_p, ctypes.POINTER(c_void_p)]),
    "vsync_client_get_fd": (c_int, [c_void_p]),
    "vsync_client_dispatch": (c_int, [c_void_p, c_int]),
    "vsync_client_get_displays": (c_int, [c_void_p, ctypes.POINTER(RawDisplay), ctypes.c_size_t, ctypes.c_size_t]),
    "vsync_client_last_error": (c_char_p, [c_void_p]),
    "vsync_client_destroy": (None, [c_void_p]),
    "vsync_link_create": (c_int, [c_void_p, c_char_p, FRAME_FN, c_void_p, ctypes.POINTER(c_void_p)]),
    "vsync_link_set_rate": (c_int, [c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_double]),
    "vsync_link_set_work_duration": (c_int, [c_void_p, c_uint64]),
    "vsync_link_set_predict_while_off": (c_int, [c_void_p, ctypes.c_bool]),
    "vsync_link_set_hardware_ticks": (c_int, [c_void_p, ctypes.c_bool]),
    "vsync_link_set_paused": (c_int, [c_void_p, ctypes.c_bool]),
    "vsync_link_set_display_callback": (c_int, [c_void_p, DISPLAY_FN]),
    "vsync_link_set_error_callback": (c_int, [c_void_p, ERROR_FN]),
    "vsync_link_get_refresh": (c_int, [c_void_p, ctypes.POINTER(c_uint64), ctypes.POINTER(c_uint64)]),
    "vsync_link_get_max_fps": (c_int, [c_void_p]),
    "vsync_link_set_page_only": (c_int, [c_void_p, ctypes.c_bool]),
    "vsync_display_timing": (c_int, [c_void_p, c_uint32, c_uint64, ctypes.POINTER(RawDisplayTiming)]),
    "vsync_link_destroy": (None, [c_void_p]),
    "vsync_link_frame_done": (c_int, [c_void_p, ctypes.POINTER(RawFrame), c_uint64]),
    "vsync_link_get_frame_counts": (c_int, [c_void_p, ctypes.POINTER(RawFrameCounts)]),
    "vsync_frame_reason_name": (c_char_p, [c_int]),
    "vsync_strerror": (c_char_p, [c_int]),
    "vsync_now_ns": (c_uint64, []),
}

_lib = None


def lib():
    """The loaded library, with every function's signature declared (loaded on first use)."""
    global _lib
    if _lib is None:
        path = os.environ.get("VSYNC_LIB") or "libvsync.so.1"
        try:
            loaded = ctypes.CDLL(path)
        except OSError as e:
            raise OSError(f"cannot load libvsync ({e}): install libvsync1, or point VSYNC_LIB at libvsync.so.1") from e
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(loaded, name)
            fn.restype, fn.argtypes = restype, argtypes
        _lib = loaded
    return _lib

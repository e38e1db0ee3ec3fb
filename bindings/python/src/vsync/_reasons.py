"""Late frames' reasons: the app ends each frame with Link.frame_done() and libvsync judges it by
the rules of the Swift DisplayLink's FrameMonitor (Android FrameTimeline's reasons)."""
import dataclasses
import enum

from ._lib import lib


class FrameReason(enum.IntEnum):
    """Why a frame was late (or that it was not); the values are libvsync's enum vsync_frame_reason."""
    ON_TIME = 0                # presented within 2 ms of its target
    APP_DEADLINE_MISSED = 1    # the app's work took longer than the time it had
    DAEMON_LATE = 2            # vsyncd sent the tick late
    DELIVERY_LATE = 3          # sent on time, read late: the app's thread did not run
    PRESENT_SCHEDULING = 4     # finished in time, shown a whole number of vsyncs off
    PREDICTION_ERROR = 5       # the vblank did not come when the refresh model said
    VARIABLE_REFRESH = 6       # variable refresh: the display waited past the earliest vblank
    DISPLAY_OFF = 7            # the display was off
    PREDICTED_WHILE_OFF = 8    # a predicted frame while the display was off
    MODE_CHANGE = 9            # the display's mode changed since the last frame
    UNKNOWN = 10               # the facts do not say

    @classmethod
    def _from(cls, value):
        # A newer library's reason this package does not know.
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN

    @property
    def label(self):
        """The name vsync-probe follow --json prints ("appDeadlineMissed")."""
        name = lib().vsync_frame_reason_name(int(self))
        return name.decode() if name else "unknown"

    @property
    def late(self):
        return self is not FrameReason.ON_TIME


@dataclasses.dataclass(frozen=True)
class FrameCounts:
    """A link's frames judged since it was created; subtract two readings for a window's."""
    frames: int
    late: int                  # of those, the ones not on time
    by_reason: dict            # FrameReason -> frames judged with it (every reason, zeros included)

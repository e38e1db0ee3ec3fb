import Glibc
import Testing
@testable import VsyncDRM

/// Each error is one line that says what failed and what to do.
struct DRMErrorTests {
    @Test func crtcOffOnEINVALFromAVBlankCall() {
        let error = DRMError.from(errno: EINVAL, device: "/dev/dri/card0", operation: "drmWaitVBlank", crtcID: 38)
        #expect(error.kind == .crtcOff(crtcID: 38))
        #expect(error.description == "CRTC 38 on /dev/dri/card0 is off: light the display (connect a monitor or set a mode) or pick another CRTC (vsync-probe list shows which are on)")
    }

    @Test func einvalWithoutACRTCIsGeneric() {
        let error = DRMError.from(errno: EINVAL, device: "/dev/dri/card0", operation: "drmModeGetResources")
        #expect(error.kind == .other)
        #expect(error.description.contains("drmModeGetResources failed on /dev/dri/card0: Invalid argument"))
    }

    @Test(arguments: [
        (EOPNOTSUPP, DRMError.Kind.noVBlankSupport, "does not support vblank"),
        (ENODEV, .deviceGone, "is gone"),
        (EBUSY, .timedOut, "timed out"),
        (EIO, .other, "Input/output error"),
    ])
    func errnoMapsToKind(code: Int32, kind: DRMError.Kind, phrase: String) {
        let error = DRMError.from(errno: code, device: "/dev/dri/card1", operation: "drmCrtcQueueSequence", crtcID: 40)
        #expect(error.kind == kind)
        #expect(error.description.contains(phrase) && error.description.contains("/dev/dri/card1"), "\(error)")
    }

    @Test func permissionDeniedNamesDeviceAndGroup() {
        // /dev/null exists everywhere, owned by root: the hint must not be "join group root".
        let error = DRMError.from(errno: EACCES, device: "/dev/null", operation: "open")
        guard case .permissionDenied(let group) = error.kind else {
            Issue.record("EACCES gave \(error.kind)")
            return
        }
        #expect(group == "root")
        #expect(error.description.hasPrefix("permission denied on /dev/null (open): "))
        #expect(error.description.contains("group 'video'"))
        let named = DRMError(kind: .permissionDenied(group: "render"), errno: EPERM, device: "/dev/dri/card0", operation: "open")
        #expect(named.description == "permission denied on /dev/dri/card0 (open): add the user to group 'render'")
    }

    @Test func noDeviceAndUnknownCRTCSayWhatToDo() {
        let none = DRMError(kind: .noDevice, errno: 0, device: "/dev/dri", operation: "scan")
        #expect(none.description == "no DRM device: /dev/dri has no card* node: this machine has no KMS display driver loaded (load one, or attach a display)")
        let unknown = DRMError(kind: .unknownCRTC(crtcID: 9999, valid: [35, 51]), errno: 0, device: "/dev/dri/card0", operation: "lookup")
        #expect(unknown.description == "no CRTC 9999 on /dev/dri/card0: valid CRTC ids are 35, 51 (see vsync-probe list)")
    }

    @Test func everyMessageIsOneLine() {
        let kinds: [DRMError.Kind] = [
            .noDevice, .permissionDenied(group: nil), .crtcOff(crtcID: 1), .noVBlankSupport, .deviceGone,
            .timedOut, .unknownCRTC(crtcID: 2, valid: []), .other,
        ]
        for kind in kinds {
            let text = DRMError(kind: kind, errno: EIO, device: "/dev/dri/card0", operation: "op").description
            #expect(!text.contains("\n") && !text.isEmpty, "\(kind)")
        }
    }

    @Test func openingSomethingThatIsNotADRMDeviceFailsClearly() {
        do {
            _ = try Card(path: "/dev/null")
            Issue.record("/dev/null opened as a DRM card")
        } catch {
            #expect(error.description.contains("/dev/null is not a DRM device"), "\(error)")
        }
        do {
            _ = try Card(path: "/dev/dri/card-none")
            Issue.record("a missing node opened")
        } catch {
            #expect(error.description == "/dev/dri/card-none does not exist: run vsync-probe list to see the cards there are")
        }
    }
}

import Glibc
import VsyncCore

// A suspend stops CLOCK_MONOTONIC and the vblank counter's meaning with it: every model starts
// over once, on the first read after resume, before that read's vblanks are fed.
extension Server {
    func checkSuspend() {
        let clocks = suspendClocks()
        guard let asleep = suspendDetector.check(monotonicNs: clocks.monotonicNs, boottimeNs: clocks.boottimeNs)
        else { return }
        logger.info("resumed after \(asleep / 1_000_000) ms asleep: every display's model starts over")
        for d in displays {
            d.resetModel()
            publishTiming(d)
        }
    }

    @Sendable static func readSuspendClocks() -> (monotonicNs: UInt64, boottimeNs: UInt64) {
        var mono = timespec(), boot = timespec()
        clock_gettime(CLOCK_MONOTONIC, &mono)
        clock_gettime(CLOCK_BOOTTIME, &boot)
        return (UInt64(mono.tv_sec) * 1_000_000_000 + UInt64(mono.tv_nsec),
                UInt64(boot.tv_sec) * 1_000_000_000 + UInt64(boot.tv_nsec))
    }
}

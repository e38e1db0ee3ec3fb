import Glibc
import VsyncCore

// A suspend stops CLOCK_MONOTONIC and the vblank counter's meaning with it: every model starts
// over once, on the first read after resume, before that read's vblanks are fed.
extension Server {
    func checkSuspend() {
        let clocks = displays.suspendClocks()
        guard let asleep = displays.suspendDetector.check(monotonicNs: clocks.monotonicNs, boottimeNs: clocks.boottimeNs)
        else { return }
        logger.info("resumed after \(asleep / 1_000_000) ms asleep: every display's model starts over")
        for d in displays {
            d.resetModel()
            publishTiming(d)
        }
    }
}

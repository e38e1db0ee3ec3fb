import Foundation
import Testing

/// The VM test bed itself: the guest boots, runs what it is given, reports back faithfully, and
/// has a working vkms device. Every other VM test relies on these.
@Suite(.serialized)
struct GuestBootTests {
    @Test func exitStatusAndStreamsComeBackSeparately() async throws {
        let result = try await GuestVM.run(["sh", "-c", "echo out; echo err >&2; exit 7"], timeout: 120)
        #expect(result.status == 7, "\(result)")
        #expect(result.stdout == "out\n", "\(result)")
        #expect(result.stderr == "err\n", "\(result)")
    }

    @Test func environmentAndWorkingDirectoryReachTheCommand() async throws {
        let result = try await GuestVM.run(
            ["sh", "-c", "printf '%s|%s|%s' \"$VSYNCD_GUEST_TEST\" \"$HOME\" \"$PWD\""],
            timeout: 120, env: ["VSYNCD_GUEST_TEST": "a b $c"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "a b $c|/tmp|\(GuestVM.repositoryRoot.path)", "\(result)")
    }

    @Test func vkmsCardAndConnectorExist() async throws {
        let result = try await GuestVM.run(
            ["sh", "-c", "test -c /dev/dri/card0 && cat /sys/class/drm/card0-Virtual-1/status"], timeout: 120)
        #expect(result.status == 0, "no /dev/dri/card0 or no Virtual-1 connector in the guest: \(result)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "connected", "\(result)")
    }

    @Test func hostBuiltSwiftProductRunsInTheGuest() async throws {
        let probe = try GuestVM.productPath("vsync-probe")
        let result = try await GuestVM.run([probe, "--help"], timeout: 120)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("USAGE"), "\(result)")
    }

    /// vbltest leaves its loop as soon as stdin is readable, so it reads from a pipe that stays
    /// silent for 3.5 s: about three `freq:` lines, one per 60 vblanks.
    @Test func vbltestSeesAbout60HzOnVkms() async throws {
        let result = try await GuestVM.run(["sh", "-c", "sleep 3.5 | vbltest -M vkms"], timeout: 120)
        #expect(result.status == 0, "\(result)")
        let rates = (result.stdout + result.stderr).split(separator: "\n").compactMap { line -> Double? in
            guard line.hasPrefix("freq: "), line.hasSuffix("Hz") else { return nil }
            return Double(line.dropFirst("freq: ".count).dropLast(2))
        }
        // The first line includes vbltest's own start-up; the last is steady state.
        let steady = try #require(rates.last, "vbltest printed no 'freq: NN.NNHz' line: \(result)")
        #expect((55.0...65.0).contains(steady), "vbltest measured \(steady) Hz on vkms: \(result)")
    }

    /// The guest is killed at the timeout (not when the command ends) and the run fails with
    /// vm-run's one-line verdict.
    @Test func commandOverrunningItsTimeoutFailsLoudly() async throws {
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: GuestVMError.self) {
            try await GuestVM.run(["sleep", "600"], timeout: 10)
        }
        let elapsed = clock.now - start
        #expect(elapsed < .seconds(40), "the timed-out guest took \(elapsed) to stop")
        let message = error.map { "\($0)" } ?? ""
        #expect(message.contains("vm-run: command did not finish within 10 s")
            || message.contains("vm-run: guest did not come up within 10 s"), "\(message)")
    }
}

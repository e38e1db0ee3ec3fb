import Foundation
import Testing

/// Displays named by the monitor's EDID on a real driver, not only vkms (which has no EDID): qemu's virtio-gpu
/// (vm-run.sh --virtio-gpu) is card1 beside vkms's card0. Linux 7.x's virtio-gpu reads the EDID
/// qemu makes (PNP id RHT, product name "QEMU Monitor", no serial) into the connector's EDID
/// property, and its vblanks come from the kernel's generic vblank timer. Its CRTC starts off
/// (fbcon lights only card0): the test lights it at a rate of its own, so the EDID follower's
/// ticks can only come from that display.
@Suite(.serialized)
struct DisplayIdentityVMTests {
    static let rate = 72.0

    struct Listing: Decodable {
        struct Card: Decodable {
            var path: String
            var driver: String?
            var connectors: [Connector]
        }
        struct Connector: Decodable { var name: String; var edidMake: String?; var edidModel: String?; var edidSerial: String? }
        var cards: [Card]
    }

    @Test func aClientFollowsTheMonitorByItsEDIDOnVirtioGPU() async throws {
        var script = try VsyncdGuestScript()
        script.virtioGPU = true
        script.shell("hold --device /dev/dri/card1 --connector Virtual-2 \(Self.rate)")
        script.shell("vsyncd_start")
        script.listDisplays()
        script.shell("follow edid --display 'edid:RHT/QEMU Monitor' --frames 40")
        script.shell("follow name --display Virtual-2 --frames 40")
        script.shell("follow vkms --display Virtual-1 --frames 40")
        script.shell("wait $PID_edid $PID_name $PID_vkms; release; vsyncd_stop; dump")
        let out = try await script.run(timeout: 300)
        #expect(out.result.status == 0 && out.errors.isEmpty, "\(out)")

        // vsync-probe list: virtio-gpu's connector carries the EDID identity, vkms's has none.
        let listing = try JSONDecoder().decode(Listing.self, from: Data((out.all("list").first ?? "").utf8))
        let virtio = try #require(listing.cards.first { $0.driver == "virtio_gpu" }, "no virtio_gpu card: \(listing.cards.map(\.path))")
        #expect(virtio.path == "/dev/dri/card1")
        let monitor = try #require(virtio.connectors.first { $0.name == "Virtual-2" })
        // The make is the PNP registry's name for RHT where hwdata is installed, else PNP(RHT).
        #expect(["Red Hat, Inc.", "PNP(RHT)"].contains(monitor.edidMake ?? ""), "\(monitor)")
        #expect(monitor.edidModel == "QEMU Monitor" && monitor.edidSerial == "", "\(monitor)")
        let vkms = listing.cards.first { $0.driver == "vkms" }?.connectors.first { $0.name == "Virtual-1" }
        #expect(vkms != nil && vkms?.edidMake == nil, "\(String(describing: vkms))")

        // By EDID and by connector name: the virtio display's own rate; vkms's 60 Hz untouched.
        let exact = 1e9 / customModePeriodNs(Self.rate)
        let vkmsHz = try out.defaultRefreshHz()
        for (name, hz) in [("edid", exact), ("name", exact), ("vkms", vkmsHz)] {
            let ticks = out.ticks(name)
            #expect(ticks.count == 40, "\(name): \(ticks.count) ticks; \(out.all("\(name).err"))")
            guard let last = ticks.last else { continue }
            let measuredHz = 1e9 / Double(last.durationNs)
            // The display's frame duration, from the daemon's model of that CRTC's vblanks.
            #expect(abs(ppm(measuredHz, against: hz)) < 100, "\(name): \(measuredHz) Hz, expected \(hz) Hz")
            #expect(ticks.allSatisfy { $0.flags == ["hardware"] }, "\(name): \(Set(ticks.flatMap(\.flags)))")
            print("\(name): \(ticks.count) ticks at \(sixDecimals(measuredHz)) Hz (display \(sixDecimals(hz)) Hz)")
        }
    }
}

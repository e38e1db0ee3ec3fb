import Foundation
import Testing
import VsyncDRM

/// A card's stable path, from udev's /dev/dri/by-path links or, without udev, from sysfs, on
/// directory trees laid out as the kernel and udev lay them out.
@Suite("Card bus path")
struct CardIdentityTests {
    static func tree() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("busPath-\(UUID().uuidString.prefix(8))")
        let fm = FileManager.default
        // sysfs: /sys/class/drm/card1/device -> a PCI device whose subsystem is bus/pci.
        let device = root.appendingPathComponent("sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0")
        try fm.createDirectory(at: device, withIntermediateDirectories: true)
        try fm.createDirectory(at: root.appendingPathComponent("sys/bus/pci"), withIntermediateDirectories: true)
        try fm.createSymbolicLink(at: device.appendingPathComponent("subsystem"), withDestinationURL: root.appendingPathComponent("sys/bus/pci"))
        let card = root.appendingPathComponent("sys/class/drm/card1")
        try fm.createDirectory(at: card, withIntermediateDirectories: true)
        try fm.createSymbolicLink(at: card.appendingPathComponent("device"), withDestinationURL: device)
        // /dev/dri/card1 and udev's link to it.
        let dri = root.appendingPathComponent("dev/dri")
        try fm.createDirectory(at: dri.appendingPathComponent("by-path"), withIntermediateDirectories: true)
        fm.createFile(atPath: dri.appendingPathComponent("card1").path, contents: nil)
        fm.createFile(atPath: dri.appendingPathComponent("card2").path, contents: nil)
        try fm.createSymbolicLink(at: dri.appendingPathComponent("by-path/pci-0000:03:00.0-card"), withDestinationURL: dri.appendingPathComponent("card1"))
        try fm.createSymbolicLink(at: dri.appendingPathComponent("by-path/pci-0000:03:00.0-render"), withDestinationURL: dri.appendingPathComponent("card2"))
        return root
    }

    @Test func udevsLinkNamesTheCard() throws {
        let root = try Self.tree()
        defer { try? FileManager.default.removeItem(at: root) }
        let dri = root.appendingPathComponent("dev/dri").path
        #expect(Card.busPath(ofNode: "\(dri)/card1", byPathDirectory: "\(dri)/by-path", sysfs: "/nonexistent") == "pci-0000:03:00.0")
        // Only a -card link counts (render nodes have their own).
        #expect(Card.busPath(ofNode: "\(dri)/card2", byPathDirectory: "\(dri)/by-path", sysfs: "/nonexistent") == "")
    }

    @Test func withoutUdevSysfsGivesTheSameName() throws {
        let root = try Self.tree()
        defer { try? FileManager.default.removeItem(at: root) }
        let sysfs = root.appendingPathComponent("sys/class/drm").path
        #expect(Card.busPath(ofNode: "/dev/dri/card1", byPathDirectory: "/nonexistent", sysfs: sysfs) == "pci-0000:03:00.0")
        #expect(Card.busPath(ofNode: "/dev/dri/card7", byPathDirectory: "/nonexistent", sysfs: sysfs) == "")
    }
}

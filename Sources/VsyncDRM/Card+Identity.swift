import CDRM
import Glibc
import VsyncCore

// What names a card and a monitor beyond vsyncd's numbers: the card's bus path and each
// connector's EDID. Both are read without DRM master.
extension Card {
    /// The connector's `EDID` property blob, nil when it has none (nothing plugged in, a virtual
    /// connector, a driver without EDID). One property listing and, when the blob id differs
    /// from `knownBlob`, one blob read: `blobID` lets a caller skip re-reading an unchanged EDID.
    public func edid(connectorID: UInt32, knownBlob: UInt32? = nil) -> (blobID: UInt32, bytes: [UInt8]?)? {
        guard let props = drmModeObjectGetProperties(fileDescriptor, connectorID, UInt32(DRM_MODE_OBJECT_CONNECTOR)) else { return nil }
        defer { drmModeFreeObjectProperties(props) }
        for i in 0..<Int(props.pointee.count_props) {
            guard let prop = drmModeGetProperty(fileDescriptor, props.pointee.props[i]) else { continue }
            let isEDID = withUnsafeBytes(of: prop.pointee.name) { raw in
                raw.prefix { $0 != 0 }.elementsEqual("EDID".utf8)
            }
            drmModeFreeProperty(prop)
            guard isEDID else { continue }
            let blobID = UInt32(truncatingIfNeeded: props.pointee.prop_values[i])
            guard blobID != 0 else { return (0, nil) }
            if blobID == knownBlob { return (blobID, nil) }
            guard let blob = drmModeGetPropertyBlob(fileDescriptor, blobID) else { return (blobID, nil) }
            defer { drmModeFreePropertyBlob(blob) }
            let bytes = blob.pointee.data.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(blob.pointee.length))) } ?? []
            return (blobID, bytes)
        }
        return nil
    }

    /// The card's stable path: udev's /dev/dri/by-path name for this node without "-card"
    /// (`pci-0000:03:00.0`, `platform-vkms`), else the same built from sysfs (the device's bus
    /// and name, as udev's path_id does for a device straight on its bus); "" if neither is there.
    public static func busPath(ofNode path: String, byPathDirectory: String = "/dev/dri/by-path", sysfs: String = "/sys/class/drm")
        -> String
    {
        let node = String(path.split(separator: "/").last ?? Substring(path))
        if let dir = opendir(byPathDirectory) {
            defer { closedir(dir) }
            let target = realPath(path)
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard name.hasSuffix("-card"), target != nil, realPath("\(byPathDirectory)/\(name)") == target else { continue }
                return String(name.dropLast(5))
            }
        }
        guard let device = realPath("\(sysfs)/\(node)/device"),
            let subsystem = realPath("\(sysfs)/\(node)/device/subsystem")
        else { return "" }
        let bus = subsystem.split(separator: "/").last.map(String.init) ?? ""
        let name = device.split(separator: "/").last.map(String.init) ?? ""
        return bus.isEmpty || name.isEmpty ? "" : "\(bus)-\(name)"
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

extension PNPRegistry {
    /// The built-in table, with hwdata's full `pnp.ids` over it where that is installed (the
    /// table libdisplay-info compiles in), so makes read as compositors show them.
    public static func installed(path: String = "/usr/share/hwdata/pnp.ids") -> PNPRegistry {
        guard let file = fopen(path, "r") else { return .builtIn }
        defer { fclose(file) }
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n <= 0 { break }
            text += buffer[0..<n]
        }
        return PNPRegistry.builtIn.merging(.parse(String(decoding: text, as: UTF8.self)))
    }
}

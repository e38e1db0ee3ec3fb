import CDRM
import Glibc

// Object properties read without DRM master: variable refresh (VRR) state. `vrr_capable` is on
// connectors of drivers that can do VRR (amdgpu, i915, nouveau…; vkms has none);
// `VRR_ENABLED` is on every CRTC of an atomic driver, set by the compositor, and the kernel
// raises no uevent when it changes, so vsyncd polls it (the value read is one ioctl pair).
extension Card {
    /// The id of the property called `name` on an object, nil if it has none. Lists every
    /// property by name (an ioctl each): look it up once and keep the id.
    public func propertyID(named name: String, objectID: UInt32, objectType: UInt32) -> UInt32? {
        guard let props = drmModeObjectGetProperties(fileDescriptor, objectID, objectType) else { return nil }
        defer { drmModeFreeObjectProperties(props) }
        for i in 0..<Int(props.pointee.count_props) {
            guard let prop = drmModeGetProperty(fileDescriptor, props.pointee.props[i]) else { continue }
            let matches = withUnsafeBytes(of: prop.pointee.name) { raw in raw.prefix { $0 != 0 }.elementsEqual(name.utf8) }
            drmModeFreeProperty(prop)
            if matches { return props.pointee.props[i] }
        }
        return nil
    }

    /// The value of property `propertyID` on an object now, nil if the object lacks it.
    public func propertyValue(_ propertyID: UInt32, objectID: UInt32, objectType: UInt32) -> UInt64? {
        guard let props = drmModeObjectGetProperties(fileDescriptor, objectID, objectType) else { return nil }
        defer { drmModeFreeObjectProperties(props) }
        for i in 0..<Int(props.pointee.count_props) where props.pointee.props[i] == propertyID {
            return props.pointee.prop_values[i]
        }
        return nil
    }

    public static let connectorObject = UInt32(DRM_MODE_OBJECT_CONNECTOR)
    public static let crtcObject = UInt32(DRM_MODE_OBJECT_CRTC)

    /// The connector's `vrr_capable`: nil when the driver has no such property (no VRR at all).
    public func variableRefreshCapable(connectorID: UInt32) -> Bool? {
        guard let id = propertyID(named: "vrr_capable", objectID: connectorID, objectType: Self.connectorObject) else { return nil }
        return propertyValue(id, objectID: connectorID, objectType: Self.connectorObject).map { $0 != 0 }
    }

    /// The id of the CRTC's `VRR_ENABLED`, to poll with `variableRefreshEnabled`.
    public func variableRefreshEnabledProperty(crtcID: UInt32) -> UInt32? {
        propertyID(named: "VRR_ENABLED", objectID: crtcID, objectType: Self.crtcObject)
    }

    /// The CRTC's `VRR_ENABLED` now, read by the property's id (no name lookup).
    public func variableRefreshEnabled(crtcID: UInt32, property: UInt32) -> Bool? {
        propertyValue(property, objectID: crtcID, objectType: Self.crtcObject).map { $0 != 0 }
    }
}

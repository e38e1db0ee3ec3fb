import Testing
import VsyncCore

/// The features a connection has are decided once from its version, by the named gates.
struct ProtocolFeaturesTests {
    @Test func eachVersionHasWhatItAndTheVersionsBeforeItAdded() {
        #expect(ProtocolFeatures(version: 1).isEmpty)
        #expect(ProtocolFeatures(version: 2) == [.workDurations, .waitingSubscriptions])
        #expect(ProtocolFeatures(version: 3) == [.workDurations, .waitingSubscriptions, .cardSelectors, .followingPrimary, .waitingThroughRemoval])
        #expect(ProtocolFeatures(version: 4) == ProtocolFeatures(version: 3).union(.generations))
        #expect(ProtocolFeatures(version: 5) == ProtocolFeatures(version: 4).union([.timingPage, .variableRefresh]))
        #expect(ProtocolFeatures(version: 6) == ProtocolFeatures(version: 5).union(.modelTimedTicks))
        // Every feature is in the current version, and each gate is within the versions spoken.
        let all = ProtocolFeatures.sinceVersion.reduce(ProtocolFeatures()) { $0.union($1.feature) }
        #expect(ProtocolFeatures(version: WireProtocol.currentVersion) == all)
        #expect(ProtocolFeatures.sinceVersion.allSatisfy { $0.version > WireProtocol.minimumVersion && $0.version <= WireProtocol.currentVersion })
    }

    @Test func anEventKindNeedsTheFeatureOfItsVersion() {
        for kind in DisplayEventKind.allCases {
            #expect(ProtocolFeatures(version: kind.minimumVersion).isSuperset(of: kind.requiredFeatures))
            #expect(kind.minimumVersion == WireProtocol.minimumVersion || !ProtocolFeatures(version: kind.minimumVersion - 1).isSuperset(of: kind.requiredFeatures))
        }
    }
}

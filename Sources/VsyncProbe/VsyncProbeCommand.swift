import ArgumentParser

/// `vsync-probe`: what the displays are and how their vblank really ticks.
// The annotation makes `await main()` pick the async entry point (swift-argument-parser#538).
@available(macOS 10.15, macCatalyst 13, iOS 13, tvOS 13, watchOS 6, *)
public struct VsyncProbeCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "vsync-probe",
        abstract: "Inspect DRM displays and measure their real vblank timing.",
        subcommands: [ListCommand.self, MeasureCommand.self]
    )

    public init() {}
}

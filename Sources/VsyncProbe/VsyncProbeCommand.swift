import ArgumentParser
import VsyncCore

/// `vsync-probe`: what the displays are and how their vblank really ticks.
public struct VsyncProbeCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "vsync-probe",
        abstract: "Inspect DRM displays and measure their real vblank timing.",
        version: VsyncVersion.string,
        subcommands: [ListCommand.self, MeasureCommand.self, FollowCommand.self, PageCommand.self, RecordCommand.self]
    )

    public init() {}

    /// Parses the command line and runs the chosen subcommand, async or not. (From a thin
    /// main.swift, `await main()` resolves to the synchronous entry point on Linux, which
    /// refuses async subcommands; this does what the async one does.)
    public static func runAsRoot() async -> Never {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit()
        } catch {
            exit(withError: error)
        }
    }
}

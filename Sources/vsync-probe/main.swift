import VsyncProbe

await VsyncProbeCommand.runAsRoot()

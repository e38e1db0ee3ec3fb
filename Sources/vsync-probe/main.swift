import VsyncProbe

await VsyncProbeCommand.main()

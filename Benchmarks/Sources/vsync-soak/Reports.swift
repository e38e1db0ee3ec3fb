/// What one worker process saw, written as one JSON object on its stdout when it leaves.
struct WorkerReport: Codable, Sendable {
    var index = 0
    var role = ""
    /// Ticks delivered to the handlers of all its links.
    var frames = 0
    /// Consecutive tick pairs checked against the invariant (pairs straddling a rate change,
    /// pause or resume are not checked: the daemon restarts its count there).
    var checkedPairs = 0
    /// Sum of `skipped` over all delivered ticks.
    var skipped = 0
    /// The "keeps up" link (steady workers only): full rate, fast handler, never changed.
    var keepUpFrames = 0
    var keepUpSkipped = 0
    var keepUpCheckedPairs = 0
    /// Keeps-up frames skipped while neither vsyncd nor the link was kept off the CPU.
    var keepUpUnexplained = 0
    var keepUpUnexplainedSamples: [String] = []
    var linksOpened = 0
    var linksClosed = 0
    var pauses = 0
    var resumes = 0
    var rateChanges = 0
    var slowSpells = 0
    var violations = 0
    var violationSamples: [String] = []
    var errors = 0
    var errorSamples: [String] = []
}

/// The soak's result: printed as text, or as one JSON object with `--json`.
struct SoakSummary: Codable, Sendable {
    var seconds = 0.0
    var hertz = 0.0
    var clients = 0
    var seed: UInt64 = 0
    var passed = false
    var failures: [String] = []

    var workersStarted = 0
    var workersLeft = 0
    var workersKilled = 0
    var workersReported = 0
    /// Started just before the end and stopped by SIGTERM before they could take it.
    var workersStoppedEarly = 0
    var workerCrashes = 0

    var ticks = 0
    var checkedPairs = 0
    var joins = 0
    var leaves = 0
    var linksOpened = 0
    var linksClosed = 0
    var pauses = 0
    var resumes = 0
    var rateChanges = 0
    var slowSpells = 0
    var violations = 0
    var violationSamples: [String] = []
    var linkErrors = 0
    var linkErrorSamples: [String] = []
    var skipped = 0
    var keepUpFrames = 0
    var keepUpSkipped = 0
    var keepUpCheckedPairs = 0
    /// Keeps-up frames skipped while neither vsyncd nor the link was kept off the CPU.
    var keepUpUnexplained = 0
    var keepUpUnexplainedSamples: [String] = []

    var daemonRunningAtEnd = false
    var daemonExitStatus: Int32 = -1

    var fdBaseline = 0
    var fdFirst = 0
    var fdLast = 0
    var fdMax = 0
    /// fd count once every worker had left, minus the baseline (bound: `fdSlack`).
    var fdDelta = 0
    var fdSlack = 0

    var rssFirstKiB = 0
    var rssAfterWarmupKiB = 0
    var rssLastKiB = 0
    var rssMaxKiB = 0
    /// Highest RSS after warm-up minus RSS at the end of warm-up (bound: `rssGrowthBoundKiB`).
    var rssGrowthKiB = 0
    var rssGrowthBoundKiB = 0
    var warmupSeconds = 0.0
    var samples = 0
}

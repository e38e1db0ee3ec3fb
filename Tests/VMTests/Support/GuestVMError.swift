/// Why the VM test bed could not run a command (as opposed to the command failing in the guest).
enum GuestVMError: Error, CustomStringConvertible {
    /// Tests/TestBed/vm-run.sh is not where #filePath says the repository is.
    case scriptMissing(path: String)
    /// vm-run.sh could not be started at all.
    case launchFailed(path: String, reason: String)
    /// vm-run.sh exited 125 with its own "vm-run: ..." line: no qemu, no kernel, the guest did not
    /// come up, or the command overran its timeout. `detail` holds its stderr (console tail).
    case testBedFailed(summary: String, detail: String)
    /// A built product the test wants to run in the guest does not exist.
    case productMissing(name: String, path: String)
    /// A test that measures the shipped build found no current release build of a product.
    case releaseProductMissing(name: String, path: String, reason: String)

    var description: String {
        switch self {
        case .scriptMissing(let path):
            "VM test bed script missing at \(path): the repository layout changed or #filePath is wrong"
        case .launchFailed(let path, let reason):
            "cannot start \(path): \(reason)"
        case .testBedFailed(let summary, let detail):
            "\(summary) (the VM test bed needs qemu-system-x86 and the kernel from Tests/TestBed/build-kernel.sh)\n\(detail)"
        case .productMissing(let name, let path):
            "product '\(name)' not found at \(path): build it first with `swift build --scratch-path <same path as the tests>`"
        case .releaseProductMissing(let name, let path, let reason):
            "release build of '\(name)' unusable at \(path): \(reason); run Scripts/build-release.sh (Scripts/test.sh does) before these tests"
        }
    }
}

/// What one command run in the VM test bed's guest gave back.
struct GuestResult: Sendable, CustomStringConvertible {
    /// The command's stdout, as it arrived over the guest's ttyS1.
    var stdout: String
    /// The command's stderr, as it arrived over the guest's ttyS2.
    var stderr: String
    /// The command's exit status inside the guest.
    var status: Int32

    /// For `#expect(..., "\(result)")`: everything needed to see why a check failed.
    var description: String {
        "status \(status)\n--- stdout ---\n\(stdout)--- stderr ---\n\(stderr)"
    }
}

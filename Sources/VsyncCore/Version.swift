/// The release version, one place for every program's `--version` and the packages.
public enum VsyncVersion {
    public static let string = "0.3.0"
}

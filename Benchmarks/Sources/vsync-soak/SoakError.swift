import ProcessTools

/// One clear line: what failed, why, what to do.
struct SoakError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

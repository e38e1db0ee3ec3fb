/// A star polygon rasterized on the CPU into an 8-bit coverage image: even-odd scanline fill,
/// `samples × samples` supersampling per pixel for the anti-aliased edges. The cost grows with
/// `samples²`, which is how the demo varies it from frame to frame.
struct StarRaster {
    var size: Int
    var points: Int

    /// The image at `angle` (radians), or nil when `cancelled` turned true between rows.
    func render(angle: Double, samples: Int, cancelled: () -> Bool) -> [UInt8]? {
        let vertices = star(angle: angle)
        var counts = [UInt16](repeating: 0, count: size * size)
        var crossings: [Double] = []
        crossings.reserveCapacity(vertices.count)
        let s = Double(samples)
        for y in 0..<size {
            if cancelled() { return nil }
            for sy in 0..<samples {
                let yy = Double(y) + (Double(sy) + 0.5) / s
                crossings.removeAll(keepingCapacity: true)
                for i in vertices.indices {
                    let (x0, y0) = vertices[i]
                    let (x1, y1) = vertices[(i + 1) % vertices.count]
                    guard (y0 <= yy) != (y1 <= yy) else { continue }
                    crossings.append(x0 + (yy - y0) / (y1 - y0) * (x1 - x0))
                }
                crossings.sort()
                var i = 0
                while i + 1 < crossings.count {
                    // Sub-columns whose centre lies inside the span [a, b).
                    let first = max(0, Int((crossings[i] * s - 0.5).rounded(.up)))
                    let last = min(size * samples - 1, Int((crossings[i + 1] * s - 0.5).rounded(.up)) - 1)
                    if first <= last {
                        for sx in first...last { counts[y * size + sx / samples] &+= 1 }
                    }
                    i += 2
                }
            }
        }
        let full = Double(samples * samples)
        return counts.map { UInt8(min(255, (Double($0) * 255 / full).rounded())) }
    }

    /// The outline: `points` tips on a circle, inner corners at 40 % of its radius.
    private func star(angle: Double) -> [(Double, Double)] {
        let centre = Double(size) / 2
        let outer = centre * 0.95
        return (0..<(2 * points)).map { i in
            let r = i % 2 == 0 ? outer : outer * 0.4
            let a = angle + Double(i) * .pi / Double(points)
            return (centre + r * cos(a), centre + r * sin(a))
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Lines fitted to the envelope of a run of (x, y) points rather than through their middle:
/// for timestamps whose error is one-sided (interrupt latency only ever makes a vblank late).
///
/// Both are linear programs solved on the points' convex hull (Andrew's monotone chain, one
/// pass, with stacks the caller owns so nothing is allocated):
/// - `lower`: the line on or below every point that is highest at the mean x (least total
///   lateness). Best when the lateness piles up near its floor (exponential-like); the LP
///   Moon, Skelly and Towsley use to take clock skew out of one-way delays (INFOCOM 1999).
///   The optimum is the lower hull's edge over the mean x.
/// - `minimax`: the narrowest strip holding every point (the L∞ fit), by its lower edge. Best when
///   the lateness is bounded and flat, as when the stamp is the first timer tick after the
///   vblank (the test bed under TCG: the host's 4 ms tick). The optimum slope is a hull edge's.
enum EnvelopeFit {
    typealias Line = (slope: Double, interceptAtZero: Double)

    /// Fills `stack[0..<result]` with the lower (or upper) hull's point indices, x ascending.
    static func hull(count n: Int, upper: Bool, stack: inout [Int], x: (Int) -> Double, y: (Int) -> Double) -> Int {
        var top = 0
        for i in 0..<n {
            let xi = x(i)
            let yi = y(i)
            while top >= 2 {
                let a = stack[top - 2]
                let b = stack[top - 1]
                let xa = x(a)
                let ya = y(a)
                let cross = (x(b) - xa) * (yi - ya) - (y(b) - ya) * (xi - xa)
                // Lower hull: pop on a non-left turn; upper hull: on a non-right turn.
                if upper ? cross >= 0 : cross <= 0 { top -= 1 } else { break }
            }
            stack[top] = i
            top += 1
        }
        return top
    }

    /// x strictly increasing; nil with fewer than two points or a slope not positive and finite.
    static func lower(count n: Int, stack: inout [Int], x: (Int) -> Double, y: (Int) -> Double) -> Line? {
        guard n >= 2 else { return nil }
        let top = hull(count: n, upper: false, stack: &stack, x: x, y: y)
        var meanX = 0.0
        for i in 0..<n { meanX += x(i) }
        meanX /= Double(n)
        // The hull edge over the mean x. When the mean x is a vertex, both edges meeting there
        // are optimal, and so is any slope between them: take the middle one.
        var slope = 0.0
        var anchor = stack[0]
        for k in 0..<(top - 1) {
            let a = stack[k]
            let b = stack[k + 1]
            let xa = x(a)
            let xb = x(b)
            guard xb >= meanX else { continue }
            slope = (y(b) - y(a)) / (xb - xa)
            anchor = a
            if xb == meanX, k + 2 < top {
                let c = stack[k + 2]
                slope = (slope + (y(c) - y(b)) / (x(c) - xb)) / 2
                anchor = b
            }
            break
        }
        guard slope > 0, slope.isFinite else { return nil }
        return (slope, y(anchor) - slope * x(anchor))
    }

    /// x strictly increasing; nil with fewer than two points or a slope not positive and finite.
    static func minimax(
        count n: Int, lowerStack: inout [Int], upperStack: inout [Int], x: (Int) -> Double, y: (Int) -> Double
    ) -> Line? {
        guard n >= 2 else { return nil }
        let nl = hull(count: n, upper: false, stack: &lowerStack, x: x, y: y)
        let nu = hull(count: n, upper: true, stack: &upperStack, x: x, y: y)
        // The search is O(hull²): hulls of noisy stamps have a dozen vertices, but points on a
        // curve would have all of them. Past that, the lower envelope will do.
        guard nl + nu <= 64 else { return lower(count: n, stack: &lowerStack, x: x, y: y) }
        // The strip's vertical width at slope m: convex in m, least at a hull edge's slope.
        func width(_ m: Double) -> (width: Double, top: Double, bottom: Double) {
            var top = -Double.infinity
            var bottom = Double.infinity
            for k in 0..<nu {
                let i = upperStack[k]
                top = Swift.max(top, y(i) - m * x(i))
            }
            for k in 0..<nl {
                let i = lowerStack[k]
                bottom = Swift.min(bottom, y(i) - m * x(i))
            }
            return (top - bottom, top, bottom)
        }
        var best = Double.infinity
        var lo = 0.0
        var hi = 0.0
        func consider(_ a: Int, _ b: Int) {
            let m = (y(b) - y(a)) / (x(b) - x(a))
            let w = width(m).width
            // A flat stretch of optimal slopes: keep its ends and take the middle.
            if w < best * (1 - 1e-12) {
                best = w
                lo = m
                hi = m
            } else if w <= best * (1 + 1e-12) {
                lo = Swift.min(lo, m)
                hi = Swift.max(hi, m)
            }
        }
        for k in 0..<(nl - 1) { consider(lowerStack[k], lowerStack[k + 1]) }
        for k in 0..<(nu - 1) { consider(upperStack[k], upperStack[k + 1]) }
        let slope = (lo + hi) / 2
        guard slope > 0, slope.isFinite else { return nil }
        // The strip's lower edge: the earliest the stamps come, as with `lower`.
        return (slope, width(slope).bottom)
    }
}

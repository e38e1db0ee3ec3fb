import TestSupport
import Testing
@testable import VsyncClientCore

/// The client core's subscription table against a Dictionary doing the same operations.
@Suite("IDTable")
struct IDTableTests {
    @Test func itBehavesAsADictionaryKeptInIDOrder() {
        var rng = SplitMix64(seed: 0x1D7AB)
        var table = IDTable<Int>()
        var reference: [UInt32: Int] = [:]
        for step in 0..<5_000 {
            let id = UInt32(rng.next() % 24)
            switch rng.next() % 5 {
            case 0, 1:
                table[id] = step; reference[id] = step
            case 2:
                table[id] = nil; reference[id] = nil
            case 3:
                #expect(table.removeValue(forKey: id) == reference.removeValue(forKey: id))
            default:
                if let at = table.index(of: id) {
                    table[at: at] += 1
                    reference[id]! += 1
                } else {
                    #expect(reference[id] == nil)
                }
            }
            #expect(table[id] == reference[id])
            #expect(table.keys == reference.keys.sorted())
            #expect(table.count == reference.count && table.isEmpty == reference.isEmpty)
        }
        #expect(table.entries.map(\.1) == reference.keys.sorted().map { reference[$0]! })
        table.removeAll { $0 % 2 == 0 }
        #expect(table.keys == reference.keys.filter { $0 % 2 == 1 }.sorted())
        #expect(table.contains { $0 >= 0 } == !table.isEmpty && !table.contains { $0 < 0 })
        table.removeAll()
        #expect(table.isEmpty && table[1] == nil && table.index(of: 1) == nil)
    }
}

/// A trace as Chrome trace-event JSON (the format Perfetto's UI and chrome://tracing open):
/// one track per display, each frame a slice from its vblank to the next (named by sequence,
/// missed vblanks before it in its args), mode changes and off as instant events. Times are
/// CLOCK_MONOTONIC in µs, as the format wants. Written by `vsync-probe record --trace-out`.
public enum TraceEventJSON {
    public static func encode(_ trace: VBlankTrace) -> String {
        var events: [String] = []
        for d in trace.displays {
            events.append(
                #"{"name":"process_name","ph":"M","pid":\#(d.id),"args":{"name":"\#(escape("\(d.connector) (\(d.device) CRTC \(d.crtcID))"))"}}"#
            )
        }
        // Each vblank's slice ends at the display's next vblank: find it per display.
        var last: [UInt32: (sequence: UInt64, timestampNs: UInt64)] = [:]
        var slices: [(display: UInt32, sequence: UInt64, start: UInt64, end: UInt64, missed: UInt64)] = []
        var instants: [(display: UInt32, time: UInt64, name: String)] = []
        for event in trace.events {
            switch event {
            case .vblank(let id, let s, let t):
                if let p = last[id], s > p.sequence, t > p.timestampNs {
                    slices.append((id, p.sequence, p.timestampNs, t, s - p.sequence - 1))
                }
                last[id] = (s, t)
            case .mode(let t, let id, let w, let h, let r):
                instants.append((id, t, "mode \(w)x\(h) \(r)"))
            case .off(let t, let id):
                instants.append((id, t, "off"))
                last[id] = nil
            case .variableRefreshEnabled(let t, let id, let on):
                instants.append((id, t, "variable refresh \(on ? "on" : "off")"))
            case .variableRefreshCapable, .refreshRange:
                continue  // what the monitor can do, not something that happened
            }
        }
        // In time order, as a reader of the file expects.
        var timed: [(time: UInt64, json: String)] = []
        for s in slices {
            timed.append(
                (
                    s.start,
                    #"{"name":"frame \#(s.sequence)","ph":"X","pid":\#(s.display),"tid":1,"ts":\#(micros(s.start)),"dur":\#(micros(s.end - s.start)),"args":{"sequence":\#(s.sequence),"missedAfter":\#(s.missed)}}"#
                ))
        }
        for i in instants {
            timed.append((i.time, #"{"name":"\#(escape(i.name))","ph":"i","s":"p","pid":\#(i.display),"tid":1,"ts":\#(micros(i.time))}"#))
        }
        timed.sort { $0.time < $1.time }
        events += timed.map(\.json)
        return #"{"displayTimeUnit":"ms","traceEvents":[\#n"# + events.joined(separator: ",\n") + "\n]}\n"
    }

    /// ns as µs with three decimals, exactly (no Double rounding of large values).
    static func micros(_ ns: UInt64) -> String {
        let frac = String(ns % 1000)
        return "\(ns / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where c.value < 0x20: out += "\\u00" + (c.value < 16 ? "0" : "") + String(c.value, radix: 16)
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}

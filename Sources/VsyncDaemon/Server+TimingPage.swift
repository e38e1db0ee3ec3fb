import CLinux
import CVsyncPage
import Glibc
import Logging
import VsyncCore

// The timing page's writes: a record per display, rewritten on each vblank the daemon gets
// (the last vblank and the model's line) and on each change (the flags, state and mode).
extension Server {
    /// TIMING_PAGE with the page's descriptor, right after WELCOME (protocol 5). Not sent when
    /// the WELCOME itself waits in the outbox (a descriptor cannot queue behind it there): that
    /// client lives without the page, as with a daemon that has none.
    func sendTimingPage(to client: Client) {
        guard let page = timingPage, client.closeReason == nil, !client.isBlocked else { return }
        switch client.send(page.message.encoded(version: client.encodingVersion), with: page.clientFD) {
        case .sent: break
        case .full: logger.debug("client \(client.label): no timing page (socket full at the handshake)")
        case .failed(let e): sendFailed(client, e)
        }
    }

    /// Gives a new display its slot and first record.
    func placeOnPage(_ d: Display) {
        guard let page = timingPage, d.pageSlot < 0 else { return }
        guard let slot = page.claimSlot() else {
            logger.warning("display \(d.id): the timing page is full (\(VSYNC_PAGE_RECORDS) displays); clients read it from ticks")
            return
        }
        d.pageSlot = slot
        publishTiming(d)
    }

    func takeOffPage(_ d: Display) {
        guard let page = timingPage, d.pageSlot >= 0 else { return }
        page.release(d.pageSlot)
        d.pageSlot = -1
    }

    /// The whole record: after a change of the display (state, mode, model reset, vblank events
    /// on or off, primary) and from housekeeping, which keeps the timing-quality flag fresh.
    /// `flags`: the display record's, when the caller has just made the record (a display
    /// event), so its residuals are not computed twice.
    func publishTiming(_ d: Display, flags: DisplayFlags? = nil) {
        guard d.pageSlot >= 0 else { return }
        d.pageFlags = (flags ?? info(d).flags).rawValue & 0xFFFF
        // Current only from the first vblank after events came on: until then `last_*` is
        // absent or from before an idle spell, and a reader would aim at a stale line.
        // Sparse sampling: between bursts the model's line is as good as a vblank's.
        writeRecord(d, current: d.isModelTimed || (source.isActive(d.key) && d.newestIsCurrent))
    }

    /// The tick path's write: a vblank just came, so events are on; the flags are the last full
    /// write's. No lookup, no lock, no allocation: one seqlocked store of the fields.
    func publishVBlank(_ d: Display) {
        guard d.pageSlot >= 0 else { return }
        writeRecord(d, current: true)
    }

    private func writeRecord(_ d: Display, current: Bool) {
        guard let page = timingPage else { return }
        var v = vsync_page_values()
        v.display_id = d.id
        v.generation = d.generation
        v.flags = d.pageFlags | (d.state == .on ? VSYNC_PAGE_ON : 0) | (current && d.state == .on ? VSYNC_PAGE_CURRENT : 0)
        if d.isVariable {  // the range while there is no grid; 0 on a fixed grid (§ 10)
            let range = d.variableTiming
            v.min_interval_ns = range.shortestNs
            v.max_interval_ns = range.longestNs
        }
        if let last = d.model.newest {
            v.last_sequence = last.sequence
            v.last_timestamp_ns = last.timestampNs
            if d.isVariable {
                // Variable refresh: no grid, so the line is the earliest the next vblanks can
                // be, as ticks say (the last vblank + k × the shortest interval).
                v.anchor_sequence = last.sequence
                v.anchor_ns = last.timestampNs
                v.period_ns = d.variableTiming.shortestNs
                v.period_frac = 0
            } else if d.model.sampleCount > 0 {
                // The line through the model's fit at the newest vblank: interrupt-stamped
                // displays put it before the late stamp, on the true grid.
                v.anchor_sequence = last.sequence
                v.anchor_ns = d.model.line.predictedTimestamp(forSequence: last.sequence)
                let period = VBlankTiming.split(periodNs: d.model.periodNs)
                v.period_ns = period.whole
                v.period_frac = period.fraction
            }
        }
        v.refresh_mhz = d.state == .on ? (d.source.refresh?.millihertz ?? 0) : 0
        v.updated_ns = monotonicNow()
        page.write(d.pageSlot, &v)
    }
}

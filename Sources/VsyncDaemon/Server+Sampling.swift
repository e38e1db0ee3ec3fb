import VsyncCore

// Sparse vblank sampling (`--vblank-sampling sparse`, `VBlankSampling`): once the model is
// confident, vblank events run only in short bursts; between them no request is queued on the
// CRTC, so the kernel can turn its interrupt off, and every subscription is ticked by the
// pacing timer at the model's predicted vblanks, with the sequence the kernel would give.
extension Display {
    /// Ticks come from the model: the display is followed and its vblank events sleep, or a
    /// burst has turned them on and the vblank it judges has not come yet.
    var isModelTimed: Bool {
        guard sampling.mode == .sparse, state == .on, !vblankRefused, model.sampleCount > 0, !holdsInterrupt else {
            return false
        }
        if sampling.isModelTimed { return true }
        return sampling.isSettling
    }

    /// What the sampling policy needs of the model after a vblank.
    var samplingReading: VBlankSampling.ModelReading {
        VBlankSampling.ModelReading(
            sampleCount: model.sampleCount, jitterNs: model.jitterNs,
            interruptStamped: model.timestampSource == .interrupt, variable: isVariable)
    }
}

extension Server {
    /// Before the model takes a vblank: a burst's first one after the enable is dropped (false:
    /// neither fed nor ticked); its next moves the grid onto itself if the phase moved while
    /// events slept (some drivers restart their vblank timer on enable), as does the first while
    /// sampling continuously after the requests ran out (`requeued`), so nothing is ticked
    /// or predicted on the old grid from it on. Not a model restart: no generation.
    func judgeSample(_ d: Display, sequence: UInt64, timestampNs: UInt64) -> Bool {
        guard d.model.sampleCount > 0 else { return true }
        let predicted = d.model.line.predictedTimestamp(forSequence: sequence)
        let wasContinuous = d.sampling.state == .continuous
        switch d.sampling.judge(timestampNs: timestampNs, predictedNs: predicted) {
        case .drop:
            source.limitQueue(d.key, to: d.sampling.queueDepth)  // before this read's re-arm
            return false
        case .reanchor(let delta):
            d.model.reanchor(byNs: delta)
            logger.debug("display \(d.id): phase moved \(delta) ns while the vblank interrupt was off; re-anchored")
        case .feed:
            if !wasContinuous, d.sampling.state == .continuous {
                let off = Int64(bitPattern: timestampNs &- predicted)
                logger.debug(
                    "display \(d.id): vblank \(sequence) \(off) ns off the re-anchored line; sampling continuously until confident")
            }
        }
        return true
    }

    /// After a vblank's ticks: once the model is confident and any burst is done, vblank events
    /// stop and the pacing timer takes the subscriptions on from the last vblank each was due.
    func sampled(_ d: Display, timestampNs: UInt64) {
        guard d.sampling.mode == .sparse else { return }
        let wasContinuous = d.sampling.state == .continuous
        let reading = d.samplingReading
        let stop = d.sampling.fed(at: timestampNs, reading: reading)
        if !wasContinuous, d.sampling.state == .continuous {
            logger.debug(
                "display \(d.id): model not confident (\(reading.sampleCount) samples, RMS \(Int(reading.jitterNs)) ns\(reading.interruptStamped ? ", interrupt stamps" : "")); sampling continuously"
            )
        }
        source.limitQueue(d.key, to: d.sampling.queueDepth)  // before this read's re-arm
        guard stop else { return }
        modelTakesOver(d)
        updateVBlank(d)
    }

    /// The pacing timer ticks the subscriptions from the model, from the last vblank each was due.
    private func modelTakesOver(_ d: Display) {
        for sub in d.subscriptions where sub.workDurationNs == 0 {
            sub.pacer = FramePacer()
            if let last = sub.lastDueSequence { sub.pacer.handedOut(last) }
        }
    }

    /// The display's vblank requests ran out while wanted and were queued afresh (a late read):
    /// its phase may have moved with the interrupt's restart. Sampling continuously (in either
    /// mode), the next vblank is checked; in a burst, the burst starts over with its whole
    /// queue, and the model ticks until its judged vblank, as at any burst's start.
    func requeued(_ d: Display) {
        // One interrupt stamp cannot tell a moved phase from its own latency.
        guard d.model.sampleCount > 0, d.model.timestampSource == .scanout else { return }
        logger.debug("display \(d.id): vblank requests ran out before they were read; checking the phase again")
        guard d.sampling.requeued() else { return }
        source.limitQueue(d.key, to: d.sampling.queueDepth)
        do throws(VBlankFailure) { try source.setActive(d.key, true, token: d.token) } catch {
            return handleFailure(d, error)
        }
        modelTakesOver(d)
        updatePacing(d)
    }

    /// A burst now, if events sleep: a new subscriber or a display event checks the model
    /// against real vblanks.
    func burstNow(_ d: Display) {
        if d.sampling.requestBurst() { updateVBlank(d) }
    }

    /// From the pacing timer: the burst due by now starts.
    func startBurstIfDue(_ d: Display, now: UInt64) {
        guard d.isFollowed, d.sampling.startBurstIfDue(nowNs: now) else { return }
        updateVBlank(d)
    }
}

import Dispatch
import Synchronization

// A run on a pool thread: the app's closure, or its task, run on that thread.
extension FrameWork {
    /// On a pool thread: runs the key's waiting run, if it still has one.
    func execute(_ key: Key) {
        guard let run = state.withLock({ $0.begin(key) }) else { return }
        let info = FrameWorkRun(
            targetSequence: run.targetSequence, targetTimestampNanoseconds: run.targetNs,
            commitDeadlineNanoseconds: run.commitDeadlineNs, check: { [weak self] in self?.isCancelled(run) ?? true })
        let result: Result<Output, any Error>
        if info.isCancelled {
            result = .failure(CancellationError())
        } else {
            switch run.work {
            case .sync(let work): result = Result { try work(info) }
            case .async(let work): result = Self.runTask(work, info, run)
            }
        }
        state.withLock { $0.finish(run, result, now: MonotonicClock.nanoseconds()) }
    }

    /// Runs async work in a task of its own whose code runs on this pool thread (the task
    /// prefers a ``ThreadExecutor`` this thread drains), so the pool bounds it as it bounds
    /// closures, and it never takes the core the pool leaves for the link.
    private static func runTask(_ work: @escaping AsyncWork, _ info: FrameWorkRun, _ run: Run) -> Result<Output, any Error> {
        let executor = ThreadExecutor()
        let outcome = Outcome<Output>()
        let task = Task(executorPreference: executor) {
            let result: Result<Output, any Error>
            do { result = .success(try await work(info)) } catch { result = .failure(error) }
            outcome.value.withLock { $0 = result }
            executor.finish()
        }
        run.attach(task)
        if info.isCancelled { task.cancel() }
        executor.run()
        return outcome.value.withLock { $0 } ?? .failure(CancellationError())
    }
}

/// A task executor drained by the thread that waits for the task: its jobs (the task's code
/// between suspensions, and its child tasks') run on that thread, one at a time, until
/// ``finish()``.
final class ThreadExecutor: TaskExecutor {
    private let jobs = Mutex<[UnownedJob]>([])
    private let done = Atomic<Bool>(false)
    /// One signal per job and one for the finish: every wake-up has a job or the end to find.
    private let wake = DispatchSemaphore(value: 0)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        wake.signal()
    }

    /// Called by the task's last job: the draining thread returns once the jobs before it ran.
    func finish() {
        done.store(true, ordering: .releasing)
        wake.signal()
    }

    /// Runs the jobs as they come, on the calling thread, until the task finished.
    func run() {
        while true {
            wake.wait()
            let job = jobs.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            if let job {
                job.runSynchronously(on: asUnownedTaskExecutor())
            } else if done.load(ordering: .acquiring) {
                return
            }
        }
    }
}

/// The result of async work, handed from its task to the pool thread that ran it.
final class Outcome<Output: Sendable>: Sendable {
    let value = Mutex<Result<Output, any Error>?>(nil)
}

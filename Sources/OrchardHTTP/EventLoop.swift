internal import CHTTPShims
internal import CLibevent
internal import CShims
import Foundation

/// Process-wide libevent setup, done once before the first `event_base` exists.
enum Libevent {
    static let setUp: Void = {
        // Locking and cross-thread wake-ups (event_active from another thread) need this before any
        // base is created. It fails only if pthreads themselves are unusable.
        guard evthread_use_pthreads() == 0 else { fatalError("libevent: evthread_use_pthreads failed") }
        // A peer closing its socket must not kill the process through a write.
        signal(SIGPIPE, SIG_IGN)
    }()
}

/// One `event_base` run by one dedicated thread: the unit of the server's threading model.
///
/// Everything that touches libevent or evhttp objects owned by this loop runs on its thread. Other
/// threads hand work over with ``execute(_:)``, which queues it and wakes the loop with `event_active`
/// on an internal event (libevent's pthread locking makes that safe from any thread). The loop is also a
/// Swift `TaskExecutor`: request handlers run as tasks that prefer it, so a handler that never suspends
/// runs and replies on the loop thread without a thread hop, and one that awaits other work (a blocking
/// pool, the HTTP client) resumes here, where its reply must be sent.
final class EventLoop: TaskExecutor, @unchecked Sendable {
    // Thread-safety: `queue`, `spare`, `wakePending` and `state` are guarded by `lock`; `base` and
    // everything it owns are used only on the loop thread (or before it starts / after it ended).
    private enum State { case created, running, stopped }
    private enum Work {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    let index: Int
    let base: OpaquePointer
    private var wake: OpaquePointer?
    private let lock = NSLock()
    private var queue: [Work] = []
    private var spare: [Work] = []
    private var wakePending = false
    private var state = State.created
    private var loopThread: pthread_t?
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    /// Set while the base is being freed: objects freed then must not touch their events.
    private(set) var isTearingDown = false
    /// Runs on the loop thread after the loop stopped, before the base is freed.
    var teardown: (() -> Void)?

    init(index: Int) throws(HTTPError) {
        _ = Libevent.setUp
        self.index = index
        // The epoll changelist folds the add/delete pairs evhttp makes within one loop turn (stop reading
        // while a request is handled, start writing the reply, ...) into one epoll_ctl or none.
        guard let config = event_config_new() else { throw HTTPError(.internalFailure, "event_config_new failed") }
        defer { event_config_free(config) }
        _ = event_config_set_flag(config, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        guard let base = event_base_new_with_config(config) else {
            throw HTTPError(.internalFailure, "event_base_new failed")
        }
        self.base = base
        // Two priorities: 0 for the loop's own work (replies of finished handlers) and the connections that carry
        // payments, 1 (libevent's default, the middle) for everything else, accepts included. Active events of
        // priority 0 run before any of priority 1, so under load payments are read and answered first.
        _ = event_base_priority_init(base, 2)
        guard
            let wake = event_new(
                base, -1, 0,
                { _, _, context in Unmanaged<EventLoop>.fromOpaque(context!).takeUnretainedValue().runQueued() },
                Unmanaged.passUnretained(self).toOpaque())
        else {
            event_base_free(base)
            throw HTTPError(.internalFailure, "event_new failed")
        }
        _ = event_priority_set(wake, Self.urgentPriority)
        self.wake = wake
    }

    /// The priority of the loop's own work and of connections that carry payments (``RouteClass/payment``).
    static let urgentPriority: Int32 = 0
    /// Every other event's priority.
    static let normalPriority: Int32 = 1

    deinit {
        // Normally freed by the loop thread; this covers a loop that was never started.
        if let wake { event_free(wake) }
        if state == .created { event_base_free(base) }
    }

    /// Starts the loop thread (pinned to `cpu` if given) and returns once it runs.
    func start(name: String, cpu: Int? = nil) {
        lock.withLock { state = .running }
        let thread = Thread { [self] in
            orchard_name_current_thread(name)
            if let cpu { _ = orchard_pin_current_thread(Int32(cpu)) }
            run()
        }
        thread.start()
        started.wait()
    }

    /// Whether the caller is this loop's thread.
    var inLoopThread: Bool {
        guard let loopThread else { return false }
        return pthread_equal(loopThread, pthread_self()) != 0
    }

    /// Runs `work` on the loop thread, after the work queued before it. Dropped once the loop stopped.
    func execute(_ work: @escaping @Sendable () -> Void) {
        lock.withLock {
            guard state != .stopped else { return }
            queue.append(.closure(work))
            wakeLocked()
        }
    }

    /// `TaskExecutor`: runs a task's job on the loop thread. After the loop stopped, jobs move to the
    /// global executor so the tasks still finish (their replies are then dropped).
    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let accepted = lock.withLock { () -> Bool in
            guard state != .stopped else { return false }
            queue.append(.job(unowned))
            wakeLocked()
            return true
        }
        if !accepted { globalConcurrentExecutor.enqueue(ExecutorJob(unowned)) }
    }

    /// Asks the loop to stop after the work already queued; `teardown` then runs on the loop thread.
    func stop() {
        execute { [self] in event_base_loopbreak(base) }
    }

    /// Waits (blocking) until the loop thread finished its teardown. Never call it on a loop thread.
    func join() { finished.wait() }

    // MARK: - Loop thread

    private func wakeLocked() {
        // Called with `lock` held, so the event cannot be freed meanwhile (teardown takes the lock).
        if !wakePending, let wake {
            wakePending = true
            event_active(wake, EV_READ, 0)
        }
    }

    private func run() {
        loopThread = pthread_self()
        started.signal()
        event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY)

        let leftover = lock.withLock { () -> [Work] in
            state = .stopped
            defer { queue.removeAll() }
            return queue
        }
        for work in leftover {
            switch work {
            case .job(let job): globalConcurrentExecutor.enqueue(ExecutorJob(job))
            case .closure(let closure): closure()
            }
        }
        teardown?()
        teardown = nil
        if let wake {
            event_free(wake)
            self.wake = nil
        }
        // Let bufferevents freed by the teardown finish (libevent finalizes some of them in the loop).
        for _ in 0..<4 { event_base_loop(base, EVLOOP_NONBLOCK) }
        isTearingDown = true
        event_base_free(base)
        finished.signal()
    }

    private func runQueued() {
        lock.withLock {
            swap(&queue, &spare)
            wakePending = false
        }
        for work in spare {
            switch work {
            case .job(let job): job.runSynchronously(on: asUnownedTaskExecutor())
            case .closure(let closure): closure()
            }
        }
        spare.removeAll(keepingCapacity: true)
    }
}

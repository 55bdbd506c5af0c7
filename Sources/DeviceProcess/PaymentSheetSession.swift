import AppPayments
import DeviceControlAPI
import Foundation
import PayClient

/// One presented payment sheet in the device process: the meeting point of the sheet's state machine
/// (``DevicePaymentSheet`` on a task of its own), the app (long-polling its events, posting its answers) and the
/// user (posting actions through the control API).
///
/// The state machine asks for one thing at a time: either the user's next action or the app's answer to one event.
/// An app's event stays pending until answered (a repeated poll sees the same event and sequence number); a user's
/// action is answered once the state machine has applied it (its result and the sheet as it then shows).
actor PaymentSheetSession {
    let id: String
    let applicationIdentifier: String
    /// Approved by `--auto-auth`: the control API cannot act on it.
    let automatic: Bool

    /// How a user's action went, with the sheet as it shows afterwards.
    struct Reply: Sendable {
        let result: PaymentSheetActionResult
        let sheet: PaymentSheetView?
    }

    /// Why the sheet ended.
    enum Ending: Sendable {
        case completed(PaymentAuthorizationResult)
        case cancelled(timedOut: Bool)
        case failed(any Error)
    }

    private var sheet: PaymentSheetView?
    private var waitingFor = "device"
    private(set) var ending: Ending?
    private var cancelRequested = false
    private var timedOut = false

    // The user's side.
    private var machineWaiter: CheckedContinuation<PaymentSheetAction, Never>?
    /// An action posted while the state machine was busy (asking the app about the proposed card).
    private var queued: (action: PaymentSheetAction, poster: CheckedContinuation<Reply, Never>)?
    /// The poster of the action the state machine is applying.
    private var inFlight: CheckedContinuation<Reply, Never>?
    /// Posters of a cancellation, answered when the sheet ended.
    private var cancelPosters: [CheckedContinuation<Reply, Never>] = []

    // The app's side.
    private var sequence = 0
    private var pending: PaymentSheetAppEvent?
    private var answerWaiter: CheckedContinuation<AnswerPaymentSheetEvent.Body?, Never>?
    private var eventWaiters: [Int: CheckedContinuation<PaymentSheetAppEvent?, Never>] = [:]
    private var nextWaiter = 0

    private var shown = false
    private var shownWaiters: [CheckedContinuation<Void, Never>] = []

    init(id: String, applicationIdentifier: String, automatic: Bool) {
        self.id = id
        self.applicationIdentifier = applicationIdentifier
        self.automatic = automatic
    }

    // MARK: The state machine's side

    /// Records what the sheet shows (the state machine is applying an action or asking the app).
    func show(_ view: PaymentSheetView) {
        sheet = view
        markShown()
    }

    /// The user's next action: a queued one, or the next to arrive; `.cancel` once cancelled or timed out. Answers
    /// the previous action's poster with `result`.
    func nextAction(_ view: PaymentSheetView, after result: PaymentSheetActionResult?) async -> PaymentSheetAction {
        sheet = view
        waitingFor = "user"
        markShown()
        if let result, let poster = inFlight {
            inFlight = nil
            poster.resume(returning: Reply(result: result, sheet: currentSheet))
        }
        if cancelRequested { return .cancel }
        if let (action, poster) = queued {
            queued = nil
            inFlight = poster
            waitingFor = "device"
            return action
        }
        return await withCheckedContinuation { machineWaiter = $0 }
    }

    /// Publishes an event for the app and waits for its answer; nil when the sheet was cancelled or timed out (or,
    /// for the authorization, when the app did not answer within `answerTimeout`).
    func appEvent(_ event: PaymentSheetAppEvent, answerTimeout: Duration) async -> AnswerPaymentSheetEvent.Body? {
        let authorization = event.kind == .paymentAuthorized
        if cancelRequested && !authorization { return nil }
        sequence += 1
        var event = event
        event.sequence = sequence
        pending = event
        waitingFor = "app"
        markShown()
        for (_, waiter) in eventWaiters { waiter.resume(returning: event) }
        eventWaiters = [:]
        if authorization {
            let number = sequence
            Task { [weak self] in
                try? await Task.sleep(for: answerTimeout)
                await self?.abandonAnswer(number)
            }
        }
        let answer = await withCheckedContinuation { answerWaiter = $0 }
        waitingFor = "device"
        return answer
    }

    /// The state machine returned or threw: the end for the app, the user's pending action and every waiter.
    func finish(_ ending: Ending) {
        guard self.ending == nil else { return }
        if case .cancelled = ending, timedOut {
            self.ending = .cancelled(timedOut: true)
        } else if case .completed = ending, timedOut {
            // The app's verdict never came in time (WebKit's 30-second rule for `onpaymentauthorized`): the sheet
            // ends with an error, not as a completed payment, though the app holds the token (TN3174).
            self.ending = .failed(
                PaymentSheetError(.timedOut, "the app did not complete the payment in time"))
        } else {
            self.ending = ending
        }
        waitingFor = "nobody"
        pending = nil
        let end = endEvent()
        for (_, waiter) in eventWaiters { waiter.resume(returning: end) }
        eventWaiters = [:]
        let result: PaymentSheetActionResult
        if case .failed(let error) = ending { result = .refused(error) } else { result = .accepted }
        let reply = Reply(result: result, sheet: currentSheet)
        for poster in [inFlight, queued?.poster].compactMap({ $0 }) + cancelPosters { poster.resume(returning: reply) }
        inFlight = nil
        queued = nil
        cancelPosters = []
        machineWaiter?.resume(returning: .cancel)
        machineWaiter = nil
        answerWaiter?.resume(returning: nil)
        answerWaiter = nil
        markShown()
    }

    // MARK: The user's side

    /// Hands `action` to the state machine and waits until it was applied. Nil with a refusal when the sheet
    /// ended, is automatic, or is still applying another action.
    func submit(_ action: PaymentSheetAction) async -> Result<Reply, PaymentSheetError> {
        guard ending == nil else {
            return .failure(PaymentSheetError(.invalidAction, "the payment sheet has ended"))
        }
        guard !automatic else {
            return .failure(
                PaymentSheetError(.invalidAction, "the device process approves this sheet itself (--auto-auth)"))
        }
        if case .cancel = action {
            // Whatever the sheet is doing: it ends as soon as it next waits for someone.
            cancel()
            return .success(await withCheckedContinuation { cancelPosters.append($0) })
        }
        guard inFlight == nil, queued == nil else {
            return .failure(PaymentSheetError(.invalidAction, "the sheet is still applying the previous action"))
        }
        let reply = await withCheckedContinuation { (continuation: CheckedContinuation<Reply, Never>) in
            if let waiter = machineWaiter {
                machineWaiter = nil
                inFlight = continuation
                waitingFor = "device"
                waiter.resume(returning: action)
            } else {
                queued = (action, continuation)
            }
        }
        return .success(reply)
    }

    /// The requester ended the payment (a Mac's page, for a Handoff sheet): the sheet is cancelled wherever it waits,
    /// an automatic one too; its delegate refuses a verdict still awaited.
    func dismiss() {
        guard ending == nil else { return }
        cancel()
    }

    /// The sheet was not completed in time: cancelled wherever it waits (except for the app's verdict on a payment
    /// already authorized).
    func expire() {
        guard ending == nil else { return }
        timedOut = true
        cancel()
    }

    /// The page did not complete event `number` within the handler timeout (WebKit's 30-second rule): the sheet
    /// ends as timed out, and the event's answer, even an authorization's verdict, is no longer awaited. False when
    /// that event was answered in time.
    func handlerTimedOut(_ number: Int) -> Bool {
        guard ending == nil, let pending, pending.sequence == number else { return false }
        timedOut = true
        cancelRequested = true
        machineWaiter?.resume(returning: .cancel)
        machineWaiter = nil
        self.pending = nil
        answerWaiter?.resume(returning: nil)
        answerWaiter = nil
        return true
    }

    /// Ends the wait for the user, and for the app's answer to a selection (an app that is slow to answer does not
    /// hold up a cancellation); the app's verdict on an authorized payment is still awaited.
    private func cancel() {
        cancelRequested = true
        machineWaiter?.resume(returning: .cancel)
        machineWaiter = nil
        if pending?.kind != .paymentAuthorized {
            answerWaiter?.resume(returning: nil)
            answerWaiter = nil
            pending = nil
        }
    }

    /// What the sheet shows now, with who it waits for.
    var currentSheet: PaymentSheetView? {
        guard var view = sheet else { return nil }
        view.waitingFor = waitingFor
        switch ending {
        case nil: view.status = "presented"
        case .completed: view.status = "completed"
        case .cancelled: view.status = "cancelled"
        case .failed(let error):
            view.status = "failed"
            view.failure = PaymentSheetService.describe(error).message
        }
        return view
    }

    // MARK: The app's side

    /// The event waiting for the app's answer, the end, or, after `wait` without either, a `none` event.
    func nextEvent(wait: Duration) async -> PaymentSheetAppEvent {
        if let pending { return pending }
        if ending != nil { return endEvent() }
        let number = nextWaiter
        nextWaiter += 1
        Task { [weak self] in
            try? await Task.sleep(for: wait)
            await self?.endWait(number)
        }
        let event = await withCheckedContinuation { eventWaiters[number] = $0 }
        return event ?? PaymentSheetAppEvent(sheet: id, kind: .none)
    }

    /// The app's answer to event `answer.sequence`; false if that event does not wait for an answer (any more).
    func answer(_ answer: AnswerPaymentSheetEvent.Body) -> Result<Void, PaymentSheetError> {
        guard let pending, pending.sequence == answer.sequence, let waiter = answerWaiter else {
            return .failure(
                PaymentSheetError(.invalidAction, "event \(answer.sequence) does not wait for an answer"))
        }
        let authorization = pending.kind == .paymentAuthorized
        guard authorization ? answer.result?.value != nil : answer.update != nil else {
            return .failure(
                PaymentSheetError(
                    .invalidRequest,
                    authorization
                        ? "the answer to an authorization is a result (status success or failure)"
                        : "the answer to a selection is an update"))
        }
        self.pending = nil
        answerWaiter = nil
        waiter.resume(returning: answer)
        return .success(())
    }

    /// Resolves once the sheet is shown (it waits for the app or the user) or ended.
    func waitShown() async {
        if shown { return }
        await withCheckedContinuation { shownWaiters.append($0) }
    }

    // MARK: Helpers

    private func markShown() {
        guard !shown else { return }
        shown = true
        for waiter in shownWaiters { waiter.resume() }
        shownWaiters = []
    }

    private func endWait(_ number: Int) {
        eventWaiters.removeValue(forKey: number)?.resume(returning: nil)
    }

    private func abandonAnswer(_ number: Int) {
        guard let pending, pending.sequence == number, let waiter = answerWaiter else { return }
        self.pending = nil
        answerWaiter = nil
        waiter.resume(returning: nil)
    }

    private func endEvent() -> PaymentSheetAppEvent {
        var event = PaymentSheetAppEvent(sheet: id, kind: .ended)
        switch ending {
        case .completed(let result):
            event.outcome = "completed"
            event.result = PaymentSheetVerdict(result)
        case .cancelled(let timedOut):
            event.outcome = "cancelled"
            if timedOut {
                event.error = DeviceControlErrorBody.Detail(
                    code: PaymentSheetError.Code.timedOut.rawValue, message: "the sheet was not completed in time")
            }
        case .failed(let error):
            event.outcome = "failed"
            let described = PaymentSheetService.describe(error)
            event.error = DeviceControlErrorBody.Detail(code: described.code, message: described.message)
        case nil:
            break
        }
        return event
    }
}

public import AppPayments
public import DeviceControlAPI
import Foundation

/// The payment sheet of a running device process, as an app on that device reaches it: over the device's control
/// socket (mode 0600, the analogue of PassKit's XPC to the wallet). The sheet, the wallet, the Secure Element and
/// the Pay server stay in the device process; the app sees the events of ``PaymentAuthorizationControllerDelegate``
/// (the shipping contact redacted) and answers them.
///
/// ``present(_:applicationIdentifier:delegate:)`` presents the request (`POST /payment-sheets`), long-polls the
/// sheet's events (at most ``pollSeconds`` per poll) and posts each answer, until the sheet ends. The sheet's
/// refusals come back as ``PaymentSheetError`` with the device's code (`notEntitled`, `noEligibleCard`,
/// `sheetPresented` when another sheet is up, ...).
public final class ControlSocketSheetHost: PaymentSheetHost {
    public let socketPath: String
    public let pollSeconds: Int
    private let deviceName: String?
    private let trace: @Sendable (String) -> Void

    /// - Parameters:
    ///   - socketPath: the device process's control socket.
    ///   - deviceName: the device's name, for the trace's hint to the user.
    public init(
        socketPath: String, deviceName: String? = nil, pollSeconds: Int = 20,
        trace: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.socketPath = socketPath
        self.deviceName = deviceName
        self.pollSeconds = min(max(pollSeconds, 1), PaymentSheetService.maximumPollSeconds)
        self.trace = trace
    }

    public func canMakePayments() async -> Bool {
        await capability(CanMakePayments())
    }

    public func canMakePayments(
        usingNetworks networks: [PaymentNetwork], capabilities: MerchantCapabilities
    ) async -> Bool {
        await capability(
            CanMakePayments(
                networks: networks.map(\.rawValue), capabilities: MerchantCapabilities.names(of: capabilities)))
    }

    private func capability(_ query: CanMakePayments) async -> Bool {
        (try? await call(query))?.canMakePayments ?? false
    }

    public func present(
        _ request: PaymentRequest, applicationIdentifier: String, delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome {
        try await present(
            PaymentSheetRequestBody(request), request: request, applicationIdentifier: applicationIdentifier,
            delegate: delegate)
    }

    /// Presents a request written as the control socket's body, for what a ``PaymentRequest`` does not say: a
    /// recurring, automatic reload or deferred payment request (PassKit's, ``PaymentSheetRequestBody``'s
    /// `recurringPaymentRequest`, `automaticReloadPaymentRequest`, `deferredPaymentRequest`). A malformed body is
    /// `invalidRequest` before anything is sent.
    public func present(
        _ body: PaymentSheetRequestBody, applicationIdentifier: String,
        delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome {
        let request = try body.paymentRequest().get()
        return try await present(
            body, request: request, applicationIdentifier: applicationIdentifier, delegate: delegate)
    }

    private func present(
        _ body: PaymentSheetRequestBody, request: PaymentRequest, applicationIdentifier: String,
        delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome {
        let presented = try await call(PresentPaymentSheet(applicationIdentifier: applicationIdentifier, request: body))
        trace(
            presented.automatic
                ? "sheet \(presented.id) presented on the device process, which approves it itself (--auto-auth)"
                : "sheet \(presented.id) presented: it waits for the user on the device's control API "
                    + "(orchard device sheet show|choose-card|contact|shipping|authenticate|cancel"
                    + (deviceName.map { " --name \($0))" } ?? ")"))
        var current = request
        var verdict: PaymentAuthorizationResult?
        while true {
            let event = try await call(
                NextPaymentSheetEvent(sheet: presented.id, wait: pollSeconds), timeoutSeconds: pollSeconds + 15)
            var answer = AnswerPaymentSheetEvent.Body(sequence: event.sequence ?? 0)
            switch event.kind {
            case .none:
                continue
            case .paymentMethodSelected:
                guard let method = event.paymentMethod else { throw Self.malformed("a payment method event") }
                answer.update = .init(apply(await delegate.didSelectPaymentMethod(method, request: current), &current))
            case .shippingContactSelected:
                guard let contact = event.shippingContact else { throw Self.malformed("a shipping contact event") }
                answer.update = .init(
                    apply(await delegate.didSelectShippingContact(contact, request: current), &current))
            case .shippingMethodSelected:
                guard let method = event.shippingMethod else { throw Self.malformed("a shipping method event") }
                answer.update = .init(
                    apply(await delegate.didSelectShippingMethod(method, request: current), &current))
            case .couponCodeChanged:
                guard let code = event.couponCode else { throw Self.malformed("a coupon code event") }
                answer.update = .init(apply(await delegate.didChangeCouponCode(code, request: current), &current))
            case .paymentAuthorized:
                guard let payment = event.payment?.value else { throw Self.malformed("an authorization event") }
                let result = await delegate.didAuthorizePayment(payment)
                verdict = result
                answer.result = .init(result)
            case .ended:
                switch event.outcome {
                case "completed":
                    guard let result = event.result?.value ?? verdict else {
                        throw Self.malformed("a completed sheet without the app's verdict")
                    }
                    return .completed(result)
                case "cancelled":
                    return .cancelled
                default:
                    throw PaymentSheetError(
                        PaymentSheetError.Code(event.error?.code ?? "failed"),
                        event.error?.message ?? "the payment sheet failed")
                }
            }
            // A sheet cancelled meanwhile refuses the answer (409): its end is the next event.
            _ = try? await call(AnswerPaymentSheetEvent(sheet: presented.id, answer))
        }
    }

    /// The app's own copy of its request follows its updates (the device shows the same).
    private func apply(_ update: PaymentRequestUpdate, _ request: inout PaymentRequest) -> PaymentRequestUpdate {
        request.paymentSummaryItems = update.paymentSummaryItems
        if let methods = update.shippingMethods { request.shippingMethods = methods }
        return update
    }

    private static func malformed(_ what: String) -> PaymentSheetError {
        PaymentSheetError(.deviceUnreachable, "the device process sent \(what) outside the protocol")
    }

    /// One request on the control socket (on a thread of its own); a refusal becomes the device's
    /// ``PaymentSheetError``.
    private func call<Request: DeviceControlRequest>(
        _ request: Request, timeoutSeconds: Int = 30
    ) async throws(PaymentSheetError) -> Request.Answer {
        switch await ControlSocketClient.send(request, to: socketPath, timeoutSeconds: timeoutSeconds) {
        case .success(let answer):
            return answer
        case .failure(let error):
            guard let refusal = error.refusal else {
                throw error.code == .protocolError
                    ? Self.malformed("an answer to \(request.route.method) \(request.route.path)")
                    : PaymentSheetError(.deviceUnreachable, error.message)
            }
            throw PaymentSheetError(PaymentSheetError.Code(refusal.code), refusal.message)
        }
    }
}

import Foundation

/// Headless Chromium driven over its DevTools pipe (``DevToolsPipe``): the few operations `orchard demo` uses, as
/// ``WebDriver`` offers them on chromedriver, but with no chromedriver and so no TCP port another user of the machine
/// could drive the browser through.
///
/// Each page (a window) is a DevTools target; the browser attaches to one at a time (`Target.attachToTarget` with
/// `flatten`) and sends that page's commands with its session identifier. Clicks are mouse events at the element's
/// centre (`Input.dispatchMouseEvent`), so the page gets the user activation a real click gives (`window.open` needs
/// it); typing inserts text into the focused element (`Input.insertText`), which fires its `input` event.
public final class DevToolsBrowser: ScriptedBrowser, @unchecked Sendable {
    // @unchecked: `current` and `sessions` are guarded by `lock`; `pipe` is set once.
    private let pipe: DevToolsPipe
    private let lock = NSLock()
    private var current: String?
    private var sessions: [String: String] = [:]

    /// The browser on `pipe` (Chromium started with it, ``DevToolsPipe/browserStarted()`` called), attached to its
    /// first page once it has one (up to 10 s).
    /// - Throws: ``WebDriverError`` when the browser shows no page or refuses to attach to it.
    public init(pipe: DevToolsPipe) async throws {
        self.pipe = pipe
        for _ in 0..<100 {
            if let page = try await windowHandles.first {
                try await switchTo(page)
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw WebDriverError(.noSession, "Chromium shows no page on its DevTools pipe")
    }

    /// The page targets' identifiers (`Target.getTargets`): the window handles.
    public var windowHandles: [String] {
        get async throws {
            let result = try await pipe.send("Target.getTargets")
            let targets = result["targetInfos"] as? [[String: Any]] ?? []
            return targets.filter { $0["type"] as? String == "page" }.compactMap { $0["targetId"] as? String }
        }
    }

    /// The current page's identifier.
    public var currentWindow: String {
        get async throws {
            guard let page = lock.withLock({ current }) else {
                throw WebDriverError(.command, "no current page (it was closed)")
            }
            return page
        }
    }

    /// Makes the page `handle` current, attaching to it the first time.
    public func switchTo(_ handle: String) async throws {
        if lock.withLock({ sessions[handle] }) == nil {
            let result = try await pipe.send("Target.attachToTarget", ["targetId": handle, "flatten": true])
            guard let session = result["sessionId"] as? String else {
                throw WebDriverError(.command, "DevTools: Target.attachToTarget answered no sessionId")
            }
            lock.withLock { sessions[handle] = session }
        }
        _ = try await pipe.send("Target.activateTarget", ["targetId": handle])
        lock.withLock { current = handle }
    }

    /// Closes the current page (`Target.closeTarget`); another must be made current before the next page command.
    public func closeWindow() async throws {
        let page = try await currentWindow
        _ = try await pipe.send("Target.closeTarget", ["targetId": page])
        lock.withLock {
            sessions[page] = nil
            current = nil
        }
    }

    /// Opens `url` in the current page and waits (up to 30 s) until its new document has loaded.
    public func navigate(_ url: String) async throws {
        // The old document is marked, so that its own load state is not taken for the new one's.
        _ = try? await evaluate("document.orchardLeaving = true;")  // try?: a page with no document yet
        let result = try await page("Page.navigate", ["url": url])
        if let error = result["errorText"] as? String, !error.isEmpty {
            throw WebDriverError(.command, "navigating to \(url): \(error)")
        }
        try await wait(
            url, seconds: 30, until: "return !document.orchardLeaving && document.readyState === 'complete';")
    }

    /// Runs `script` (a function body, as WebDriver's) in the current page; its return value as JSON text ("null"
    /// for none).
    public func evaluate(_ script: String) async throws -> String {
        let result = try await page(
            "Runtime.evaluate",
            ["expression": "JSON.stringify((function () { \(script) })())", "returnByValue": true])
        if let exception = result["exceptionDetails"] as? [String: Any] {
            let thrown = (exception["exception"] as? [String: Any])?["description"] as? String
            throw WebDriverError(.command, "the script threw: \(thrown ?? exception["text"] as? String ?? "?")")
        }
        return (result["result"] as? [String: Any])?["value"] as? String ?? "null"
    }

    /// Clicks the element matching `css` with the mouse, at its centre once scrolled into view, when it is enabled and
    /// nothing covers it there (waiting up to `seconds` for that, as a user waits for a control the page disabled
    /// while it works).
    public func click(_ css: String, seconds: Double = 10) async throws {
        let selector = try Self.literal(css)
        let script = """
            const element = document.querySelector(\(selector));
            if (!element) return 'missing';
            if (element.disabled) return 'disabled';
            element.scrollIntoView({ block: 'center', inline: 'center' });
            const box = element.getBoundingClientRect();
            const x = box.left + box.width / 2, y = box.top + box.height / 2;
            const hit = document.elementFromPoint(x, y);
            if (!hit || !(hit === element || element.contains(hit))) return 'covered';
            return [x, y];
            """
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var state = "missing"
        while true {
            let answer = try await evaluate(script)
            if let point = try? JSONDecoder().decode([Double].self, from: Data(answer.utf8)), point.count == 2 {
                for type in ["mouseMoved", "mousePressed", "mouseReleased"] {
                    var event: [String: Any] = ["type": type, "x": point[0], "y": point[1]]
                    if type != "mouseMoved" {
                        event["button"] = "left"
                        event["clickCount"] = 1
                    }
                    _ = try await page("Input.dispatchMouseEvent", event)
                }
                return
            }
            state = (try? JSONDecoder().decode(String.self, from: Data(answer.utf8))) ?? answer
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw WebDriverError(.timeout, "\(css) could not be clicked for \(seconds) s: \(state)")
    }

    /// Types `text` into the element matching `css` (waiting up to 10 s for it): focused, its value selected, then
    /// replaced by the text as typing does (an `input` event).
    public func type(_ css: String, _ text: String) async throws {
        let selector = try Self.literal(css)
        try await wait(
            css, seconds: 10,
            until: """
                const element = document.querySelector(\(selector));
                if (!element) return false;
                element.focus();
                if (element.select) element.select();
                return document.activeElement === element;
                """)
        _ = try await page("Input.insertText", ["text": text])
    }

    /// Ends the browser (`Browser.close`) and closes the pipe.
    public func quit() async {
        _ = try? await pipe.send("Browser.close", timeout: .seconds(5))  // try?: the browser may be gone already
        pipe.close()
    }

    /// Sends `method` to the current page.
    private func page(_ method: String, _ parameters: [String: Any]) async throws -> [String: Any] {
        let page = try await currentWindow
        guard let session = lock.withLock({ sessions[page] }) else {
            throw WebDriverError(.command, "not attached to page \(page)")
        }
        return try await pipe.send(method, parameters, session: session)
    }

    /// `text` as a JavaScript string literal.
    private static func literal(_ text: String) throws -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: [text]),
            let array = String(data: data, encoding: .utf8)
        else { throw WebDriverError(.command, "cannot quote \(text)") }
        return String(array.dropFirst().dropLast())
    }
}

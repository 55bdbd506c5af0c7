import Foundation

/// A browser driven by script, as the purchase flows use one: ``WebDriver`` (on chromedriver, the browser tests) and
/// ``DevToolsBrowser`` (over Chromium's DevTools pipe, `orchard demo`). What is built from these three operations is
/// written once, here.
public protocol ScriptedBrowser: Sendable {
    /// Runs `script` (a function body, as WebDriver's) in the current page; its return value as JSON text.
    func evaluate(_ script: String) async throws -> String
    /// The pages' (windows') handles.
    var windowHandles: [String] { get async throws }
    /// Makes the page `handle` current.
    func switchTo(_ handle: String) async throws
}

extension ScriptedBrowser {
    /// Runs `script`, which returns a string.
    public func string(_ script: String) async throws -> String {
        let json = try await evaluate(script)
        return (try? JSONDecoder().decode(String.self, from: Data(json.utf8))) ?? json
    }

    /// Waits (up to `seconds`) until `script` returns true; a page between two documents answers nothing yet and is
    /// asked again.
    public func wait(_ what: String, seconds: Double = 20, until script: String) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if (try? await evaluate(script)) == "true" { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        let page = (try? await string("return location.href + ' | ' + document.body.innerText.slice(0, 600);")) ?? "?"
        throw WebDriverError(.timeout, "timed out waiting for \(what); the page: \(page)")
    }

    /// Waits for a page other than `known` and makes it current.
    public func switchToNewWindow(besides known: [String]) async throws -> String {
        for _ in 0..<100 {
            if let handle = try await windowHandles.first(where: { !known.contains($0) }) {
                try await switchTo(handle)
                return handle
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw WebDriverError(.timeout, "no new window opened")
    }
}

import Testing

@testable import OrchardBenchmarks

@Suite("HTTP benchmark")
struct HTTPBenchmarkTests {
    @Test func readsWrkReports() throws {
        let report = """
            Running 8s test @ https://127.0.0.1:41303/pay
              1 threads and 64 connections
              Thread Stats   Avg      Stdev     Max   +/- Stdev
                Latency     3.32ms    1.10ms  30.12ms   90.12%
                Req/Sec    19.31k     1.02k   20.90k    80.00%
              Latency Distribution
                 50%    3.12ms
                 75%    3.50ms
                 90%    4.01ms
                 99%  850.00us
              153712 requests in 8.00s, 32.10MB read
              Socket errors: connect 0, read 2, write 1, timeout 0
              Non-2xx or 3xx responses: 4
            Requests/sec:  19213.91
            Transfer/sec:      4.01MB
            """
        let result = try WrkOutput.parse(
            report, seconds: 8, connections: 64, serverCPUMicroseconds: 7_686_000, command: "wrk")
        #expect(result.requestsPerSecond == 19213.91)
        #expect(result.p50Milliseconds == 3.12)
        #expect(result.p99Milliseconds == 0.85)
        #expect(result.requests == 153_712)
        #expect(result.errors == 7)
        #expect(result.serverCPUMicrosecondsPerRequest == 50.0)
        #expect(throws: BenchmarkError.self) {
            try WrkOutput.parse(
                "wrk: unable to connect", seconds: 1, connections: 1, serverCPUMicroseconds: 0, command: "")
        }
    }
}

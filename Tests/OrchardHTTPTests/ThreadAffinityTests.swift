import Foundation
import OrchardHTTP
import Testing

@Suite("Thread affinity")
struct ThreadAffinityTests {
    @Test("A server runs a loop per CPU the process may use: the machine's count, or fewer when it is restricted")
    func loopsFollowTheAffinity() {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        #expect(ThreadAffinity.usableCPUCount == cores)
        #expect(HTTPServerConfiguration(listeners: []).threads == cores)
        // Threads started from a restricted thread inherit its CPUs, as a process started with `taskset` does.
        let (usable, loops) = ThreadAffinity.withThreads(on: [0]) {
            (ThreadAffinity.usableCPUCount, HTTPServerConfiguration(listeners: []).threads)
        }
        #expect(usable == 1 && loops == 1)
        #expect(ThreadAffinity.usableCPUCount == cores, "the thread has its CPUs back")
    }
}

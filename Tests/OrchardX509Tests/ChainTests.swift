import Dispatch
import Foundation
import OrchardCrypto
import OrchardX509
import Testing

@Suite("Certificate chains")
struct ChainTests {
    @Test func appleChainsVerifyAtSigningTimeAndNotToday() throws {
        let verifier = try CertificateChainVerifier(
            trustRoots: [AppleToken.appleRoot()], policy: .applePaymentTokenSigning)
        for name in AppleToken.names {
            let token = try AppleToken.load(name)
            let certificates = try CMSSignedData(berEncoded: token.signature).certificates
            let atSigning = verifier.verify(
                leaf: certificates[0], intermediates: [certificates[1]], at: token.signingTime)
            guard case .valid(let chain) = atSigning else {
                Issue.record("\(name): \(String(describing: atSigning.failure))")
                continue
            }
            #expect(chain.certificates.count == 3)
            #expect(chain.leaf == certificates[0])
            #expect(chain.certificates[1] == certificates[1])
            #expect(chain.root == (try AppleToken.appleRoot()))
            #expect(chain.validityInterval.contains(token.signingTime))
            // Every Apple signing leaf in the fixtures has expired by now.
            let today = verifier.verify(
                leaf: certificates[0], intermediates: [certificates[1]], at: SystemClock().now())
            #expect(today.failure?.code == .certificateExpired, "\(name)")
        }
    }

    @Test func testPKIChainAndItsFailures() throws {
        let pki = try TestPKI()
        let verifier = try CertificateChainVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning)
        let result = verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: TestPKI.inside)
        guard case .valid(let chain) = result else {
            Issue.record("\(String(describing: result.failure))")
            return
        }
        #expect(chain.certificates == [pki.leaf, pki.intermediate, pki.root])
        #expect(chain.validityInterval == TestPKI.leafStart...TestPKI.leafEnd)

        #expect(
            verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: TestPKI.leafEnd + 1).failure?.code
                == .certificateExpired)
        #expect(
            verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: TestPKI.leafStart - 1).failure?.code
                == .certificateNotYetValid)
        #expect(verifier.verify(leaf: pki.leaf, at: TestPKI.inside).failure?.code == .untrustedChain)

        // Times far outside any certificate's validity are rejected, not trapped on.
        for extreme in [Date.distantFuture, Date(timeIntervalSince1970: 1e300), Date(timeIntervalSince1970: .infinity)]
        {
            #expect(
                verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: extreme).failure?.code
                    == .certificateExpired)
        }
        #expect(
            verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: .distantPast).failure?.code
                == .certificateNotYetValid)

        // A chain to another root.
        let other = try TestPKI(name: "Other")
        #expect(
            verifier.verify(leaf: other.leaf, intermediates: [other.intermediate], at: TestPKI.inside).failure?.code
                == .untrustedChain)
        // The same names and keys layout, but the intermediate from another PKI: signatures do not match.
        #expect(!verifier.verify(leaf: pki.leaf, intermediates: [other.intermediate], at: TestPKI.inside).isValid)

        // Apple's markers are required by the policy, not by OpenSSL.
        let unmarked = try TestPKI(name: "Unmarked", leafMarker: false)
        let strict = try CertificateChainVerifier(trustRoots: [unmarked.root], policy: .applePaymentTokenSigning)
        #expect(
            strict.verify(leaf: unmarked.leaf, intermediates: [unmarked.intermediate], at: TestPKI.inside).failure?.code
                == .policyViolation)
        let lax = try CertificateChainVerifier(trustRoots: [unmarked.root])
        #expect(lax.verify(leaf: unmarked.leaf, intermediates: [unmarked.intermediate], at: TestPKI.inside).isValid)
        let noIntermediateMarker = try TestPKI(name: "NoCA", intermediateMarker: false)
        let strict2 = try CertificateChainVerifier(
            trustRoots: [noIntermediateMarker.root], policy: .applePaymentTokenSigning)
        #expect(
            strict2.verify(
                leaf: noIntermediateMarker.leaf, intermediates: [noIntermediateMarker.intermediate], at: TestPKI.inside
            ).failure?.code == .policyViolation)
    }

    @Test func tamperedCertificatesAreRejected() throws {
        let pki = try TestPKI()
        let verifier = try CertificateChainVerifier(trustRoots: [pki.root], cacheCapacity: 0)
        // Flip one bit in the leaf's signature value (the last bytes of the DER).
        var der = pki.leaf.derRepresentation
        der[der.count - 3] ^= 0x01
        let badLeaf = try Certificate(derEncoded: der)
        #expect(
            verifier.verify(leaf: badLeaf, intermediates: [pki.intermediate], at: TestPKI.inside).failure?.code
                == .invalidCertificateSignature)
        // Flip one bit in the leaf's subject (inside tbsCertificate).
        let name = Array(pki.leaf.subject.derRepresentation)
        let offset = try #require(firstRange(of: name, in: der)).lowerBound + name.count - 2
        var der2 = pki.leaf.derRepresentation
        der2[offset] ^= 0x01
        let renamed = try Certificate(derEncoded: der2)
        #expect(!verifier.verify(leaf: renamed, intermediates: [pki.intermediate], at: TestPKI.inside).isValid)
    }

    @Test func cacheIsKeyedByBytesAndExpiresWithTheClock() throws {
        let pki = try TestPKI()
        let clock = ManualClock(now: TestPKI.inside)
        let verifier = try CertificateChainVerifier(trustRoots: [pki.root], cacheCapacity: 2, clock: clock)
        #expect(verifier.cachedChainCount == 0)
        #expect(verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: TestPKI.inside).isValid)
        #expect(verifier.cachedChainCount == 1)
        // A hit inside the validity interval; outside it, OpenSSL decides again (and rejects).
        #expect(verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: TestPKI.leafStart).isValid)
        #expect(
            verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: TestPKI.leafEnd + 1).failure?.code
                == .certificateExpired)
        #expect(verifier.cachedChainCount == 1)
        // Rejections are not cached.
        #expect(!verifier.verify(leaf: pki.leaf, at: TestPKI.inside).isValid)
        #expect(verifier.cachedChainCount == 1)
        // Capacity: the oldest goes first.
        let second = try TestPKI(name: "Second")
        let third = try TestPKI(name: "Third")
        let multi = try CertificateChainVerifier(
            trustRoots: [pki.root, second.root, third.root], cacheCapacity: 2, clock: clock)
        for p in [pki, second, third] {
            #expect(multi.verify(leaf: p.leaf, intermediates: [p.intermediate], at: TestPKI.inside).isValid)
        }
        #expect(multi.cachedChainCount == 2)
        // Once the wall clock passes the leaf's notAfter, the entry is dropped.
        clock.setWall(TestPKI.leafEnd + 1)
        #expect(verifier.verify(leaf: pki.leaf, intermediates: [pki.intermediate], at: TestPKI.inside).isValid)
        #expect(verifier.cachedChainCount == 0)
    }

    @Test func concurrentVerificationsAgree() throws {
        let pki = try TestPKI()
        let other = try TestPKI(name: "Other")
        let verifier = try CertificateChainVerifier(trustRoots: [pki.root], cacheCapacity: 4)
        let results = ResultBox(count: 64)
        DispatchQueue.concurrentPerform(iterations: 64) { i in
            let p = i % 4 == 3 ? other : pki
            results.set(i, verifier.verify(leaf: p.leaf, intermediates: [p.intermediate], at: TestPKI.inside).isValid)
        }
        for i in 0..<64 { #expect(results.get(i) == (i % 4 != 3)) }
    }

    @Test func verifierNeedsARoot() {
        #expect(throws: X509Error(.invalidValue, "")) { try CertificateChainVerifier(trustRoots: []) }
    }
}

/// Results written from several threads.
final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Bool]
    init(count: Int) { values = Array(repeating: false, count: count) }
    func set(_ i: Int, _ v: Bool) { lock.withLock { values[i] = v } }
    func get(_ i: Int) -> Bool { lock.withLock { values[i] } }
}

func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
    guard needle.count <= haystack.count else { return nil }
    for start in 0...(haystack.count - needle.count) where haystack[start..<start + needle.count].elementsEqual(needle)
    {
        return start..<start + needle.count
    }
    return nil
}

/*
 * The conformance page of orchard-pay.js (docs/web.md, "The API by version"): one table of what each version of
 * Apple Pay JS accepts and refuses, from Apple's release notes (../shared/notes/apple-pay-web.md §1), run for every
 * version 1 to 14 (and 15, which is refused). Each row is a check, the version its behaviour changes at (`since`),
 * the outcome before that version and the outcome from it. The results are drawn in the table and kept in
 * `window.conformance` ({version, check, expected, actual}) for the browser test.
 */
(function () {
    "use strict";
    const LATEST = 14;
    const BASE = {
        countryCode: "US", currencyCode: "USD", supportedNetworks: ["visa"], merchantCapabilities: ["supports3DS"],
        total: { label: "Orchard Demo Store", amount: "1.00" },
    };
    const RECURRING = {
        paymentDescription: "Orchard tea club",
        regularBilling: {
            label: "Monthly tea", amount: "9.99", paymentTiming: "recurring", recurringPaymentIntervalUnit: "month",
            recurringPaymentStartDate: "2027-01-01T00:00:00Z",
        },
        managementURL: "https://store.orchard.test/subscriptions",
    };
    const RELOAD = {
        paymentDescription: "Orchard transit card",
        automaticReloadBilling: {
            label: "Reload", amount: "20.00", paymentTiming: "automaticReload",
            automaticReloadPaymentThresholdAmount: "5.00",
        },
        managementURL: "https://store.orchard.test/reload",
    };
    const DEFERRED = {
        paymentDescription: "Orchard hotel",
        deferredBilling: {
            label: "Stay", amount: "120.00", paymentTiming: "deferred", deferredPaymentDate: "2027-03-01T12:00:00Z",
        },
        managementURL: "https://store.orchard.test/bookings",
    };
    const OK = "ok";
    const NETWORK = function (name) { return "TypeError: \"" + name + "\" is not a valid payment network."; };
    const ONE_TYPE = "TypeError: Only one of 'recurringPaymentRequest', 'automaticReloadPaymentRequest', "
        + "'multiTokenContexts' and 'deferredPaymentRequest' may be set.";

    function request(changes) {
        return Object.assign({}, BASE, changes);
    }

    /// [check, since, outcome before `since`, outcome from `since`, what to run for a version].
    const TABLE = [
        ["supportsVersion", 1, "", "true", function (v) { return String(ApplePaySession.supportsVersion(v)); }],
        ["the minimal request", 1, "", OK, construct({})],
        ["a pending line item without an amount", 1, "", OK,
            construct({ lineItems: [{ label: "Tax", type: "pending" }] })],
        ["a pending total without an amount", 1, "", "TypeError: Missing total amount.",
            construct({ total: { label: "Orchard", type: "pending" } })],
        ["a line item type other than final or pending", 1, "",
            "TypeError: \"estimated\" is not a valid line item type.",
            construct({ lineItems: [{ label: "Tax", amount: "1.00", type: "estimated" }] })],
        ["network jcb", 2, NETWORK("jcb"), OK, construct({ supportedNetworks: ["jcb"] })],
        ["a zero total", 4, "TypeError: Total amount must be greater than zero.", OK,
            construct({ total: { label: "Orchard", amount: "0.00" } })],
        ["a negative total", 1, "", "TypeError: Total amount must not be negative.",
            construct({ total: { label: "Orchard", amount: "-1.00" } })],
        ["contact field phoneticName", 3, "TypeError: \"phoneticName\" is not a valid contact field.", OK,
            construct({ requiredShippingContactFields: ["postalAddress", "phoneticName"] })],
        ["supportedCountries is read (a bad code refused)", 3, OK, "TypeError: \"U1\" is not a valid country code.",
            construct({ supportedCountries: ["US", "U1"] })],
    ].concat(
        [["cartesBancaires", 4], ["eftpos", 4], ["electron", 4], ["maestro", 4], ["vPay", 4], ["elo", 5], ["mada", 5],
            ["mir", 11], ["girocard", 11], ["dankort", 13], ["bancomat", 14], ["bancontact", 14]]
            .map(function (entry) {
                return ["network " + entry[0], entry[1], NETWORK(entry[0]), OK,
                    construct({ supportedNetworks: ["visa", entry[0]] })];
            }),
        [
            ["a network no version has", 1, "", NETWORK("bitcoin"), construct({ supportedNetworks: ["bitcoin"] })],
            ["coupon codes: supportsCouponCode and couponCode are read", 12, "false", "true SPRING",
                function (v) {
                    const session = new ApplePaySession(v, request({ supportsCouponCode: true, couponCode: "SPRING" }));
                    return session._request.supportsCouponCode === undefined ? "false"
                        : String(session._request.supportsCouponCode) + " " + session._request.couponCode;
                }],
            ["shippingContactEditingMode is read (a bad mode refused)", 12, OK,
                "TypeError: The provided value 'sometimes' is not a valid enum value of type "
                + "ApplePayShippingContactEditingMode.",
                construct({ shippingContactEditingMode: "sometimes" })],
            ["completeCouponCodeChange outside oncouponcodechanged", 1, "", "InvalidAccessError: ",
                function (v) {
                    const session = new ApplePaySession(v, request({}));
                    session.completeCouponCodeChange({ newTotal: BASE.total });
                    return OK;
                }],
            ["a recurring payment request", 14, OK, OK, construct({ recurringPaymentRequest: RECURRING })],
            ["an automatic reload payment request", 14, OK, OK, construct({ automaticReloadPaymentRequest: RELOAD })],
            ["a deferred payment request", 14, OK, OK, construct({ deferredPaymentRequest: DEFERRED })],
            ["a recurring request without paymentDescription", 14, OK, "TypeError: Missing 'paymentDescription'.",
                construct({ recurringPaymentRequest: Object.assign({}, RECURRING, { paymentDescription: undefined }) })],
            ["regularBilling that is not a recurring line item", 14, OK,
                "TypeError: 'regularBilling' must be a 'recurring' line item.",
                construct({
                    recurringPaymentRequest: Object.assign({}, RECURRING, {
                        regularBilling: { label: "Monthly tea", amount: "9.99" },
                    }),
                })],
            ["a recurring request without managementURL", 14, OK, "TypeError: Missing 'managementURL'.",
                construct({ recurringPaymentRequest: Object.assign({}, RECURRING, { managementURL: undefined }) })],
            ["automaticReloadBilling without its threshold", 14, OK,
                "TypeError: Missing 'automaticReloadPaymentThresholdAmount'.",
                construct({
                    automaticReloadPaymentRequest: Object.assign({}, RELOAD, {
                        automaticReloadBilling: { label: "Reload", amount: "20.00", paymentTiming: "automaticReload" },
                    }),
                })],
            ["deferredBilling without its date", 14, OK, "TypeError: Missing 'deferredPaymentDate'.",
                construct({
                    deferredPaymentRequest: Object.assign({}, DEFERRED, {
                        deferredBilling: { label: "Stay", amount: "120.00", paymentTiming: "deferred" },
                    }),
                })],
            ["two payment types in one request", 14, OK, ONE_TYPE,
                construct({ recurringPaymentRequest: RECURRING, deferredPaymentRequest: DEFERRED })],
            ["a line item paymentTiming no version has", 14, OK,
                "TypeError: The provided value 'weekly' is not a valid enum value of type ApplePayPaymentTiming.",
                construct({ lineItems: [{ label: "Tea", amount: "1.00", paymentTiming: "weekly" }] })],
        ]);

    function construct(changes) {
        return function (v) {
            const made = new ApplePaySession(v, request(changes));
            return made instanceof ApplePaySession ? OK : "not a session";
        };
    }

    function outcome(run, v) {
        try {
            return run(v);
        } catch (error) {
            return error.name + ": " + error.message;
        }
    }

    const results = [];

    function keep(version, check, expected, actual) {
        results.push({ version: String(version), check: check, expected: expected, actual: actual });
        const row = document.createElement("tr");
        [String(version), check, expected, actual].forEach(function (text) {
            const cell = document.createElement("td");
            cell.textContent = text;
            row.append(cell);
        });
        if (expected !== actual) {
            row.className = "failed";
        }
        document.querySelector("#results tbody").append(row);
    }

    function run() {
        for (let v = 1; v <= LATEST; v += 1) {
            TABLE.forEach(function (row) {
                keep(v, row[0], v < row[1] ? row[2] : row[3], outcome(row[4], v));
            });
        }
        // Past the latest version: refused as WebKit refuses it.
        keep(LATEST + 1, "supportsVersion", "false", outcome(function () {
            return String(ApplePaySession.supportsVersion(LATEST + 1));
        }));
        keep(LATEST + 1, "the minimal request", "InvalidAccessError: \"15\" is not a supported version.",
            outcome(construct({}), LATEST + 1));
        // The static calls of no version: openPaymentSetup (from this gesture) and applePayCapabilities.
        const setup = ApplePaySession.openPaymentSetup("merchant.dev.orchard.demo");
        const capabilities = ApplePaySession.applePayCapabilities("merchant.dev.orchard.demo");
        const never = ApplePaySession.applePayCapabilities("merchant.dev.never-registered");
        Promise.all([setup, capabilities, never]).then(function (answers) {
            keep("all", "openPaymentSetup from a gesture", "false", String(answers[0]));
            keep("all", "applePayCapabilities of the store's merchant", "paymentCredentialsAvailable",
                answers[1].paymentCredentialStatus);
            keep("all", "applePayCapabilities of a merchant never registered", "paymentCredentialsUnavailable",
                answers[2].paymentCredentialStatus);
        }, function (error) {
            keep("all", "the static calls", "answers", error.name + ": " + error.message);
        }).then(function () {
            const failed = results.filter(function (r) { return r.expected !== r.actual; }).length;
            document.getElementById("summary").textContent =
                results.length + " checks, " + failed + " failed.";
            window.conformance = results;
            document.body.dataset.done = "true";
        });
    }

    const button = document.getElementById("run");
    button.addEventListener("click", run);
    function ready() {
        try {
            button.disabled = !ApplePaySession.canMakePayments();
        } catch (error) {
            button.disabled = true;
        }
        document.body.dataset.ready = String(!button.disabled);
    }
    if (document.readyState === "complete") {
        ready();
    } else {
        window.addEventListener("load", ready);
    }
    window.addEventListener("orchardpayready", ready);
})();

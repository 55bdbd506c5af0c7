/*
 * orchard-pay.js 1.2.0: Apple Pay JS (`ApplePaySession`, versions 1 to 14) for browsers without it, through the
 * device's browser agent (https://agent.orchard.test). Orchard, docs/web.md "Apple Pay in a browser".
 *
 * The page talks to the agent only by postMessage to an invisible frame of the agent's origin; the frame reads the
 * page's real origin from the browser, and the payment sheet is a page of the agent's origin on the device's screen.
 * This script keeps WebKit's state machine, exception names and messages, and the user-gesture rule.
 */
(function () {
    "use strict";
    if (typeof window === "undefined" || window.ApplePaySession) {
        return; // The browser's own Apple Pay.
    }

    const AGENT = "https://agent.orchard.test";
    const LATEST_VERSION = 14;
    // The networks by the version that added them (notes §1.1): a version-N page may name only those of N or
    // earlier.
    const NETWORK_SINCE = {
        amex: 1, chinaUnionPay: 1, discover: 1, interac: 1, masterCard: 1, privateLabel: 1, visa: 1, jcb: 2,
        cartesBancaires: 4, eftpos: 4, electron: 4, maestro: 4, vPay: 4, elo: 5, mada: 5, mir: 11, girocard: 11,
        dankort: 13, bancomat: 14, bancontact: 14,
    };
    // The version that added each part of the API beyond version 1 (docs/web.md, "The API by version"). A member
    // of a later version in a request or update is not read, as a browser of that version does not know it.
    const SINCE = {
        openPaymentSetup: 2, updateDictionaries: 3, phoneticName: 3, supportedCountries: 3, zeroTotal: 4,
        couponCode: 12, shippingContactEditingMode: 12, paymentTypes: 14, paymentTiming: 14,
    };
    const PAYMENT_TYPES = [
        "recurringPaymentRequest", "automaticReloadPaymentRequest", "multiTokenContexts", "deferredPaymentRequest",
    ];
    const PAYMENT_TIMINGS = ["immediate", "recurring", "deferred", "automaticReload"];
    const INTERVAL_UNITS = ["year", "month", "day", "hour", "minute"];
    const CREDENTIAL_STATUSES = {
        available: "paymentCredentialsAvailable", unknown: "paymentCredentialStatusUnknown",
        unavailable: "paymentCredentialsUnavailable", unsupported: "applePayUnsupported",
    };
    const CAPABILITIES = ["supports3DS", "supportsEMV", "supportsCredit", "supportsDebit"];
    const CONTACT_FIELDS = ["email", "name", "phone", "postalAddress", "phoneticName"];
    const ERROR_CODES = [
        "unknown", "shippingContactInvalid", "billingContactInvalid", "addressUnserviceable", "couponCodeInvalid",
        "couponCodeExpired",
    ];
    const CONTACT_ERROR_FIELDS = [
        "phoneNumber", "emailAddress", "name", "phoneticName", "postalAddress", "addressLines", "locality",
        "subLocality", "postalCode", "administrativeArea", "subAdministrativeArea", "country", "countryCode",
    ];
    const FINAL_STATES = ["completed", "aborted", "canceled"];

    // The agent's frame and what it said.
    const agent = { frame: null, ready: false, canPay: false, refusal: null, waiters: [], queries: new Map() };
    let nextLocal = 1;
    let nextQuery = 1;
    const sessions = new Map();
    let activeSession = null;

    function insertFrame() {
        const frame = document.createElement("iframe");
        frame.src = AGENT + "/frame";
        frame.allow = "payment";
        frame.title = "Apple Pay (the device's browser agent)";
        frame.setAttribute("aria-hidden", "true");
        frame.tabIndex = -1;
        frame.style.cssText = "position:absolute;width:0;height:0;border:0;visibility:hidden";
        (document.body || document.documentElement).appendChild(frame);
        agent.frame = frame;
    }

    function whenReady(action) {
        if (agent.ready) {
            action();
        } else {
            agent.waiters.push(action);
        }
    }

    function post(message) {
        whenReady(function () {
            agent.frame.contentWindow.postMessage(Object.assign({ orchard: 1 }, message), AGENT);
        });
    }

    window.addEventListener("message", function (event) {
        if (!agent.frame || event.source !== agent.frame.contentWindow || event.origin !== AGENT) {
            return;
        }
        const message = event.data;
        if (!message || message.orchard !== 1) {
            return;
        }
        if (message.type === "hello") {
            agent.ready = true;
            agent.canPay = Boolean(message.canMakePayments);
            agent.refusal = message.refusal || null;
            agent.waiters.splice(0).forEach(function (action) { action(); });
            // Orchard's own addition: a page may check canMakePayments() again once the agent has spoken.
            window.dispatchEvent(new Event("orchardpayready"));
        } else if (message.type === "reply") {
            const resolve = agent.queries.get(message.query);
            if (resolve) {
                agent.queries.delete(message.query);
                resolve(message.value);
            }
        } else if (message.type === "event") {
            const session = sessions.get(message.session);
            if (session) {
                session._agentEvent(message.event);
            }
        }
    });

    function invalidAccess(message) {
        return new DOMException(message || "", "InvalidAccessError");
    }

    /// WebKit's refusals of an insecure page or a third-party frame (notes §1.8).
    function checkPage() {
        if (!window.isSecureContext || location.protocol !== "https:") {
            throw invalidAccess("Trying to start an Apple Pay session from an insecure document.");
        }
        // Any ancestor not https (the agent's frame will not load under one, and the agent refuses it too).
        const ancestors = location.ancestorOrigins ? Array.from(location.ancestorOrigins) : [];
        if (ancestors.some(function (origin) { return !origin.startsWith("https://"); })) {
            throw invalidAccess("Trying to start an Apple Pay session from a document with an insecure parent frame.");
        }
        if (agent.refusal) {
            throw new DOMException(agent.refusal.message, agent.refusal.name);
        }
    }

    function userGesture() {
        return !navigator.userActivation || navigator.userActivation.isActive;
    }

    // MARK: Request validation (WebKit's TypeErrors)

    function amount(value, what) {
        const text = typeof value === "number" ? String(value) : value;
        if (typeof text !== "string" || !/^-?[0-9]+(\.[0-9]+)?$/.test(text)) {
            throw new TypeError("\"" + value + "\" is not a valid amount.");
        }
        return text;
    }

    function enumValue(value, values, type) {
        if (!values.includes(value)) {
            throw new TypeError("The provided value '" + value + "' is not a valid enum value of type " + type + ".");
        }
        return value;
    }

    function date(value, member) {
        const parsed = value instanceof Date ? value : new Date(value);
        if (typeof value !== "string" && !(value instanceof Date) || isNaN(parsed.getTime())) {
            throw new TypeError("'" + member + "' must be a date.");
        }
        return parsed.toISOString();
    }

    function lineItem(item, total, version) {
        if (typeof item !== "object" || item === null) {
            throw new TypeError("Type error");
        }
        if (typeof item.label !== "string") {
            throw new TypeError(total ? "Missing total label." : "Missing line item label.");
        }
        const type = item.type === undefined ? "final" : item.type;
        if (type !== "final" && type !== "pending") {
            throw new TypeError("\"" + type + "\" is not a valid line item type.");
        }
        const out = { label: item.label, type: type };
        if (item.amount !== undefined || type === "final") {
            out.amount = amount(item.amount);
        }
        if (version >= SINCE.paymentTiming && item.paymentTiming !== undefined) {
            out.paymentTiming = enumValue(item.paymentTiming, PAYMENT_TIMINGS, "ApplePayPaymentTiming");
            if (out.paymentTiming === "recurring") {
                if (item.recurringPaymentStartDate !== undefined) {
                    out.recurringPaymentStartDate = date(item.recurringPaymentStartDate, "recurringPaymentStartDate");
                }
                if (item.recurringPaymentEndDate !== undefined) {
                    out.recurringPaymentEndDate = date(item.recurringPaymentEndDate, "recurringPaymentEndDate");
                }
                out.recurringPaymentIntervalUnit = enumValue(
                    item.recurringPaymentIntervalUnit === undefined ? "month" : item.recurringPaymentIntervalUnit,
                    INTERVAL_UNITS, "ApplePayRecurringPaymentDateUnit");
                const count = item.recurringPaymentIntervalCount === undefined ? 1 : item.recurringPaymentIntervalCount;
                if (!Number.isInteger(count) || count < 1) {
                    throw new TypeError("'recurringPaymentIntervalCount' must be a positive whole number.");
                }
                out.recurringPaymentIntervalCount = count;
            } else if (out.paymentTiming === "deferred") {
                if (item.deferredPaymentDate === undefined) {
                    throw new TypeError("Missing 'deferredPaymentDate'.");
                }
                out.deferredPaymentDate = date(item.deferredPaymentDate, "deferredPaymentDate");
            } else if (out.paymentTiming === "automaticReload") {
                if (item.automaticReloadPaymentThresholdAmount === undefined) {
                    throw new TypeError("Missing 'automaticReloadPaymentThresholdAmount'.");
                }
                out.automaticReloadPaymentThresholdAmount = amount(item.automaticReloadPaymentThresholdAmount);
            }
        }
        return out;
    }

    function contactFields(fields, version) {
        if (fields === undefined) {
            return undefined;
        }
        if (!Array.isArray(fields)) {
            throw new TypeError("Type error");
        }
        fields.forEach(function (field) {
            if (!CONTACT_FIELDS.includes(field) || (field === "phoneticName" && version < SINCE.phoneticName)) {
                throw new TypeError("\"" + field + "\" is not a valid contact field.");
            }
        });
        return fields.slice();
    }

    function shippingMethods(methods) {
        if (methods === undefined) {
            return undefined;
        }
        if (!Array.isArray(methods)) {
            throw new TypeError("Type error");
        }
        return methods.map(function (method) {
            if (typeof method !== "object" || method === null || typeof method.label !== "string"
                || typeof method.identifier !== "string") {
                throw new TypeError("Type error");
            }
            return {
                label: method.label, detail: typeof method.detail === "string" ? method.detail : "",
                amount: amount(method.amount), identifier: method.identifier,
            };
        });
    }

    function validateTotal(total, version) {
        const item = lineItem(total, true, version);
        if (item.amount === undefined) {
            throw new TypeError("Missing total amount.");
        }
        const value = Number(item.amount);
        if (value < 0) {
            throw new TypeError("Total amount must not be negative.");
        }
        if (version < SINCE.zeroTotal && value === 0) {
            throw new TypeError("Total amount must be greater than zero.");
        }
        return item;
    }

    function url(value, member) {
        if (value === undefined) {
            throw new TypeError("Missing '" + member + "'.");
        }
        let parsed;
        try {
            parsed = new URL(String(value));
        } catch (error) {
            throw new TypeError("'" + member + "' must be a valid URL.");
        }
        return parsed.href;
    }

    /// A version 14 payment type's billing item: a line item of `timing`.
    function billing(item, member, timing, version, required) {
        if (item === undefined && !required) {
            return undefined;
        }
        if (item === undefined) {
            throw new TypeError("Missing '" + member + "'.");
        }
        const out = lineItem(item, false, version);
        if (out.paymentTiming !== timing) {
            throw new TypeError("'" + member + "' must be " + (timing === "automaticReload" ? "an" : "a") + " '"
                + timing + "' line item.");
        }
        return out;
    }

    /// The request's one payment type (version 14): `{kind, paymentDescription, billing, …}`, or undefined.
    function paymentType(request, version) {
        if (version < SINCE.paymentTypes) {
            return undefined;
        }
        const present = PAYMENT_TYPES.filter(function (name) { return request[name] !== undefined; });
        if (present.length > 1) {
            throw new TypeError("Only one of 'recurringPaymentRequest', 'automaticReloadPaymentRequest', "
                + "'multiTokenContexts' and 'deferredPaymentRequest' may be set.");
        }
        if (present.length === 0) {
            return undefined;
        }
        const kind = present[0];
        const value = request[kind];
        if (kind === "multiTokenContexts") {
            if (!Array.isArray(value) || value.length === 0) {
                throw new TypeError("'multiTokenContexts' must be a non-empty list.");
            }
            return {
                kind: "multiToken",
                contexts: value.map(function (context) {
                    if (typeof context !== "object" || context === null) {
                        throw new TypeError("Type error");
                    }
                    ["merchantIdentifier", "externalIdentifier", "merchantName"].forEach(function (member) {
                        if (typeof context[member] !== "string") {
                            throw new TypeError("Missing '" + member + "'.");
                        }
                    });
                    return {
                        merchantIdentifier: context.merchantIdentifier, externalIdentifier: context.externalIdentifier,
                        merchantName: context.merchantName, merchantDomain: context.merchantDomain,
                        amount: amount(context.amount),
                    };
                }),
            };
        }
        if (typeof value !== "object" || value === null) {
            throw new TypeError("Type error");
        }
        if (typeof value.paymentDescription !== "string") {
            throw new TypeError("Missing 'paymentDescription'.");
        }
        const out = {
            paymentDescription: value.paymentDescription,
            billingAgreement: typeof value.billingAgreement === "string" ? value.billingAgreement : undefined,
        };
        if (kind === "recurringPaymentRequest") {
            out.kind = "recurring";
            out.billing = billing(value.regularBilling, "regularBilling", "recurring", version, true);
            out.trialBilling = billing(value.trialBilling, "trialBilling", "recurring", version, false);
        } else if (kind === "automaticReloadPaymentRequest") {
            out.kind = "automaticReload";
            out.billing = billing(
                value.automaticReloadBilling, "automaticReloadBilling", "automaticReload", version, true);
        } else {
            out.kind = "deferred";
            out.billing = billing(value.deferredBilling, "deferredBilling", "deferred", version, true);
            if (value.freeCancellationDate !== undefined) {
                out.freeCancellationDate = date(value.freeCancellationDate, "freeCancellationDate");
            }
        }
        out.managementURL = url(value.managementURL, "managementURL");
        if (value.tokenNotificationURL !== undefined) {
            out.tokenNotificationURL = url(value.tokenNotificationURL, "tokenNotificationURL");
        }
        return out;
    }

    function validateRequest(version, request) {
        if (typeof request !== "object" || request === null) {
            throw new TypeError("Type error");
        }
        if (!Array.isArray(request.merchantCapabilities) || request.merchantCapabilities.length === 0) {
            throw new TypeError("At least one merchant capability must be provided.");
        }
        request.merchantCapabilities.forEach(function (capability) {
            if (!CAPABILITIES.includes(capability)) {
                throw new TypeError("\"" + capability + "\" is not a valid merchant capability.");
            }
        });
        if (!Array.isArray(request.supportedNetworks) || request.supportedNetworks.length === 0) {
            throw new TypeError("At least one supported network must be provided.");
        }
        request.supportedNetworks.forEach(function (network) {
            if (!Object.prototype.hasOwnProperty.call(NETWORK_SINCE, network) || NETWORK_SINCE[network] > version) {
                throw new TypeError("\"" + network + "\" is not a valid payment network.");
            }
        });
        if (typeof request.countryCode !== "string" || !/^[A-Za-z]{2}$/.test(request.countryCode)) {
            throw new TypeError("\"" + request.countryCode + "\" is not a valid country code.");
        }
        if (typeof request.currencyCode !== "string" || !/^[A-Za-z]{3}$/.test(request.currencyCode)) {
            throw new TypeError("\"" + request.currencyCode + "\" is not a valid currency code.");
        }
        if (request.total === undefined) {
            throw new TypeError("Missing total.");
        }
        if (request.applicationData !== undefined && typeof request.applicationData !== "string") {
            throw new TypeError("\"applicationData\" must be a Base64-encoded string.");
        }
        const out = {
            countryCode: request.countryCode.toUpperCase(),
            currencyCode: request.currencyCode.toUpperCase(),
            supportedNetworks: request.supportedNetworks.slice(),
            merchantCapabilities: request.merchantCapabilities.slice(),
            total: validateTotal(request.total, version),
            lineItems: (request.lineItems || []).map(function (item) { return lineItem(item, false, version); }),
            requiredShippingContactFields: contactFields(request.requiredShippingContactFields, version),
            requiredBillingContactFields: contactFields(request.requiredBillingContactFields, version),
            shippingMethods: shippingMethods(request.shippingMethods),
            applicationData: request.applicationData,
        };
        if (version >= SINCE.supportedCountries && request.supportedCountries !== undefined) {
            if (!Array.isArray(request.supportedCountries)) {
                throw new TypeError("Type error");
            }
            request.supportedCountries.forEach(function (country) {
                if (typeof country !== "string" || !/^[A-Za-z]{2}$/.test(country)) {
                    throw new TypeError("\"" + country + "\" is not a valid country code.");
                }
            });
            out.supportedCountries = request.supportedCountries.map(function (c) { return c.toUpperCase(); });
        }
        if (version >= SINCE.couponCode) {
            out.supportsCouponCode = Boolean(request.supportsCouponCode);
            if (request.couponCode !== undefined) {
                out.couponCode = String(request.couponCode);
            }
        }
        if (version >= SINCE.shippingContactEditingMode && request.shippingContactEditingMode !== undefined) {
            out.shippingContactEditingMode = enumValue(
                request.shippingContactEditingMode, ["available", "storePickup"], "ApplePayShippingContactEditingMode");
        }
        out.paymentType = paymentType(request, version);
        return out;
    }

    /// An update dictionary (version 3 and later): `newTotal` required.
    function validateUpdate(update, version) {
        if (typeof update !== "object" || update === null) {
            throw new TypeError("Type error");
        }
        if (update.newTotal === undefined) {
            throw new TypeError("Missing total.");
        }
        return {
            newTotal: validateTotal(update.newTotal, version),
            newLineItems: (update.newLineItems || []).map(function (item) { return lineItem(item, false, version); }),
            newShippingMethods: shippingMethods(update.newShippingMethods),
            errors: (update.errors || []).map(plainError),
        };
    }

    function plainError(error) {
        return { code: error.code, contactField: error.contactField, message: error.message || "" };
    }

    // MARK: ApplePayError

    class ApplePayError {
        constructor(code, contactField, message) {
            if (!ERROR_CODES.includes(code)) {
                throw new TypeError(
                    "Failed to construct 'ApplePayError': The provided value '" + code
                    + "' is not a valid enum value of type ApplePayErrorCode.");
            }
            if (contactField !== undefined && !CONTACT_ERROR_FIELDS.includes(contactField)) {
                throw new TypeError(
                    "Failed to construct 'ApplePayError': The provided value '" + contactField
                    + "' is not a valid enum value of type ApplePayErrorContactField.");
            }
            this.code = code;
            this.contactField = contactField;
            this.message = message === undefined ? "" : String(message);
        }
    }

    // MARK: ApplePaySession

    class ApplePaySession extends EventTarget {
        constructor(version, paymentRequest) {
            super();
            if (arguments.length < 2) {
                throw new TypeError(
                    "Failed to construct 'ApplePaySession': 2 arguments required, but only " + arguments.length
                    + " present.");
            }
            checkPage();
            const number = Number(version);
            if (!ApplePaySession.supportsVersion(number)) {
                throw invalidAccess("\"" + version + "\" is not a supported version.");
            }
            if (!userGesture()) {
                throw invalidAccess("Must create a new ApplePaySession from a user gesture handler.");
            }
            this._request = validateRequest(number, paymentRequest);
            this._version = number;
            this._state = "idle";
            this._validation = "idle";
            this._local = "s" + nextLocal++;
            this._listeners = new Map();
            this.onvalidatemerchant = null;
            this.onpaymentmethodselected = null;
            this.onshippingcontactselected = null;
            this.onshippingmethodselected = null;
            this.oncouponcodechanged = null;
            this.onpaymentauthorized = null;
            this.oncancel = null;
        }

        static supportsVersion(version) {
            const number = Number(version);
            if (number === 0) {
                throw invalidAccess();
            }
            return Number.isInteger(number) && number >= 1 && number <= LATEST_VERSION;
        }

        static canMakePayments() {
            checkPage();
            return agent.canPay;
        }

        static canMakePaymentsWithActiveCard(merchantIdentifier) {
            return new Promise(function (resolve, reject) {
                try {
                    checkPage();
                } catch (error) {
                    reject(error);
                    return;
                }
                const query = nextQuery++;
                agent.queries.set(query, function (value) { resolve(Boolean(value)); });
                post({ type: "activeCard", query: query, merchantIdentifier: String(merchantIdentifier) });
            });
        }

        /// The wallet's answer for `merchantIdentifier` at this page's top-level domain, as the Apple Pay JS SDK's
        /// `applePayCapabilities`: `paymentCredentialStatusUnknown` when the device's website queries are off.
        static applePayCapabilities(merchantIdentifier) {
            return new Promise(function (resolve, reject) {
                try {
                    checkPage();
                } catch (error) {
                    reject(error);
                    return;
                }
                whenReady(function () {
                    if (!agent.canPay) {
                        resolve({ paymentCredentialStatus: CREDENTIAL_STATUSES.unsupported });
                        return;
                    }
                    const query = nextQuery++;
                    agent.queries.set(query, function (value) {
                        resolve({ paymentCredentialStatus: CREDENTIAL_STATUSES[value] || CREDENTIAL_STATUSES.unknown });
                    });
                    post({ type: "capabilities", query: query, merchantIdentifier: String(merchantIdentifier) });
                });
            });
        }

        /// Version 2: the device's wallet, to add a card. Orchard's device adds cards only from its own command line
        /// (`orchard device add-card`), so this resolves false (WebKit's answer when setup could not be shown).
        static openPaymentSetup(merchantIdentifier) {
            try {
                checkPage();
            } catch (error) {
                return Promise.reject(error);
            }
            if (!userGesture()) {
                return Promise.reject(invalidAccess("Must call ApplePaySession.openPaymentSetup from a user gesture handler."));
            }
            if (typeof merchantIdentifier !== "string" || merchantIdentifier === "") {
                return Promise.reject(new TypeError("Type error"));
            }
            return Promise.resolve(false);
        }

        addEventListener(type, listener, options) {
            this._listeners.set(type, (this._listeners.get(type) || 0) + 1);
            super.addEventListener(type, listener, options);
        }

        removeEventListener(type, listener, options) {
            this._listeners.set(type, Math.max(0, (this._listeners.get(type) || 0) - 1));
            super.removeEventListener(type, listener, options);
        }

        begin() {
            if (this._state !== "idle") {
                throw invalidAccess("Payment session is already active.");
            }
            if (activeSession && !FINAL_STATES.includes(activeSession._state)) {
                throw invalidAccess("Page already has an active payment session.");
            }
            activeSession = this;
            this._state = "active";
            sessions.set(this._local, this);
            // The sheet is on the device's screen: opened from this gesture (a window the page keeps no handle to).
            window.open(AGENT + "/sheet", "_blank", "noopener,popup,width=440,height=760");
            post({ type: "begin", session: this._local, version: this._version, request: this._request });
        }

        abort() {
            if (this._state === "idle") {
                throw invalidAccess();
            }
            if (FINAL_STATES.includes(this._state)) {
                return;
            }
            this._state = "aborted";
            this._end();
            post({ type: "abort", session: this._local });
        }

        completeMerchantValidation(merchantSession) {
            if (typeof merchantSession !== "object" || merchantSession === null) {
                throw new TypeError("Type error");
            }
            if (this._state !== "active" || this._validation !== "validating") {
                throw invalidAccess();
            }
            this._validation = "complete";
            post({ type: "merchantSession", session: this._local, merchantSession: merchantSession });
        }

        // The completions have two forms, chosen as WebIDL chooses an overload, by the number of arguments: the
        // positional form of versions 1 and 2, and version 3's one update dictionary (any version may use either).

        completePaymentMethodSelection(updateOrTotal, newLineItems) {
            if (this._state !== "paymentMethodSelected") {
                throw invalidAccess();
            }
            if (arguments.length < 1) {
                throw new TypeError("Not enough arguments");
            }
            const update = arguments.length === 1
                ? validateUpdate(updateOrTotal, this._version)
                : validateUpdate({ newTotal: updateOrTotal, newLineItems: newLineItems }, this._version);
            this._answer(update);
        }

        completeShippingContactSelection(updateOrStatus, newShippingMethods, newTotal, newLineItems) {
            if (this._state !== "shippingContactSelected") {
                throw invalidAccess();
            }
            if (arguments.length === 1) {
                this._answer(validateUpdate(updateOrStatus, this._version));
            } else if (arguments.length === 4) {
                this._legacy("shippingContact", updateOrStatus, {
                    newShippingMethods: newShippingMethods, newTotal: newTotal, newLineItems: newLineItems,
                });
            } else {
                throw new TypeError("Not enough arguments");
            }
        }

        completeShippingMethodSelection(updateOrStatus, newTotal, newLineItems) {
            if (this._state !== "shippingMethodSelected") {
                throw invalidAccess();
            }
            if (arguments.length === 1) {
                this._answer(validateUpdate(updateOrStatus, this._version));
            } else if (arguments.length === 3) {
                this._legacy("shippingMethod", updateOrStatus, { newTotal: newTotal, newLineItems: newLineItems });
            } else {
                throw new TypeError("Not enough arguments");
            }
        }

        /// Version 12: the answer to `oncouponcodechanged` (`errors` may hold couponCodeInvalid or
        /// couponCodeExpired, which the sheet shows; the sheet stays).
        completeCouponCodeChange(update) {
            if (this._state !== "couponCodeChanged") {
                throw invalidAccess();
            }
            this._answer(validateUpdate(update, this._version));
        }

        completePayment(resultOrStatus) {
            if (this._state !== "authorized") {
                throw invalidAccess();
            }
            let result = typeof resultOrStatus === "object" && resultOrStatus !== null
                ? { status: resultOrStatus.status, errors: (resultOrStatus.errors || []).map(plainError) }
                : { status: resultOrStatus, errors: [] };
            // The legacy statuses become FAILURE with an ApplePayError (WebKit).
            if (result.status === 2) {
                result = { status: 1, errors: [plainError(new ApplePayError("billingContactInvalid"))] };
            } else if (result.status === 3) {
                result = { status: 1, errors: [plainError(new ApplePayError("shippingContactInvalid", "postalAddress"))] };
            } else if (result.status === 4) {
                result = { status: 1, errors: [plainError(new ApplePayError("shippingContactInvalid"))] };
            }
            if (typeof result.status !== "number" || result.status < 0 || result.status > 7) {
                throw new TypeError("Type error");
            }
            // WebKit's isFinalStateResult: FAILURE with errors, none "unknown", keeps the sheet so the user can
            // correct them and authorize again (the PIN statuses of China UnionPay are not supported: they end it).
            result.keepsSheet = result.status === 1 && result.errors.length > 0
                && !result.errors.some(function (error) { return error.code === "unknown"; });
            if (result.keepsSheet) {
                // The sheet stays for the correction; the spent merchant session cannot pay again, so the page is
                // asked for a fresh one (onvalidatemerchant again) before the user authorizes again.
                this._state = "active";
                this._validation = "idle";
            } else {
                this._state = "completed";
                this._end();
            }
            post({ type: "answer", session: this._local, result: result });
        }

        // Internal.

        /// Payment Request's `PaymentResponse.retry()` (WebKit's `ApplePayPaymentHandler::retry`): FAILURE with
        /// `errors` (never empty: WebKit adds an `unknown` one), which is never a final result, so the sheet stays for
        /// the user to correct and authorize again (after the page's fresh merchant session, as for any kept sheet).
        _retry(errors) {
            if (this._state !== "authorized") {
                throw abortError();
            }
            const result = { status: 1, errors: errors.map(plainError), keepsSheet: true };
            this._state = "active";
            this._validation = "idle";
            post({ type: "answer", session: this._local, result: result });
        }

        /// The positional completion forms of versions 1 and 2 (WebKit's closing rules): SUCCESS updates the sheet.
        /// For a shipping method any other status cancels the sheet. For a shipping contact, the statuses naming a
        /// contact become an ApplePayError the sheet shows (it stays, so the user can correct the contact); any
        /// other status cancels the sheet.
        _legacy(kind, status, update) {
            if (typeof status !== "number" || !Number.isInteger(status) || status < 0 || status > 7) {
                throw new TypeError("Type error");
            }
            const validated = validateUpdate(update, this._version);
            const contactErrors = {
                2: new ApplePayError("billingContactInvalid"),
                3: new ApplePayError("shippingContactInvalid", "postalAddress"),
                4: new ApplePayError("shippingContactInvalid"),
            };
            if (status === ApplePaySession.STATUS_SUCCESS) {
                this._answer(validated);
            } else if (kind === "shippingContact" && contactErrors[status]) {
                validated.errors = [plainError(contactErrors[status])];
                this._answer(validated);
            } else {
                this._state = "canceled";
                this._end();
                post({ type: "abort", session: this._local });
                this._dispatch("cancel", { sessionError: { code: "unknown", info: {} } });
            }
        }

        _answer(update) {
            this._state = "active";
            post({ type: "answer", session: this._local, update: update });
        }

        _end() {
            if (activeSession === this) {
                activeSession = null;
            }
        }

        _hasListener(type) {
            return typeof this["on" + type] === "function" || (this._listeners.get(type) || 0) > 0;
        }

        _dispatch(type, fields) {
            const event = new Event(type);
            Object.keys(fields).forEach(function (key) {
                Object.defineProperty(event, key, { value: fields[key], enumerable: true });
            });
            const handler = this["on" + type];
            if (typeof handler === "function") {
                try {
                    handler.call(this, event);
                } catch (error) {
                    setTimeout(function () { throw error; });
                }
            }
            this.dispatchEvent(event);
        }

        _agentEvent(event) {
            if (FINAL_STATES.includes(this._state) && event.type !== "cancel") {
                return;
            }
            const current = { newTotal: this._request.total, newLineItems: this._request.lineItems };
            switch (event.type) {
                case "validatemerchant":
                    this._validation = "validating";
                    this._dispatch("validatemerchant", { validationURL: event.validationURL });
                    break;
                case "paymentmethodselected":
                    this._state = "paymentMethodSelected";
                    if (!this._hasListener("paymentmethodselected")) {
                        this._answer(validateUpdate(current, this._version));
                    } else {
                        this._dispatch("paymentmethodselected", { paymentMethod: event.paymentMethod });
                    }
                    break;
                case "shippingcontactselected":
                    this._state = "shippingContactSelected";
                    if (!this._hasListener("shippingcontactselected")) {
                        this._answer(validateUpdate(current, this._version));
                    } else {
                        this._dispatch("shippingcontactselected", { shippingContact: event.shippingContact });
                    }
                    break;
                case "shippingmethodselected":
                    this._state = "shippingMethodSelected";
                    if (!this._hasListener("shippingmethodselected")) {
                        this._answer(validateUpdate(current, this._version));
                    } else {
                        this._dispatch("shippingmethodselected", { shippingMethod: event.shippingMethod });
                    }
                    break;
                case "couponcodechanged":
                    this._state = "couponCodeChanged";
                    if (!this._hasListener("couponcodechanged")) {
                        this._answer(validateUpdate(current, this._version));
                    } else {
                        this._dispatch("couponcodechanged", { couponCode: event.couponCode });
                    }
                    break;
                case "paymentauthorized":
                    this._state = "authorized";
                    this._dispatch("paymentauthorized", { payment: event.payment });
                    break;
                case "cancel":
                    if (FINAL_STATES.includes(this._state)) {
                        return;
                    }
                    this._state = "canceled";
                    this._end();
                    this._dispatch("cancel", { sessionError: { code: "unknown", info: {} } });
                    break;
                default:
                    break;
            }
        }
    }

    const STATUSES = {
        STATUS_SUCCESS: 0, STATUS_FAILURE: 1, STATUS_INVALID_BILLING_POSTAL_ADDRESS: 2,
        STATUS_INVALID_SHIPPING_POSTAL_ADDRESS: 3, STATUS_INVALID_SHIPPING_CONTACT: 4, STATUS_PIN_REQUIRED: 5,
        STATUS_PIN_INCORRECT: 6, STATUS_PIN_LOCKOUT: 7,
    };
    Object.keys(STATUSES).forEach(function (name) {
        Object.defineProperty(ApplePaySession, name, { value: STATUSES[name], enumerable: true });
        Object.defineProperty(ApplePaySession.prototype, name, { value: STATUSES[name], enumerable: true });
    });

    // MARK: Payment Request (`https://apple.com/apple-pay` only)

    const APPLE_PAY_METHOD = "https://apple.com/apple-pay";
    const NativePaymentRequest = window.PaymentRequest;
    let nextRequest = 1;

    function abortError(message) {
        return new DOMException(message || "The user aborted a request.", "AbortError");
    }

    function money(amountValue, what) {
        if (typeof amountValue !== "object" || amountValue === null || typeof amountValue.currency !== "string") {
            throw new TypeError("Missing " + what + " amount.");
        }
        return { currency: amountValue.currency, value: amount(amountValue.value) };
    }

    /// A `PaymentItem` as an Apple Pay line item.
    function paymentItem(item, what) {
        if (typeof item !== "object" || item === null || typeof item.label !== "string") {
            throw new TypeError("Missing " + what + " label.");
        }
        const value = money(item.amount, what);
        return { label: item.label, amount: value.value, type: item.pending ? "pending" : "final", currency: value.currency };
    }

    function shippingOptions(options) {
        return (options || []).map(function (option) {
            if (typeof option !== "object" || option === null || typeof option.id !== "string") {
                throw new TypeError("Type error");
            }
            return {
                label: String(option.label), detail: "", amount: money(option.amount, "shipping option").value,
                identifier: option.id, selected: Boolean(option.selected),
            };
        });
    }

    /// `PaymentDetailsInit` or `PaymentDetailsUpdate` as an Apple Pay update dictionary.
    function detailsUpdate(details, current) {
        const out = { newTotal: current.total, newLineItems: current.lineItems };
        if (details.total !== undefined) {
            out.newTotal = paymentItem(details.total, "total");
        }
        if (details.displayItems !== undefined) {
            out.newLineItems = details.displayItems.map(function (item) { return paymentItem(item, "line item"); });
        }
        if (details.shippingOptions !== undefined) {
            out.newShippingMethods = shippingOptions(details.shippingOptions);
        }
        const errors = (details.paymentMethodErrors || []).slice();
        if (details.shippingAddressErrors && Object.keys(details.shippingAddressErrors).length > 0) {
            errors.push(new ApplePayError("shippingContactInvalid", "postalAddress",
                Object.values(details.shippingAddressErrors).join("; ")));
        }
        if (typeof details.error === "string" && details.error !== "") {
            errors.push(new ApplePayError("unknown", undefined, details.error));
        }
        out.errors = errors;
        return out;
    }

    /// The event a `PaymentRequest` fires for a merchant's validation (WebKit's `MerchantValidationEvent`, a W3C
    /// Note): `complete(promise)` once, with the merchant session object.
    class MerchantValidationEvent extends Event {
        constructor(type, init) {
            super(type);
            this.methodName = init.methodName;
            this.validationURL = init.validationURL;
            this._complete = init.complete;
            this._completed = false;
        }

        complete(merchantSessionPromise) {
            if (this._completed) {
                throw new DOMException("", "InvalidStateError");
            }
            this._completed = true;
            this._complete(Promise.resolve(merchantSessionPromise));
        }
    }

    /// An event whose `updateWith(promise)` answers the sheet (`shippingaddresschange`, `shippingoptionchange`,
    /// `paymentmethodchange`).
    class PaymentRequestUpdateEvent extends Event {
        constructor(type, init) {
            super(type);
            Object.assign(this, init.fields || {});
            this._update = init.update;
            this._updated = false;
        }

        updateWith(detailsPromise) {
            if (this._updated) {
                throw new DOMException("", "InvalidStateError");
            }
            this._updated = true;
            this._update(Promise.resolve(detailsPromise));
        }
    }

    /// The browser's `PaymentRequest` with Orchard's Apple Pay for the method `https://apple.com/apple-pay`: a
    /// request that names it shows Apple Pay only (as Safari does); any other request is the browser's own.
    class PaymentRequest extends EventTarget {
        constructor(methodData, details, options) {
            const methods = Array.isArray(methodData) ? methodData : [];
            const applePay = methods.find(function (method) {
                return method && method.supportedMethods === APPLE_PAY_METHOD;
            });
            if (!applePay) {
                if (NativePaymentRequest) {
                    return new NativePaymentRequest(methodData, details, options);
                }
                throw new TypeError("At least one payment method is required");
            }
            super();
            checkPage();
            const data = applePay.data || {};
            if (typeof data.version !== "number") {
                throw new TypeError("Member ApplePayRequest.version is required and must be an instance of unsigned long");
            }
            if (typeof data.merchantIdentifier !== "string") {
                throw new TypeError(
                    "Member ApplePayRequest.merchantIdentifier is required and must be an instance of DOMString");
            }
            if (!ApplePaySession.supportsVersion(data.version)) {
                throw invalidAccess("\"" + data.version + "\" is not a supported version.");
            }
            if (typeof details !== "object" || details === null || details.total === undefined) {
                throw new TypeError("Member PaymentDetailsInit.total is required.");
            }
            const total = paymentItem(details.total, "total");
            const wanted = options || {};
            const fields = [];
            if (wanted.requestShipping) {
                fields.push("postalAddress");
            }
            if (wanted.requestPayerName) {
                fields.push("name");
            }
            if (wanted.requestPayerEmail) {
                fields.push("email");
            }
            if (wanted.requestPayerPhone) {
                fields.push("phone");
            }
            const options_ = shippingOptions(details.shippingOptions);
            const selected = options_.find(function (option) { return option.selected; });
            this._version = data.version;
            this._merchantIdentifier = data.merchantIdentifier;
            // The Apple Pay request; ApplePaySession validates it as the version says.
            this._request = Object.assign({}, data, {
                currencyCode: total.currency,
                total: { label: total.label, amount: total.amount, type: total.type },
                lineItems: (details.displayItems || []).map(function (item) {
                    const line = paymentItem(item, "line item");
                    return { label: line.label, amount: line.amount, type: line.type };
                }),
                requiredShippingContactFields: fields.length > 0 ? fields : undefined,
                shippingMethods: options_.length > 0
                    ? [selected || options_[0]].concat(options_.filter(function (o) { return o !== (selected || options_[0]); }))
                        .map(function (o) { return { label: o.label, detail: o.detail, amount: o.amount, identifier: o.identifier }; })
                    : undefined,
            });
            delete this._request.version;
            delete this._request.merchantIdentifier;
            // Checked now, as WebKit checks the request in the constructor.
            validateRequest(this._version, this._request);
            this.id = typeof details.id === "string" ? details.id : "orchard-request-" + nextRequest++;
            this.shippingAddress = null;
            this.shippingOption = selected ? selected.identifier : null;
            this.shippingType = wanted.requestShipping ? (wanted.shippingType || "shipping") : null;
            this.onmerchantvalidation = null;
            this.onshippingaddresschange = null;
            this.onshippingoptionchange = null;
            this.onpaymentmethodchange = null;
            this._options = {
                requestShipping: Boolean(wanted.requestShipping), requestPayerName: Boolean(wanted.requestPayerName),
                requestPayerEmail: Boolean(wanted.requestPayerEmail), requestPayerPhone: Boolean(wanted.requestPayerPhone),
            };
            this._response = null;
            this._state = "created";
            this._session = null;
            this._current = { total: this._request.total, lineItems: this._request.lineItems };
        }

        canMakePayment() {
            try {
                return Promise.resolve(ApplePaySession.canMakePayments());
            } catch (error) {
                return Promise.resolve(false);
            }
        }

        hasEnrolledInstrument() {
            return ApplePaySession.canMakePaymentsWithActiveCard(this._merchantIdentifier);
        }

        show() {
            if (this._state !== "created") {
                return Promise.reject(new DOMException("", "InvalidStateError"));
            }
            let session;
            try {
                session = new ApplePaySession(this._version, this._request);
            } catch (error) {
                this._state = "closed";
                return Promise.reject(error);
            }
            this._state = "interactive";
            this._session = session;
            const request = this;
            return new Promise(function (resolve, reject) {
                request._reject = reject;
                session.onvalidatemerchant = function (event) {
                    request._fire(new MerchantValidationEvent("merchantvalidation", {
                        methodName: APPLE_PAY_METHOD, validationURL: event.validationURL,
                        complete: function (promise) {
                            promise.then(function (merchantSession) {
                                session.completeMerchantValidation(merchantSession);
                            }).catch(function (error) {
                                request._end(error instanceof TypeError ? error : abortError());
                            });
                        },
                    }));
                };
                const update = function (type, fields, complete) {
                    return function (event) {
                        const current = request._current;
                        let answered = false;
                        const detailsEvent = new PaymentRequestUpdateEvent(type, {
                            fields: fields(event),
                            update: function (promise) {
                                answered = true;
                                promise.then(function (details) {
                                    const changed = detailsUpdate(details || {}, current);
                                    request._current = { total: changed.newTotal, lineItems: changed.newLineItems };
                                    complete(validateUpdate(changed, request._version));
                                }).catch(function (error) { request._end(error); });
                            },
                        });
                        request._fire(detailsEvent);
                        if (!answered) {
                            complete({ newTotal: current.total, newLineItems: current.lineItems });
                        }
                    };
                };
                session.onshippingcontactselected = update("shippingaddresschange", function (event) {
                    request.shippingAddress = address(event.shippingContact);
                    return {};
                }, function (changed) { session.completeShippingContactSelection(changed); });
                session.onshippingmethodselected = update("shippingoptionchange", function (event) {
                    request.shippingOption = event.shippingMethod.identifier;
                    return {};
                }, function (changed) { session.completeShippingMethodSelection(changed); });
                session.onpaymentmethodselected = update("paymentmethodchange", function (event) {
                    return { methodName: APPLE_PAY_METHOD, methodDetails: event.paymentMethod };
                }, function (changed) { session.completePaymentMethodSelection(changed); });
                session.oncouponcodechanged = update("paymentmethodchange", function (event) {
                    return { methodName: APPLE_PAY_METHOD, methodDetails: { couponCode: event.couponCode } };
                }, function (changed) { session.completeCouponCodeChange(changed); });
                session.onpaymentauthorized = function (event) {
                    request._state = "closed";
                    if (request._response) {
                        // The user authorized again after `retry()` (WebKit's `PaymentRequest::accept`).
                        request._response._authorizedAgain(event.payment);
                        return;
                    }
                    request._response = new PaymentResponse(request, session, event.payment);
                    resolve(request._response);
                };
                session.oncancel = function () { request._end(abortError()); };
                session.begin();
            });
        }

        abort() {
            if (this._state !== "interactive" || (this._response && this._response._retrying)) {
                return Promise.reject(new DOMException("", "InvalidStateError"));
            }
            this._session.abort();
            this._end(abortError("The request was aborted."));
            return Promise.resolve();
        }

        _end(error) {
            if (this._state === "interactive") {
                this._state = "closed";
                if (this._session && !FINAL_STATES.includes(this._session._state) && this._session._state !== "idle") {
                    this._session.abort();
                }
                if (this._response) {
                    this._response._abort(error);  // a retry's promise (WebKit's `abortWithException`)
                } else {
                    this._reject(error);
                }
            }
        }

        _fire(event) {
            const handler = this["on" + event.type];
            if (typeof handler === "function") {
                try {
                    handler.call(this, event);
                } catch (error) {
                    setTimeout(function () { throw error; });
                }
            }
            this.dispatchEvent(event);
        }
    }

    /// An Apple Pay contact as a `PaymentAddress`-like object.
    function address(contact) {
        if (!contact) {
            return null;
        }
        return {
            country: contact.countryCode || "", addressLine: contact.addressLines || [], region: contact.administrativeArea || "",
            city: contact.locality || "", dependentLocality: contact.subLocality || "", postalCode: contact.postalCode || "",
            sortingCode: "", organization: "", recipient: [contact.givenName, contact.familyName].filter(Boolean).join(" "),
            phone: contact.phoneNumber || "",
        };
    }

    /// `PaymentValidationErrors` (of `retry()`) or a `PaymentDetailsUpdate`'s errors as Apple Pay errors, as WebKit
    /// maps them (`computeAddressErrors`, `computePayerErrors`, `computePaymentMethodErrors`): the generic `error` and
    /// each address field become `shippingContactInvalid` (with its contact field) when the request asked for
    /// shipping; each payer field becomes `shippingContactInvalid` for `name`, `emailAddress` or `phoneNumber` when
    /// the request asked for it; `paymentMethod` must be a sequence of `ApplePayError` (else TypeError), taken as
    /// they are.
    const ADDRESS_ERROR_FIELDS = [
        ["addressLine", "addressLines"], ["city", "locality"], ["country", "country"],
        ["dependentLocality", "subLocality"], ["phone", "phoneNumber"], ["postalCode", "postalCode"],
        ["recipient", "name"], ["region", "administrativeArea"],
    ];
    const PAYER_ERROR_FIELDS = [
        ["name", "requestPayerName", "name"], ["email", "requestPayerEmail", "emailAddress"],
        ["phone", "requestPayerPhone", "phoneNumber"],
    ];

    function validationErrors(options, error, shippingAddress, payer, paymentMethod) {
        const errors = [];
        const invalid = function (message, field) {
            if (typeof message === "string") {
                errors.push(new ApplePayError("shippingContactInvalid", field, message));
            }
        };
        if (options.requestShipping) {
            invalid(error);
            ADDRESS_ERROR_FIELDS.forEach(function (pair) { invalid((shippingAddress || {})[pair[0]], pair[1]); });
        }
        PAYER_ERROR_FIELDS.forEach(function (triple) {
            if (options[triple[1]]) {
                invalid((payer || {})[triple[0]], triple[2]);
            }
        });
        if (paymentMethod !== undefined) {
            if (paymentMethod === null || typeof paymentMethod[Symbol.iterator] !== "function") {
                throw new TypeError("Value is not a sequence");
            }
            Array.from(paymentMethod).forEach(function (item) {
                if (!(item instanceof ApplePayError)) {
                    throw new TypeError("Type error");
                }
                errors.push(item);
            });
        }
        return errors;
    }

    /// What `show()` resolves with: `details` is the `ApplePayPayment`; `complete(result)` answers the sheet;
    /// `retry(errors)` keeps the sheet with the errors for the user to correct, and resolves once the user authorized
    /// again, the response then holding the new payment. A retry whose new authorization changes the payer's name,
    /// email or phone fires `payerdetailchange` first (its `updateWith` may answer with `payerErrors` and the other
    /// errors of a details update: the sheet stays again with them, and the retry waits for the next authorization).
    class PaymentResponse extends EventTarget {
        constructor(request, session, payment) {
            super();
            this.requestId = request.id;
            this.methodName = APPLE_PAY_METHOD;
            this.onpayerdetailchange = null;
            this._request = request;
            this._session = session;
            this._completed = false;
            this._retrying = null;
            this._fill(payment);
        }

        /// The fields from a payment, each only when the request asked for it (WebKit's `PaymentRequest::accept`).
        _fill(payment) {
            const options = this._request._options;
            const contact = payment.shippingContact || {};
            const name = [contact.givenName, contact.familyName].filter(Boolean).join(" ");
            this.details = payment;
            this.shippingAddress = options.requestShipping ? address(contact) : null;
            this.shippingOption = options.requestShipping ? this._request.shippingOption : null;
            this.payerName = options.requestPayerName && name ? name : null;
            this.payerEmail = options.requestPayerEmail ? contact.emailAddress || null : null;
            this.payerPhone = options.requestPayerPhone ? contact.phoneNumber || null : null;
        }

        complete(result) {
            if (this._completed || this._retrying) {
                return Promise.reject(new DOMException("", "InvalidStateError"));
            }
            this._completed = true;
            const status = result === "success" ? ApplePaySession.STATUS_SUCCESS : ApplePaySession.STATUS_FAILURE;
            try {
                this._session.completePayment(status);
            } catch (error) {
                return Promise.reject(error);
            }
            return Promise.resolve();
        }

        retry(errorFields) {
            if (this._completed || this._retrying) {
                return Promise.reject(new DOMException("", "InvalidStateError"));
            }
            const fields = errorFields === undefined || errorFields === null ? {} : errorFields;
            let errors;
            try {
                errors = validationErrors(
                    this._request._options, fields.error, fields.shippingAddress, fields.payer, fields.paymentMethod);
            } catch (error) {
                return Promise.reject(error);
            }
            const response = this;
            return new Promise(function (resolve, reject) {
                response._keepSheet(errors);
                response._retrying = { resolve: resolve, reject: reject };
            }).catch(function (error) {
                response._retrying = null;
                throw error;
            });
        }

        toJSON() {
            return {
                requestId: this.requestId, methodName: this.methodName, details: this.details,
                shippingAddress: this.shippingAddress, shippingOption: this.shippingOption, payerName: this.payerName,
                payerEmail: this.payerEmail, payerPhone: this.payerPhone,
            };
        }

        // Internal.

        /// The sheet stays with `errors` (an `unknown` one when there are none, so the result is never final).
        _keepSheet(errors) {
            const kept = errors.length > 0 ? errors : [new ApplePayError("unknown")];
            this._session._retry(kept);
            this._request._state = "interactive";
        }

        _settleRetry() {
            const retrying = this._retrying;
            this._retrying = null;
            if (retrying) {
                retrying.resolve();
            }
        }

        /// The user authorized again after `retry()`.
        _authorizedAgain(payment) {
            const before = [this.payerName, this.payerEmail, this.payerPhone].join("\u0000");
            this._fill(payment);
            if ([this.payerName, this.payerEmail, this.payerPhone].join("\u0000") === before) {
                this._settleRetry();
                return;
            }
            const response = this;
            let answered = false;
            const event = new PaymentRequestUpdateEvent("payerdetailchange", {
                update: function (promise) {
                    answered = true;
                    promise.then(function (details) {
                        const update = details || {};
                        const errors = validationErrors(
                            response._request._options, update.error, update.shippingAddressErrors,
                            update.payerErrors, update.paymentMethodErrors);
                        if (errors.length > 0) {
                            response._keepSheet(errors);
                        } else {
                            response._settleRetry();
                        }
                    }).catch(function (error) {
                        response._request._state = "interactive";
                        response._request._end(error instanceof TypeError ? error : abortError());
                    });
                },
            });
            this._fire(event);
            if (!answered) {
                this._settleRetry();
            }
        }

        /// The sheet ended during a retry (the user cancelled, the page aborted): the retry rejects.
        _abort(error) {
            this._completed = true;
            const retrying = this._retrying;
            this._retrying = null;
            if (retrying) {
                retrying.reject(error);
            }
        }

        _fire(event) {
            const handler = this["on" + event.type];
            if (typeof handler === "function") {
                try {
                    handler.call(this, event);
                } catch (error) {
                    setTimeout(function () { throw error; });
                }
            }
            this.dispatchEvent(event);
        }
    }

    Object.defineProperty(window, "ApplePaySession", { value: ApplePaySession, configurable: true, writable: true });
    Object.defineProperty(window, "ApplePayError", { value: ApplePayError, configurable: true, writable: true });
    if (window.isSecureContext) {
        Object.defineProperty(window, "PaymentRequest", { value: PaymentRequest, configurable: true, writable: true });
        Object.defineProperty(window, "MerchantValidationEvent",
            { value: MerchantValidationEvent, configurable: true, writable: true });
    }
    insertFrame();
})();

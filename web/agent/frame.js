/*
 * The browser agent's invisible frame (docs/web.md, "The browser agent"). It reads the embedding page's real
 * origin from the browser (location.ancestorOrigins, isSecureContext, the payment permission policy), relays the
 * page's ApplePaySession calls to the agent's server with this page load's secret, and hands the page only what
 * the API hands it.
 */
(function () {
    "use strict";
    // This page load's secret: no document carries one; the agent's server hands it to this script's fetch alone
    // (docs/web.md, "The browser agent"), and it stays in memory.
    const secret = fetch("/v1/secret", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        credentials: "omit",
        body: JSON.stringify({ document: "frame" }),
    }).then(function (response) {
        return response.json().then(function (json) {
            if (response.status !== 200 || typeof json.secret !== "string") {
                throw new Error(json.error ? json.error.message : "the agent gave this page no secret");
            }
            return json.secret;
        });
    });
    // The secret ends with the page load.
    window.addEventListener("pagehide", function () {
        secret.then(function (value) {
            fetch("/v1/secret/end", {
                method: "POST",
                headers: { "X-Orchard-Agent-Secret": value, "Content-Type": "application/json" },
                body: "{}",
                credentials: "omit",
                keepalive: true,
            });
        }, function () {});
    });
    const ancestors = location.ancestorOrigins ? Array.from(location.ancestorOrigins) : [];
    const policy = document.permissionsPolicy || document.featurePolicy;
    const page = {
        ancestorOrigins: ancestors,
        secureContext: window.isSecureContext,
        paymentAllowed: Boolean(policy && policy.allowsFeature && policy.allowsFeature("payment")),
    };
    const parentOrigin = ancestors.length > 0 ? ancestors[0] : null;
    // The page's sessions: its local name → {agent's session, pending event sequence, ended}.
    const sessions = new Map();

    function call(method, path, body) {
        return secret.then(function (value) {
            const init = { method: method, headers: { "X-Orchard-Agent-Secret": value }, credentials: "omit", keepalive: true };
            if (body !== undefined) {
                init.headers["Content-Type"] = "application/json";
                init.body = typeof body === "string" ? body : JSON.stringify(body);
            }
            return fetch(path, init);
        }).then(function (response) {
            return response.json().then(function (json) {
                return { status: response.status, body: json };
            });
        });
    }

    function toPage(message) {
        if (parentOrigin && window.parent !== window) {
            window.parent.postMessage(Object.assign({ orchard: 1 }, message), parentOrigin);
        }
    }

    function sessionPath(pattern, session) {
        return pattern.replace(":session", encodeURIComponent(session));
    }

    // The contact as Apple Pay JS's ApplePayPaymentContact (redacted before authorization by the device).
    function contact(value) {
        if (!value) {
            return undefined;
        }
        const out = {};
        if (value.name) {
            const parts = value.name.trim().split(/\s+/);
            out.givenName = parts.length > 1 ? parts.slice(0, -1).join(" ") : parts[0];
            if (parts.length > 1) {
                out.familyName = parts[parts.length - 1];
            }
        }
        if (value.emailAddress) {
            out.emailAddress = value.emailAddress;
        }
        if (value.phoneNumber) {
            out.phoneNumber = value.phoneNumber;
        }
        const address = value.postalAddress;
        if (address) {
            if (address.street) {
                out.addressLines = address.street.split("\n");
            }
            out.locality = address.city;
            out.administrativeArea = address.state;
            out.postalCode = address.postalCode;
            out.countryCode = address.country;
            out.country = address.country;
        }
        return out;
    }

    function pageEvent(event) {
        switch (event.kind) {
            case "paymentMethodSelected":
                return { type: "paymentmethodselected", paymentMethod: event.paymentMethod };
            case "shippingContactSelected":
                return { type: "shippingcontactselected", shippingContact: contact(event.shippingContact) };
            case "shippingMethodSelected":
                return {
                    type: "shippingmethodselected",
                    shippingMethod: {
                        label: event.shippingMethod.label, detail: event.shippingMethod.detail,
                        amount: event.shippingMethod.amount, identifier: event.shippingMethod.identifier,
                    },
                };
            case "couponCodeChanged":
                return { type: "couponcodechanged", couponCode: event.couponCode };
            case "paymentAuthorized": {
                const payment = event.payment;
                const token = JSON.parse(atob(payment.token));
                const result = { token: token };
                if (payment.billingContact) {
                    result.billingContact = contact(payment.billingContact);
                }
                if (payment.shippingContact) {
                    result.shippingContact = contact(payment.shippingContact);
                }
                return { type: "paymentauthorized", payment: result };
            }
            default:
                return null;
        }
    }

    function poll(local) {
        const state = sessions.get(local);
        if (!state || state.ended) {
            return;
        }
        // One chain of polls per session: a newer poll makes an older one's answer moot.
        state.generation = (state.generation || 0) + 1;
        const generation = state.generation;
        call("GET", sessionPath("/v1/frame/sessions/:session/events", state.agent) + "?wait=20")
            .then(function (answer) {
                if (generation !== state.generation) {
                    return;
                }
                if (answer.status !== 200) {
                    throw new Error(answer.body.error ? answer.body.error.message : "the agent refused");
                }
                const event = answer.body;
                if (event.kind === "ended") {
                    state.ended = true;
                    if (event.outcome !== "completed") {
                        if (event.error) {
                            console.error("Apple Pay: " + event.error.message);
                        }
                        toPage({ type: "event", session: local, event: { type: "cancel" } });
                    }
                    return;
                }
                if (event.kind !== "none") {
                    if (event.sequence !== state.sequence) {
                        state.sequence = event.sequence;
                        const forPage = pageEvent(event);
                        if (forPage) {
                            toPage({ type: "event", session: local, event: forPage });
                        }
                    }
                    // The event waits for the page's answer (which polls again at once): look again only to learn
                    // whether the sheet ended meanwhile.
                    state.timer = setTimeout(function () { poll(local); }, 500);
                    return;
                }
                poll(local);
            })
            .catch(function (error) {
                if (generation !== state.generation) {
                    return;
                }
                console.error("Apple Pay: " + error.message);
                state.ended = true;
                toPage({ type: "event", session: local, event: { type: "cancel" } });
            });
    }

    function summaryItems(update) {
        return update.newLineItems.concat([update.newTotal]).map(function (item) {
            return { label: item.label, amount: item.amount === undefined ? "0" : item.amount, type: item.type };
        });
    }

    function answer(local, message) {
        const state = sessions.get(local);
        if (!state || state.ended) {
            return;
        }
        const body = { sequence: state.sequence };
        if (message.update) {
            body.update = {
                paymentSummaryItems: summaryItems(message.update),
                errors: message.update.errors.map(function (error) { return error.message || error.code; }),
            };
            if (message.update.newShippingMethods) {
                body.update.shippingMethods = message.update.newShippingMethods;
            }
        } else {
            body.result = {
                status: message.result.status === 0 ? "success" : "failure",
                errors: message.result.errors.map(function (error) { return error.message || error.code; }),
            };
            if (message.result.keepsSheet === true) {
                body.result.keepsSheet = true;
            }
        }
        call("POST", sessionPath("/v1/frame/sessions/:session/answer", state.agent), body).then(function () {
            clearTimeout(state.timer);
            poll(local);
            // A failure the user corrects spent the merchant session: the page validates again for the next
            // authorization (docs/web.md, "A failed payment the user can correct").
            if (body.result && body.result.keepsSheet === true) {
                toPage({
                    type: "event", session: local,
                    event: { type: "validatemerchant", validationURL: state.validationURL },
                });
            }
        });
    }

    function begin(message) {
        // Known before the agent answers, so an abort() right after begin() is not lost.
        const state = { agent: null, sequence: null, ended: false };
        sessions.set(message.session, state);
        call("POST", "/v1/frame/sessions", { version: message.version, page: page, request: message.request })
            .then(function (answer) {
                if (answer.status !== 201) {
                    console.error("Apple Pay: " + answer.body.error.message);
                    state.ended = true;
                    toPage({ type: "event", session: message.session, event: { type: "cancel" } });
                    return;
                }
                state.agent = answer.body.session;
                state.validationURL = answer.body.validationURL;
                if (state.ended) {
                    call("POST", sessionPath("/v1/frame/sessions/:session/abort", state.agent), {});
                    return;
                }
                toPage({
                    type: "event", session: message.session,
                    event: { type: "validatemerchant", validationURL: answer.body.validationURL },
                });
            });
    }

    function merchantSession(message) {
        const state = sessions.get(message.session);
        if (!state) {
            return;
        }
        call("POST", sessionPath("/v1/frame/sessions/:session/merchant-session", state.agent),
            JSON.stringify(message.merchantSession))
            .then(function (answer) {
                if (answer.status !== 200) {
                    // WebKit logs the refusal and cancels the sheet.
                    console.error("Apple Pay: " + answer.body.error.message);
                    state.ended = true;
                    toPage({ type: "event", session: message.session, event: { type: "cancel" } });
                    return;
                }
                poll(message.session);
            });
    }

    window.addEventListener("message", function (event) {
        if (event.source !== window.parent || event.origin !== parentOrigin) {
            return;
        }
        const message = event.data;
        if (!message || message.orchard !== 1) {
            return;
        }
        switch (message.type) {
            case "begin":
                begin(message);
                break;
            case "merchantSession":
                merchantSession(message);
                break;
            case "answer":
                answer(message.session, message);
                break;
            case "abort": {
                const state = sessions.get(message.session);
                if (state && !state.ended) {
                    state.ended = true;
                    if (state.agent) {
                        call("POST", sessionPath("/v1/frame/sessions/:session/abort", state.agent), {});
                    }
                }
                break;
            }
            case "capabilities":
                call("POST", "/v1/frame/active-card", { merchantIdentifier: message.merchantIdentifier, page: page })
                    .then(function (answer) {
                        toPage({
                            type: "reply", query: message.query,
                            value: answer.status === 200 ? answer.body.credentialStatus : "unsupported",
                        });
                    });
                break;
            case "activeCard":
                call("POST", "/v1/frame/active-card", { merchantIdentifier: message.merchantIdentifier, page: page })
                    .then(function (answer) {
                        toPage({ type: "reply", query: message.query, value: answer.status === 200 && answer.body.canMakePayments });
                    });
                break;
            default:
                break;
        }
    });

    // WebKit's refusals of this page (the agent's server checks them again on every call).
    function refusal() {
        if (ancestors.length === 0) {
            return { name: "InvalidAccessError", message: "Trying to start an Apple Pay session from an inactive document." };
        }
        if (!ancestors[0].startsWith("https://")) {
            return { name: "InvalidAccessError", message: "Trying to start an Apple Pay session from an insecure document." };
        }
        if (!page.secureContext || !ancestors.every(function (origin) { return origin.startsWith("https://"); })) {
            return {
                name: "InvalidAccessError",
                message: "Trying to start an Apple Pay session from a document with an insecure parent frame.",
            };
        }
        if (ancestors.length > 1 && !page.paymentAllowed) {
            return {
                name: "SecurityError",
                message: "Third-party iframes are not allowed to request payments unless explicitly allowed via "
                    + "Feature-Policy (payment)",
            };
        }
        return null;
    }

    // Said while the page loads (the frame delays the page's load event), so canMakePayments() answers at once.
    const refused = refusal();
    const capable = document.querySelector("meta[name=orchard-can-make-payments]").content === "true";
    toPage({ type: "hello", canMakePayments: capable && refused === null, refusal: refused });
    call("POST", "/v1/frame/hello", page);
})();

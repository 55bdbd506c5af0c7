/*
 * The payment sheet on the device's screen (docs/web.md, "The payment sheet"): a page of the agent's origin that no
 * page can frame. It shows what the device's sheet holds (merchant, items and total, cards by network, type and
 * suffix, shipping, contact) and sends the user's actions, including the device's own authentication, to the agent.
 */
(function () {
    "use strict";
    if (window.opener) {
        window.opener = null;
    }
    // This page load's secret: no document carries one; the agent's server hands it to this script's fetch alone
    // (docs/web.md, "The browser agent"), and it stays in memory.
    const secret = fetch("/v1/secret", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        credentials: "omit",
        body: JSON.stringify({ document: "sheet" }),
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
    const $ = function (id) { return document.getElementById(id); };
    let shown = null; // The JSON of what is drawn, to redraw only on change.
    let busy = false;
    let drawnCoupon = null; // The coupon code last put in the field.

    function call(method, path, body) {
        return secret.then(function (value) {
            const init = { method: method, headers: { "X-Orchard-Agent-Secret": value }, credentials: "omit" };
            if (body !== undefined) {
                init.headers["Content-Type"] = "application/json";
                init.body = JSON.stringify(body);
            }
            return fetch(path, init);
        }).then(function (response) {
            return response.json().then(function (json) { return { status: response.status, body: json }; });
        });
    }

    // One action at a time: while one is on its way the sheet says so (aria-busy) and its other controls are
    // disabled, so a tap it would not send does not look taken. Cancel is always sent: the device cancels
    // without waiting for the page's answer to the action before.
    function act(action, body) {
        const cancelling = action === "cancel";
        if (busy && !cancelling) {
            return;
        }
        if (!cancelling) {
            setBusy(true);
        }
        const done = function () {
            if (!cancelling) {
                setBusy(false);
            }
        };
        call("POST", "/v1/sheet/current/" + action, body || {}).then(function (answer) {
            done();
            if (answer.status !== 200) {
                showError(answer.body.error ? answer.body.error.message : "refused");
            } else if (answer.body.result === "rejected") {
                showError("Not recognised. Try again" + (answer.body.offered && answer.body.offered.length
                    ? " (" + answer.body.offered.join(", ") + ")" : "") + ".");
            } else {
                showError(null);
            }
            refresh();
        }, done);
    }

    function setBusy(value) {
        busy = value;
        $("sheet").setAttribute("aria-busy", String(value));
        if (value) {
            disableActions();
        } else {
            document.querySelectorAll("[data-busy-disabled]").forEach(function (control) {
                control.disabled = false;
                delete control.dataset.busyDisabled;
            });
        }
    }

    // Disables what is enabled (and marks it, to give back exactly that); redraws call it again for new controls.
    function disableActions() {
        document.querySelectorAll("#details button, #details input[type=radio], #handoff-choices button")
            .forEach(function (control) {
                if (control.id !== "cancel" && !control.disabled) {
                    control.disabled = true;
                    control.dataset.busyDisabled = "";
                }
            });
    }

    function showError(message) {
        $("errors").hidden = !message;
        $("errors").textContent = message || "";
    }

    function text(element, value) {
        element.textContent = value;
        return element;
    }

    const METHOD_LABELS = {
        "face-id": "Pay with Face ID", "touch-id": "Pay with Touch ID", "passcode": "Pay with Passcode",
        "double-click": "Confirm with Side Button",
    };

    function draw(screen) {
        const json = JSON.stringify(screen);
        if (json === shown) {
            return;
        }
        shown = json;
        drawScreen(screen);
        if (busy) {
            disableActions();
        }
    }

    function drawScreen(screen) {
        if (screen.handoff) {
            drawHandoff(screen);
            return;
        }
        $("handoff").hidden = true;
        const sheet = screen.sheet;
        const status = $("status");
        if (screen.state === "idle" || (!sheet && screen.state !== "validating" && screen.state !== "ended")) {
            $("details").hidden = true;
            status.textContent = "Waiting for a payment request. Keep this window open: the device's payment sheet shows here.";
            return;
        }
        if (screen.state === "validating") {
            $("details").hidden = true;
            status.textContent = "Checking " + (screen.domain || "the website") + "…";
            return;
        }
        if (!sheet || sheet.status !== "presented") {
            $("details").hidden = true;
            const outcome = sheet ? sheet.status : "ended";
            // A refusal (a fresh merchant session refused) ends the sheet with its reason, whatever its status.
            status.textContent = screen.failure ? "Payment not completed: " + screen.failure
                : outcome === "completed" ? "Done" : outcome === "cancelled" ? "Cancelled" : "Payment not completed";
            document.title = "Apple Pay: " + status.textContent;
            return;
        }
        document.title = "Apple Pay: " + (screen.merchantName || sheet.merchantName);
        $("details").hidden = false;
        status.textContent = "Pay " + (screen.merchantName || sheet.merchantName) + " (" + (screen.domain || sheet.applicationIdentifier) + ")";
        text($("merchant"), (screen.merchantName || sheet.merchantName) + " · " + (screen.domain || sheet.applicationIdentifier));
        const body = $("items").tBodies[0];
        body.replaceChildren();
        sheet.items.slice(0, -1).forEach(function (item) {
            const row = body.insertRow();
            text(row.insertCell(), item.label);
            // A pending item's amount is not known yet (Apple Pay JS `type: "pending"`).
            text(row.insertCell(), item.type === "pending" ? "Amount pending" : item.amount + " " + sheet.currencyCode);
        });
        const totalItem = sheet.items[sheet.items.length - 1];
        text($("total"), "Total " + sheet.total + " " + sheet.currencyCode
            + (totalItem && totalItem.type === "pending" ? " (pending)" : ""));

        // Version 14: the one payment type (recurring, automatic reload, deferred, several merchants).
        const type = sheet.paymentType;
        $("payment-type").hidden = !type;
        if (type) {
            const titles = {
                recurring: "Recurring payment", automaticReload: "Automatic reload", deferred: "Deferred payment",
                multiToken: "Payments to several merchants",
            };
            text($("payment-type-title"), titles[type.kind] || type.kind);
            text($("payment-type-description"), type.paymentDescription);
            text($("payment-type-billing"), (type.billing
                ? type.billing.label + " " + type.billing.amount + " " + sheet.currencyCode + " " : "") + type.schedule);
            $("payment-type-agreement").hidden = !type.billingAgreement;
            text($("payment-type-agreement"), type.billingAgreement || "");
            text($("payment-type-management"), type.managementURL ? "Manage at " + type.managementURL : "");
        }

        // Version 12: the coupon code field; the page's errors for it show beside it.
        const couponErrors = sheet.appErrors.filter(function (error) { return /coupon/i.test(error); });
        $("coupon").hidden = !sheet.supportsCouponCode;
        // The field shows the sheet's code when that changes, never overwriting what the user is typing.
        if (sheet.supportsCouponCode && sheet.couponCode !== drawnCoupon) {
            drawnCoupon = sheet.couponCode;
            $("coupon-code").value = sheet.couponCode || "";
        }
        $("coupon-errors").hidden = couponErrors.length === 0;
        text($("coupon-errors"), couponErrors.join("; "));

        const cards = $("cards");
        cards.replaceChildren(text(document.createElement("legend"), "Card"));
        sheet.cards.forEach(function (card) {
            const label = document.createElement("label");
            const input = document.createElement("input");
            input.type = "radio";
            input.name = "card";
            input.value = card.id;
            input.checked = card.id === sheet.selectedCard;
            input.addEventListener("change", function () { act("card", { card: card.id }); });
            label.append(input, " " + card.displayName + " •••• " + card.suffix + " (" + card.network + ", " + card.type + ")");
            cards.append(label);
        });

        const shipping = $("shipping");
        shipping.hidden = sheet.shippingMethods.length === 0;
        shipping.replaceChildren(text(document.createElement("legend"), "Shipping method"));
        sheet.shippingMethods.forEach(function (method) {
            const label = document.createElement("label");
            const input = document.createElement("input");
            input.type = "radio";
            input.name = "shipping";
            input.value = method.identifier;
            input.id = "shipping-" + method.identifier;
            input.checked = method.identifier === sheet.selectedShippingMethod;
            input.addEventListener("change", function () { act("shipping-method", { identifier: method.identifier }); });
            label.append(input, " " + method.label + (method.detail ? " (" + method.detail + ")" : "") + " " + method.amount);
            shipping.append(label);
        });

        const needsContact = sheet.requiredShippingContactFields.length > 0;
        // The app's errors (e.g. a failed payment's ApplePayError for the address) show next to the contact form,
        // open again so the user can correct the contact.
        const otherErrors = sheet.appErrors.filter(function (error) { return !couponErrors.includes(error); });
        const correcting = needsContact && otherErrors.length > 0;
        $("contact").hidden = !needsContact || (Boolean(sheet.shippingContact) && !correcting);
        $("contact-errors").hidden = !correcting;
        $("contact-errors").textContent = correcting ? otherErrors.join("; ") : "";
        const summary = $("contact-summary");
        summary.hidden = !sheet.shippingContact;
        if (sheet.shippingContact) {
            const c = sheet.shippingContact;
            summary.textContent = "Ship to " + [c.name, c.postalAddress && c.postalAddress.city].filter(Boolean).join(", ");
        }
        showError(otherErrors.length && !correcting ? otherErrors.join("; ") : null);

        const authenticate = $("authenticate");
        authenticate.replaceChildren();
        $("passcode-label").hidden = !sheet.authenticationMethods.includes("passcode");
        sheet.authenticationMethods.forEach(function (method) {
            const button = document.createElement("button");
            button.type = "button";
            button.id = "pay-" + method;
            button.textContent = METHOD_LABELS[method] || method;
            button.disabled = sheet.needs.length > 1;
            button.addEventListener("click", function () {
                if (method === "passcode") {
                    act("authenticate", { method: method, passcode: $("passcode").value });
                } else {
                    act("authenticate", { method: method, success: !document.body.dataset.mismatch });
                }
            });
            authenticate.append(button);
        });
        // The simulated user's face or finger that does not match (to try a failed authentication).
        const mismatch = document.createElement("button");
        mismatch.type = "button";
        mismatch.id = "pay-mismatch";
        mismatch.textContent = "Try with a face or finger that does not match";
        mismatch.disabled = sheet.needs.length > 1;
        mismatch.addEventListener("click", function () {
            const method = sheet.authenticationMethods.find(function (m) { return m === "face-id" || m === "touch-id"; });
            if (method) {
                act("authenticate", { method: method, success: false });
            }
        });
        authenticate.append(mismatch);
    }

    // A Mac that cannot authenticate a payment itself: the phones and watches near it that offer a card (Handoff,
    // docs/handoff.md); the chosen device's user authorizes there.
    function drawHandoff(screen) {
        const status = $("status");
        $("details").hidden = true;
        // Cancel stays while the chosen device's user decides: the Mac tells the device, whose sheet is dismissed.
        $("handoff").hidden = screen.state !== "choosing" && screen.state !== "waiting";
        $("handoff-choices").hidden = screen.state !== "choosing";
        const merchant = (screen.merchantName || "the merchant") + " (" + (screen.domain || "the website") + ")";
        switch (screen.state) {
            case "validating":
                status.textContent = "Looking for your iPhone or Apple Watch near this Mac…";
                return;
            case "choosing": {
                document.title = "Apple Pay: " + screen.merchantName;
                status.textContent = "Pay " + merchant + " with a device near this Mac";
                const list = $("handoff-choices");
                list.replaceChildren();
                screen.handoff.forEach(function (choice) {
                    const button = document.createElement("button");
                    button.type = "button";
                    button.id = "handoff-" + choice.device;
                    button.textContent = choice.label + " · " + choice.cardDescription;
                    button.addEventListener("click", function () {
                        act("handoff", {
                            device: choice.device, label: choice.label, card: choice.card,
                            cardDescription: choice.cardDescription,
                        });
                    });
                    const item = document.createElement("li");
                    item.append(button);
                    list.append(item);
                });
                return;
            }
            case "waiting":
                document.title = "Apple Pay: Waiting";
                status.textContent = "Authorize the payment to " + merchant + " on your iPhone or Apple Watch.";
                return;
            default:
                status.textContent = screen.state === "completed" ? "Done"
                    : screen.failure === "cancelled" ? "Cancelled"
                    : "Payment not completed" + (screen.failure ? ": " + screen.failure : "");
                document.title = "Apple Pay: " + status.textContent;
        }
    }

    $("contact").addEventListener("submit", function (event) {
        event.preventDefault();
        const form = event.target.elements;
        act("shipping-contact", {
            name: form.name.value || undefined,
            emailAddress: form.email.value || undefined,
            phoneNumber: form.phone.value || undefined,
            postalAddress: {
                street: form.street.value, city: form.city.value, state: form.state.value,
                postalCode: form.postalCode.value, country: form.country.value,
            },
        });
    });
    $("coupon").addEventListener("submit", function (event) {
        event.preventDefault();
        act("coupon-code", { couponCode: $("coupon-code").value });
    });
    $("cancel").addEventListener("click", function () { act("cancel"); });
    $("handoff-cancel").addEventListener("click", function () { act("cancel"); });

    function refresh() {
        call("GET", "/v1/sheet/current").then(function (answer) {
            if (answer.status === 200) {
                draw(answer.body);
            }
        }, function () {});
    }

    refresh();
    setInterval(refresh, 400);
})();

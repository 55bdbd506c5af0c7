/*
 * The demo store (docs/web.md, "The demo store"): a cart, shipping options and Apple Pay JS as a merchant writes
 * it. The merchant session comes from the store's server (POST /v1/web/merchant-session); the order is created with
 * the final total and the request's applicationData when the user authorized, and the ApplePayPayment is posted
 * to POST /v1/web/orders/ORDER/payment.
 */
(function () {
    "use strict";
    const cart = [];
    const SHIPPING = [
        { label: "Standard", detail: "5 to 7 days", amount: "0.00", identifier: "standard" },
        { label: "Express", detail: "1 to 2 days", amount: "5.00", identifier: "express" },
    ];
    let shipping = SHIPPING[0];
    const $ = function (id) { return document.getElementById(id); };

    function cents(text) { return Math.round(Number(text) * 100); }
    function money(value) { return (value / 100).toFixed(2); }
    function subtotal() { return cart.reduce(function (sum, item) { return sum + cents(item.price); }, 0); }
    function total() { return subtotal() + cents(shipping.amount); }
    function lineItems() {
        return [
            { label: "Subtotal", amount: money(subtotal()), type: "final" },
            { label: "Shipping (" + shipping.label + ")", amount: shipping.amount, type: "final" },
        ];
    }
    function totalItem() { return { label: "Orchard Demo Store", amount: money(total()), type: "final" }; }
    function status(text) { $("status").textContent = text; }

    function drawCart() {
        const list = $("cart");
        list.replaceChildren();
        cart.forEach(function (item) {
            const entry = document.createElement("li");
            entry.textContent = item.name + " " + item.price + " USD";
            list.append(entry);
        });
        $("subtotal").textContent = money(subtotal());
        $("total").textContent = money(total());
    }

    document.querySelectorAll("#catalogue button").forEach(function (button) {
        button.addEventListener("click", function () {
            cart.push({ name: button.dataset.item, price: button.dataset.price });
            drawCart();
        });
    });
    document.querySelectorAll("input[name=shipping]").forEach(function (input) {
        input.addEventListener("change", function () {
            shipping = SHIPPING.find(function (m) { return m.identifier === input.value; });
            drawCart();
        });
    });

    function randomApplicationData() {
        const bytes = new Uint8Array(16);
        crypto.getRandomValues(bytes);
        return btoa(String.fromCharCode.apply(null, bytes));
    }

    function postJSON(path, body) {
        return fetch(path, {
            method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
        }).then(function (response) {
            return response.json().then(function (json) { return { ok: response.ok, body: json }; });
        });
    }

    function buy() {
        if (cart.length === 0) {
            status("Add something to the cart first.");
            return;
        }
        const applicationData = randomApplicationData();
        const methods = [shipping].concat(SHIPPING.filter(function (m) { return m !== shipping; }));
        const request = {
            countryCode: "US", currencyCode: "USD",
            supportedNetworks: ["visa", "masterCard", "amex", "discover"],
            merchantCapabilities: ["supports3DS"],
            total: totalItem(), lineItems: lineItems(), shippingMethods: methods,
            requiredShippingContactFields: ["postalAddress", "name", "email"],
            applicationData: applicationData,
        };
        let session;
        try {
            session = new ApplePaySession(3, request);
        } catch (error) {
            status(error.name + ": " + error.message);
            return;
        }
        session.onvalidatemerchant = function (event) {
            postJSON("/v1/web/merchant-session", { validationURL: event.validationURL }).then(function (answer) {
                if (!answer.ok) {
                    throw new Error("no merchant session");
                }
                session.completeMerchantValidation(answer.body);
            }).catch(function () {
                status("The store could not start Apple Pay.");
                session.abort();
            });
        };
        session.onpaymentmethodselected = function () {
            session.completePaymentMethodSelection({ newTotal: totalItem(), newLineItems: lineItems() });
        };
        session.onshippingcontactselected = function () {
            session.completeShippingContactSelection({ newTotal: totalItem(), newLineItems: lineItems() });
        };
        session.onshippingmethodselected = function (event) {
            shipping = SHIPPING.find(function (m) { return m.identifier === event.shippingMethod.identifier; }) || shipping;
            document.querySelector("input[name=shipping][value=" + shipping.identifier + "]").checked = true;
            drawCart();
            session.completeShippingMethodSelection({ newTotal: totalItem(), newLineItems: lineItems() });
        };
        session.onpaymentauthorized = function (event) {
            const items = cart.map(function (item) { return item.name; }).join(", ").slice(0, 120);
            postJSON("/v1/orders", { item: items, amount: money(total()), currency: "USD", applicationData: applicationData })
                .then(function (order) {
                    if (!order.ok) {
                        throw new Error(order.body.error ? order.body.error.message : "the order was refused");
                    }
                    return postJSON("/v1/web/orders/" + order.body.orderID + "/payment", event.payment)
                        .then(function (paid) { return { order: order.body.orderID, paid: paid }; });
                })
                .then(function (result) {
                    if (result.paid.ok && result.paid.body.outcome === "approved") {
                        session.completePayment({ status: ApplePaySession.STATUS_SUCCESS });
                        location.href = "/confirmation?order=" + encodeURIComponent(result.order);
                    } else {
                        session.completePayment({ status: ApplePaySession.STATUS_FAILURE });
                        status("The payment was declined.");
                    }
                })
                .catch(function (error) {
                    session.completePayment({ status: ApplePaySession.STATUS_FAILURE });
                    status("The payment failed: " + error.message);
                });
        };
        session.oncancel = function () {
            status("Payment cancelled.");
        };
        status("Paying with Apple Pay…");
        session.begin();
    }

    const button = $("apple-pay");
    button.addEventListener("click", buy);
    button.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") {
            event.preventDefault();
            buy();
        }
    });

    function offerApplePay() {
        let available = false;
        try {
            available = Boolean(window.ApplePaySession) && ApplePaySession.canMakePayments();
        } catch (error) {
            available = false;
        }
        button.hidden = !available;
        $("no-apple-pay").hidden = available;
        document.body.dataset.applePay = available ? "available" : "unavailable";
    }
    if (document.readyState === "complete") {
        offerApplePay();
    } else {
        window.addEventListener("load", offerApplePay);
    }
    // The agent's hello usually comes before the load event, but nothing orders the two.
    window.addEventListener("orchardpayready", offerApplePay);
    drawCart();
})();

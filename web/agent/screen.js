/*
 * The device's screen beside the sheet (docs/web.md, "The device's screen"): a read-only page of the agent's origin
 * that no page can frame. It shows the wallet's cards (network, type, last four digits, state), the payment sheets
 * that ended since the device process started, a sheet waiting for the user, with a link to it, and whether the
 * account owner put the device in lost mode.
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
        body: JSON.stringify({ document: "screen" }),
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

    const NETWORKS = { visa: "Visa", masterCard: "Mastercard", amex: "American Express", discover: "Discover" };

    function row(cells) {
        const tr = document.createElement("tr");
        cells.forEach(function (value) {
            const td = document.createElement("td");
            td.textContent = value;
            tr.appendChild(td);
        });
        return tr;
    }

    function draw(screen) {
        $("title").textContent = screen.device + " (" + screen.kind + ")";
        document.title = $("title").textContent;
        $("lost-mode").hidden = !screen.lostMode;
        document.body.dataset.lostMode = screen.lostMode ? "true" : "false";
        const cards = $("cards").tBodies[0];
        cards.replaceChildren();
        screen.cards.forEach(function (card) {
            const tr = row([
                card.displayName + (card.isDefault ? " (default)" : ""),
                (NETWORKS[card.network] || card.network) + " " + card.type + " •••• " + card.suffix,
                card.state,
            ]);
            tr.dataset.state = card.state;
            cards.appendChild(tr);
        });
        if (!screen.cards.length) {
            cards.appendChild(row(["No cards in the wallet."]));
        }
        const payments = $("payments").tBodies[0];
        payments.replaceChildren();
        screen.recentPayments.forEach(function (payment) {
            payments.appendChild(row([
                payment.merchant, payment.amount + " " + payment.currency,
                payment.outcome + (payment.detail ? " (" + payment.detail + ")" : ""),
                new Date(payment.endedAt).toLocaleString(),
            ]));
        });
        if (!screen.recentPayments.length) {
            payments.appendChild(row(["No payments since the device started."]));
        }
        const prompts = $("prompt-list");
        prompts.replaceChildren();
        screen.prompts.forEach(function (prompt) {
            const li = document.createElement("li");
            const link = document.createElement("a");
            link.href = prompt.page;
            link.textContent = "Payment sheet" + (prompt.merchant ? " for " + prompt.merchant : "") + ": open it";
            li.dataset.kind = prompt.kind;
            li.appendChild(link);
            prompts.appendChild(li);
        });
        $("prompts").hidden = !screen.prompts.length;
        $("status").textContent = screen.prompts.length ? "A payment waits for you." : "Nothing waits for you.";
    }

    function refresh() {
        secret
            .then(function (value) {
                return fetch("/v1/screen", { headers: { "X-Orchard-Agent-Secret": value }, credentials: "omit" });
            })
            .then(function (response) {
                return response.json().then(function (json) { return { status: response.status, body: json }; });
            })
            .then(function (answer) {
                if (answer.status !== 200) {
                    $("status").textContent = answer.body.error ? answer.body.error.message : "refused";
                    return;
                }
                const json = JSON.stringify(answer.body);
                if (json !== shown) {
                    shown = json;
                    draw(answer.body);
                }
                document.body.dataset.loaded = "true";
            }, function () {
                $("status").textContent = "The device is not answering.";
            })
            .then(function () { setTimeout(refresh, 1000); });
    }

    refresh();
}());

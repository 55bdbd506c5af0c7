(function () {
    "use strict";
    const order = new URLSearchParams(location.search).get("order") || "";
    document.getElementById("order-id").textContent = order;
})();

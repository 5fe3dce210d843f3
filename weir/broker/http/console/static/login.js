// The login page: checks the user's password against the API (any /v3 call
// authenticates), keeps the credential in this tab's sessionStorage, and goes
// back to the page that asked for it.
"use strict";

document.addEventListener("alpine:init", () => {
  Alpine.data("login", () => ({
    user: "",
    password: "",
    error: "",
    busy: false,
    async submit() {
      this.busy = true;
      this.error = "";
      const bytes = new TextEncoder().encode(this.user + ":" + this.password);
      const value = "Basic " + btoa(String.fromCharCode(...bytes));
      try {
        await Weir.api("/v3/clusters", { headers: { Authorization: value }, noLoginRedirect: true });
        Weir.login(this.user, value);
        const next = Weir.param("next", "/console/overview");
        location.assign(next.startsWith("/console/") ? next : "/console/overview");
      } catch (error) {
        this.error = error.status === 401 ? "Wrong user or password." : error.message;
      } finally {
        this.busy = false;
      }
    },
  }));
});

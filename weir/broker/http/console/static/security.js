// The security page: SCRAM users, ACLs and client quotas, through the REST admin API
// as the logged-in user. What the user may change comes from the cluster's
// authorized operations (KIP-430: ALTER for users and ACLs, ALTER_CONFIGS for
// quotas); a list the ACLs refuse (403) shows "not authorized" instead.
"use strict";

document.addEventListener("alpine:init", () => {
  const RESOURCE_TYPES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"];
  const OPERATIONS = [
    "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
  ];
  const USER_KEYS = ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"];

  Alpine.data("security", () => ({
    loaded: false,
    canAlter: false,
    canAlterConfigs: false,
    notice: "",
    users: [],
    usersError: "",
    usersDenied: false,
    newUser: { name: "", password: "" },
    userFormError: "",
    acls: [],
    aclsError: "",
    aclsDenied: false,
    filter: { principal: "", resource_type: "", resource_name: "" },
    newAcl: {
      principal: "User:", permission: "ALLOW", operation: "READ", resource_type: "TOPIC",
      resource_name: "", pattern_type: "LITERAL", host: "*",
    },
    aclFormError: "",
    quotas: [],
    quotasError: "",
    quotasDenied: false,
    newQuota: { entity_type: "user", entity_name: "", key: "producer_byte_rate", value: "" },
    quotaFormError: "",
    resourceTypes: RESOURCE_TYPES,
    operations: OPERATIONS,

    get quotaKeys() {
      return this.newQuota.entity_type === "ip" ? ["connection_creation_rate"] : USER_KEYS;
    },

    async init() {
      await this.loadPermissions();
      await Promise.all([this.loadUsers(), this.loadAcls(), this.loadQuotas()]);
      this.loaded = true;
    },

    async loadPermissions() {
      try {
        const body = await Weir.api(await Weir.clusterPath("/authorized-operations"));
        this.canAlter = body.cluster.includes("ALTER");
        this.canAlterConfigs = body.cluster.includes("ALTER_CONFIGS");
      } catch (error) {
        this.canAlter = false;
        this.canAlterConfigs = false;
      }
    },

    // A list's failure: 403 hides the table and says why.
    failed(error, section) {
      this[section + "Error"] = Weir.errorText(error);
      this[section + "Denied"] = error.status === 403;
    },

    // -- users ----------------------------------------------------------------------

    async loadUsers() {
      try {
        const body = await Weir.api(await Weir.clusterPath("/users"));
        this.users = body.data;
        this.usersError = "";
        this.usersDenied = false;
      } catch (error) {
        this.users = [];
        this.failed(error, "users");
      }
    },

    async createUser() {
      this.userFormError = "";
      const name = this.newUser.name.trim();
      try {
        await Weir.api(await Weir.clusterPath("/users"), {
          method: "POST",
          body: { user_name: name, password: this.newUser.password },
        });
        this.newUser = { name: "", password: "" };
        this.notice = "User " + name + " created.";
        await this.loadUsers();
      } catch (error) {
        this.userFormError = Weir.errorText(error);
      }
    },

    async deleteUser(name) {
      if (!confirm("Delete user " + name + "? Its clients can no longer log in.")) return;
      try {
        await Weir.api(await Weir.clusterPath("/users/" + encodeURIComponent(name)), { method: "DELETE" });
        this.notice = "User " + name + " deleted.";
        await this.loadUsers();
      } catch (error) {
        this.usersError = Weir.errorText(error);
      }
    },

    // -- ACLs -----------------------------------------------------------------------

    aclKey(a) {
      return [a.principal, a.permission, a.operation, a.resource_type, a.pattern_type, a.resource_name, a.host].join("|");
    },

    async loadAcls() {
      const query = new URLSearchParams(
        Object.entries(this.filter).filter(([, v]) => v.trim() !== "").map(([k, v]) => [k, v.trim()])
      ).toString();
      try {
        const body = await Weir.api(await Weir.clusterPath("/acls" + (query ? "?" + query : "")));
        this.acls = body.data.sort((a, b) => this.aclKey(a).localeCompare(this.aclKey(b)));
        this.aclsError = "";
        this.aclsDenied = false;
      } catch (error) {
        this.acls = [];
        this.failed(error, "acls");
      }
    },

    async createAcl() {
      this.aclFormError = "";
      try {
        await Weir.api(await Weir.clusterPath("/acls"), { method: "POST", body: { ...this.newAcl } });
        this.notice = "ACL added: " + this.newAcl.principal + " " + this.newAcl.permission + " " +
          this.newAcl.operation + " on " + this.newAcl.resource_type + ":" + this.newAcl.resource_name + ".";
        this.newAcl.resource_name = "";
        await this.loadAcls();
      } catch (error) {
        this.aclFormError = Weir.errorText(error);
      }
    },

    async deleteAcl(a) {
      if (!confirm("Delete this ACL? " + a.principal + " " + a.permission + " " + a.operation)) return;
      const query = new URLSearchParams({
        resource_type: a.resource_type, resource_name: a.resource_name, pattern_type: a.pattern_type,
        principal: a.principal, host: a.host, operation: a.operation, permission: a.permission,
      }).toString();
      try {
        await Weir.api(await Weir.clusterPath("/acls?" + query), { method: "DELETE" });
        this.notice = "ACL deleted.";
        await this.loadAcls();
      } catch (error) {
        this.aclsError = Weir.errorText(error);
      }
    },

    // -- quotas ---------------------------------------------------------------------

    entityText(entity) {
      return Object.entries(entity)
        .map(([kind, name]) => kind + "=" + (name === null ? "<default>" : name))
        .join(", ");
    },

    async loadQuotas() {
      try {
        const body = await Weir.api(await Weir.clusterPath("/client-quotas"));
        this.quotas = body.data;
        this.quotasError = "";
        this.quotasDenied = false;
      } catch (error) {
        this.quotas = [];
        this.failed(error, "quotas");
      }
    },

    async setQuota() {
      this.quotaFormError = "";
      const q = this.newQuota;
      const name = q.entity_name.trim();
      const body = {
        entity: { [q.entity_type]: name === "" ? null : name },
        set: { [q.key]: Number(q.value) },
      };
      try {
        await Weir.api(await Weir.clusterPath("/client-quotas"), { method: "POST", body });
        this.notice = "Quota set: " + this.entityText(body.entity) + " " + q.key + "=" + q.value + ".";
        await this.loadQuotas();
      } catch (error) {
        this.quotaFormError = Weir.errorText(error);
      }
    },

    async removeQuotas(row) {
      if (!confirm("Remove every quota of " + this.entityText(row.entity) + "?")) return;
      const body = { entity: row.entity, remove: Object.keys(row.values) };
      try {
        await Weir.api(await Weir.clusterPath("/client-quotas"), { method: "POST", body });
        this.notice = "Quotas of " + this.entityText(row.entity) + " removed.";
        await this.loadQuotas();
      } catch (error) {
        this.quotasError = Weir.errorText(error);
      }
    },
  }));
});

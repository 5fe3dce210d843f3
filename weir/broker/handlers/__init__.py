"""The Kafka APIs this broker serves: one module per API family, each handler a
function of (request, context) that answers one request (`context.Handler`). The
registry `apis` is the only place that says which APIs and versions are served.
Handlers read and change the broker through `weir.broker.broker`, the coordinator
services and, in a cluster, the cluster member; they never touch sockets."""

"""The HTTP listener and what it serves: health for orchestrators, `/metrics` for
Prometheus (Weir's own families and kafka_exporter's), and the JSON group views. An
ASGI app (Starlette) on Hypercorn, inside the broker's Trio process, behind Weir's
own accept loop, connection pool and per-connection deadlines (`listener`). It reads
the broker's state; it changes nothing."""

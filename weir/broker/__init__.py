"""The broker: the one process that serves Kafka clients, replicates, and drives the
pure state machines below it (`weir.log`, `weir.controller`, `weir.groupcoord`).

Its parts, top to bottom (the import contract in pyproject.toml keeps this order):

- `app`: `weir serve` wires everything together; `repair`: `weir repair`, offline.
- `http` and `server`: the listeners (HTTP endpoints; the Kafka listener with its
  framing, budgets and dispatch).
- `handlers`: the Kafka APIs, one module per API family, each a function per request.
- `coordinators`: the services that give the pure coordinators storage and time.
- `cluster`: etcd, membership, ISR replication and the peer client (a cluster only).
- `broker` (with `topic_changes`, `partition_replica`, `roles`), `config`, `metrics`:
  the broker's state, its topic changes, settings and counters.
"""

"""A broker as a member of a cluster over etcd: the etcd client, registration and the
metadata watch (`cluster_member`), Kafka's ISR replication of each partition
(`replication`) and the follower's client of a leader (`peer_client`). A single node
has none of this (`Broker.cluster` is None); nothing here serves client requests."""
